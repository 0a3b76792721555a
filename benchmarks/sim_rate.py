"""How many simulated runs per second the ``sim`` engine delivers, in process.

    python benchmarks/sim_rate.py [--world paper] [--repeats 5]

Measures the vectorised API (``runners.sim.simulate``, what benchmarks and truth use) at
several batch sizes, with noise and random (rho, budget) per run drawn from the reachable
range and a budget ladder, and the one-record-at-a-time engine path (``SimEngine.run``,
what ``runners execute --engine sim`` uses; dominated by pydantic record building). The
one-off cost of tabulating the compiler's levers per (model, reward) is reported apart.
Prints a table; the issue asks for >= 10,000 runs/s on the vectorised path.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from planner.compiler import compile_plan
from planner.proposals import make_proposal
from runners.engines.sim import SimEngine
from runners.sim.levers import lever_table
from runners.sim.simulate import simulate
from runners.sim.world import load_world

SETTINGS = [("qwen2.5-1.5b", "sparse"), ("qwen2.5-1.5b", "prm"), ("qwen2.5-7b", "proxy-prm")]
BUDGETS = np.array([1e15, 3e15, 1e16, 3e16, 1e17])  # a pilot-to-target ladder


def _best_rate(fn, n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default="paper")
    ap.add_argument("--repeats", type=int, default=5, help="timings of each path; the best is reported")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        from planner.errors import ConfigError

        raise ConfigError(f"repeats: need at least 1 timing (the best of them is reported), got {args.repeats}")
    world = load_world(args.world)
    rng = np.random.default_rng(0)

    rows: list[tuple[str, str, str]] = []
    t0 = time.perf_counter()
    for model, reward in SETTINGS:
        lever_table(model, reward)
    rows.append(("lever tables (one-off)", f"{len(SETTINGS)} settings",
                 f"{(time.perf_counter() - t0) / len(SETTINGS):.2f} s each"))

    for n in (100, 1_000, 10_000, 100_000):
        for model, reward in SETTINGS:
            t = lever_table(model, reward)
            rho = rng.uniform(t.lo, t.hi, n)
            budget = rng.choice(BUDGETS, n)
            simulate(world, model, reward, rho, budget, "native", seed=1)  # warm the fallbacks
            rate = _best_rate(
                lambda rho=rho, budget=budget, model=model, reward=reward: simulate(
                    world, model, reward, rho, budget, "native", seed=1),
                n, args.repeats)
            rows.append((f"simulate, batch {n:,}", f"{model}/{reward}", f"{rate:,.0f} runs/s"))

    engine = SimEngine(world)
    props = [make_proposal(compile_plan("qwen2.5-1.5b", "sparse", float(r), 1e16))
             for r in np.linspace(0.2, 0.9, 20)]
    rate = _best_rate(lambda: [engine.run(p, s) for s in range(10) for p in props],
                      10 * len(props), args.repeats)
    rows.append(("SimEngine.run (records)", "qwen2.5-1.5b/sparse", f"{rate:,.0f} runs/s"))

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"sim engine rate, world {world.name} (best of {args.repeats})")
    for col in ("path", "setting", "rate"):
        table.add_column(col, justify="right" if col == "rate" else "left")
    for r in rows:
        table.add_row(*r)
    Console(width=100).print(table)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
