"""Output-path checks: the folders they guard are the store's own."""

from __future__ import annotations

import json
import os
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


_PLAN = ["plan", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--rho", "0.5", "--budget", "1e16"]
_SUGGEST = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]


@pytest.mark.parametrize("args", [
    [*_PLAN, "--out", "loop1"],
    [*_SUGGEST, "--out", "loop1"],
    [*_SUGGEST, "--out", "p.json", "--pending", "loop1"],
    ["report", "--data", "d", "--out", "loop1"],
])
def test_a_loop_of_links_is_the_one_line_error_of_its_option(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Path.resolve raises RuntimeError on a loop: a traceback, exit 1, from each of these."""
    from typer.testing import CliRunner

    from planner.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    res = CliRunner().invoke(app, args)
    option = "pending" if "--pending" in args else "out"
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"error: {option}: ") and "a loop of symbolic links" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_an_out_that_is_a_link_or_a_special_file_is_written_through_not_replaced(tmp_path: Path) -> None:
    """The write's rename replaced what --out named with a regular file: as root, `--out
    /dev/null` made the system's /dev/null one, a link (`latest.json -> run3/p.json`) lost
    its target's update, and a FIFO's reader waited for good. (The FIFO stands in for the
    devices: a regression here must not replace the machine's /dev/null.)"""
    import stat
    import threading

    from typer.testing import CliRunner

    from planner.cli import app

    target = tmp_path / "run3" / "p.json"
    target.parent.mkdir()
    target.write_text("old")
    os.symlink(target, tmp_path / "latest.json")
    os.symlink(tmp_path / "new" / "made.json", tmp_path / "dangling.json")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    for name in ("latest.json", "dangling.json", "fifo"):
        res = CliRunner().invoke(app, [*_PLAN, "--out", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        assert (tmp_path / name).is_symlink() or name == "fifo"
    reader.join(10)
    assert stat.S_ISFIFO((tmp_path / "fifo").lstat().st_mode)
    assert json.loads(got[0])["proposals"][0]["model"] == "qwen2.5-1.5b"
    assert json.loads(target.read_text())["proposals"][0]["rho"] == 0.5
    assert json.loads((tmp_path / "new" / "made.json").read_text())["proposals"][0]["reward"] == "sparse"


def test_a_report_whose_data_is_a_file_blames_data_not_an_out_never_given(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from planner.cli import app

    (tmp_path / "afile").write_text("x")
    res = CliRunner().invoke(app, ["report", "--data", str(tmp_path / "afile")])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error: data: ") and "is a file; pass the --data directory" in res.stderr


def test_a_data_folder_under_a_file_is_refused_naming_that_folder(tmp_path: Path) -> None:
    # "cannot create 'afile/sub/probe'" named a stand-in file the user never asked for.
    from typer.testing import CliRunner

    from planner.cli import app

    (tmp_path / "afile").write_text("")
    data = tmp_path / "afile" / "sub"
    res = CliRunner().invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                                   "--rewards", "sparse", "--data", str(data), "--quiet"])
    assert res.exit_code == 2
    assert res.stderr == (f"error: data: cannot create {str(data)!r} ({str(tmp_path / 'afile')!r} is not a writable "
                          "directory); move that file out of the way, or give another path\n")
