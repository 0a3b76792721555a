"""Output-path checks: the folders they guard are the store's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli.paths import (
    STORE_FOLDERS,
    check_not_store_folder,
    check_output_file,
    is_store_folder,
)
from planner.errors import ConfigError
from runners.store import PilotStore


def test_store_folders_are_the_stores_layout(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    assert {store.runs_dir.name, store.failed_dir.name, store.corrupt_dir.name} == set(STORE_FOLDERS)


def test_a_store_folder_is_recognised_and_a_lone_namesake_is_not(tmp_path: Path) -> None:
    (tmp_path / "store" / "runs").mkdir(parents=True)
    (tmp_path / "store" / "failed").mkdir()
    assert is_store_folder(tmp_path / "store" / "runs")
    assert is_store_folder(tmp_path / "store" / "corrupt")  # not there yet, beside the others
    (tmp_path / "plain" / "runs").mkdir(parents=True)
    assert not is_store_folder(tmp_path / "plain" / "runs")
    assert not is_store_folder(tmp_path / "store")
    with pytest.raises(ConfigError, match="pass the store itself"):
        check_not_store_folder(tmp_path / "store" / "runs")
    with pytest.raises(ConfigError, match="inside a pilot store's runs/"):
        check_output_file(tmp_path / "store" / "runs" / "proposals.json", "out")
    assert check_output_file(tmp_path / "store" / "proposals.json", "out") == tmp_path / "store" / "proposals.json"


@pytest.mark.parametrize(("cli", "args", "option"), [
    ("planner", ["race", "--budget", "1e16", "--engine", "sim", "--max-runs", "2", "--data", ""], "--data"),
    ("planner", ["suggest", "--budget", "1e16", "--data", ""], "--data"),
    ("planner", ["suggest", "--budget", "1e16", "--out", ""], "--out"),
    ("planner", ["suggest", "--budget", "1e16", "--pending", ""], "--pending"),
    ("planner", ["report", "--data", "", "--out", "r"], "--data"),
    ("planner", ["report", "--data", "d", "--out", ""], "--out"),
    ("planner", ["race", "--budget", "1e16", "--data", "d", "--world", ""], "--world"),
    ("planner", ["race", "--budget", "1e16", "--data", "d", "--backend", ""], "--backend"),
    ("planner", ["plan", "--model", "qwen2.5-1.5b", "--reward", "prm", "--rho", "0.5", "--budget", "1e16",
                 "--out", ""], "--out"),
    ("planner", ["audit", ""], "config"),
    ("runners", ["execute", "p.json", "--engine", "sim", "--data", ""], "--data"),
    ("runners", ["status", "--data", ""], "--data"),
    ("runners", ["truth", "--world", "paper", "--model", "qwen2.5-1.5b", "--reward", "prm", "--budget", "1e16",
                 "--plot", ""], "--plot"),
    ("runners", ["pretrain", "--model", "tiny-s", "--cache-dir", ""], "--cache-dir"),
])
def test_an_empty_path_or_name_is_refused_not_read_as_here_or_unset(
    cli: str, args: list[str], option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Path("")`` is ".": ``--data ''`` (an unset shell variable) wrote a store into the
    directory the command ran in; ``--plot ''`` wrote no figure and said nothing."""
    from typer.testing import CliRunner

    from planner.cli import app as planner_app
    from runners.cli import app as runners_app

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(planner_app if cli == "planner" else runners_app, args)
    assert res.exit_code == 2, res.output
    assert "empty" in res.stderr and option in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing written here


def _report_folder(root: Path) -> Path:
    """A folder as `planner report --out` leaves it: its regimes.json says so."""
    import json

    rep = root / "report"
    (rep / "figures").mkdir(parents=True)
    (rep / "report.md").write_text("# RACE regime report\n")
    (rep / "regimes.json").write_text(json.dumps({"schema_version": 1, "generated_by": "planner report",
                                                  "status": "ok", "data": str(root / "store"), "settings": []}))
    return rep


@pytest.mark.parametrize(("cli", "args"), [
    ("planner", ["race", "--budget", "1e16", "--engine", "sim", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                 "--max-runs", "2"]),
    ("planner", ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]),
    ("planner", ["report", "--out", "again"]),
    ("runners", ["execute", "p.json", "--engine", "sim"]),
    ("runners", ["status"]),
    ("runners", ["card", "some-run-s0"]),
])
def test_a_report_folder_given_as_data_is_refused_and_left_as_it_was(
    cli: str, args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--data`` naming `planner report`'s output folder (it sits beside, or inside, the
    store it reports on): the race wrote its summary over the report's regimes.json and
    runs/ into the report, execute made a store there, suggest proposed a fresh design as
    if nothing had run and report reported "no runs" with exit 0. Each is now refused,
    naming the store the report came from."""
    from typer.testing import CliRunner

    from planner.cli import app as planner_app
    from runners.cli import app as runners_app

    monkeypatch.chdir(tmp_path)
    if cli == "runners" and args[0] == "execute":
        made = CliRunner().invoke(planner_app, ["plan", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--rho",
                                                "0.5", "--budget", "1e14", "--out", "p.json"])
        assert made.exit_code == 0, made.output
    rep = _report_folder(tmp_path)
    before = {p: p.read_bytes() for p in rep.rglob("*") if p.is_file()}
    res = CliRunner().invoke(planner_app if cli == "planner" else runners_app, [*args, "--data", str(rep)])
    assert res.exit_code == 2, res.output
    assert "report" in res.stderr and str(tmp_path / "store") in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in rep.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "again").exists() and not (tmp_path / "proposals.json").exists()


def test_a_reports_data_is_absolute_so_its_store_is_named_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """regimes.json of `planner report` kept ``--data`` as typed ("store"): from another
    folder, the refusal of the report folder given as a store named a store not there."""
    import json

    from typer.testing import CliRunner

    from planner.cli import app as planner_app

    (tmp_path / "store").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(planner_app, ["report", "--data", "store", "--quiet"])
    assert res.exit_code == 0, res.output
    store = (tmp_path / "store").resolve()
    assert json.loads((store / "report" / "regimes.json").read_text())["data"] == str(store)
    monkeypatch.chdir(tmp_path / "elsewhere")
    res = CliRunner().invoke(planner_app, ["report", "--data", str(store / "report"), "--out", "r"])
    assert res.exit_code == 2 and f"pass the store it reports on, {str(store)!r}" in res.stderr, res.stderr


@pytest.mark.parametrize(("typed", "report", "store"), [
    ("camp", "camp/report", "camp"),  # the default DATA/report, run beside the store
    ("reports/tiny/data", "reports/tiny/report", "reports/tiny/data"),  # a checkout's campaign, run at its root
    ("gone", "camp/report", None),  # not found: named as typed, and said to be
])
def test_an_older_reports_relative_data_is_found_from_the_report(
    typed: str, report: str, store: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An older report's ``data`` is relative to where `planner report` ran: looked for from
    the folders above the report's, not from wherever the refused command runs."""
    import json

    from planner.cli.paths import check_not_report_folder

    rep = tmp_path / report
    rep.mkdir(parents=True)
    (rep / "regimes.json").write_text(json.dumps({"generated_by": "planner report", "data": typed}))
    if store:
        (tmp_path / store / "runs").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(ConfigError) as err:
        check_not_report_folder(rep)
    shown = (str((tmp_path / store).resolve()) if store
             else f"{typed} (relative to where `planner report` ran)")
    assert f"pass the store it reports on, {shown!r}" in str(err.value)
