"""The report's figures: each setting's figure file its own, failed runs in the FLOP split,
credible intervals drawn as the data give them, and rho* panels chosen by what they hold.

Most tests draw from hand-made calls (no surrogate fit): the figures, not the fits, are
under test here.
"""

from __future__ import annotations

import itertools
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_report_support import MODELS, REWARDS, make_campaign

from planner.regime import RegimeCall
from planner.report import build_report
from planner.report.data import SettingAt, unique_slugs
from planner.schema import run_id_for


def _renamed_store(tmp_path: Path, names: tuple[str, ...]) -> Path:
    """One small sim campaign copied under each policy name (seeds apart: run ids differ)."""
    from runners.store import PilotStore

    src = make_campaign(tmp_path / "src", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,), n_failed=0)
    store = PilotStore(tmp_path / "data")
    for k, name in enumerate(names):
        for r in PilotStore(src).records():
            seed = r.seed + 100 * k
            store.add(r.model_copy(update={"model": name, "plan": r.plan.model_copy(update={"model": name}),
                                           "seed": seed, "run_id": run_id_for(r.proposal_id, seed)}))
    return store.root


@pytest.fixture(scope="module")
def cjk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[str]]:
    """The report of two policies named in CJK, and the glyph warnings drawing it raised."""
    tmp = tmp_path_factory.mktemp("cjk")
    data = _renamed_store(tmp, ("模型", "样本"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = build_report(data, tmp / "out", progress=False)
    assert res.status == "ok"
    return res, [str(w.message) for w in caught if "Glyph" in str(w.message)]


def test_names_the_font_lacks_draw_without_a_warning_per_glyph(cjk: tuple[Any, list[str]]) -> None:
    # Every missing CJK glyph printed a UserWarning (~100 a report), even under --quiet.
    _, glyphs = cjk
    assert glyphs == [], glyphs[:3]


def test_names_that_slug_alike_get_figures_of_their_own(cjk: tuple[Any, list[str]]) -> None:
    # Both names became "_": one figure file overwrote the other and report.md linked it for both.
    res, _ = cjk
    md = res.markdown.read_text()
    links = dict(re.findall(r"!\[(\S+) / sparse / 1e\+16\]\((figures/frontier-[^)]+\.png)\)", md))
    assert set(links) == {"模型", "样本"} and len(set(links.values())) == 2, links
    assert all((res.out / p).is_file() for p in links.values())
    pngs = {p.name for p in res.figures if p.suffix == ".png"}
    assert len(pngs) == md.count("](figures/") // 2  # every figure a file of its own (PNG + SVG links)


def test_slugs_are_readable_for_plain_names_and_unique_for_lossy_or_ambiguous_ones() -> None:
    plain = SettingAt("qwen2.5-1.5b", "prm", 1e16)
    assert plain.slug == "qwen2.5-1.5b-prm-b1.000e16"
    lossy = [SettingAt("org/m", "prm", 1e16), SettingAt("org:m", "prm", 1e16), SettingAt("模型", "prm", 1e16)]
    slugs = [s.slug for s in lossy]
    assert len(set(slugs)) == 3 and all(s.startswith(("org_m-prm-b1.000e16-", "_-prm-b1.000e16-")) for s in slugs)
    assert lossy[0].slug == SettingAt("org/m", "prm", 1e16).slug  # stable: the same name every report
    # Names that read alike only together: "-" inside a name, case (macOS folds it), budgets
    # closer than the name's 4 digits. Each gets a suffix; names alone in a report stay plain.
    clash = [SettingAt("a-b", "c", 1e16), SettingAt("a", "b-c", 1e16), SettingAt("M", "prm", 1e16),
             SettingAt("m", "prm", 1e16), SettingAt("x", "prm", 1e16), SettingAt("x", "prm", 1.00001e16), plain]
    got = unique_slugs(clash)
    assert len({v.casefold() for v in got.values()}) == len(clash)
    assert got[plain] == plain.slug and all(got[s] != s.slug for s in clash[:-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], list[Any]]:
    """ok records and one failed attempt of a small sim campaign (no fit)."""
    from planner.report.data import load_records

    data = make_campaign(tmp_path_factory.mktemp("runs") / "data", models=MODELS, rewards=REWARDS[:1],
                         n_rho=3, seeds=(0,), n_failed=1)
    ok, failed, _ = load_records(data)
    return ok, failed


def _report_data(ok: list[Any], failed: list[Any], calls: dict[str, dict[SettingAt, RegimeCall]] | None = None) -> Any:
    """Report data with hand-made regime calls per target (the frontier curves are flat:
    the figures under test draw only the calls)."""
    from planner.report.data import Frontier, ReportData, TargetFit

    data = ReportData(Path("campaign"), "native", ok, failed, [])
    grid = np.linspace(0.05, 0.95, 5)
    for target, by in (calls or {}).items():
        data.fits[target] = TargetFit(target, frontiers={
            s: Frontier(s, target, grid, np.zeros(5), np.ones(5), c, 0.2) for s, c in by.items()})
        data.settings = sorted(set(data.settings) | set(by))
    return data


def _call(rho: float, ci: tuple[float, float], optimum: tuple[float, float] | None = None,
          predicted: bool = False) -> RegimeCall:
    support = {"rho_star_support": "posterior-mean" if predicted else "measured"}
    return RegimeCall(rho, ci, "update-heavy", {"update-heavy": 1.0}, extra=support, optimum_ci=optimum)


def _bars(ax: Any) -> list[tuple[float, float, float]]:
    """(x, low, high) of every vertical bar (errorbar segment) on ``ax``."""
    from matplotlib.collections import LineCollection

    return [(float(seg[0][0]), *sorted((float(seg[0][1]), float(seg[1][1]))))
            for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()]


def _points(ax: Any) -> list[tuple[float, float, bool]]:
    """(x, y, open) of every marker drawn as a line without a line (rho* points)."""
    out = []
    for ln in ax.get_lines():
        if ln.get_marker() in ("o",) and ln.get_linestyle() in ("None", "none", ""):
            hollow = ln.get_markerfacecolor() in ("none", "white", (1.0, 1.0, 1.0, 1.0))
            out += [(float(x), float(y), hollow) for x, y in zip(ln.get_xdata(), ln.get_ydata(), strict=True)]
    return out


def test_the_flop_split_keeps_failed_runs_when_it_leaves_runs_out(runs: tuple[list[Any], list[Any]]) -> None:
    # ok runs came first and the figure kept the first 120: past 120 runs no failed run was
    # drawn, though the caption promised them in red.
    from planner.report.figures import MAX_SPLIT_RUNS, split_figure

    ok, failed = runs
    many = [ok[i % len(ok)].model_copy(update={"seed": i, "run_id": run_id_for(ok[i % len(ok)].proposal_id, i)})
            for i in range(MAX_SPLIT_RUNS + 10)]
    spec = split_figure(_report_data(many, failed))
    ticks = spec.fig.axes[0].get_yticklabels()
    assert len(ticks) == MAX_SPLIT_RUNS
    red = [t.get_text() for t in ticks if t.get_color() == "#C44E52"]
    assert len(red) == len(failed) == 1 and "FAILED a1" in red[0]
    assert (f"{MAX_SPLIT_RUNS} of {len(many) + 1} runs are drawn: every failed run (1) and "
            f"{MAX_SPLIT_RUNS - 1} of the {len(many)} ok ones") in spec.caption, spec.caption


def test_intervals_are_drawn_as_computed_and_rho_star_apart(runs: tuple[list[Any], list[Any]]) -> None:
    # rho* 0.27 outside its interval [0.374, 0.374] (tiny-s / prm / 2.236e11 of the tiny
    # campaign): the bar was stretched from 0.27 to 0.374, drawing rho* inside it.
    from planner.report.figures import disagreement_figure, size_figure

    ok, _ = runs
    a, b = SettingAt(MODELS[0], REWARDS[0], 1e16), SettingAt(MODELS[1], REWARDS[0], 1e16)
    outside, inside = _call(0.27, (0.374, 0.374), (0.374, 0.596)), _call(0.5, (0.4, 0.6), (0.35, 0.65))
    data = _report_data(ok, [], {"native": {a: outside, b: inside}, "pass1": {a: inside, b: inside}})
    ax = size_figure(data).fig.axes[0]
    assert sorted((round(lo, 3), round(hi, 3)) for _, lo, hi in _bars(ax)) == [(0.374, 0.374), (0.4, 0.6)]
    assert sorted(round(y, 3) for _, y, _ in _points(ax)) == [0.27, 0.5]
    ax = disagreement_figure(data).fig.axes[0]
    bars = sorted((round(lo, 3), round(hi, 3)) for _, lo, hi in _bars(ax))
    assert bars == [(0.35, 0.65), (0.35, 0.65), (0.35, 0.65), (0.374, 0.596)]  # the optimum's interval
    assert sorted(round(y, 3) for _, y, _ in _points(ax)) == [0.27, 0.5, 0.5, 0.5]


def test_a_predicted_rho_star_is_an_open_marker(runs: tuple[list[Any], list[Any]]) -> None:
    # A rho* no run is near (rho*+ in the tables) was drawn as if measured.
    from planner.report.figures import size_figure

    ok, _ = runs
    a, b = SettingAt(MODELS[0], REWARDS[0], 1e16), SettingAt(MODELS[1], REWARDS[0], 1e16)
    data = _report_data(ok, [], {"native": {a: _call(0.3, (0.2, 0.4), predicted=True), b: _call(0.6, (0.5, 0.7))}})
    spec = size_figure(data)
    assert sorted((round(y, 2), hollow) for _, y, hollow in _points(spec.fig.axes[0])) == [(0.3, True), (0.6, False)]
    labels = [t.get_text() for leg in spec.fig.legends for t in leg.get_texts()]
    assert "rho*+ (a prediction: no run near it)" in labels and "Open markers: rho*+" in spec.caption, labels


def test_size_panels_keep_the_budgets_holding_runs(runs: tuple[list[Any], list[Any]]) -> None:
    # The four largest budgets were drawn: the pilots' budget, where the runs are, was the one
    # left out.
    from planner.report.figures import size_figure

    ok, _ = runs
    mine = [r for r in ok if r.model == MODELS[0]]
    assert len(mine) == 2 and all(r.budget == 1e16 for r in mine)  # one attempt failed
    others = (2e16, 3e16, 1e17, 3e17)
    moved = [mine[0].model_copy(update={"budget": b}) for b in others]  # one run at each
    calls = {SettingAt(MODELS[0], REWARDS[0], b): _call(0.5, (0.4, 0.6)) for b in (1e16, *others)}
    spec = size_figure(_report_data([*mine, *moved], [], {"native": calls}))
    titles = [ax.get_title() for ax in spec.fig.axes if ax.get_title()]
    assert titles == ["budget 1e+16 FLOPs (2 runs)", "budget 3e+16 FLOPs (1 run)", "budget 1e+17 FLOPs (1 run)",
                      "budget 3e+17 FLOPs (1 run)"]
    assert "holding the most runs (then settings, then the larger); not drawn: 2e+16 FLOPs" in spec.caption


def test_a_predicted_rho_star_outside_its_interval_is_explained(runs: tuple[list[Any], list[Any]]) -> None:
    # rho* 0.51+ [0.52, 0.97] (a race's decision budget with no runs; the posterior mean flat
    # across update-heavy, so its argmax is the regime's first grid point, where 9 of 256
    # sample paths peak): every text said rho* leaves its interval only where it is held to
    # measured allocations, which a rho*+ is not.
    from planner.report.document import blocks
    from planner.report.figures import disagreement_figure, size_figure

    ok, _ = runs
    a, b = SettingAt(MODELS[0], REWARDS[0], 1e16), SettingAt(MODELS[1], REWARDS[0], 1e16)
    flat = _call(0.505, (0.52, 0.97), (0.13, 0.94), predicted=True)
    data = _report_data(ok, [], {"native": {a: flat, b: flat}, "pass1": {a: flat, b: flat}})
    calls = next(bl.text for bl in blocks(data, {}) if bl.kind == "p" and bl.text.startswith("Per setting under"))
    for text in (calls, size_figure(data).caption, disagreement_figure(data).caption):
        assert "nearly flat" in text, text


def _loo(n: int, outside: int) -> Any:
    """A LOO result of ``n`` points, ``outside`` of them beyond their 90% interval."""
    from surrogate.cv import LOOResult

    z = np.where(np.arange(n) < outside, 3.0, 0.5)
    return LOOResult(mean=np.zeros(n), std=np.ones(n), observed=z, X=np.zeros((n, 4)), rmse=1.0,
                     coverage90=float(np.mean(z <= 1.6448536269514722)), loglik=-1.0)


def test_a_narrow_figure_keeps_its_whole_footer(runs: tuple[list[Any], list[Any]]) -> None:
    # One policy (one size panel) or one fitted target (one LOO panel) makes a figure about
    # 5 inches wide; its footer was one line wider than that, cut off at both edges: a figure
    # copied out of the report lost "engine: SIMULATED" first.
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from planner.report.figures import loo_figure, size_figure

    ok, _ = runs
    a = SettingAt(MODELS[0], REWARDS[0], 1e16)
    data = _report_data(ok, [], {"native": {a: _call(0.5, (0.4, 0.6))}})
    data.data_dir = Path("/home/alice/experiments/race-campaigns/qwen-sweep-2026-12/data")
    data.fits["native"].loo = _loo(20, 2)
    for spec in (size_figure(data), loo_figure(data)):
        canvas = FigureCanvasAgg(spec.fig)
        canvas.draw()
        foot = spec.fig._supxlabel
        box = foot.get_window_extent(canvas.get_renderer())
        assert 0 <= box.x0 and box.x1 <= spec.fig.bbox.width, (spec.name, box, spec.fig.bbox.width)
        text = foot.get_text()
        assert "engine: SIMULATED (sim)" in text and str(data.data_dir) in text, text
        words = spec.caption[spec.caption.index("engine: "):].removesuffix(".").split()
        assert [w for w in text.split() if w != "|"] == [w for w in words if w != "|"]  # all of it, in lines


def test_a_one_panel_size_figure_keeps_its_title_clear_of_the_legend(runs: tuple[list[Any], list[Any]]) -> None:
    # At 5.2 in, the title centred on the figure ran under the legend in the right margin.
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from planner.report.figures import size_figure

    ok, _ = runs
    data = _report_data(ok, [], {"native": {SettingAt(MODELS[0], REWARDS[0], 1e16): _call(0.5, (0.4, 0.6))}})
    spec = size_figure(data)
    assert len([ax for ax in spec.fig.axes if ax.has_data()]) == 1
    canvas = FigureCanvasAgg(spec.fig)
    canvas.draw()
    r = canvas.get_renderer()
    title = spec.fig._suptitle.get_window_extent(r)
    (legend,) = spec.fig.legends
    assert not title.overlaps(legend.get_window_extent(r)), (title, legend.get_window_extent(r))


def test_loo_coverage_below_nominal_does_not_print_as_nominal(runs: tuple[list[Any], list[Any]]) -> None:
    # 26 of 29 points inside their 90% intervals (89.7%) printed "90%" beside the nominal
    # 90%, and 249 of 250 "100%": coverage rounds down, as probabilities beside a
    # threshold do (format_probability).
    from planner.report.document import blocks
    from planner.report.figures import loo_figure

    ok, _ = runs
    a = SettingAt(MODELS[0], REWARDS[0], 1e16)
    for n, outside, shown in ((29, 3, "89%"), (250, 1, "99%"), (20, 2, "90%"), (20, 0, "100%")):
        data = _report_data(ok, [], {"native": {a: _call(0.5, (0.4, 0.6))}})
        data.fits["native"].loo = _loo(n, outside)
        table = next(b for b in blocks(data, {}) if b.kind == "table" and "90% coverage" in b.headers)
        assert table.rows[0][3] == shown, (n, outside, table.rows[0])
        assert loo_figure(data).fig.axes[0].get_title().startswith(f"native: coverage {shown} of {n},")


def _drawn(spec: Any) -> Any:
    """``spec``'s figure laid out and drawn; its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(spec.fig)
    canvas.draw()
    return canvas.get_renderer()


def _texts(fig: Any, match: Any) -> list[Any]:
    """The figure's visible text artists whose text ``match`` accepts."""
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and match(t.get_text())]


def _frontier_data(ok: list[Any], shares: Any = None, grid: Any = None, call: RegimeCall | None = None) -> Any:
    """Report data of one frontier at MODELS[0] / REWARDS[0] / 1e16 under native."""
    from planner.report.data import Frontier

    s = SettingAt(MODELS[0], REWARDS[0], 1e16)
    data = _report_data(ok, [], {"native": {s: call or _call(0.5, (0.4, 0.6))}})
    g = np.linspace(0.05, 0.95, 5) if grid is None else grid
    data.fits["native"].frontiers[s] = Frontier(s, "native", g, np.full(len(g), 0.5), np.full(len(g), 0.01),
                                                call or _call(0.5, (0.4, 0.6)), 0.2, shares)
    return data, data.fits["native"].frontiers[s]


def test_the_regime_box_hides_no_run(runs: tuple[list[Any], list[Any]]) -> None:
    # The box sat in the axes' lower-left corner, under the markers' zorder: a search-heavy
    # under-learner (low rho, low metric) was drawn over it and hid it.
    from planner.report.data import observed, runs_at
    from planner.report.figures import frontier_figure

    ok, _ = runs
    mine = sorted((r for r in ok if r.model == MODELS[0]), key=lambda r: r.rho_planned)
    low = [r.model_copy(update={"metrics": r.metrics.model_copy(update={"native": 0.0 if k == 0 else 1.0})})
           for k, r in enumerate(mine)]
    call = RegimeCall(0.7, (0.6, 0.8), "update-heavy", {"search-heavy": 0.45, "update-heavy": 0.55},
                      extra={"noise_sd": 0.01, "noise_source": "inferred"}, stake=0.0031)
    data, fr = _frontier_data(low, call=call)
    spec = frontier_figure(data, fr)
    r = _drawn(spec)
    (box,) = _texts(spec.fig, lambda s: s.startswith("regime: "))
    where = box.get_window_extent(r)
    ax = spec.fig.axes[0]
    assert not where.overlaps(ax.get_window_extent(r)), (where, ax.get_window_extent(r))
    assert 0 <= where.x0 and where.x1 <= spec.fig.bbox.width and 0 <= where.y0 <= where.y1 <= spec.fig.bbox.height
    pts = observed(runs_at(data.ok, fr.setting, "native")[0], "native")
    assert len(pts) == 2 and min(p[1] for p in pts) == 0.0
    for rho, y, _, _ in pts:
        px, py = ax.transData.transform((rho, y))
        assert not (where.x0 - 6 <= px <= where.x1 + 6 and where.y0 - 6 <= py <= where.y1 + 6), (rho, y, where)
    # A near tie says so, in the figure and in its caption.
    assert "stake: 0.0031 (0.3 sd*)" in box.get_text(), box.get_text()
    assert "stake 0.0031 (0.3 sd*)" in spec.caption


def _shares(labels: list[int]) -> Any:
    """(G, 3) shares whose largest component is ``labels`` (search, learning, reward)."""
    out = np.full((len(labels), 3), 0.2)
    out[np.arange(len(labels)), labels] = 0.6
    return out


def test_every_regime_region_is_named(runs: tuple[list[Any], list[Any]]) -> None:
    # Each boundary named only the region right of it ("update-heavy ->"): the first region,
    # reward-heavy under prm, was never named, nor was a figure without a boundary.
    from planner.regime import LABELS
    from planner.report.figures import frontier_figure

    ok, _ = runs
    grid = np.linspace(0.05, 0.95, 5)
    for labels, named in (([2, 2, 1, 1, 1], ["reward-heavy", "update-heavy"]), ([1] * 5, ["update-heavy"]),
                          ([0, 0, 0, 1, 1], ["search-heavy", "update-heavy"])):
        data, fr = _frontier_data(ok, _shares(labels), grid)
        spec = frontier_figure(data, fr)
        r = _drawn(spec)
        ax = spec.fig.axes[0]
        texts = _texts(spec.fig, lambda s: s in LABELS)
        assert [t.get_text() for t in texts] == named, (labels, [t.get_text() for t in texts])
        cuts = [0, *(i for i in range(1, 5) if labels[i] != labels[i - 1]), 5]
        for t, (a, b) in zip(texts, itertools.pairwise(cuts), strict=True):
            x = t.xy[0]
            assert grid[a] <= x <= grid[min(b, 4)], (t.get_text(), x, a, b)  # over its own region
            box = t.get_window_extent(r)
            assert box.y0 >= ax.get_window_extent(r).y1 - 1  # above the runs, not among them
            assert not box.overlaps(ax.title.get_window_extent(r)), (t.get_text(), box)


def test_names_of_narrow_regions_do_not_run_into_each_other(runs: tuple[list[Any], list[Any]]) -> None:
    # Compiled plans can flip the label from one grid point to the next.
    from planner.regime import LABELS
    from planner.report.figures import frontier_figure

    ok, _ = runs
    labels = [0, 0, 1, 2, 1, 2, 2, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    data, fr = _frontier_data(ok, _shares(labels), np.linspace(0.05, 0.95, len(labels)))
    spec = frontier_figure(data, fr)
    r = _drawn(spec)
    boxes = [t.get_window_extent(r) for t in _texts(spec.fig, lambda s: s in LABELS)]
    assert len(boxes) == 1 + sum(a != b for a, b in itertools.pairwise(labels))
    for i, a in enumerate(boxes):
        assert not a.overlaps(spec.fig.axes[0].title.get_window_extent(r))
        assert 0 <= a.x0 and a.x1 <= spec.fig.bbox.width and a.y1 <= spec.fig.bbox.height
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)


def test_the_disagreement_figure_keeps_its_title_and_labels_whole(runs: tuple[list[Any], list[Any]]) -> None:
    # Four settings, legend outside the axes: the axes' title was wider than the axes and cut
    # off at the figure's left edge ("rget disagreement"), and the y label ran into it.
    from planner.report.figures import disagreement_figure

    ok, _ = runs
    settings = [SettingAt(m, REWARDS[0], b) for m in MODELS for b in (1e14, 2.371e14)]
    # A predicted rho* (the store's pilots alone) adds the legend's widest entry.
    c = _call(0.6, (0.4, 0.8), (0.1, 0.95), predicted=True)
    spec = disagreement_figure(_report_data(ok, [], {t: dict.fromkeys(settings, c) for t in ("native", "pass1")}))
    r = _drawn(spec)
    (ax,) = spec.fig.axes
    titles = _texts(spec.fig, lambda s: s.startswith("Target disagreement"))
    assert len(titles) == 1
    title, ylabel = titles[0].get_window_extent(r), ax.yaxis.label.get_window_extent(r)
    (legend,) = [*spec.fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
    fig = spec.fig.bbox
    for box in (title, ylabel, legend.get_window_extent(r)):
        assert 0 <= box.x0 and box.x1 <= fig.width and 0 <= box.y0 and box.y1 <= fig.height, (box, fig)
    assert not title.overlaps(ylabel), (title, ylabel)
    assert not title.overlaps(legend.get_window_extent(r))
    assert not ax.get_window_extent(r).overlaps(legend.get_window_extent(r))


def test_the_flop_split_legend_names_only_the_components_runs_spend_on(runs: tuple[list[Any], list[Any]]) -> None:
    from planner.report.figures import split_figure

    ok, _ = runs
    legend = lambda recs: {t.get_text() for t in split_figure(_report_data(recs, [])).fig.legends[0].get_texts()}  # noqa: E731
    rule = [r for r in ok if r.card.flops.reward == 0 and r.plan.flops.reward == 0]  # sparse: scored by rule
    assert rule
    r = rule[0]
    scored = [r.model_copy(update={"card": r.card.model_copy(update={"flops": r.card.flops.model_copy(
        update={"reward": 0.1 * r.budget})})})]  # a reward model's forward passes, metered
    assert legend(rule) == {"search (planned)", "learning (planned)", "search (metered)", "learning (metered)"}
    assert "reward (metered)" in legend(rule + scored)
