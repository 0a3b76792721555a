"""A race resumed or changed on an existing --data: regimes.json and the notes describe the
runs that are there, whatever the new flags say (through typer's CliRunner, sim engine)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app
from runners.store import PilotStore

runner = CliRunner()
RACE = ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--quiet"]


def race(data: Path, *args: str) -> object:
    res = runner.invoke(app, [*RACE, "--data", str(data), *args], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    return res


def pilots(data: Path, reward: str) -> Counter[float]:
    return Counter(r.budget for r in PilotStore(data).records(status=None) if r.reward == reward and r.budget < 1e16 / 1.5)


def entry(data: Path, reward: str) -> dict:
    doc = json.loads((data / "regimes.json").read_text())
    (e,) = [e for e in doc["settings"] if e["reward"] == reward]
    return e


def test_a_resume_with_another_pilot_budget_completes_the_design_where_it_ran(tmp_path: Path) -> None:
    data = tmp_path / "d"
    race(data, "--rewards", "sparse", "--max-runs", "3")
    assert pilots(data, "sparse") == Counter({1e14: 3})
    # Used to start a whole new 4-point design at 5e14 (7 pilots over two budgets) and to
    # record pilot_budget 5e14 for runs that never ran there.
    res = race(data, "--rewards", "sparse", "--pilot-budget", "5e14", "--max-runs", "6")
    assert pilots(data, "sparse") == Counter({1e14: 4})
    assert entry(data, "sparse")["pilot_budget"] == 1e14
    assert "pilot budget raised" not in res.output
    doc = json.loads((data / "regimes.json").read_text())
    assert doc["pilot_budget"] == 5e14 and doc["seeds"] == 1  # the request, beside where the runs are


def test_pilot_budget_is_where_the_pilots_ran_for_every_strategy(tmp_path: Path) -> None:
    # prm's requested 1e14 buys too few prompt groups: each strategy runs it higher, and
    # grid, random and optuna used to record the requested 1e14 all the same.
    for strategy in ("grid", "random", "ours"):
        data = tmp_path / strategy
        race(data, "--rewards", "prm", "--strategy", strategy, "--max-runs", "5")
        ran = pilots(data, "prm")
        assert ran and min(ran) > 1.01e14
        assert entry(data, "prm")["pilot_budget"] == min(ran)


def test_a_resume_at_a_larger_budget_keeps_the_pilots_budget(tmp_path: Path) -> None:
    # The earlier race's target runs (1e16) sit below the new decision budget (1e17) and
    # can outnumber the pilots: the most common budget below it read as the pilot budget.
    data = tmp_path / "d"
    race(data, "--rewards", "sparse", "--max-runs", "12")
    before = pilots(data, "sparse")
    assert min(before) == 1e14
    race(data, "--rewards", "sparse", "--budget", "1e17", "--max-runs", "16")
    ran = Counter(r.budget for r in PilotStore(data).records(status=None) if r.budget < 1e17 / 1.5)
    assert ran[1e16] > 0 and entry(data, "sparse")["pilot_budget"] == 1e14


def test_adding_a_setting_leaves_the_others_pilots_and_says_no_raise_for_them(tmp_path: Path) -> None:
    data = tmp_path / "d"
    first = race(data, "--rewards", "prm", "--max-runs", "6")
    assert "pilot budget raised for qwen2.5-1.5b/prm" in first.output
    (ran,) = pilots(data, "prm")
    res = race(data, "--rewards", "sparse,prm", "--max-runs", "8")
    # prm's design used to be recomputed from its place among both settings: a raise to
    # another budget, said and recorded, for pilots that ran at `ran`.
    assert "qwen2.5-1.5b/prm" not in " ".join(ln for ln in res.output.splitlines() if "pilot budget raised" in ln)
    assert entry(data, "prm")["pilot_budget"] == ran


def test_another_strategy_on_the_same_data_is_said_and_a_spent_cap_too(tmp_path: Path) -> None:
    data = tmp_path / "d"
    race(data, "--rewards", "sparse", "--max-runs", "6")
    res = race(data, "--rewards", "sparse", "--strategy", "random", "--max-runs", "8")
    said = " ".join(res.stderr.split())
    assert "by the ours strategy, whose runs this random race's calls also rest on" in said
    res = race(data, "--rewards", "sparse", "--strategy", "random", "--max-runs", "4")
    assert "the store already held 8 run(s)" in " ".join(res.stderr.split())


def test_the_report_says_when_the_store_has_outgrown_the_race_summary(tmp_path: Path) -> None:
    data = tmp_path / "d"
    race(data, "--rewards", "sparse", "--max-runs", "5")
    summary = (data / "regimes.json").read_text()
    race(data, "--rewards", "sparse", "--max-runs", "7")
    (data / "regimes.json").write_text(summary)  # as an interrupted resume leaves it
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", "--data", str(data), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    md = " ".join((out / "report.md").read_text().split())
    assert "The store now holds 7 attempt(s) of these settings, 2 more than this summary counts" in md
    assert "report (refitted on the store)" in md
    # On the terminal too, not only inside the report (it said nothing there).
    said = " ".join(res.stderr.split())
    assert "warning: the store holds 2 attempt(s) of the race's settings more than its regimes.json counts" in said
    shutil.rmtree(out)


def test_an_interrupt_after_the_last_run_says_so_and_a_rerun_writes_the_summary(tmp_path: Path, monkeypatch) -> None:
    # Re-reading the store and writing regimes.json follow the last run; a Ctrl-C there was
    # a bare exit 130 with nothing said and no summary.
    import planner.loop

    data = tmp_path / "d"

    def cut(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(planner.loop, "write_regimes", cut)
        res = runner.invoke(app, [*RACE, "--rewards", "sparse", "--max-runs", "4", "--data", str(data)],
                            env={"COLUMNS": "300"})
    assert res.exit_code == 130, res.output
    assert "interrupted after the race's last run" in res.output and "rerun the same command" in res.output
    assert not (data / "regimes.json").exists()
    ids = sorted(r.run_id for r in PilotStore(data).records(status=None))
    assert len(ids) == 4
    race(data, "--rewards", "sparse", "--max-runs", "4")
    assert sorted(r.run_id for r in PilotStore(data).records(status=None)) == ids  # nothing run again
    assert entry(data, "sparse")["runs"] == 4
    with monkeypatch.context() as m:  # mid-race: the message every command gives
        m.setattr(planner.loop, "run_race", cut)
        res = runner.invoke(app, [*RACE, "--rewards", "sparse", "--max-runs", "8", "--data", str(data)],
                            env={"COLUMNS": "300"})
    assert res.exit_code == 130 and res.output.startswith(f"interrupted: the finished runs are kept in {data}")
