"""Is the learning real? Base vs trained tiny-s on the native target, 3 seeds (``--seeds``, at
least 2), sparse and prm.

For each reward system: compile one plan (``--budget``, rho per reward), run the ``trl``
engine with seeds 0..N-1 on the fully pretrained tiny world, and compare ``native`` after
training with ``native_base`` (the same fixed evaluation samples before training). The
claim holds when the mean gain exceeds the spread (max - min) of ``native`` over the seeds.
CPU heavy (minutes per run on 2 cores): run it by hand, not in CI.

    python benchmarks/learning_real.py --budget 5e11 --seeds 3 --out benchmarks/results/learning_real.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RHOS = {"sparse": 0.72, "prm": 0.45, "proxy-prm": 0.45, "dense": 0.72, "structured": 0.72}


def run_setting(reward: str, rho: float, budget: float, seeds: int, opts: dict[str, Any]) -> dict[str, Any]:
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal
    from runners.engines.trl import TrlEngine

    proposal = make_proposal(compile_plan("tiny-s", reward, rho, budget))
    engine = TrlEngine(**opts)
    runs = []
    for seed in range(seeds):
        t0 = time.perf_counter()
        rec = engine.run(proposal, seed)
        runs.append({
            "seed": seed, "native": rec.metrics.native, "native_base": rec.metrics.native_base,
            "pass1": rec.metrics.pass1, "pass1_base": rec.metrics.pass1_base,
            "judge": rec.metrics.judge, "judge_base": rec.metrics.judge_base,
            "flops": rec.card.flops.model_dump(), "rho": rec.card.rho, "wall_s": rec.card.wall_s,
            "steps": rec.provenance["optimizer_steps"], "elapsed_s": round(time.perf_counter() - t0, 1),
        })
        print(json.dumps(runs[-1]), flush=True)
    after = [r["native"] for r in runs]
    gains = [r["native"] - r["native_base"] for r in runs]
    spread = max(after) - min(after)
    plan = proposal.plan
    return {
        "reward": reward, "rho_planned": plan.rho, "budget": budget,
        "levers": {"G": plan.completions_per_prompt, "K": plan.completions_kept, "mu": plan.num_iterations,
                   "prompts": plan.total_prompts},
        "native_base": runs[0]["native_base"], "native_after_mean": statistics.mean(after),
        "gain_mean": statistics.mean(gains), "seed_spread": spread,
        "learning_is_real": statistics.mean(gains) > spread, "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=5e11)
    p.add_argument("--seeds", type=int, default=3, help="seeds per reward; at least 2 (the check compares "
                   "the gain with their spread)")
    p.add_argument("--rewards", default="sparse,prm", help=f"comma-separated, of: {', '.join(RHOS)}")
    p.add_argument("--eval-samples", type=int, default=256)
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--quick", action="store_true", help="quick-pretrained tiny world (smoke test)")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    from bench_cli import check_known

    from planner.errors import ConfigError

    rewards = [r for r in a.rewards.split(",") if r]
    check_known("rewards", rewards or [""], RHOS)
    if a.seeds < 2:
        # One seed has no spread, so the claim would hold on any gain at all.
        raise ConfigError(f"seeds: need at least 2 to compare the gain with the seed spread, got {a.seeds}")
    opts: dict[str, Any] = {"quick": a.quick, "eval_samples": a.eval_samples}
    if a.learning_rate is not None:
        opts["learning_rate"] = a.learning_rate
    results = [run_setting(r, RHOS[r], a.budget, a.seeds, opts) for r in rewards]
    for r in results:
        print(f"{r['reward']:>10}: native {r['native_base']:.3f} -> {r['native_after_mean']:.3f} "
              f"(gain {r['gain_mean']:+.3f}, {a.seeds}-seed spread {r['seed_spread']:.3f}) "
              f"real={r['learning_is_real']}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=2))
    return 0 if all(r["learning_is_real"] for r in results) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    raise SystemExit(run(main))
