"""Score one bench file's final calls under each regret rule, side by side.

The same races, the same recommended rho per setting (``rho_hat``, stored since the rule
changed), scored two ways by :meth:`bench_scoring.Truth.score`:

* ``frontier``: the truth frontier's value at the achieved rho nearest the recommendation
  (the current rule; the truth's own rho* scores 0);
* ``snapped``: the recommendation read as a requested rho and compiled (the rule of the
  results stored before it, when the sim also snapped it to a 0.005 grid first);
* ``as-run``: each strategy's as it would run its recommendation
  (:func:`bench_scoring.as_run_rule`: frontier for Optuna's metered rho, snapped for the
  requested rho of ours, grid and random), the benchmark's rule since 12-05.

Per world and pooled it prints each strategy's median regret under both rules, and
ours' paired comparison with each equal-spend baseline under each (``paired_regret``).

    python benchmarks/rescore.py FILE.json
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # sibling modules, when this file is loaded by path
    sys.path.insert(0, str(BENCH))

from bench_cli import read_results  # noqa: E402
from bench_scoring import Truth, as_run_rule  # noqa: E402
from paired_regret import BASELINES, compare, pairs  # noqa: E402

from planner.frontier import Setting  # noqa: E402
from planner.strategies import RaceProblem  # noqa: E402

RULES = ("frontier", "snapped", "as-run")


def rescore(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """rule -> outcomes (summary dicts) with ``regret`` scored under that rule."""
    c = doc["config"]
    problem = RaceProblem(tuple(Setting(m, r) for m in c["models"] for r in c["rewards"]), budget=c["budget"],
                          pilot_budget=c["pilot_budget"], target=c["target"])
    truths = {w: Truth(w, problem) for w in c["worlds"]}
    out: dict[str, list[dict[str, Any]]] = {rule: [] for rule in RULES}
    for o in doc["outcomes"]:
        if not o.get("rho_hat"):
            raise SystemExit(f"error: {o['strategy']} {o['world']} rep {o['rep']} has no rho_hat: the file "
                             "predates it; run planner_bench.py again")
        t = truths[o["world"]]
        for rule in RULES:
            how = as_run_rule(o["strategy"]) if rule == "as-run" else rule
            regret = [t.score(s, rho, "", how)[2] for s, rho in zip(problem.settings, o["rho_hat"], strict=True)]
            out[rule].append(o | {"regret": regret})
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    a = ap.parse_args(argv)
    doc = read_results(a.file)
    scored = rescore(doc)
    worlds = list(doc["config"]["worlds"])
    names = sorted({(o["strategy"], o.get("config", "")) for o in doc["outcomes"]})
    report: dict[str, Any] = {"medians": {}, "paired": {}}
    print("median simple regret, final calls: frontier rule / snapped rule / as-run rule")
    print(f"{'strategy':<28}" + "".join(f"{w:>25}" for w in [*worlds, "pooled"]))
    for name, cfg in names:
        label = f"{name} {cfg}".strip()
        cells = []
        for w in [*worlds, "pooled"]:
            vals = []
            for rule in RULES:
                regs = [r for o in scored[rule] if (o["strategy"], o.get("config", "")) == (name, cfg)
                        and (w == "pooled" or o["world"] == w) for r in o["regret"]]
                vals.append(float(np.median(regs)) if regs else float("nan"))
            report["medians"].setdefault(label, {})[w] = dict(zip(RULES, vals, strict=True))
            cells.append(" / ".join(f"{v:.4f}" for v in vals))
        print(f"{label:<28}" + "".join(f"{c:>25}" for c in cells))
    print("\nours against each equal-spend baseline, pooled over worlds (paired by repetition and setting):")
    for base in BASELINES:
        for rule in RULES:
            per_world = pairs(scored[rule], base)
            if not per_world:
                continue
            r = compare(per_world)
            report["paired"].setdefault(base, {})[rule] = r
            print(f"  {base:<11} {rule:<9} ours {r['ours_median']:.4f} vs {r['baseline_median']:.4f}, "
                  f"diff {r['diff']:+.4f} [{r['diff_ci'][0]:+.4f}, {r['diff_ci'][1]:+.4f}], "
                  f"ours lower in {r['ours_lower']:.0%} of pairs, Wilcoxon p {r['wilcoxon_p']:.3g} "
                  f"({r['n_reps']} races)")
    return report


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
