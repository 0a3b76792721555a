"""Compute cards: the fields every card shows, ``runners card`` and its errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_report_support import FAILED_ERROR, make_campaign
from typer.testing import CliRunner

from planner.engine import open_store
from planner.report.cards import CARD_COLUMNS, card_fields
from runners.cli import app


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # sim runs take microseconds; no surrogate is fitted here
    return make_campaign(tmp_path_factory.mktemp("cards") / "data", models=("qwen2.5-1.5b",),
                         rewards=("prm",), n_rho=3, seeds=(0,), n_failed=1)


def test_card_fields_match_the_record(campaign: Path) -> None:
    rec = open_store(campaign).records(status="ok")[0]
    f = card_fields(rec)
    assert set(CARD_COLUMNS) <= set(f)
    assert f["run"] == rec.run_id and f["rho"] == f"{rec.card.rho:.3f}"
    assert float(f["total"]) == pytest.approx(rec.card.flops.total, rel=1e-2)
    shares = [int(x.rstrip("%")) for x in f["split"].split(" / ")]
    assert len(shares) == 3 and abs(sum(shares) - 100) <= 2
    assert shares[2] > 0  # a PRM run spends FLOPs on reward
    assert "SIMULATED" in f["engine"] and f["hardware"] == "simulated"
    for phase in rec.card.tokens:
        assert phase in f["tokens"]
    assert "world" in f["software"] and "total" in f["wall"]


def test_card_shows_base_metrics_and_short_engine_numbers(campaign: Path) -> None:
    from planner.schema import Metrics

    rec = open_store(campaign).records(status="ok")[0]
    card = rec.card.model_copy(update={"passes": {"search": 29998671872.0, "train": 17}})
    rec = rec.model_copy(update={"card": card, "metrics": Metrics(native=0.661, native_base=0.647, judge=0.5)})
    f = card_fields(rec)
    assert f["metrics"] == "native 0.661 (base 0.647), judge 0.500"
    assert f["extras"] == "passes: search 3e+10, train 17"


def test_runners_card_prints_one(campaign: Path) -> None:
    rec = open_store(campaign).records(status="ok")[0]
    res = CliRunner().invoke(app, ["card", rec.run_id, "--data", str(campaign)], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    for needle in (rec.run_id, "SIMULATED", "search", "learning", "reward", "rho", "tokens",
                   "wall time", "hardware", "software", f"{rec.card.flops.total:.3g}"):
        assert needle in res.output, needle


def test_runners_card_failed_run_shows_error_literally(campaign: Path) -> None:
    failed = open_store(campaign).records(status="failed")[0]
    res = CliRunner().invoke(app, ["card", failed.run_id, "--data", str(campaign)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    flat = re.sub(r"\s+", " ", res.output)
    assert "failed (attempt 1)" in flat and "[details]" in flat  # rich markup not eaten
    assert FAILED_ERROR.split(";")[0] in flat


def test_a_failed_runs_card_names_the_phase_it_stopped_in(campaign: Path) -> None:
    """The trl engine attaches its own card to a failure (no ``partial`` mark, no phase): its
    failed cards said only "failed (attempt 1)", though the record keeps the phase."""
    failed = open_store(campaign).records(status="failed")[0]
    card = failed.card.model_copy(update={"partial": None, "phase": None})
    rec = failed.model_copy(update={"card": card, "provenance": {**failed.provenance, "phase": "train"}})
    assert card_fields(rec)["status"] == "failed (attempt 1), stopped in train"
    ok = open_store(campaign).records(status="ok")[0]
    assert card_fields(ok.model_copy(update={"provenance": {**ok.provenance, "phase": "train"}}))["status"] == "ok"


def test_runners_card_unknown_run(campaign: Path) -> None:
    rec = open_store(campaign).records(status="ok")[0]
    res = CliRunner().invoke(app, ["card", rec.run_id[:-1] + "9", "--data", str(campaign)])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and res.output.startswith("error: run_id:")
    assert "did you mean" in res.output
    res = CliRunner().invoke(app, ["card", "x", "--data", str(campaign / "missing")])
    assert res.exit_code == 2 and "data:" in res.output


def test_runners_card_names_a_store_folder_given_as_the_store(campaign: Path) -> None:
    # DIR/runs read as a store holds no run: "no run ...; 0 run(s) are there" sent the user
    # looking for a missing run, where `planner report` names the slip.
    rec = open_store(campaign).records(status="ok")[0]
    res = CliRunner().invoke(app, ["card", rec.run_id, "--data", str(campaign / "runs")])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "is a pilot store's runs/ folder; pass the store itself" in res.output, res.output
