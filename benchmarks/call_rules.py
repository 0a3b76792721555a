"""Call rules scored on the same races: ours' posterior call against the paper's local
quadratic fitted to ours' own target-budget runs, and a hybrid of the two.

Ours' races as ``planner_bench.py`` runs them (same seeds, same cap), then, per setting,
three calls from the same records:

* ``ours``: the posterior's most probable regime (what the race reports);
* ``quadratic``: :func:`planner.strategies.quadratic.quadratic_call` on ours' runs at the
  target budget (the grid baseline's local shape fit, on ours' data);
* ``hybrid``: ours where its probability reaches the confidence, the quadratic elsewhere.

It asks whether a shape fit, which beats a duel on near-tied settings (``duel_vs_shape.py``),
would settle ours' open calls better than the posterior does. Prints same-regime rates per
world and pooled; ``--out`` writes them as JSON.

    python benchmarks/call_rules.py [--worlds contrast,shifted] [--seeds 10] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
for p in (BENCH, BENCH.parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

RULES = ("ours", "quadratic", "hybrid")


def world_calls(world: str, reps: Sequence[int], flops_per_setting: float) -> list[list[dict[str, Any]]]:
    """Per repetition, per setting: whether each rule's call is the true regime."""
    import planner_bench as pb
    import torch
    from bench_scoring import Truth

    from planner.acquisition import AcquisitionConfig
    from planner.frontier import Setting
    from planner.strategies.base import target_value
    from planner.strategies.quadratic import quadratic_call

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    problem = pb.RaceProblem(tuple(Setting(m, r) for m in pb.POLICIES_QWEN for r in pb.REWARDS), budget=1e16,
                             pilot_budget=1e15, target="native", confidence=0.9)
    truth = Truth(world, problem)
    n = len(problem.settings)
    out = []
    for rep in reps:
        # As planner_bench's race for ours (same strategy, seeds and caps), keeping the store.
        strategy = pb.make_strategy("ours", problem, rep, n_anchor=pb.N_ANCHOR, anchor="stratified",
                                    config=AcquisitionConfig(seed=rep, cost_power=0.5))
        store = pb.MemoryStore()
        res = pb.run_race(problem, strategy, pb.SeededEngine(world, rep), store,
                          max_runs=pb.RUNS_PER_SETTING * n, max_flops=flops_per_setting * n * problem.budget)
        records = store.records()
        row = []
        for s in problem.settings:
            at_target = [r for r in records if Setting(r.model, r.reward) == s
                         and abs(r.budget - problem.budget) <= 0.05 * problem.budget]
            q = quadratic_call(s, problem, [r.card.rho for r in at_target],
                               [target_value(r, problem.target) for r in at_target], seed=rep)
            c = res.calls[s]
            true = truth.f[s].regime
            hybrid = c.regime if c.confidence >= problem.confidence else q.regime
            row.append({"ours": c.regime == true, "quadratic": q.regime == true, "hybrid": hybrid == true,
                        "confident": c.confidence >= problem.confidence, "target_runs": len(at_target)})
        out.append(row)
        print(f"{world} rep {rep}: " + " ".join("".join(str(int(x[k])) for k in RULES) for x in row), flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    import planner_bench as pb

    from runners.sim.world import list_worlds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", default=None, help="comma-separated (default: all shipped)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--flops-per-setting", type=float, default=pb.FLOPS_PER_SETTING)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    worlds = a.worlds.split(",") if a.worlds else [p.stem for p in list_worlds()]
    args = [(w, range(a.seeds), a.flops_per_setting) for w in worlds]
    if a.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(min(a.jobs, len(worlds))) as pool:
            results = dict(zip(worlds, pool.starmap(world_calls, args), strict=True))
    else:
        results = {w: world_calls(*arg) for w, arg in zip(worlds, args, strict=True)}
    rows = []
    for name, calls in [*results.items(), ("pooled", [r for v in results.values() for r in v])]:
        flat = [x for row in calls for x in row]
        rows.append({"world": name, "calls": len(flat), **{k: float(np.mean([x[k] for x in flat])) for k in RULES},
                     "confident": float(np.mean([x["confident"] for x in flat])),
                     "target_runs": float(np.mean([x["target_runs"] for x in flat]))})
    from rich.console import Console
    from rich.table import Table

    t = Table(title="same-regime rate of three call rules on ours' races (same records)")
    for h in ("world", "calls", *RULES, "confident share", "target runs / setting"):
        t.add_column(h, justify="left" if h == "world" else "right")
    for r in rows:
        t.add_row(r["world"], str(r["calls"]), *(f"{r[k]:.3f}" for k in RULES), f"{r['confident']:.2f}",
                  f"{r['target_runs']:.1f}")
    Console().print(t)
    doc = {"rows": rows, "calls": results, "seeds": a.seeds, "flops_per_setting": a.flops_per_setting}
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1))
    return doc


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
