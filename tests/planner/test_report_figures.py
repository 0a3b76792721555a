"""The report's figures: each setting's figure file its own, failed runs in the FLOP split,
credible intervals drawn as the data give them, and rho* panels chosen by what they hold.

Most tests draw from hand-made calls (no surrogate fit): the figures, not the fits, are
under test here.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from test_report_support import MODELS, REWARDS, make_campaign

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

    data = make_campaign(tmp_path_factory.mktemp("runs") / "data", models=MODELS[:1], rewards=REWARDS[:1],
                         n_rho=3, seeds=(0,), n_failed=1)
    ok, failed, _ = load_records(data)
    return ok, failed


def _report_data(ok: list[Any], failed: list[Any]) -> Any:
    from planner.report.data import ReportData

    return ReportData(Path("campaign"), "native", ok, failed, [])


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
