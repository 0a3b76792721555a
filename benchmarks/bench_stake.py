"""Does a call's stake say how much its regime matters? Checked against the truth.

``stake`` (``planner.regime.regime_stake``) is the posterior's expected gap between the
best allocations of the called regime and of the next one. The benchmark knows the true
gap (``runners.sim.truth.regime_gap``); this module compares the two over every final call
of a strategy with a posterior (``ours``): their rank correlation, and the stake where the
truth is a near-tie (gap < 0.2 noise sd) against where it is decidable (>= 0.5 sd).

    python benchmarks/bench_stake.py RESULTS.json [MORE.json ...] [--plot FIG.png]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
for _p in (BENCH, BENCH.parent):  # sibling scripts, and the repository's packages
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from bench_cli import read_results  # noqa: E402
from bench_scoring import DECIDABLE_GAP_SD as DECIDABLE_SD  # noqa: E402

__all__ = ["GAP_BINS_SD", "NEAR_TIE_SD", "plot_stake", "print_stake", "stake_by_gap", "stake_table"]

NEAR_TIE_SD = 0.2  # below this true gap (noise sd) a regime call changes almost nothing
GAP_BINS_SD: tuple[float, ...] = (0.0, 0.05, 0.2, 0.5, 1.0, float("inf"))


def _pairs(outcomes: Sequence[dict[str, Any]], noise: dict[str, float]) -> dict[str, list[tuple[float, float]]]:
    """world -> (stake, true gap) of every final call with a stake, both in noise sd."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for o in outcomes:
        sd = noise[o["world"]]
        for st, gap in zip(o.get("stake") or [], o.get("gap") or [], strict=False):
            if st is not None and np.isfinite(st):
                # A stored gap of null is an infinite one (JSON has no inf): no other regime
                # is reachable there, the call cannot be wrong.
                pairs.setdefault(o["world"], []).append((st / sd, (math.inf if gap is None else gap) / sd))
    return pairs


def stake_table(outcomes: Sequence[dict[str, Any]], noise: dict[str, float]) -> list[dict[str, Any]]:
    """Per world and pooled: calls with a stake, Spearman's rho between stake and true gap,
    and median stake / true gap (in noise sd) on near-tied and on decidable settings.

    ``outcomes`` are ``Outcome.summary()`` dicts (with ``stake`` and ``gap`` lists);
    ``noise`` maps world -> the target's noise sd. Outcomes without stakes are skipped.
    """
    from scipy.stats import spearmanr

    rows = []
    groups = sorted(_pairs(outcomes, noise).items())
    if len(groups) > 1:
        groups.append(("pooled", [p for _, ps in groups for p in ps]))
    for world, ps in groups:
        a = np.array(ps)
        tie, dec = a[a[:, 1] < NEAR_TIE_SD], a[a[:, 1] >= DECIDABLE_SD]
        rho = spearmanr(a[:, 0], a[:, 1]).statistic if len(a) > 2 and np.ptp(a[:, 1]) > 0 else float("nan")
        rows.append({
            "world": world, "calls": len(a), "spearman": float(rho),
            "near_tie_calls": len(tie),
            "stake_sd_near_tie": float(np.median(tie[:, 0])) if len(tie) else float("nan"),
            "decidable_calls": len(dec),
            "stake_sd_decidable": float(np.median(dec[:, 0])) if len(dec) else float("nan"),
            "gap_sd_decidable": float(np.median(dec[:, 1])) if len(dec) else float("nan"),
        })
    return rows


def stake_by_gap(outcomes: Sequence[dict[str, Any]], noise: dict[str, float]) -> list[dict[str, Any]]:
    """Pooled over worlds: quartiles of the stake (noise sd) per bin of the true gap
    (:data:`GAP_BINS_SD`, lower edge inclusive); empty bins are left out."""
    a = np.array([p for ps in _pairs(outcomes, noise).values() for p in ps]).reshape(-1, 2)
    out = []
    for lo, hi in itertools.pairwise(GAP_BINS_SD):
        top = np.isinf(a[:, 1]) if hi == math.inf else False  # the last bin holds an infinite gap
        st = a[(a[:, 1] >= lo) & ((a[:, 1] < hi) | top), 0]
        if len(st):
            q1, med, q3 = np.percentile(st, [25, 50, 75])
            out.append({"gap_lo": lo, "gap_hi": hi, "calls": len(st), "q1": float(q1), "median": float(med),
                        "q3": float(q3)})
    return out


def print_stake(rows: Sequence[dict[str, Any]], bins: Sequence[dict[str, Any]] = ()) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="stake vs the truth's regime gap (final calls; medians in noise sd)")
    for h in ("world", "calls", "Spearman", f"near-tie (< {NEAR_TIE_SD} sd): n, stake",
              f"decidable (>= {DECIDABLE_SD} sd): n, stake, true gap"):
        t.add_column(h, justify="left" if h == "world" else "right")
    for r in rows:
        t.add_row(r["world"], str(r["calls"]), f"{r['spearman']:.2f}",
                  f"{r['near_tie_calls']}, {r['stake_sd_near_tie']:.2f}",
                  f"{r['decidable_calls']}, {r['stake_sd_decidable']:.2f}, {r['gap_sd_decidable']:.2f}")
    Console().print(t)
    if bins:
        b = Table(title="stake (noise sd) by the truth's regime gap, all worlds")
        for h in ("true gap (sd)", "calls", "stake q1", "median", "q3"):
            b.add_column(h, justify="right")
        for r in bins:
            b.add_row(f"{r['gap_lo']:g} - {r['gap_hi']:g}", str(r["calls"]), f"{r['q1']:.2f}",
                      f"{r['median']:.2f}", f"{r['q3']:.2f}")
        Console().print(b)


def plot_stake(outcomes: Sequence[dict[str, Any]], noise: dict[str, float], out: Path) -> Path:
    """Scatter of every final call's stake against the truth's gap (both in noise sd, log
    axes, zero gaps at the axis floor), one colour per world, with the line stake = gap and
    the near-tie / decidable thresholds. Writes ``out`` (any matplotlib suffix)."""
    from matplotlib.figure import Figure

    pairs = _pairs(outcomes, noise)
    floor = 1e-3  # log axes: a gap of exactly 0 (flat worlds) is drawn here
    fig = Figure(figsize=(6.4, 5.0), dpi=110, layout="constrained")
    ax = fig.subplots()
    for world, ps in sorted(pairs.items()):
        a = np.array(ps)
        ax.plot(np.maximum(a[:, 1], floor), np.maximum(a[:, 0], floor), "o", ms=3.5, alpha=0.6, label=world)
    lim = (floor, 10.0)
    ax.plot(lim, lim, "k--", lw=0.8, label="stake = true gap")
    for x, name in ((NEAR_TIE_SD, "near-tie"), (DECIDABLE_SD, "decidable")):
        ax.axvline(x, color="#999999", lw=0.8, ls=":")
        ax.text(x, lim[1], f" {name} ", rotation=90, va="top", ha="right" if name == "near-tie" else "left",
                fontsize=7, color="#666666")
    ax.set(xscale="log", yscale="log", xlim=lim, ylim=lim, xlabel="true regime gap (noise sd)",
           ylabel="stake of the final call (noise sd)",
           title="SIMULATED: stake vs the truth's regime gap, every final call")
    ax.legend(fontsize=7, loc="lower right")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    from runners.sim.world import load_world

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="planner_bench.py result JSON files")
    ap.add_argument("--plot", type=Path, default=None, help="also draw the scatter (e.g. stake.png)")
    a = ap.parse_args(argv)
    outcomes: list[dict[str, Any]] = []
    target = None
    for f in a.results:
        doc = read_results(f)
        target = doc["config"]["target"]
        outcomes += doc["outcomes"]
    noise = {w: load_world(w).noise[target or "native"] for w in {o["world"] for o in outcomes}}
    rows = stake_table(outcomes, noise)
    if not rows:
        raise SystemExit("error: results: no outcome carries a stake; rerun planner_bench.py (stakes "
                         "are recorded since the stake was added)")
    print_stake(rows, stake_by_gap(outcomes, noise))
    if a.plot:
        print(f"wrote {plot_stake(outcomes, noise, a.plot)}")
    return rows


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cli import run

    run(main)
