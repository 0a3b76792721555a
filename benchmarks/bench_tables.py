"""The tables ``planner_bench.py`` prints (rich): per world, pooled, anytime and the cost
to reach a rate, the oracle duel, and ours against each equal-spend baseline, paired."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # sibling scripts, also when this module is loaded alone
    sys.path.insert(0, str(BENCH))

from bench_scoring import ORACLE_RUNS  # noqa: E402
from paired_regret import paired_table, print_paired  # noqa: E402

__all__ = ["paired", "print_anytime", "print_pooled", "print_table"]


def print_table(rows: list[dict[str, Any]], latency: dict[str, float]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="planner benchmark (simulated; FLOPs in target-run units)")
    for col in ("world", "strategy", "design", "same-regime", "decidable", "|rho* err| med", "regret med",
                "FLOPs", "ask s (no fit)", "confident", "acc|conf", "stops"):
        t.add_column(col)
    order = list(dict.fromkeys(r["world"] for r in rows))
    for r in sorted(rows, key=lambda r: order.index(r["world"])):  # stable: keeps strategies' order
        if r["strategy"] == "grid" and not r.get("show", False):
            continue
        def num(v: float, spec: str) -> str:
            return "-" if v != v else format(v, spec)  # NaN: nothing to score (no decidable setting, no call)

        t.add_row(r["world"], r["strategy"], r["config"], f"{r['same_regime']:.3f}",
                  f"{num(r['same_regime_decidable'], '.3f')} ({r['decidable_share']:.2f})",
                  num(r["rho_err_median"], ".3f"), num(r["regret_median"], ".4f"),
                  f"{r['flops_target_units']:.1f}", f"{r['ask_s']:.2f}", num(r["confident_share"], ".2f"),
                  num(r["same_regime_when_confident"], ".2f"), ",".join(f"{k}:{v}" for k, v in r["stops"].items()))
    c = Console(width=200)
    c.print(t)
    c.print("suggest latency: " + ", ".join(f"{k} {v:.2f}" for k, v in latency.items()))


def print_pooled(pool: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="all worlds pooled (± one standard error: binomial for the rates, bootstrap for the median regret; "
                    "constant: one label called everywhere)")
    for col in ("strategy", "design", "same-regime", "decidable", "regret med", "FLOPs"):
        t.add_column(col)
    def pm(r: dict[str, Any], key: str, digits: int = 3) -> str:
        se = r.get(key + "_se", float("nan"))
        return f"{r[key]:.{digits}f}" + ("" if np.isnan(se) else f" ± {se:.{digits}f}")

    for r in sorted(pool, key=lambda r: -r["same_regime"]):
        t.add_row(r["strategy"], r["config"], pm(r, "same_regime"), pm(r, "same_regime_decidable"),
                  pm(r, "regret_median", 4), f"{r['flops_target_units']:.1f}")
    Console(width=200).print(t)


def print_anytime(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    c = Console(width=200)
    t = Table(title="ours, anytime: the calls of a race capped at each FLOP budget (target-run units)")
    for col in ("world", "cap", "FLOPs", "same-regime", "decidable", "regret med"):
        t.add_column(col)
    for w, sm in summary.items():
        for r in sm["anytime"]:
            t.add_row(w, f"{r['cap']:.0f}", f"{r['flops_target_units']:.1f}", f"{r['same_regime']:.3f}",
                      f"{r['same_regime_decidable']:.3f}", f"{r['regret_median']:.4f}")
    c.print(t)
    t = Table(title="FLOPs to reach a same-regime rate: ours (anytime) vs the cheapest grid design")
    for col in ("world", "settings", "rate", "ours", "grid", "grid design", "ours / grid"):
        t.add_column(col)
    for w, sm in summary.items():
        for r in sm["cost_to_reach"]:
            fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
            t.add_row(w, "decidable" if r["metric"].endswith("decidable") else "all", f"{r['rate']:.2f}",
                      fmt(r["ours_flops"]), fmt(r["grid_flops"]), r["grid_design"] or "-",
                      "-" if r["ratio"] is None else f"{r['ratio']:.2f}")
    c.print(t)
    t = Table(title="oracle duel (two-allocation comparison, not a ceiling): expected same-regime rate (all settings / decidable ones) of a call "
                    "that knows both contenders' best rho; FLOPs per setting = 2 x runs per arm, target-run units")
    for col in ("world", *(f"{2 * k} units/setting" for k in ORACLE_RUNS)):
        t.add_column(col)
    for w, sm in summary.items():
        dec = lambda v: "-" if np.isnan(v) else f"{v:.3f}"  # noqa: E731
        t.add_row(w, *(f"{sm['oracle_duel'][str(k)]:.3f} / {dec(sm['oracle_duel_decidable'][str(k)])}"
                       for k in ORACLE_RUNS))
    c.print(t)


def paired(outcomes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours against each equal-spend baseline, paired by repetition and setting
    (benchmarks/paired_regret.py), printed when any baseline ran beside ours."""
    rows = paired_table(outcomes)
    if rows:
        print_paired(rows)
    return rows
