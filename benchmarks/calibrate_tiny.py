"""Calibrate the sim world's tiny-policy capacities from real tiny-world runs.

Reads a store of ``trl`` records (default: the stored tiny campaign), fits every
measured tiny policy's (base, ceiling, scale) per target with
``runners.sim.calibrate.calibrate`` and prints, per policy and target: the measured
base, the fitted ceiling and scale, the range of ceilings as good as the best (how well
the runs pin it), the median gain measured vs simulated, and the Huber loss and residual
sd of the fit against the world's current entry. Ends with the TOML lines to paste into
``configs/worlds/*.toml``.

    python benchmarks/calibrate_tiny.py [--data reports/tiny-campaign/data] [--world paper]

Then it checks the fit out of sample: fitted on each policy's smallest-budget runs, how
well it predicts the gains of the larger-budget runs, against the world's entry and two
baselines. The entry before calibration: ``git show 887062e:configs/worlds/paper.toml >
old.toml`` and ``--world old.toml``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from planner.schema import TARGETS
from runners.sim.calibrate import calibrate, huber, measured_runs, simulated_gains, with_capacities
from runners.sim.world import load_world
from runners.store import PilotStore

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "reports" / "tiny-campaign" / "data")
    ap.add_argument("--world", default="paper")
    ap.add_argument("--delta", type=float, default=0.02, help="Huber threshold (metric units)")
    args = ap.parse_args(argv)
    world = load_world(args.world)
    runs = measured_runs(PilotStore(args.data).records())
    if not runs:
        raise SystemExit(f"error: no real runs under {args.data}; run a trl campaign first")
    print(f"world {world.name}; data {args.data}; Huber delta {args.delta}\n")
    print("| policy | target | runs | base | ceiling | scale | ceilings as good | gain measured / sim "
          "| loss (--world entry) | residual sd |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    toml = []
    for model, mr in runs.items():
        t0 = time.perf_counter()
        cal = calibrate(world, model, mr, delta=args.delta)
        for t, f in cal.targets.items():
            c = f.capacity
            obs = mr.metrics[t] - mr.base[t]
            old = float(np.mean(huber(simulated_gains(world, model, mr, t) - obs, args.delta)))
            lo, hi = f.ceiling_range
            print(f"| {model} | {t} | {cal.runs} | {c.base:.3f} | {c.ceiling:.3f} | {c.scale:.3g} | "
                  f"{lo:.2f}-{hi:.2f} | {f.observed_gain:+.4f} / {f.predicted_gain:+.4f} | "
                  f"{f.loss:.2e} ({old:.2e}) | {f.residual_sd:.3f} |")
        caps = cal.capacities()
        toml.append(f"[models.{model}]")
        toml.extend(f"{t} = {{ base = {caps[t].base:.3f}, ceiling = {caps[t].ceiling:.3f}, "
                    f"scale = {caps[t].scale:.4g} }}" for t in TARGETS)
        toml.append(f"# fitted in {time.perf_counter() - t0:.1f} s\n")
    print("\n" + "\n".join(toml))
    print("\nOut of budget: fitted on the runs at the smallest budget, scored on the larger-budget runs"
          " (RMSE of the gain; '--world entry' is that world's own entry (out of sample only if it was not fitted on these runs, i.e. not the shipped one); 'zero' predicts no gain, 'mean' the"
          " training runs' mean gain):\n")
    print("| policy | target | fit runs | held-out runs | calibrated | --world entry | zero | mean |")
    print("|---|---|---|---|---|---|---|---|")
    for model, mr in runs.items():
        budgets = mr.budget
        train = budgets <= budgets.min() * 1.0001
        if train.all() or train.sum() < 3:
            continue
        cal = calibrate(world, model, mr.subset(train), delta=args.delta)
        fitted = with_capacities(world, model, cal.capacities())
        test = mr.subset(~train)
        for t in TARGETS:
            obs = test.metrics[t] - test.base[t]
            mean_gain = float(np.mean(mr.subset(train).metrics[t] - mr.subset(train).base[t]))
            rmse = [float(np.sqrt(np.mean((p - obs) ** 2))) for p in (
                simulated_gains(fitted, model, test, t), simulated_gains(world, model, test, t),
                np.zeros_like(obs), np.full_like(obs, mean_gain))]
            print(f"| {model} | {t} | {int(train.sum())} | {int((~train).sum())} | "
                  + " | ".join(f"{x:.4f}" for x in rmse) + " |")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
