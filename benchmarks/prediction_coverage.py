"""Are the predictions ours attaches to its proposals calibrated? Measured on sim races.

Every proposal of ``ours`` carries the surrogate's prediction of what its run will measure
(mean and std, ``Proposal.prediction``). This races ours on sim worlds (the benchmark's
protocol: 6 settings, target ``native`` at 1e16, pilots at 1e15, its FLOP cap) and, for
every run, compares the measured value with the prediction made when the run was
proposed: the share inside mean +- 1.645 std (90% if calibrated) and the mean z, by the
proposal's kind (initial design, anchor, acquisition, validation; the reason's first
word). A prediction made before any fit is None: those runs are not counted.

    python benchmarks/prediction_coverage.py [--worlds paper,contrast] [--reps 2] [--out F.json]

About 30 s per race on 2 cores.

``--loo`` also asks whether the fit's own leave-one-out z-scores could widen a prediction:
at every ask it records the RMS of the surrogate's LOO z-scores (closed form, at the fitted
hyperparameters) and scores each run a second time with its std times max(1, that RMS).

``--settings`` races other settings (``--settings qwen2.5-1.5b/sparse``: a one-setting race,
whose anchors' predictions rest on pilots alone) and ``--pilot-budget`` moves the pilots.

``--transfer`` measures predictions for settings *without* runs instead: each repetition
races a few of the 3 x 3 settings (three Qwen2.5 sizes x sparse, dense, prm; which ones
follows the repetition), then asks ours for the initial design of all nine and runs the
proposals of the settings it had not run. Each is grouped by how its setting relates to
the fitted ones: ``crossed`` (its model and its reward each have runs), ``between sizes``
(its policy lies between two fitted sizes, its reward fitted), ``outside sizes`` and
``reward unfitted``, and by whether the proposal marks the prediction ``extrapolated``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

Z90 = 1.6448536269514722


class Recording:
    """An engine that runs through ``inner`` and keeps (kind, prediction, measured).

    ``rep`` seeds the runs as the benchmark does (``planner_bench.SeededEngine``): replicate
    ``i`` of repetition ``rep`` draws with seed ``1000 * rep + i``, so repetitions draw
    their own noise (the sim's is a function of world, plan and seed)."""

    def __init__(self, inner: Any, target: str, rep: int = 0, scales: dict[str, float] | None = None) -> None:
        self.inner, self.target, self.name, self.rep = inner, target, inner.name, rep
        self.simulated = True
        self.source = getattr(inner, "source", None)
        self.rows: list[tuple[str, float, float, float]] = []
        # proposal id -> its fit's LOO z RMS (LooTap); rows (kind, mean, std, measured, RMS)
        self.scales: dict[str, float] | None = scales
        self.tapped: list[tuple[str, float, float, float, float]] = []

    def run(self, proposal: Any, seed: int, progress: Any = None) -> Any:
        rec = self.inner.run(proposal, 1000 * self.rep + seed, progress)
        pred = proposal.prediction
        value = getattr(rec.metrics, self.target)
        if pred is not None and value is not None:
            kind = proposal.reason.split(":")[0].split(" (")[0].strip() or "?"
            kind += " (marked)" if pred.extrapolated else ""
            self.rows.append((kind, pred.mean, pred.std, float(value)))
            if self.scales is not None and proposal.id in self.scales:
                self.tapped.append((kind, pred.mean, pred.std, float(value), self.scales[proposal.id]))
        return rec


class LooTap:
    """A strategy that asks through ``inner`` and keeps, for every proposal, the RMS of the
    leave-one-out z-scores of the surrogate that predicted it (``scales``: id -> RMS; a
    proposal made before any fit has none)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.scales: dict[str, float] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def ask(self, *args: Any, **kwargs: Any) -> Any:
        import numpy as np

        proposals = self.inner.ask(*args, **kwargs)
        sur = self.inner.surrogate()
        if sur is not None and proposals:
            loo = sur.loo_cv()
            rms = float(np.sqrt(np.mean(((loo.observed - loo.mean) / loo.std) ** 2)))
            self.scales.update({p.id: rms for p in proposals})
        return proposals


BENCH_SETTINGS = tuple((m, r) for m in ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b") for r in ("sparse", "prm"))


def race(world: str, rep: int, tmp: Path, settings: Sequence[tuple[str, str]] = BENCH_SETTINGS,
         pilot_budget: float = 1e15, loo: list[tuple[str, float, float, float, float]] | None = None,
         noise_sd: str | None = None) -> list[tuple[str, float, float, float]]:
    """Rows ``(kind, mean, std, measured)`` of one race; with ``loo`` (a list) each row
    whose prediction a fit made is appended to it with that fit's LOO z RMS. ``noise_sd``
    is stated to ours (``--noise-sd``): a number, or ``"world"`` for the world's own."""
    from planner.engine import load_engine
    from planner.loop import run_race
    from planner.strategies import RaceProblem, make_strategy
    from runners.store import PilotStore

    problem = RaceProblem(list(settings), budget=1e16, pilot_budget=pilot_budget)
    stated = None
    if noise_sd == "world":
        from runners.sim.world import load_world

        stated = float(load_world(world).noise[problem.target])
    elif noise_sd is not None:
        stated = float(noise_sd)
    strategy: Any = make_strategy("ours", problem, seed=rep, noise_sd=stated)
    if loo is not None:
        strategy = LooTap(strategy)
    eng = Recording(load_engine("sim", world=world), problem.target, rep,
                    scales=None if loo is None else strategy.scales)
    run_race(problem, strategy, eng, PilotStore(tmp / f"{world}-{rep}"),
             max_flops=6 * 1e16 * len(settings), max_runs=40 * len(settings))
    if loo is not None:
        loo.extend(eng.tapped)
    return eng.rows


MODELS = ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b")
REWARDS = ("sparse", "dense", "prm")
# Fitted subsets, one per repetition (cycled): every relation of a query to them occurs.
SUBSETS = (
    (("qwen2.5-1.5b", "sparse"), ("qwen2.5-1.5b", "prm"), ("qwen2.5-7b", "sparse")),
    (("qwen2.5-1.5b", "sparse"), ("qwen2.5-3b", "dense")),
    (("qwen2.5-3b", "sparse"), ("qwen2.5-3b", "prm"), ("qwen2.5-7b", "dense"), ("qwen2.5-1.5b", "dense")),
    (("qwen2.5-1.5b", "dense"),),
)


def relation(model: str, reward: str, fitted: Sequence[tuple[str, str]]) -> str:
    """How an unfitted setting relates to the fitted ones (the groups of ``--transfer``)."""
    from planner.registry import get_model

    if reward not in {r for _, r in fitted}:
        return "reward unfitted"
    if model in {m for m, _ in fitted}:
        return "crossed"
    sizes = [get_model(m).num_parameters for m, _ in fitted]
    n = get_model(model).num_parameters
    return "between sizes" if min(sizes) <= n <= max(sizes) else "outside sizes"


def transfer(world: str, rep: int, tmp: Path) -> list[tuple[str, float, float, float]]:
    """Rows ``(group, mean, std, measured)`` of one repetition of ``--transfer``; the group
    is the relation, and ``" (marked)"`` is appended where the prediction is marked."""
    from planner.engine import load_engine
    from planner.loop import run_race
    from planner.strategies import RaceProblem, make_strategy
    from runners.store import PilotStore

    fitted = SUBSETS[rep % len(SUBSETS)]
    store = PilotStore(tmp / f"transfer-{world}-{rep}")
    # A subset's second round (rep >= len(SUBSETS)) draws new noise; the first keeps seed 0,
    # the draws of the stored prediction_transfer_1202.json (--reps 4).
    eng = Recording(load_engine("sim", world=world), "native", rep // len(SUBSETS))
    first = RaceProblem(list(fitted), budget=1e16, pilot_budget=1e15)
    run_race(first, make_strategy("ours", first, seed=rep), eng, store, max_runs=8 * len(fitted))
    every = RaceProblem([(m, r) for m in MODELS for r in REWARDS], budget=1e16, pilot_budget=1e15)
    strategy = make_strategy("ours", every, seed=rep)
    strategy.tell(store.records())
    rows = []
    for prop in strategy.ask():
        if (prop.model, prop.reward) in fitted or prop.prediction is None:
            continue
        value = getattr(eng.run(prop, seed=0).metrics, every.target)
        group = relation(prop.model, prop.reward, fitted) + (" (marked)" if prop.prediction.extrapolated else "")
        rows.append((group, prop.prediction.mean, prop.prediction.std, float(value)))
    return rows


def summarise(rows: list[tuple[str, float, float, float]]) -> list[dict[str, Any]]:
    by: dict[str, list[float]] = defaultdict(list)
    for kind, mean, std, value in rows:
        z = (value - mean) / std if std > 0 else math.copysign(math.inf, value - mean)
        by[kind].append(z)
        by["all"].append(z)
    return [{"kind": k, "n": len(zs), "inside90": sum(abs(z) <= Z90 for z in zs) / len(zs),
             "mean_z": float(sum(zs) / len(zs)), "median_abs_z": sorted(abs(z) for z in zs)[len(zs) // 2]}
            for k, zs in sorted(by.items(), key=lambda kv: (kv[0] == "all", kv[0]))]


def main(argv: list[str] | None = None) -> None:
    import tempfile

    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", default="paper,contrast,shifted")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--transfer", action="store_true",
                    help="predictions for settings without runs (see the module's docstring)")
    ap.add_argument("--settings", default=None,
                    help="race these model/reward settings instead of the benchmark's six, e.g. qwen2.5-1.5b/sparse")
    ap.add_argument("--pilot-budget", type=float, default=1e15, help="the races' pilot budget (target 1e16)")
    ap.add_argument("--loo", action="store_true",
                    help="also score each run with its std widened by its fit's LOO z RMS (not with --transfer)")
    ap.add_argument("--noise-sd", default=None,
                    help="state this run noise sd to ours (planner race --noise-sd), or 'world' for each world's own "
                         "(not with --transfer)")
    args = ap.parse_args(argv)
    if args.noise_sd is not None and (args.transfer or not (args.noise_sd == "world" or _positive(args.noise_sd))):
        from planner.errors import ConfigError

        raise ConfigError(f"noise-sd: a positive number or 'world', and not with --transfer; got {args.noise_sd!r}")
    if args.loo and args.transfer:
        ap.error("--loo: measures the races' proposals; drop it or --transfer")
    tapped: list[tuple[str, float, float, float, float]] = []
    if args.transfer:
        measure: Any = transfer
    else:
        chosen = BENCH_SETTINGS if args.settings is None else [
            tuple(s.split("/", 1)) for s in args.settings.split(",")]
        measure = partial(race, settings=chosen, pilot_budget=args.pilot_budget,
                          loo=tapped if args.loo else None, noise_sd=args.noise_sd)
    rows: list[tuple[str, float, float, float]] = []
    per_world: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for world in args.worlds.split(","):
            mine = [row for rep in range(args.reps) for row in measure(world, rep, Path(tmp))]
            per_world[world] = summarise(mine)
            rows += mine
    what = "settings without runs" if args.transfer else "proposal"
    table = Table(title=f"ours' {what} predictions against the runs (sim; 90% if calibrated)")
    for h in ("world", "kind" if not args.transfer else "setting", "runs", "inside mean +- 1.645 std", "mean z", "median |z|"):
        table.add_column(h, justify="left" if h in ("world", "kind") else "right")
    for world, summary in [*per_world.items(), ("pooled", summarise(rows))]:
        for s in summary:
            table.add_row(world, s["kind"], str(s["n"]), f"{s['inside90']:.2f}", f"{s['mean_z']:+.2f}",
                          f"{s['median_abs_z']:.2f}")
    Console().print(table)
    out: dict[str, Any] = {"worlds": per_world, "pooled": summarise(rows), "reps": args.reps,
                           "transfer": args.transfer, "settings": args.settings, "noise_sd": args.noise_sd,
                           "pilot_budget": args.pilot_budget}
    if args.loo:
        out["loo"] = loo_summary(tapped)
        Console().print(loo_table(out["loo"]))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2))


def _positive(text: str) -> bool:
    try:
        return 0 < float(text) < math.inf
    except ValueError:
        return False


def loo_summary(tapped: Sequence[tuple[str, float, float, float, float]]) -> dict[str, Any]:
    """The fitted predictions scored as made and with their std times max(1, LOO z RMS),
    and that RMS's quartiles."""
    import numpy as np

    rms = np.array([t[4] for t in tapped]) if tapped else np.array([math.nan])
    return {"as_made": summarise([t[:4] for t in tapped]) if tapped else [],
            "widened": summarise([(k, m, s * max(1.0, r), v) for k, m, s, v, r in tapped]) if tapped else [],
            "rms_quantiles": dict(zip(("min", "q25", "median", "q75", "max"),
                                      np.quantile(rms, [0, 0.25, 0.5, 0.75, 1]).round(3).tolist(), strict=True))}


def loo_table(loo: dict[str, Any]) -> Any:
    from rich.table import Table

    q = loo["rms_quantiles"]
    table = Table(title="with the std widened by the fit's LOO z RMS (min / median / max "
                        f"{q['min']:.2f} / {q['median']:.2f} / {q['max']:.2f})")
    for h in ("kind", "runs", "inside, as made", "inside, widened"):
        table.add_column(h, justify="left" if h == "kind" else "right")
    for a, w in zip(loo["as_made"], loo["widened"], strict=True):
        table.add_row(a["kind"], str(a["n"]), f"{a['inside90']:.2f}", f"{w['inside90']:.2f}")
    return table


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
