"""Surrogate quality on a fixed design, without the acquisition in the loop.

For each world of ``--worlds`` (default paper, shifted, flat, noisy: the shipped worlds
before contrast.toml was added, which the stored figures quote; ``--worlds
contrast,paper,shifted,flat,noisy`` for all), 6 repetitions and k = 1, 2, 3 target-budget
runs per setting:
6 pilots (1e15) + k target runs (1e16) per setting at uniform random rho, 6 settings
(qwen2.5-1.5b/3b/7b x sparse, prm); fit the surrogate, call each setting at 1e16
(`classify_setting`, measured-support rule on) and score against `runners.sim.truth`:
same-regime (all and decidable settings, gap >= 0.5 noise sd), regime Brier score and
median simple regret. Then LOO-CV 90% coverage on 2 policies x 5 rewards x (8 pilots + 4
target runs) per world (the same ``--worlds``) and seed. This is the script behind the prior-mode measurement in
docs/planner.md ("Model"); run it at a commit before that change for the other column.
``--pilots`` compiles the pilots as the planner does (``matched``: keeping the target
plan's mu where levers allow, :func:`planner.compiler.compile_pilot`), as the bare
compiler does at 1e15 (``compiler``), or ``both`` on the same draws, side by side.

    python benchmarks/surrogate_fixed_design.py [--reps 6] [--pilots both] [--worlds paper,shifted] [--no-loo]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# The default leaves out contrast.toml: it was added after the figures docs/planner.md quotes.
WORLDS = ("paper", "shifted", "flat", "noisy")


def fixed_design(reps: int, matched: bool = True, worlds: tuple[str, ...] = WORLDS) -> list[dict]:
    import planner_bench as pb

    from planner.design import compile_feasible
    from planner.frontier import Setting, classify_setting, reuse_at
    from planner.proposals import make_proposal
    from planner.regime import LABELS
    from planner.registry import POLICIES_QWEN, get_model
    from planner.strategies import RaceProblem
    from runners.engines.sim import SimEngine
    from surrogate import FrontierSurrogate

    settings = tuple(Setting(m, r) for m in POLICIES_QWEN for r in ("sparse", "prm"))
    problem = RaceProblem(settings, budget=1e16, pilot_budget=1e15)
    rows = []
    for world in worlds:
        truth, eng = pb.Truth(world, problem), SimEngine(world=world)
        for k in (1, 2, 3):
            res = []
            for rep in range(reps):
                rng = np.random.default_rng(1000 * rep + k)
                recs, i = [], 0
                for s in settings:
                    for b, n in ((1e15, 6), (1e16, k)):
                        for rho in np.sort(rng.uniform(0.1, 0.95, n)):
                            plan, _ = compile_feasible(s, rho, b, None, target_budget=1e16 if matched else None)
                            recs.append(eng.run(make_proposal(plan, target="native"), 1000 * rep + i))
                            i += 1
                sur = FrontierSurrogate("native", rewards=["prm", "sparse"], budget_range=(1e14, 1e16),
                                        models={m: float(get_model(m).num_parameters) for m in POLICIES_QWEN},
                                        reuse=reuse_at).fit(recs)
                for s in settings:
                    c = classify_setting(sur, s.model, s.reward, 1e16)
                    same, _, regret = truth.score(s, c.rho_star, c.regime, "snapped")  # as ours runs it
                    brier = sum((c.probabilities[lab] - (lab == truth.f[s].regime)) ** 2 for lab in LABELS)
                    res.append((same, truth.decidable(s), brier, regret))
            a = np.array(res, dtype=float)
            d = a[:, 1] == 1
            rows.append({"pilots": "matched" if matched else "compiler", "world": world, "k": k, "same": a[:, 0].mean(),
                         "same_dec": a[d, 0].mean() if d.any() else np.nan, "brier": a[:, 2].mean(),
                         "brier_dec": a[d, 2].mean() if d.any() else np.nan, "regret_med": np.median(a[:, 3])})
    return rows


def loo(seeds: tuple[int, ...] = (0, 1), worlds: tuple[str, ...] = WORLDS) -> list[dict]:
    from planner.compiler import achievable_rho_range
    from planner.registry import REWARD_SYSTEMS, get_model
    from runners.sim.simulate import simulate
    from surrogate import FrontierSurrogate

    out = []
    for world in worlds:
        for seed in seeds:
            rng, rows = np.random.default_rng(seed), []
            for m in ("qwen2.5-1.5b", "qwen2.5-7b"):
                for r in REWARD_SYSTEMS:
                    lo, hi = achievable_rho_range(m, r)
                    for b, n in ((1e15, 8), (1e16, 4)):
                        rho = lo + (hi - lo) * (np.arange(n) + rng.uniform(0.2, 0.8)) / n
                        y = simulate(world, m, r, rho, b, "native", seed=int(rng.integers(1 << 30)))
                        rows += [dict(model=m, model_params=float(get_model(m).num_parameters), reward=r,
                                      budget=b, rho_planned=x, rho=x, flops_total=b, native=v, seed=0,
                                      status="ok") for x, v in zip(rho, y, strict=True) if np.isfinite(v)]
            cv = FrontierSurrogate(rewards=REWARD_SYSTEMS, budget_range=(1e14, 1e16)).fit(rows).loo_cv()
            out.append({"world": world, "seed": seed, "coverage90": cv.coverage90, "rmse": cv.rmse,
                        "loglik": cv.loglik})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--pilots", choices=("matched", "compiler", "both"), default="both")
    ap.add_argument("--no-loo", action="store_true", help="skip the LOO-CV table")
    ap.add_argument("--worlds", default=",".join(WORLDS), help="comma-separated shipped worlds")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch
    from rich.console import Console
    from rich.table import Table

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    kinds = ("matched", "compiler") if a.pilots == "both" else (a.pilots,)
    worlds = tuple(a.worlds.split(","))
    rows = [r for kind in kinds for r in fixed_design(a.reps, matched=kind == "matched", worlds=worlds)]
    t = Table(title=f"fixed design: 6 pilots + k target runs per setting, {a.reps} reps")
    for col in ("pilots", "world", "k", "same-regime", "decidable", "Brier", "Brier decidable", "regret med"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["pilots"], r["world"], str(r["k"]), f"{r['same']:.3f}", f"{r['same_dec']:.3f}",
                  f"{r['brier']:.3f}", f"{r['brier_dec']:.3f}", f"{r['regret_med']:.4f}")
    c = Console(width=160)
    c.print(t)
    for kind in kinds:
        rs = [r for r in rows if r["pilots"] == kind]
        c.print(f"{kind} pilots: mean Brier {np.mean([r['brier'] for r in rs]):.3f}; decidable "
                f"{np.nanmean([r['brier_dec'] for r in rs]):.3f}; decidable same-regime "
                f"{np.nanmean([r['same_dec'] for r in rs]):.3f}; same-regime "
                f"{np.mean([r['same'] for r in rs]):.3f}")
    if a.no_loo:
        c.print(f"{time.perf_counter() - t0:.0f} s")
        return
    t = Table(title="LOO-CV on sim data (2 policies x 5 rewards x 12 runs)")
    for col in ("world", "seed", "90% coverage", "RMSE", "log lik / point"):
        t.add_column(col)
    for r in loo(worlds=worlds):
        t.add_row(r["world"], str(r["seed"]), f"{r['coverage90']:.3f}", f"{r['rmse']:.4f}", f"{r['loglik']:.3f}")
    c.print(t)
    c.print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
