"""The benchmark's figure: what it draws is what the result file says."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest


@pytest.fixture(scope="module")
def plot(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("bench_plot", "bench_plot_t")


def _row(world: str, strategy: str, config: str, flops: float, same: float, regret: float) -> dict[str, Any]:
    return {"world": world, "strategy": strategy, "config": config, "flops_target_units": flops,
            "same_regime": same, "regret_median": regret}


def _doc(cap: float = 6.0) -> dict[str, Any]:
    rows, summary = [], {}
    for w in ("flat", "shifted"):
        rows += [_row(w, "ours", "", 30.0, 0.9, 0.001), _row(w, "random", "", 30.0, 0.7, 0.002),
                 _row(w, "constant", "update-heavy", 0.0, 0.5, 0.01),
                 _row(w, "grid", "3pts x1 @pilot", 1.8, 0.6, 0.004),
                 _row(w, "grid", "9pts x4 @target", 215.0 if w == "shifted" else 12.0, 0.97, 0.001)]
        summary[w] = {"anytime": [{"flops_target_units": f, "same_regime": r, "regret_median": g}
                                  for f, r, g in ((2.4, 0.6, 0.005), (12.0, 0.8, 0.002), (30.0, 0.9, 0.001))],
                      "grid_for_0.95": rows[-1]}  # what planner_bench stores: the cheapest design at 0.95
    cfg = {"worlds": ["flat", "shifted"], "models": ["a", "b", "c"], "rewards": ["x", "y"], "reps": 10,
           "first_rep": 0, "target": "native", "budget": 1e16, "pilot_budget": 1e15, "flops_per_setting": cap}
    return {"config": cfg, "rows": rows, "summary": summary}


def test_figure_draws_ours_curve_and_a_third_of_the_grids_spend_at_095(plot: ModuleType) -> None:
    fig = plot.bench_figure([_doc()])
    axes = np.array(fig.axes[:4]).reshape(2, 2)
    assert [a.get_title() for a in axes[0]] == ["flat", "shifted"]
    for j, grid95 in enumerate((12.0, 215.0)):
        top = axes[0][j]
        curves = [ln for ln in top.get_lines() if len(ln.get_xdata()) == 3]
        assert [list(c.get_ydata()) for c in curves] == [[0.6, 0.8, 0.9]]
        verticals = [ln.get_xdata()[0] for ln in top.get_lines()
                     if len(ln.get_xdata()) == 2 and ln.get_xdata()[0] == ln.get_xdata()[1]]
        assert verticals == pytest.approx([grid95 / 3])  # the acceptance line: 1/3 of the grid's spend
        assert axes[1][j].get_xscale() == "log"


def test_two_files_give_two_labelled_curves_and_the_script_writes_png_and_svg(
    plot: ModuleType, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_doc()))
    b.write_text(json.dumps(_doc(cap=12.0)))
    out = plot.main([str(a), str(b), "--out", str(tmp_path / "fig" / "bench.png")])
    assert out.stat().st_size > 10_000 and out.with_suffix(".svg").stat().st_size > 10_000
    labels = [t.get_text() for t in plot.bench_figure([_doc(), _doc(cap=12.0)]).legends[0].get_texts()]
    assert any("cap 6/setting" in t for t in labels) and any("cap 12/setting" in t for t in labels)


def test_a_file_that_is_not_a_result_is_refused_with_the_fix(plot: ModuleType, tmp_path: Path) -> None:
    bad = tmp_path / "proposals.json"
    bad.write_text(json.dumps({"proposals": []}))
    with pytest.raises(SystemExit, match=r"results: .*proposals\.json is not a planner_bench\.py result"):
        plot.main([str(bad), "--out", str(tmp_path / "x.png")])
    assert not (tmp_path / "x.png").exists()
