"""The planner benchmark as a figure: same-regime rate and median regret against FLOPs spent.

One column per world. Ours is a curve (its *anytime* calls: what a race capped at each
spend would have said); every grid design, the equal-spend baselines and the constant
call are points. The 0.95 line and, where some grid design reaches it, the spend a third
of that design's (the acceptance region: ours must be on or above 0.95 left of it) are
drawn. Several result files may be overlaid (e.g. the full benchmark and ours at a larger
cap); each file's ours curve is labelled with its cap and repetitions.

    python benchmarks/bench_plot.py RESULT.json [MORE.json ...] --out FIG.png

``planner_bench.py`` calls :func:`plot_bench` itself and writes the figure beside its JSON.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["bench_figure", "plot_bench"]

STYLE = {  # strategy -> (marker, colour)
    "random": ("s", "#8C8C8C"),
    "optuna-tpe": ("^", "#8172B3"),
    "optuna-gp": ("v", "#937860"),
}
GRID = {"pilot": ("o", "none"), "target": ("o", "#55A868")}  # marker, face (edge is green)
OURS = ("#C44E52", "#DD8452", "#4C72B0")
DASHES = ("-", "--", "-.")  # one result file's ours curve each (with the same seeds they overlap)
RATE = 0.95


def _label(doc: dict[str, Any]) -> str:
    cfg = doc["config"]
    cap = cfg.get("flops_per_setting", 6.0)
    first = cfg.get("first_rep", 0)
    return f"ours, cap {cap:g}/setting, reps {first}-{first + cfg['reps'] - 1}"


def plot_bench(docs: Sequence[dict[str, Any]], out: str | Path, sources: Sequence[str] = ()) -> Path:
    """Write the figure of one or more benchmark documents (``planner_bench.py`` JSON) to
    ``out`` (PNG; an SVG beside it). Returns the PNG path."""
    fig = bench_figure(docs, sources)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    fig.savefig(out.with_suffix(".svg"))
    return out


def bench_figure(docs: Sequence[dict[str, Any]], sources: Sequence[str] = ()) -> Any:
    """The matplotlib ``Figure``: axes ``(2, n_worlds)``, rates on top, regret below."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    worlds = list(dict.fromkeys(w for d in docs for w in d["config"]["worlds"]))
    fig = Figure(figsize=(max(3.2 * len(worlds) + 0.6, 9.0), 6.4), dpi=110, layout="constrained")
    axes = fig.subplots(2, len(worlds), squeeze=False, sharex="col")
    seen_grid = False
    for j, w in enumerate(worlds):
        top, bottom = axes[0][j], axes[1][j]
        # The cheapest grid design reaching the rate, as planner_bench stored it (grid_needed).
        grid95 = [g["flops_target_units"] for d in docs if (g := d["summary"].get(w, {}).get("grid_for_0.95"))]
        for d in docs:
            for r in d["rows"]:
                if r["world"] != w or r["strategy"] == "ours":
                    continue
                x, y, reg = r["flops_target_units"], r["same_regime"], r["regret_median"]
                if r["strategy"] == "grid":
                    seen_grid = True
                    marker, face = GRID["target" if r["config"].endswith("@target") else "pilot"]
                    for ax, v in ((top, y), (bottom, reg)):
                        ax.plot([x], [v], marker, mfc=face, mec="#55A868", ms=5, alpha=0.8, ls="none")
                elif r["strategy"] == "constant":
                    top.axhline(y, color="#999999", ls=":", lw=1)
                elif r["strategy"] in STYLE:
                    marker, colour = STYLE[r["strategy"]]
                    for ax, v in ((top, y), (bottom, reg)):
                        ax.plot([x], [v], marker, color=colour, ms=6, ls="none")
        for k, d in enumerate(docs):
            curve = d["summary"].get(w, {}).get("anytime", [])
            if not curve:
                continue
            xs = [c["flops_target_units"] for c in curve]
            style = {"color": OURS[k % len(OURS)], "ls": DASHES[k % len(DASHES)], "marker": "o", "ms": 3, "lw": 1.5,
                     "zorder": 3 + len(docs) - k}
            top.plot(xs, [c["same_regime"] for c in curve], **style)
            bottom.plot(xs, [c["regret_median"] for c in curve], **style)
        top.axhline(RATE, color="black", ls="--", lw=0.8)
        bottom.set_xscale("log")
        # Plain 1-2-5 ticks: the default log labels collide when a world spans under two decades.
        bottom.xaxis.set_major_locator(FixedLocator([m * 10.0**e for e in range(-2, 4) for m in (1, 2, 5)]))
        bottom.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        bottom.xaxis.set_minor_formatter(NullFormatter())
        if grid95:
            limit = min(grid95) / 3.0
            lo, hi = bottom.get_xlim()
            top.axvspan(min(lo, limit / 2), limit, color="#C44E52", alpha=0.06, lw=0)
            top.axvline(limit, color="#C44E52", ls=":", lw=1)
            bottom.set_xlim(min(lo, limit / 2), hi)
        top.set_title(w)
        top.set_ylim(min(0.4, top.dataLim.y0 - 0.05), 1.02)
        bottom.set_xlabel("FLOPs spent (target-run units)", fontsize=8)
        if j == 0:
            top.set_ylabel("same-regime rate (vs sim truth)")
            bottom.set_ylabel("median simple regret")
    handles = [Line2D([], [], color=OURS[k % len(OURS)], ls=DASHES[k % len(DASHES)], marker="o", ms=3,
                      label=_label(d) + " (anytime)")
               for k, d in enumerate(docs) if any(d["summary"].get(w, {}).get("anytime") for w in worlds)]
    if seen_grid:
        handles += [Line2D([], [], ls="none", marker="o", mfc="none", mec="#55A868", label="grid design @pilot"),
                    Line2D([], [], ls="none", marker="o", mfc="#55A868", mec="#55A868", label="grid design @target")]
    names = {r["strategy"] for d in docs for r in d["rows"]}
    handles += [Line2D([], [], ls="none", marker=m, color=c, label=f"{n} (ours' spend)")
                for n, (m, c) in STYLE.items() if n in names]
    handles += [Line2D([], [], color="#999999", ls=":", label="one regime everywhere (no runs)"),
                Line2D([], [], color="black", ls="--", label=f"rate {RATE}")]
    if seen_grid:
        handles.append(Line2D([], [], color="#C44E52", ls=":", label="1/3 of the cheapest grid design at 0.95"))
    fig.legend(handles=handles, loc="outside lower center", ncol=4 if len(worlds) > 2 else 2, fontsize=8,
               frameon=False)
    cfg = docs[0]["config"]
    fig.suptitle(f"planner benchmark, SIMULATED worlds: target {cfg['target']} at {cfg['budget']:.0e} FLOPs, "
                 f"pilots at {cfg['pilot_budget']:.0e}\n{len(cfg['models']) * len(cfg['rewards'])} settings per world; "
                 "1 FLOP unit = one run at the target budget"
                 + (f"\n{', '.join(sources)}" if sources else ""), fontsize=9)
    return fig


def main(argv: Sequence[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="planner_bench.py JSON files (overlaid)")
    ap.add_argument("--out", required=True, help="PNG path (an SVG is written beside it)")
    a = ap.parse_args(argv)
    docs = []
    for f in a.results:
        try:
            doc = json.loads(Path(f).read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: results: cannot read {f} ({e}); pass a planner_bench.py JSON") from None
        missing = {"rows", "summary", "config"} - set(doc if isinstance(doc, dict) else ())
        if missing:
            raise SystemExit(f"error: results: {f} is not a planner_bench.py result (no {', '.join(sorted(missing))}); "
                             "run benchmarks/planner_bench.py first")
        docs.append(doc)
    path = plot_bench(docs, a.out, sources=[Path(f).name for f in a.results])
    print(f"wrote {path} and {path.with_suffix('.svg')}")
    return path


if __name__ == "__main__":
    main()
