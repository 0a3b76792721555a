"""The report's figures (matplotlib, Agg, no pyplot global state).

Each builder returns :class:`FigureSpec` objects; :func:`save` writes PNG and SVG and
returns the PNG bytes the HTML embeds. Every figure carries a footer naming the engine
(real or SIMULATED) and the data it came from, so a figure copied out of the report still
says what it is.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.frontier import AT_BUDGET_RATIO
from planner.regime import LABELS, RegimeCall, format_probability, format_stake, regime_labels
from planner.report.data import (
    Frontier,
    ReportData,
    SettingAt,
    base_score,
    disagreements,
    observed,
    runs_at,
    unique_slugs,
)

__all__ = ["FigureSpec", "all_figures", "save"]

COLORS = {"search": "#4C72B0", "learning": "#DD8452", "reward": "#55A868"}
TARGET_COLORS = {"native": "#4C72B0", "pass1": "#C44E52", "judge": "#8172B3"}
MAX_SPLIT_RUNS = 120
FOOTER_SIZE = 7  # points
Z50, Z90 = 0.6744897501960817, 1.6448536269514722


@dataclass
class FigureSpec:
    """A figure before it is saved: its file stem ``name``, title, caption, the matplotlib
    figure and the report section it belongs to."""
    name: str  # file stem under figures/
    title: str
    caption: str
    fig: Any  # matplotlib.figure.Figure
    section: str = ""


def _figure(w: float, h: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=110, layout="constrained")


def _footer(fig: Any, data: ReportData, target: str | None = None) -> str:
    """Write the footer under ``fig`` and return it on one line (for the caption)."""
    text = f"engine: {data.engine_text} | data: {data.source_text}"
    if target:
        text += f" | target: {target}"
    fig.supxlabel(_fit_lines(text, fig, FOOTER_SIZE), fontsize=FOOTER_SIZE, color="#555555")
    return text


def _fit_lines(text: str, fig: Any, size: float) -> str:
    """``text`` in lines that fit ``fig``'s width at ``size`` points: its " | " parts
    side by side while they fit, a part wider than a line broken at its spaces (a word,
    such as a path without spaces, stays whole). One line as wide as the text was cut off
    at both edges of a narrow figure (one size panel, one LOO panel), its "engine:
    SIMULATED" first."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    # Measured at the figure's dpi, as the PNG draws it (hinting widens small text there).
    renderer, prop = RendererAgg(1, 1, fig.dpi), FontProperties(size=size)
    room = (fig.get_figwidth() - 0.2) * fig.dpi

    def fits(line: str) -> bool:
        return bool(renderer.get_text_width_height_descent(line, prop, ismath=False)[0] <= room)

    lines: list[str] = []
    for k, part in enumerate(text.split(" | ")):
        if k and fits(f"{lines[-1]} | {part}"):
            lines[-1] += f" | {part}"
            continue
        line = ""
        for word in part.split(" "):
            if line and not fits(f"{line} {word}"):
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "\n".join(lines)


@contextmanager
def _no_glyph_warnings() -> Iterator[None]:
    """Silence matplotlib's "Glyph ... missing from font" for names its font cannot draw
    (CJK model names: ~100 warnings a report, even under --quiet); the tables and captions
    of report.md and report.html still carry the names."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph .* missing from", category=UserWarning)
        yield


def save(spec: FigureSpec, folder: Path) -> tuple[Path, Path, bytes]:
    """Write ``name.png`` and ``name.svg``; return both paths and the PNG bytes.

    Metadata that names matplotlib's web site or a date is dropped: the HTML must hold no
    web address, and reruns on the same data should give byte-identical files.
    """
    import io

    import matplotlib

    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / f"{spec.name}.png", folder / f"{spec.name}.svg"
    buf = io.BytesIO()
    # Tick labels (model names) are made at draw time: no mathtext there either.
    with matplotlib.rc_context({"text.parse_math": False}), _no_glyph_warnings():
        spec.fig.savefig(buf, format="png", metadata={"Software": None})
    png.write_bytes(buf.getvalue())
    # Text stays text in the SVG (searchable, and the engine/data footer is greppable);
    # a fixed hash salt gives stable element ids across reruns.
    with (matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "race-report", "text.parse_math": False}),
          _no_glyph_warnings()):
        spec.fig.savefig(svg, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    return png, svg, buf.getvalue()


# ----------------------------------------------------------------------------- frontier
def frontier_figure(data: ReportData, fr: Frontier, slug: str | None = None) -> FigureSpec:
    """``slug`` names the file (default the setting's own; :func:`unique_slugs` where
    another setting's reads alike)."""
    fig = _figure(8.8, 4.4)  # the legend sits right of the axes: inside it covered runs
    ax = fig.add_subplot()
    g, m, sd = fr.grid, fr.mean, fr.std
    ax.fill_between(g, m - Z90 * sd, m + Z90 * sd, color="#4C72B0", alpha=0.15, lw=0, label="90% band")
    ax.fill_between(g, m - Z50 * sd, m + Z50 * sd, color="#4C72B0", alpha=0.30, lw=0, label="50% band")
    ax.plot(g, m, color="#1f3b73", lw=2, label="posterior mean")
    runs, near = runs_at(data.ok, fr.setting, fr.target)
    if near:
        pts = observed(near, fr.target)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=26, marker="D", facecolors="none", edgecolors="#555555",
                   zorder=3, label=f"runs within {AT_BUDGET_RATIO:g}x of this budget")
    if not runs and not near:
        # Inside the axes, where the eye is: with no run at or near this budget there is none to cover.
        ax.text(0.62, 0.04, "no runs at this budget:\nextrapolated from other budgets",
                transform=ax.transAxes, ha="center", va="bottom", fontsize=8, color="#8a5a00",
                bbox={"boxstyle": "round", "fc": "white", "ec": "#e08a00", "alpha": 0.9})
    for i, (rho, y, spread, ys) in enumerate(observed(runs, fr.target)):
        ax.scatter([rho] * len(ys), ys, s=12, color="black", alpha=0.45, zorder=3,
                   label="runs (each seed)" if i == 0 else None)
        ax.errorbar([rho], [y], yerr=[spread], fmt="o", ms=6, color="black", mfc="white", capsize=4,
                    zorder=4, label="seed mean +- half-range" if i == 0 else None)
    base = base_score(data.ok, fr.setting.model, fr.setting.reward, fr.target)
    if base is not None:
        # Without it, a frontier that is all below the untrained policy read as training gains.
        ax.axhline(base, color="#6a3d9a", lw=1.2, ls="-.", label=f"untrained policy ({base:.3f})")
    c = fr.call
    ax.axvspan(*c.rho_star_ci, color="#DD8452", alpha=0.15, lw=0,
               label=f"rho* {int(c.level * 100)}% interval [{c.rho_star_ci[0]:.2f}, {c.rho_star_ci[1]:.2f}]")
    ax.axvline(c.rho_star, color="#DD8452", lw=2, ls="--", label=f"rho* = {c.rho_star:.2f}")
    rows = _label_regions(ax, g, regime_labels(fr.grid_shares))
    ax.set_xlabel("rho = learning FLOPs / total FLOPs")
    ax.set_ylabel(f"{fr.target} (after training)")
    # Lifted over the region labels, which sit above the axes (inside, they covered runs).
    ax.set_title(f"Frontier: {fr.setting.label} (model / reward / budget)", fontsize=10,
                 pad=4 + rows * REGION_LINE)
    # The call heads the legend, outside the axes: in a corner of them it hid the
    # bottom-left runs (search-heavy under-learners), and they drew over it.
    fig.legend(fontsize=7, loc="outside right upper", title=_call_text(c), title_fontsize=8, alignment="left")
    ax.grid(alpha=0.3)
    foot = _footer(fig, data, fr.target)
    cap = (f"Frontier of {fr.setting.label} under {fr.target}: posterior mean with 50% and 90% bands, "
           f"observed runs with their seed spread, rho* = {c.rho_star:.2f} "
           f"[{c.rho_star_ci[0]:.2f}, {c.rho_star_ci[1]:.2f}], regime {c.regime} "
           f"(P = {format_probability(c.confidence)}{_stake_note(c)}).{_runs_note(runs, near)}"
           + (f" Dash-dotted: the untrained policy's {fr.target} ({base:.3f}); below it, training lost ground."
              if base is not None else "") + _reuse_note(fr) + f" {foot}.")
    return FigureSpec(f"frontier-{fr.target}-{slug or fr.setting.slug}", fr.setting.label, cap, fig, "frontiers")


REGION_SIZE = 7  # points
REGION_LINE = 1.3 * REGION_SIZE  # points between staggered rows of region labels
REGION_GAP = 0.16  # axes widths between the centres of two labels on one row


def _label_regions(ax: Any, grid: NDArray[np.float64], labels: NDArray[np.int64]) -> int:
    """Name every regime region of ``grid`` above the axes, at its centre, and mark the
    boundaries between them; return the rows of labels drawn. Labelling only the region
    right of each boundary left the first unnamed (reward-heavy, not search-heavy, under
    prm) and a figure without a boundary with no name at all. A label closer than
    :data:`REGION_GAP` to the last one on a row goes a row up: a narrow region's name ran
    into its neighbour's."""
    cuts = [0, *(int(j) + 1 for j in np.flatnonzero(np.diff(labels))), len(grid)]
    lo, hi = float(grid[0]), float(grid[-1])
    last: list[float] = []  # per row, the centre of its latest label (axes fraction)
    for a, b in itertools.pairwise(cuts):
        if a:
            ax.axvline(grid[a], color="#888888", lw=1, ls=":")
        # Regions meet at a boundary line drawn on a grid point: a region ends where the next begins.
        left, right = float(grid[a]), float(grid[b] if b < len(grid) else grid[-1])
        centre = (left + right) / 2
        frac = (centre - lo) / (hi - lo) if hi > lo else 0.5
        row = next((k for k, x in enumerate(last) if frac - x >= REGION_GAP), len(last))
        last[row:row + 1] = [frac]
        ax.annotate(LABELS[labels[a]], (centre, 1.0), xycoords=ax.get_xaxis_transform(),
                    xytext=(0, 2 + row * REGION_LINE), textcoords="offset points", ha="center",
                    va="bottom", fontsize=REGION_SIZE, color="#555555", annotation_clip=False)
    return max(len(last), 1)


def _call_text(call: RegimeCall) -> str:
    """The regime box's text: the call, every regime's P, and the stake where there is one,
    so a near-tie copied out of the report does not read as a firm call."""
    probs = [f"P({k}) = {format_probability(v)}" for k, v in call.probabilities.items()
             if v > 0 or k == call.regime]
    lines = [f"regime: {call.regime}", *probs]
    if np.isfinite(call.stake):
        lines.append(f"stake: {format_stake(call)}")
    return "\n".join(lines)


def _stake_note(call: RegimeCall) -> str:
    return f", stake {format_stake(call)}" if np.isfinite(call.stake) else ""


def _reuse_note(fr: Frontier) -> str:
    """Why the mean can jump between neighbouring rho: where the plans' update passes per
    batch change along the grid (a reader took the steps for noise, or for a bad fit)."""
    if fr.reuse is None or len(mus := np.unique(fr.reuse)) < 2:
        return ""
    return (f" The mean can step where the compiled plans' update passes per batch (mu: {mus.min():g} to "
            f"{mus.max():g} across this grid) change along rho: mu is one of the surrogate's inputs, so a step is a "
            "move to plans of another kind, which the fit knows only as well as the runs near them.")


def _runs_note(runs: list[Any], near: list[Any]) -> str:
    if near:
        return (f" Hollow diamonds: {len(near)} run(s) at budgets within {AT_BUDGET_RATIO:g}x of this one, which count "
                "as measured here.")
    return "" if runs else " No runs at this budget: extrapolated."


# ----------------------------------------------------------------------------- FLOP split
def _split_runs(data: ReportData) -> tuple[list[Any], str]:
    """The runs the FLOP split draws, at most :data:`MAX_SPLIT_RUNS`, and what the caption
    says of those left out. Failed runs first: they are what the figure is read for (their
    partial FLOPs), and with the ok runs listed first a long campaign drew none of them."""
    failed = data.failed[:MAX_SPLIT_RUNS]
    ok = data.ok[:MAX_SPLIT_RUNS - len(failed)]
    total = len(data.records)
    if len(ok) + len(failed) == total:
        return [*ok, *failed], ""
    kept = (f"every failed run ({len(failed)})" if len(failed) == len(data.failed)
            else f"{len(failed)} of the {len(data.failed)} failed ones")
    return [*ok, *failed], (f" Only {MAX_SPLIT_RUNS} of {total} runs are drawn: {kept} and {len(ok)} of the "
                            f"{len(data.ok)} ok ones.")


def split_figure(data: ReportData) -> FigureSpec:
    recs, more = _split_runs(data)
    n = len(recs)
    fig = _figure(8.0, max(2.5, 0.32 * n + 1.4))
    ax = fig.add_subplot()
    y = np.arange(n)
    # A component no run spends on (reward under rule-based rewards) gets no legend entry.
    spent = {comp for r in recs for f in (r.plan.flops, r.card.flops) for comp in ("search", "learning", "reward")
             if getattr(f, comp) > 0}
    for row, r in enumerate(recs):
        for kind, flops, off, alpha, hatch in (("planned", r.plan.flops, -0.2, 0.45, "//"),
                                               ("metered", r.card.flops, 0.2, 1.0, None)):
            left = 0.0
            for comp in ("search", "learning", "reward"):
                w = getattr(flops, comp) / r.budget
                ax.barh(y[row] + off, w, height=0.38, left=left, color=COLORS[comp], alpha=alpha,
                        hatch=hatch, edgecolor="white", lw=0.3,
                        label=f"{comp} ({kind})" if row == 0 and comp in spent else None)
                left += w
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.set_ylim(n - 0.5, -0.5)  # top row first, no blank margin
    # The budget tells apart a setting's pilots and target runs; the attempt, a run's failures.
    names = [f"{r.model}/{r.reward} {r.budget:.4g} rho {r.rho_planned:.2f} s{r.seed}"
             + (f" FAILED a{r.attempt}" if r.status != "ok" else "") for r in recs]
    ax.set_yticks(y, names, fontsize=7)
    for tick, r in zip(ax.get_yticklabels(), recs, strict=True):
        if r.status != "ok":
            tick.set_color("#C44E52")
    ax.set_xlabel("share of the run's FLOP budget (upper bar planned, lower bar metered)")
    fig.suptitle("FLOP split of every run: planned vs metered, stacked by component", fontsize=10)
    fig.legend(fontsize=7, ncol=1, loc="outside right upper")  # the title owns the top, the footer the bottom
    ax.grid(axis="x", alpha=0.3)
    foot = _footer(fig, data)
    cap = ("Planned (hatched) and metered (solid) FLOPs of every run as shares of its budget, stacked "
           f"search / learning / reward; failed runs in red.{more} {foot}.")
    return FigureSpec("flop-split", "FLOP split per run", cap, fig, "split")


# ----------------------------------------------------------------------------- rho* vs size
MAX_SIZE_PANELS = 4


def _predicted(call: RegimeCall) -> bool:
    """rho* is the posterior mean's peak with no run near it (the tables' "rho*+")."""
    return call.extra.get("rho_star_support", "measured") != "measured"


def _rho_star_marks(ax: Any, x: ArrayLike, calls: Sequence[RegimeCall],
                    intervals: Sequence[tuple[float, float]], color: str) -> None:
    """Each interval as a bar from its own ends, and rho* as a marker of its own: filled
    where runs are near it, open for a prediction. rho* can lie outside its interval (it is
    held to measured allocations); a bar stretched to reach it drew it inside."""
    xs = np.asarray(x, dtype=float)
    lo, hi = np.array([i[0] for i in intervals]), np.array([i[1] for i in intervals])
    ax.errorbar(xs, (lo + hi) / 2, yerr=(hi - lo) / 2, fmt="none", ecolor=color, capsize=3, lw=1.2)
    rho = np.array([c.rho_star for c in calls])
    pred = np.array([_predicted(c) for c in calls], dtype=bool)
    if (~pred).any():
        ax.plot(xs[~pred], rho[~pred], "o", ls="none", color=color, ms=6, zorder=3)
    if pred.any():
        ax.plot(xs[pred], rho[pred], "o", ls="none", mfc="white", mec=color, mew=1.5, ms=6, zorder=3)


def _marker_handles(predicted: bool) -> list[Any]:
    """Legend entries of the two rho* markers (the open one only where one is drawn)."""
    from matplotlib.lines import Line2D

    out = [Line2D([], [], marker="o", ls="none", color="#555555", label="rho* (runs near it)")]
    if predicted:
        out.append(Line2D([], [], marker="o", ls="none", mfc="white", mec="#555555", mew=1.5,
                          label="rho*+ (a prediction: no run near it)"))
    out.append(Line2D([], [], color="#555555", marker="_", ms=8, label="90% interval"))
    return out


def _size_budgets(data: ReportData, frontiers: Iterable[SettingAt]) -> tuple[list[float], dict[float, tuple[int, int]]]:
    """The budgets the size figure draws (at most :data:`MAX_SIZE_PANELS`, ascending) and
    (runs, settings) at every budget. Those holding the most runs, then settings, then the
    larger: the four largest left out the pilots' budget, where the runs are."""
    held: dict[float, tuple[int, int]] = {}
    for s in frontiers:
        runs, settings = held.get(s.budget, (0, 0))
        held[s.budget] = (runs + len(runs_at(data.ok, s, data.target)[0]), settings + 1)
    ranked = sorted(held, key=lambda b: (*held[b], b), reverse=True)
    return sorted(ranked[:MAX_SIZE_PANELS]), held


def size_figure(data: ReportData) -> FigureSpec | None:
    from matplotlib.lines import Line2D

    fit = data.primary
    if fit is None or not fit.frontiers:
        return None
    budgets, held = _size_budgets(data, fit.frontiers)  # wider is unreadable; the caption names the rest
    # At least 7 in: on one panel's 5.2 the title, centred on the figure, ran under the
    # legend in the right margin.
    fig = _figure(max(4.2 * len(budgets) + 1.0, 7.0), 4.0)
    axes = fig.subplots(1, len(budgets), squeeze=False, sharey=True)[0]
    params = {r.model: r.model_params for r in data.ok}
    rewards = sorted({s.reward for s in fit.frontiers})
    drawn: dict[str, Any] = {}
    predicted = False
    for ax, b in zip(axes, budgets, strict=True):
        for k, rw in enumerate(rewards):
            frs = sorted((f for s, f in fit.frontiers.items() if s.reward == rw and s.budget == b),
                         key=lambda f: params[f.setting.model])
            if not frs:
                continue
            x = np.array([params[f.setting.model] for f in frs]) * (1 + 0.03 * (k - len(rewards) / 2))
            # one colour per reward in every panel, even where a reward has no setting
            ax.plot(x, [f.call.rho_star for f in frs], "-", color=f"C{k}")
            drawn[rw] = Line2D([], [], color=f"C{k}", marker="o", label=rw)
            _rho_star_marks(ax, x, [f.call for f in frs], [f.call.rho_star_ci for f in frs], f"C{k}")
            predicted |= any(_predicted(f.call) for f in frs)
        ax.axhline(0.5, color="#888888", lw=1, ls=":")
        ax.set_xscale("log")
        # At least a factor 4 of room: with one policy the autoscaled axis spans only the
        # rewards' 3% offsets, which then sit at opposite edges.
        xs = [params[s.model] for s in fit.frontiers if s.budget == b]
        ax.set_xlim(min(xs) / 2, max(xs) * 2)
        # Ticks at the policies themselves: "3.1B" says more than 3 x 10^9.
        sizes = sorted({(params[s.model], s.model) for s in fit.frontiers if s.budget == b})
        ax.set_xticks([p for p, _ in sizes], [f"{m}\n{p / 1e9:.3g}B" if p >= 1e8 else f"{m}\n{p / 1e6:.3g}M"
                                               for p, m in sizes], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("policy (parameters)")
        n = held[b][0]
        ax.set_title(f"budget {b:.4g} FLOPs ({n} run{'' if n == 1 else 's'})", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"rho* under {data.target} (90% interval)")
    handles = [*(h for _, h in sorted(drawn.items())), *_marker_handles(predicted)]
    fig.legend(handles, [h.get_label() for h in handles], fontsize=7, title="reward", title_fontsize=7,
               loc="outside right upper")
    fig.suptitle("rho* against model size for each reward system", fontsize=10)
    foot = _footer(fig, data, data.target)
    cap = ("rho* (argmax of the posterior-mean frontier within the called regime, among measured "
           "allocations where there are any) against policy size, "
           "one line per reward "
           "system (a point where there is one policy size), with 90% intervals drawn as computed: rho* can lie outside its interval where it is held "
           "to measured allocations, or where the posterior mean is nearly flat (its peak at the regime's "
           "edge). Open markers: rho*+, a prediction with no run near it at that budget. "
           f"The dotted line is rho = 0.5. {foot}.")
    rest = sorted(set(held) - set(budgets))
    if rest:
        cap += (f" Panels for the {len(budgets)} budgets holding the most runs (then settings, then the larger); "
                "not drawn: " + ", ".join(f"{b:.4g}" for b in rest) + " FLOPs (the tables list them).")
    return FigureSpec("rho-star-vs-size", "rho* vs model size", cap, fig, "size")


# ----------------------------------------------------------------------------- targets
def disagreement_figure(data: ReportData) -> FigureSpec | None:
    from matplotlib.patches import Patch

    rows = disagreements(data)
    if not rows:
        return None
    # 2.2 in for the legend right of the axes, on top of the axes' own width: at 6 in in all,
    # the axes left too little room for the title above them.
    fig = _figure(max(6.0, 0.9 * len(rows) + 2.0) + 2.2, 4.6)
    ax = fig.add_subplot()
    targets = [t for t in TARGET_COLORS if any(t in d.calls for d in rows)]
    handles = []
    for k, t in enumerate(targets):
        at = [(i, d.calls[t]) for i, d in enumerate(rows) if t in d.calls]
        xs = [i + (k - (len(targets) - 1) / 2) * 0.22 for i, _ in at]
        # the interval the flag is decided on
        _rho_star_marks(ax, xs, [c for _, c in at], [c.optimum_ci or c.rho_star_ci for _, c in at],
                        TARGET_COLORS[t])
        handles.append(Patch(color=TARGET_COLORS[t], label=t))
    predicted = any(_predicted(c) for d in rows for c in d.calls.values())
    ax.set_xticks(range(len(rows)), [d.setting.label + (" (disjoint)" if d.flagged else "") for d in rows],
                  rotation=35, ha="right", fontsize=7)
    for tick, d in zip(ax.get_xticklabels(), rows, strict=True):
        if d.flagged:  # bold, not red: red is pass1's colour here
            tick.set_fontweight("bold")
    ax.axhline(0.5, color="#888888", lw=1, ls=":")
    # In short lines: on one, the label was taller than the axes and ran into the title.
    ax.set_ylabel("rho*\n(90% interval of the\noptimum, any regime)", fontsize=9)
    # Two lines, over axes widened for the legend: on one line, wider than the axes, it
    # was cut off at the figure's left edge (a suptitle, centred on the figure, ran under
    # the legend instead).
    ax.set_title("Target disagreement: rho* under each target\n(bold label: intervals disjoint)", fontsize=10)
    handles += _marker_handles(predicted)
    fig.legend(handles=handles, fontsize=7, title="target", title_fontsize=7, loc="outside right upper")
    ax.grid(alpha=0.3)
    foot = _footer(fig, data)
    cap = ("rho* of each setting under each evaluation target with the 90% interval of the optimum "
           "over posterior samples (any regime), drawn as computed: rho* (the best allocation within the called "
           "regime, held to measured ones; on a nearly flat posterior mean, at the regime's edge) can lie "
           "outside it; open markers are predictions with no run near "
           "them. Settings in bold, marked (disjoint), have a pair of targets whose "
           f"intervals do not overlap. {foot}.")
    return FigureSpec("target-disagreement", "Target disagreement", cap, fig, "targets")


# ----------------------------------------------------------------------------- diagnostics
def loo_figure(data: ReportData) -> FigureSpec | None:
    fits = [f for f in data.fits.values() if f.loo is not None and f.loo.n > 0]
    if not fits:
        return None
    fig = _figure(3.8 * len(fits) + 0.6, 4.0)
    axes = fig.subplots(1, len(fits), squeeze=False)[0]
    for ax, f in zip(axes, fits, strict=True):
        loo = f.loo
        inside = np.abs(loo.observed - loo.mean) <= Z90 * loo.std
        ax.errorbar(loo.observed[inside], loo.mean[inside], yerr=Z90 * loo.std[inside], fmt="o", ms=4,
                    capsize=2, color="#4C72B0", label="inside 90% interval")
        if (~inside).any():
            ax.errorbar(loo.observed[~inside], loo.mean[~inside], yerr=Z90 * loo.std[~inside], fmt="o",
                        ms=4, capsize=2, color="#C44E52", label="outside")
        lim = [float(min(loo.observed.min(), loo.mean.min())), float(max(loo.observed.max(), loo.mean.max()))]
        ax.plot(lim, lim, color="#888888", lw=1, ls="--")
        ax.set_xlabel("observed")
        ax.set_ylabel("LOO predicted (90% interval)")
        # Rounded down, as the diagnostics table has it: 89.7% is not the nominal 90%.
        cover = format_probability(loo.coverage90, 0, percent=True)
        ax.set_title(f"{f.target}: coverage {cover}% of {loo.n}, RMSE {loo.rmse:.3g}", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("Surrogate diagnostics: leave-one-out predicted vs observed", fontsize=10)
    foot = _footer(fig, data)
    cap = ("Leave-one-out predictions of each target's surrogate (replicate groups are one point) "
           f"against the observed values, with 90% predictive intervals and their coverage. {foot}.")
    return FigureSpec("loo-diagnostics", "Surrogate diagnostics", cap, fig, "diagnostics")


def all_figures(data: ReportData, tick: Any = None) -> list[FigureSpec]:
    """Every figure the data supports (none for an empty dataset); ``tick()`` per figure."""
    import matplotlib

    step = tick or (lambda: None)
    out: list[FigureSpec] = []
    if data.empty:
        return out
    # Model and reward names and the data path are drawn as text: a "$" in one is not
    # mathtext (unbalanced, it made savefig raise). Text objects take this at creation.
    with matplotlib.rc_context({"text.parse_math": False}), _no_glyph_warnings():
        _build_all(data, out, step)
    return out


def _build_all(data: ReportData, out: list[FigureSpec], step: Any) -> None:
    out.append(split_figure(data))
    step()
    fit = data.primary
    if fit is not None:
        slugs = unique_slugs(fit.frontiers)
        for s in data.settings:
            if s in fit.frontiers:
                out.append(frontier_figure(data, fit.frontiers[s], slugs[s]))
                step()
    for build in (size_figure, disagreement_figure, loo_figure):
        spec = build(data)
        if spec is not None:
            out.append(spec)
        step()


def n_figures(data: ReportData) -> int:
    """Upper bound of :func:`all_figures`' ticks (progress total)."""
    fit = data.primary
    return 0 if data.empty else 4 + (len(fit.frontiers) if fit else 0)
