"""One benchmark race of ``ours``, traced for one setting: its runs, the call, and the
posterior-mean frontier at the target budget next to the sim's truth.

The benchmark's protocol (6 Qwen settings, target 1e16, pilots 1e15, a cap of 36
target-run units, the benchmark's seeds), so repetition ``--rep`` is the race that
``planner_bench.py`` runs at this commit on this machine. The traces docs/benchmark.md
(the default: shifted, 7b, prm) and docs/planner.md quote are of the stored run
(``planner_bench_results.json``), which needs that run's commit: before 12-02 the sim's noise
key held no world name.

    python benchmarks/race_trace.py [--world shifted] [--rep 0] [--model qwen2.5-7b] [--reward prm]
                                    [--cost-power P]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def main(argv: list[str] | None = None) -> None:
    import planner_bench as pb
    import torch
    from rich.console import Console
    from rich.table import Table

    from planner.acquisition import AcquisitionConfig
    from planner.frontier import Setting, allocation_shares, rho_grid
    from planner.loop import run_race
    from planner.regime import LABELS, regime_labels
    from planner.registry import POLICIES_QWEN
    from planner.strategies import RaceProblem, make_strategy

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default="shifted")
    ap.add_argument("--rep", type=int, default=0)
    ap.add_argument("--model", default="qwen2.5-7b", help="the setting whose race is traced")
    ap.add_argument("--reward", default="prm", help="the setting whose race is traced")
    ap.add_argument("--cost-power", type=float, default=None,
                    help="ours' acquisition cost power (default: ours' own; 1 = the previous gain per FLOP)")
    a = ap.parse_args(argv)
    from bench_cli import check_known

    check_known("model", [a.model], POLICIES_QWEN)  # before the race, not after it
    check_known("reward", [a.reward], pb.REWARDS)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    problem = RaceProblem(tuple(Setting(m, r) for m in POLICIES_QWEN for r in pb.REWARDS), budget=1e16,
                          pilot_budget=1e15, target="native")
    config = None if a.cost_power is None else AcquisitionConfig(seed=a.rep, cost_power=a.cost_power)
    strategy = make_strategy("ours", problem, a.rep, n_anchor=pb.N_ANCHOR, anchor="stratified", config=config)
    res = run_race(problem, strategy, pb.SeededEngine(a.world, a.rep), pb.MemoryStore(),
                   max_runs=pb.RUNS_PER_SETTING * len(problem.settings),
                   max_flops=pb.FLOPS_PER_SETTING * len(problem.settings) * problem.budget)
    s = Setting(a.model, a.reward)
    truth, call = pb.Truth(a.world, problem), res.calls[s]
    c = Console(width=120)
    mine = [r for r in strategy.records_ if Setting(r.model, r.reward) == s]
    by_budget = Counter(f"{r.budget:.2g}" for r in mine)
    c.print(f"{a.world} rep {a.rep} {s.key}: {len(mine)} runs ({', '.join(f'{n} at {b}' for b, n in sorted(by_budget.items()))})")
    c.print(f"call {call.regime}, P = {call.confidence:.2f} ({', '.join(f'{k} {v:.2f}' for k, v in call.probabilities.items())}); "
            f"rho* {call.rho_star:.3f} [{call.rho_star_ci[0]:.2f}, {call.rho_star_ci[1]:.2f}]; "
            f"truth {truth.f[s].regime} at rho* {truth.f[s].rho_star:.3f}")
    t = Table(title="runs")
    for col in ("rho", "budget", "mu", "native"):
        t.add_column(col, justify="right")
    for r in sorted(mine, key=lambda r: (r.budget, r.card.rho)):
        t.add_row(f"{r.card.rho:.3f}", f"{r.budget:.2g}", str(r.plan.num_iterations), f"{r.metrics.native:.4f}")
    c.print(t)
    grid = rho_grid(s.model, s.reward)
    mean, sd = strategy.surrogate().frontier(s.model, s.reward, problem.budget, grid)
    labels = regime_labels(allocation_shares(s.model, s.reward, grid, budget=problem.budget))
    f = truth.f[s]
    t = Table(title=f"frontier at {problem.budget:.0e}: posterior mean +- sd vs truth")
    for col in ("rho", "posterior", "truth", "regime"):
        t.add_column(col, justify="right")
    for i in range(0, len(grid), 4):
        true = f.value[int(np.argmin(np.abs(f.rho - grid[i])))]
        t.add_row(f"{grid[i]:.3f}", f"{mean[i]:.4f} +- {sd[i]:.4f}", f"{true:.4f}", LABELS[labels[i]])
    c.print(t)
    # The table shows every 4th rho; peaks and regime boundaries are read off the full grid.
    top = int(np.argmax(mean))
    spans, start = [], 0
    for i in range(1, len(grid) + 1):
        if i == len(grid) or labels[i] != labels[start]:
            spans.append(f"{LABELS[labels[start]]} {grid[start]:.2f}-{grid[i - 1]:.2f}")
            start = i
    c.print(f"posterior mean peaks at {mean[top]:.4f} (rho {grid[top]:.3f}); truth {f.value_star:.4f} at rho* "
            f"{f.rho_star:.3f}; regimes along rho: {', '.join(spans)}")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
