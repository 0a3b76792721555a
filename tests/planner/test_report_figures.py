"""The report's figures: each setting's figure file its own, failed runs in the FLOP split,
credible intervals drawn as the data give them, and rho* panels chosen by what they hold.

Most tests draw from hand-made calls (no surrogate fit): the figures, not the fits, are
under test here.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from test_report_support import MODELS, REWARDS, make_campaign

from planner.report import build_report
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
