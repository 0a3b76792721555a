"""planner.versions: what --version prints, what the runs' cards say they were made
with, and the one line a store spanning a library upgrade gets in its report."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.versions import (
    changed_since,
    fitting_versions,
    mixed_software,
    package_version,
    software_of,
    tool_version,
    version_line,
)


def _sim_records(n: int) -> list:
    from planner.compiler import compile_plan
    from planner.engine import load_engine
    from planner.proposals import make_proposal

    engine = load_engine("sim")
    return [engine.run(make_proposal(compile_plan("qwen2.5-1.5b", "sparse", 0.2 + 0.1 * i, 1e15)), 0)
            for i in range(n)]


def _with(record, **software: str):  # type: ignore[no-untyped-def]
    card = record.card.model_copy(update={"software": {**record.card.software, **software}})
    return record.model_copy(update={"card": card})


def test_versions_come_from_the_installed_distributions() -> None:
    assert tool_version() == version("race-planner")
    assert package_version("trl") == version("trl") and package_version("no-such-dist-xyz") is None
    line = version_line()
    assert line.startswith(f"race-planner {tool_version()} (") and f"trl {version('trl')}" in line
    assert f"botorch {version('botorch')}" in line
    # Every library a regimes.json's fitted_with names, once each.
    libs = dict(item.split(" ", 1) for item in line[line.index("(") + 1:-1].split(", "))
    assert len(libs) == line.count(", ") + 1  # no library twice
    for name in fitting_versions():
        if name != "race-planner":
            assert libs[name] == version(name), name


@pytest.mark.parametrize("cli", ["planner", "runners"])
def test_version_option_prints_the_line_and_exits_zero(cli: str) -> None:
    if cli == "planner":
        from planner.cli import app
    else:
        from runners.cli import app
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == version_line()


def test_a_sim_run_names_the_race_planner_that_made_it_and_one_version_is_not_mixed() -> None:
    records = _sim_records(3)
    assert all(r.card.software["race-planner"] == tool_version() for r in records)
    assert software_of(records) == {"race-planner": {tool_version(): 3}}
    assert mixed_software(records) is None


def test_runs_across_a_trl_upgrade_are_named_with_their_counts() -> None:
    a, b, c = _sim_records(3)
    records = [_with(a, trl="1.15.0", peft="0.21.2"), _with(b, trl="1.16.0", peft="0.21.2"),
               _with(c, trl="1.16.0", peft="0.21.2")]
    assert software_of(records)["trl"] == {"1.15.0": 1, "1.16.0": 2}
    line = mixed_software(records)
    assert line is not None and "\n" not in line
    assert "trl 1.15.0 (1 runs), 1.16.0 (2 runs)" in line and "peft" not in line
    # One torch release built for a laptop and a GPU box is not a mix.
    assert mixed_software([_with(a, torch="2.13.0+cpu"), _with(b, torch="2.13.0+cu126")]) is None
    # A card older than a key names no version of it: nothing to compare, nothing mixed.
    older = c.model_copy(update={"card": c.card.model_copy(update={"software": {"engine": "sim"}})})
    assert mixed_software([_with(a, trl="1.16.0"), older]) is None


def test_the_report_says_what_the_runs_were_made_with_and_notes_a_mixed_store(tmp_path: Path) -> None:
    from planner.engine import open_store
    from planner.report.data import assemble
    from planner.report.document import regimes_json

    records = _sim_records(4)
    store = open_store(tmp_path)
    for i, r in enumerate(records):
        store.write(_with(r, trl="1.15.0" if i == 0 else "1.16.0"))
    data = assemble(tmp_path, targets=("native",))
    assert data.software_text == f"race-planner {tool_version()}, trl 1.15.0 / 1.16.0"
    assert any("different library versions" in n and "trl 1.15.0 (1 runs), 1.16.0 (3 runs)" in n
               for n in data.notes)
    assert regimes_json(data)["software"] == {"race-planner": {tool_version(): 4}, "trl": {"1.15.0": 1, "1.16.0": 3}}


def test_a_library_changed_since_the_stores_runs_is_named_and_a_build_label_is_not_a_change() -> None:
    a, b = _sim_records(2)
    assert changed_since([a, b]) is None  # made here, now
    here_trl = version("trl")
    line = changed_since([_with(a, trl="0.9.0"), _with(b, trl="0.9.0")])
    assert line is not None and f"trl 0.9.0 -> {here_trl}" in line and "race-planner" not in line
    # One of the store's versions is this machine's: the report's note covers the mix, not this.
    assert changed_since([_with(a, trl="0.9.0"), _with(b, trl=here_trl)]) is None
    # The same torch release built for another machine (a GPU box's +cu126) is not an upgrade.
    torch_release = version("torch").split("+")[0]
    assert changed_since([_with(a, torch=f"{torch_release}+cu126")]) is None
    assert "torch 1.0.0 -> " in (changed_since([_with(a, torch="1.0.0")]) or "")
