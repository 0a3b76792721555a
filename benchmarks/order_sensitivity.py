"""How much of a benchmark difference is the surrogate's rounding: ours' races of the
stored main results against the same races (same worlds, repetitions and seeds) after
the surrogate began fitting its runs in a canonical order (commit "Surrogate fits its runs
in a canonical order"). The only change is the order of the rows of one GP fit, so every
difference below is what a permutation of the data, i.e. floating-point rounding in the
hyperparameter fit, does to a race that feeds its fits back into its proposals.

    python benchmarks/order_sensitivity.py [BEFORE.json [AFTER.json ...]]

Prints one line per race (right calls of 6, median regret, FLOPs in target-run units),
the totals (calls that changed, right calls, pooled median regret), then both sides'
pooled figures (same-regime rate, decidable and p >= 0.9 calls right, regret, FLOPs) and
each world's same-regime rate.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # sibling modules, when this file is loaded by path
    sys.path.insert(0, str(HERE))

from bench_cli import read_results  # noqa: E402

BEFORE = HERE / "planner_bench_results.json"
AFTER = (HERE / "results" / "planner_bench_ours_canonical_order_reps0-2.json",
         HERE / "results" / "planner_bench_ours_canonical_order_reps3-9.json")


def ours(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    rows = read_results(path)["outcomes"]
    return {(o["world"], o["rep"]): o for o in rows if o["strategy"] == "ours" and o["config"] == ""}


def merged(paths: list[Path] | tuple[Path, ...]) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for p in paths:
        these = ours(p)
        if overlap := sorted(these.keys() & out.keys()):
            from planner.errors import ConfigError

            raise ConfigError(f"{p}: repeats {overlap[0][0]} rep {overlap[0][1]} of an earlier file; "
                              "the rerun's files must hold disjoint repetitions")
        out |= these
    return out


def compare(before: dict[tuple[str, int], dict[str, Any]], after: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """Race-by-race differences over the races present in both."""
    keys = sorted(set(before) & set(after))
    lines, changed, calls, ra, rb = [], 0, 0, [], []
    right = [0, 0]
    for k in keys:
        x, y = before[k], after[k]
        changed += sum(p != q for p, q in zip(x["same"], y["same"], strict=True))
        calls += len(y["same"])
        right[0] += sum(x["same"])
        right[1] += sum(y["same"])
        ra += x["regret"]
        rb += y["regret"]
        lines.append((k, sum(x["same"]), sum(y["same"]), float(np.median(x["regret"])), float(np.median(y["regret"])),
                      x["flops_target_units"], y["flops_target_units"], x["same"] == y["same"]))
    return {"races": len(keys), "lines": lines, "changed": changed, "calls": calls, "right": right,
            "regret_median": (float(np.median(ra)), float(np.median(rb)))}


def summary(races: dict[tuple[str, int], dict[str, Any]], world: str | None = None) -> dict[str, Any]:
    """Pooled (or one world's) figures of a set of ours' races: same-regime rate and its
    binomial standard error, decidable and confident calls right, median regret, FLOPs."""
    rs = [o for (w, _), o in sorted(races.items()) if world is None or w == world]
    same = [s for o in rs for s in o["same"]]
    dec = [s for o in rs for s, d in zip(o["same"], o["decidable"], strict=True) if d]
    conf = [s for o in rs for s, c in zip(o["same"], o["confident"], strict=True) if c]
    p = float(np.mean(same))
    return {"races": len(rs), "same": p, "se": float(np.sqrt(p * (1 - p) / len(same))),
            "decidable": (sum(dec), len(dec)), "confident": (sum(conf), len(conf)),
            "regret_median": float(np.median([x for o in rs for x in o["regret"]])),
            "flops": float(np.mean([o["flops_target_units"] for o in rs]))}


def _line(tag: str, m: dict[str, Any]) -> str:
    return (f"{tag:<9} same-regime {m['same']:.3f} +- {m['se']:.3f}, decidable {m['decidable'][0]}/"
            f"{m['decidable'][1]}, p >= 0.9 calls right {m['confident'][0]}/{m['confident'][1]}, "
            f"regret median {m['regret_median']:.4f}, {m['flops']:.1f} units")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", nargs="?", type=Path, default=BEFORE)
    ap.add_argument("after", nargs="*", type=Path, default=list(AFTER),
                    help="files of the rerun (disjoint repetitions, merged)")
    args = ap.parse_args(argv)
    r = compare(ours(args.before), merged(args.after))
    print(f"{'world':<9} rep  right (of 6)  regret median     FLOPs (units)   same calls")
    for (w, rep), a, b, ga, gb, fa, fb, same in r["lines"]:
        print(f"{w:<9} {rep:>3}  {a} -> {b}        {ga:.4f} -> {gb:.4f}  {fa:5.1f} -> {fb:5.1f}   {'yes' if same else 'no'}")
    print(f"{r['races']} races: {r['changed']} of {r['calls']} calls changed; right {r['right'][0]} -> "
          f"{r['right'][1]}; pooled median regret {r['regret_median'][0]:.4f} -> {r['regret_median'][1]:.4f}")
    before, after = ours(args.before), merged(args.after)
    common = {k: before[k] for k in after if k in before}
    print(_line("before", summary(common)))
    print(_line("after", summary(after)))
    for w in sorted({w for w, _ in after}):
        print(f"  {w:<9} same-regime {summary(common, w)['same']:.3f} -> {summary(after, w)['same']:.3f}")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
