"""Right calls per setting: how many repetitions each strategy (and grid design) called a
setting's true regime, read from stored ``planner_bench.py`` results.

The benchmark's tables pool a world's 6 settings; 0.95 of a world's 60 calls allows 3
wrong ones, so where a world misses the line it matters which settings the misses sit
on. One table per results file, one row per (world, strategy, design), one column per
setting: right calls of the repetitions that ran.

    python benchmarks/setting_calls.py [FILE ...] [--worlds contrast,shifted] [--grid target|pilot|all|none]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parent / "planner_bench_results.json"


def setting_calls(doc: dict[str, Any], worlds: Sequence[str] | None = None,
                  grid: str = "target") -> tuple[list[str], list[dict[str, Any]]]:
    """(setting keys in the file's order, rows): each row has ``world``, ``strategy``,
    ``design``, ``reps`` and ``right`` (right calls per setting). ``grid`` keeps the grid
    designs at the target budget, at the pilot budget, all or none."""
    c = doc["config"]
    keys = [f"{m}/{r}" for m in c["models"] for r in c["rewards"]]
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in doc["outcomes"]:
        if worlds and o["world"] not in worlds:
            continue
        design = o.get("config") or ""
        if o["strategy"] == "grid" and grid != "all" and (grid == "none" or not design.endswith("@" + grid)):
            continue
        r = rows.setdefault((o["world"], o["strategy"], design),
                            {"world": o["world"], "strategy": o["strategy"], "design": design, "reps": 0,
                             "right": [0] * len(keys)})
        r["reps"] += 1
        r["right"] = [n + bool(a) for n, a in zip(r["right"], o["same"], strict=True)]
    order = list(dict.fromkeys(c["worlds"]))
    return keys, sorted(rows.values(), key=lambda r: (order.index(r["world"]) if r["world"] in order else len(order),
                                                      r["strategy"] != "ours", r["strategy"], r["design"]))


def main(argv: Sequence[str] | None = None) -> list[tuple[str, list[str], list[dict[str, Any]]]]:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=[str(DEFAULT)], help="planner_bench.py JSON results")
    ap.add_argument("--worlds", default=None, help="comma-separated worlds (default: every world in the file)")
    ap.add_argument("--grid", choices=("target", "pilot", "all", "none"), default="target",
                    help="grid designs shown: at the target budget (default), the pilot budget, all, none")
    a = ap.parse_args(list(argv) if argv is not None else None)
    worlds = [w for w in a.worlds.split(",") if w] if a.worlds else None
    c = Console(width=160)
    out = []
    for f in a.files:
        try:
            doc = json.loads(Path(f).read_text())
            keys, rows = setting_calls(doc, worlds, a.grid)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"error: {f}: not a planner_bench.py results file ({e}); "
                             "give the --out JSON of benchmarks/planner_bench.py") from None
        if worlds is not None:
            from bench_cli import check_known

            check_known("worlds", worlds, doc["config"]["worlds"])  # else an empty table, exit 0
        reps = sorted({o["rep"] for o in doc["outcomes"]})
        t = Table(title=f"{Path(f).name} (reps {reps[0]}-{reps[-1]}): right calls per setting")
        for col in ("world", "strategy", "design", *(k.removeprefix("qwen2.5-") for k in keys)):
            t.add_column(col)
        for r in rows:
            t.add_row(r["world"], r["strategy"], r["design"], *(f"{n}/{r['reps']}" for n in r["right"]))
        c.print(t)
        out.append((Path(f).name, keys, rows))
    return out


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
