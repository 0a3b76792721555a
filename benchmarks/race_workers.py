"""Does ``planner race --workers 2`` gain from filling ours' rounds? Side by side, one run.

The main job's race (scripts/main.sh: real GRPO/LoRA runs on tiny-s, sparse and dense,
target 5e11, pilots 1e11, 20 runs, two local workers) twice, back to back, on the same
machine and the same pretrained policy, each into a fresh data directory:

* ``fill``: what ``--workers 2`` does -- ours' acquisition and validation rounds hold at
  least 2 runs (``RaceStrategy(min_batch=2)``), so no worker idles;
* ``no-fill``: the same two workers, but rounds as with one worker (``min_batch=1``):
  a round with one undecided setting runs one run while the other worker waits.

It prints wall time, rounds, runs, FLOPs and the final calls of each arm, and the wall
ratio. The two arms make different proposals after the anchors, so they are different
races as well as different schedules: read the ratio with the runs and rounds beside it.
The pretraining of tiny-s (outside both clocks) happens once, before the first arm. The
JSON keeps each arm's rounds (seconds, runs, calls), so rounds the arms share show how far
the machine drifted between them. (The stored ``benchmarks/results/race_workers.json``
predates that field; the printed rounds of its run are in ``race_workers.log`` beside it.)

    python benchmarks/race_workers.py [--arms fill,no-fill] [--out race_workers.json]

Takes ~30 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Not the stored results file: a rerun (or a mistyped --arms) would replace what the docs
# cite, and that run's rounds are not in its JSON to regenerate.
DEFAULT_OUT = Path("race_workers.json")
RACE = {"budget": "5e11", "models": "tiny-s", "rewards": "sparse,dense", "target": "native",
        "pilot_budget": "1e11", "max_runs": 20, "workers": 2, "engine_options": {"eval_samples": 128}}
# arm -> ours' min_batch; `planner race --workers N` with one seed sets min_batch N.
ARMS = {"fill": RACE["workers"], "no-fill": 1}


def race_arm(arm: str, data: Path) -> dict[str, Any]:
    """One race of the main job with ours' ``min_batch`` of ``arm``; wall time and result."""
    from planner.cli.problem import race_problem
    from planner.engine import load_engine, open_batches, open_store, prepare_engine
    from planner.loop import RaceProgress, run_race
    from planner.strategies import make_strategy

    problem = race_problem(RACE["budget"], RACE["models"], RACE["rewards"], RACE["target"], RACE["pilot_budget"])
    eng = load_engine("trl", **RACE["engine_options"])
    prepare_engine(eng, [(s.model, s.reward) for s in problem.settings])
    strat = make_strategy("ours", problem, 0, min_batch=ARMS[arm])
    t0 = time.perf_counter()
    trace: list[dict[str, Any]] = []

    def progress(p: RaceProgress) -> None:
        now = time.perf_counter() - t0
        calls = ", ".join(f"{s.key} {c.regime} P {c.confidence:.2f}" for s, c in p.calls.items())
        print(f"  [{arm}] {now:6.0f} s  round {p.round}: {p.last_batch} runs "
              f"(total {p.runs}, {p.flops:.3g} FLOPs)  {calls}", flush=True)
        trace.append({"round": p.round, "s": round(now, 1), "batch": p.last_batch, "runs": p.runs,
                      "flops": p.flops, "calls": {s.key: [c.regime, round(c.confidence, 3)] for s, c in p.calls.items()}})

    with open_batches(engine="trl", data=data, workers=RACE["workers"], backend="local",
                      engine_options=RACE["engine_options"]) as parallel:
        result = run_race(problem, strat, eng, open_store(data), max_runs=RACE["max_runs"],
                          progress=progress, run_batch=parallel)
    wall = time.perf_counter() - t0
    return {
        "arm": arm, "min_batch": ARMS[arm], "wall_s": round(wall, 1), "rounds": result.rounds,
        "runs": result.total_runs, "flops": result.total_flops, "stop": result.stop_reason,
        "calls": {s.key: {"regime": c.regime, "p": round(c.confidence, 3), "rho_star": round(c.rho_star, 3)}
                  for s, c in result.calls.items()},
        "rounds_trace": trace,  # after every round: seconds since the start, runs, calls
    }


def main(argv: list[str] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", default="fill,no-fill", help="comma-separated arms, run in this order")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="where the JSON goes (default ./race_workers.json)")
    args = ap.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        ap.error(f"--arms: unknown arm {bad[0]!r}; use {', '.join(ARMS)}")
    if not arms:
        ap.error(f"--arms: no arm given; use some of {', '.join(ARMS)}")

    rows = []
    with tempfile.TemporaryDirectory(prefix="race-workers-") as tmp:
        for arm in arms:
            print(f"{arm}: racing (min_batch {ARMS[arm]}, {RACE['workers']} workers)", flush=True)
            rows.append(race_arm(arm, Path(tmp) / arm))

    table = Table(title="The main job's race, two workers, with and without filling ours' rounds")
    for col in ("arm", "min_batch", "wall", "rounds", "runs", "FLOPs", "stop", "calls"):
        table.add_column(col)
    for r in rows:
        calls = "; ".join(f"{k} {v['regime']} P {v['p']:.2f} rho* {v['rho_star']:.2f}" for k, v in r["calls"].items())
        table.add_row(r["arm"], str(r["min_batch"]), f"{r['wall_s'] / 60:.1f} min", str(r["rounds"]),
                      str(r["runs"]), f"{r['flops']:.3g}", r["stop"], calls)
    Console().print(table)
    by = {r["arm"]: r for r in rows}
    if {"fill", "no-fill"} <= by.keys():
        print(f"wall fill / no-fill: {by['fill']['wall_s'] / by['no-fill']['wall_s']:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"race": RACE, "arms": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
