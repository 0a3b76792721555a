"""`planner suggest` through typer's CliRunner: the proposals it writes, the notes it prints, and its refusals of bad input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.proposals import read_proposals, write_proposals
from runners.store import PilotStore

runner = CliRunner()


def test_suggest_on_empty_data_writes_an_initial_design_fast(tmp_path: Path) -> None:
    out = tmp_path / "proposals.json"
    t0 = time.perf_counter()
    res = runner.invoke(app, ["suggest", "--budget", "1e18", "--data", str(tmp_path / "none"), "--out", str(out)])
    elapsed = time.perf_counter() - t0
    assert res.exit_code == 0, res.output
    assert elapsed < 10
    ps = read_proposals(out)
    assert ps.target_budget == 1e18
    assert len(ps.proposals) == 3 * 5 * 4  # Qwen sizes x reward systems x initial design
    p = ps.proposals[0]
    assert p.budget == pytest.approx(1e16, rel=0.03) and "initial design" in p.reason
    assert {q.reward for q in ps.proposals} == {"sparse", "structured", "dense", "proxy-prm", "prm"}


def test_suggest_table_is_one_whole_line_per_proposal_at_80_columns(tmp_path: Path) -> None:
    out = tmp_path / "proposals.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e18", "--data", str(tmp_path / "none"), "--out", str(out)],
                        env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    rows = [line for line in res.stdout.splitlines() if "initial design" in line]
    assert len(rows) == len(ps) == 60  # no wrapped reasons
    assert all(len(line) <= 80 for line in res.stdout.splitlines())
    assert res.stderr.startswith("note: no pilot store at") and "proposing the initial design" in res.stderr
    for p, line in zip(ps, rows, strict=True):  # setting and rho printed whole
        assert f"{p.model}/{p.reward}" in line and f"{p.plan.rho:.3f}" in line


def test_suggest_says_when_a_settings_pilot_budget_was_raised(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-7b", "--rewards", "sparse",
                              "--data", str(tmp_path / "none"), "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    (b,) = {p.budget for p in ps}  # one pilot budget, above the default budget / 100
    assert b > 1e14 and f"pilot budget raised for qwen2.5-7b/sparse (to {b:.2g})" in res.output
    # Far below any run's cost (1 FLOP), the pilots still share one budget, and it is said.
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--pilot-budget", "1", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    (b,) = {p.budget for p in read_proposals(out).proposals}
    assert 1e13 < b < 1e16 and "pilot budget raised for qwen2.5-1.5b/sparse" in res.output
    assert "pilots scattered" not in res.output


def test_suggest_says_when_a_settings_pilots_cannot_share_a_budget(tmp_path: Path) -> None:
    """A decision budget of a few 7B PRM prompt groups: no budget up to it lands every design
    point, so the pilots land on budgets of their own. Said, not silent. (One design point
    used to get no pilot: the *target* budget buys no plan at its rho, and that error was
    read as the pilot's; compile_pilot now falls back to the plain plan there.)"""
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "5e14", "--models", "qwen2.5-7b", "--rewards", "prm",
                              "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    assert len(ps) == 4 and len({p.budget for p in ps}) == 4 and all(p.budget < 5e14 for p in ps)
    assert all("pilots scattered over" in p.reason for p in ps)
    assert "pilots scattered for qwen2.5-7b/prm" in " ".join(res.output.split())


def test_suggest_lists_and_n(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b,qwen2.5-7b",
                              "--rewards", "sparse,prm", "--n", "3", "--pilot-budget", "1e15",
                              "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    assert len(ps) == 3 and json.loads(res.output)[0]["id"] == ps[0].id


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--budget", "lots"], "budget"),
        (["--budget", "1e16", "--models", "nope"], "models: unknown model 'nope'"),
        (["--budget", "1e16", "--models", "qwen2.5-math-prm-7b"], "models"),
        (["--budget", "1e16", "--rewards", "vibes"], "rewards: unknown reward system 'vibes'"),
        (["--budget", "1e16", "--target", "elo"], "target"),
        (["--budget", "1e16", "--pilot-budget", "1e17"], "pilot-budget"),
        (["--budget", "1e10", "--models", "qwen2.5-7b"], "budget"),
        # Typer's own parsing errors too: one line, not a boxed panel.
        (["--budget", "1e16", "--n", "abc"], "Invalid value for '--n'"),
        (["--budget", "1e16", "--bogus"], "No such option: --bogus"),
        (["--n", "2"], "Missing option '--budget'"),
        (["--budget", "1e16", "--rewards", ""], "rewards: empty list"),
        (["--budget", "1e16", "--models", ","], "models: empty list"),
        # A name lost in editing, or given twice, is a slip: say so rather than guess.
        (["--budget", "1e16", "--models", "qwen2.5-1.5b,,qwen2.5-3b"], "models: empty item"),
        (["--budget", "1e16", "--rewards", "sparse,"], "rewards: empty item"),
        (["--budget", "1e16", "--rewards", "sparse,prm,sparse"], "rewards: sparse given more than once"),
        # Past what the samplers take: a traceback from the first fit, mid-race in `race`.
        (["--budget", "1e16", "--seed", "99999999999999999999999"], "Invalid value for '--seed'"),
        (["--budget", "1e16", "--seed", "-5"], "Invalid value for '--seed'"),
    ],
)
def test_suggest_bad_input_is_one_line(tmp_path: Path, args: list[str], field: str) -> None:
    res = runner.invoke(app, ["suggest", *args, "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2
    line = res.output.strip()
    assert "\n" not in line and line.startswith(f"error: {field}"), line
    assert not (tmp_path / "p.json").exists()


def test_suggest_with_the_whole_phase_pending_says_why_it_proposes_nothing(tmp_path: Path) -> None:
    base = ["suggest", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
            "--rewards", "sparse", "--data", str(tmp_path / "data")]
    first = tmp_path / "first.json"
    res = runner.invoke(app, [*base, "--out", str(first)])
    assert res.exit_code == 0, res.output
    assert len(read_proposals(first).proposals) == 4  # the initial design
    again = tmp_path / "again.json"
    res = runner.invoke(app, [*base, "--pending", str(first), "--out", str(again)])
    assert res.exit_code == 0, res.output
    assert len(read_proposals(again).proposals) == 0
    assert "4 pending runs complete the current phase" in " ".join(res.output.split())


def test_suggest_matches_pending_runs_by_plan_not_by_id(tmp_path: Path) -> None:
    """A run pending under another id (a hand-written file, another --target: the id names
    it) is the same run: proposing it again would have execute refuse the twin. The
    anchors' phase, where nothing but the id used to match a pending run."""
    data = tmp_path / "data"
    base = ["--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
            "--data", str(data)]
    res = runner.invoke(app, ["race", *base, "--engine", "sim", "--world", "paper", "--max-runs", "4", "--quiet"])
    assert res.exit_code == 0, res.output  # the 4 pilots
    anchors, renamed = tmp_path / "anchors.json", tmp_path / "renamed.json"
    assert runner.invoke(app, ["suggest", *base, "--out", str(anchors)]).exit_code == 0
    props = read_proposals(anchors).proposals
    assert len(props) == 2 and all("anchor" in p.reason for p in props)
    write_proposals(renamed, [p.model_copy(update={"id": f"mine-{i}"}) for i, p in enumerate(props)])
    out = tmp_path / "again.json"
    res = runner.invoke(app, ["suggest", *base, "--pending", str(renamed), "--out", str(out)])
    assert res.exit_code == 0, res.output
    again = read_proposals(out).proposals
    assert not {p.plan for p in again} & {p.plan for p in props}, [p.reason for p in again]


def test_suggest_shows_the_calls_so_far_on_stderr(tmp_path: Path) -> None:
    """A manual loop (suggest, execute, suggest) saw no call until every setting was
    decided; the calls so far are the race's table, on stderr, and a setting without a
    run shows none."""
    data = tmp_path / "data"
    base = ["--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b", "--data", str(data)]
    res = runner.invoke(app, ["race", *base, "--rewards", "sparse", "--engine", "sim", "--world", "paper",
                              "--max-runs", "4", "--quiet"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "next.json"
    res = runner.invoke(app, ["suggest", *base, "--rewards", "sparse,prm", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)  # the table stays off stdout
    err = " ".join(res.stderr.split())
    assert "calls so far at 1e+16 FLOPs (native)" in err
    (sparse,) = [ln for ln in res.stderr.splitlines() if ln.strip().startswith("qwen2.5-1.5b/sparse")]
    (prm,) = [ln for ln in res.stderr.splitlines() if ln.strip().startswith("qwen2.5-1.5b/prm")]
    assert "heavy" in sparse and "no runs" in prm and "heavy" not in prm
    # The batch's caveats reach stderr under --json too (the prm design's predictions are guesses).
    assert "note: (...): a guess" in err and "qwen2.5-1.5b/prm: its reward system has no fitted run" in err
    fresh = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                                "--data", str(tmp_path / "empty"), "--out", str(tmp_path / "p.json")])
    assert fresh.exit_code == 0 and "calls so far" not in fresh.stderr


def test_suggest_n_with_pending_proposes_the_rest_of_the_phase(tmp_path: Path) -> None:
    """--n 2 with the first two design points pending gives the other two: they used to be
    cut to the first 2 before the pending ones were dropped, leaving nothing."""
    base = ["suggest", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
            "--rewards", "sparse", "--n", "2"]
    first, second, both = tmp_path / "first.json", tmp_path / "second.json", tmp_path / "both.json"
    assert runner.invoke(app, [*base, "--out", str(first)]).exit_code == 0
    res = runner.invoke(app, [*base, "--pending", str(first), "--out", str(second)])
    assert res.exit_code == 0, res.output
    a, b = read_proposals(first).proposals, read_proposals(second).proposals
    assert len(a) == len(b) == 2 and not {p.id for p in a} & {p.id for p in b}
    write_proposals(both, [*a, *b])
    res = runner.invoke(app, [*base, "--pending", str(both), "--out", str(tmp_path / "third.json")])
    assert res.exit_code == 0 and "4 pending runs complete the current phase" in " ".join(res.output.split())


def test_suggest_ignores_pending_runs_of_settings_not_asked_about(tmp_path: Path) -> None:
    # The acquisition conditioned on them through a surrogate that knows only the
    # requested settings: a KeyError traceback.
    data, other, out = tmp_path / "data", tmp_path / "other.json", tmp_path / "next.json"
    one = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]
    res = runner.invoke(app, ["race", *one, "--engine", "sim", "--world", "paper", "--max-runs", "6",
                              "--quiet", "--data", str(data)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", "--budget", "1e15", "--models", "qwen2.5-3b", "--rewards", "prm",
                              "--out", str(other)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", *one, "--data", str(data), "--pending", str(other), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "pending: 4 of its runs are of settings not asked about here (e.g. qwen2.5-3b/prm)" in res.stderr
    props = read_proposals(out).proposals
    assert props and all((p.model, p.reward) == ("qwen2.5-1.5b", "sparse") for p in props)


def test_suggest_takes_several_pending_files(tmp_path: Path) -> None:
    # A second --pending silently replaced the first, whose runs were proposed again.
    base = ["suggest", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
            "--rewards", "sparse", "--n", "1"]
    files = [tmp_path / f"p{i}.json" for i in range(3)]
    assert runner.invoke(app, [*base, "--out", str(files[0])]).exit_code == 0
    res = runner.invoke(app, [*base, "--pending", str(files[0]), "--out", str(files[1])])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*base, "--pending", str(files[0]), "--pending", str(files[1]), "--pending",
                              str(files[1]), "--out", str(files[2])])
    assert res.exit_code == 0, res.output
    ids = [read_proposals(f).proposals[0].id for f in files]
    assert len(set(ids)) == 3
    res = runner.invoke(app, [*base, "--pending", str(files[0]), "--pending", str(files[2]), "--out", str(files[2])])
    assert res.exit_code == 2 and "is also --pending" in res.output


def test_suggest_refuses_to_overwrite_its_pending_file_and_a_file_as_data(tmp_path: Path) -> None:
    base = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]
    p = tmp_path / "p.json"
    assert runner.invoke(app, [*base, "--out", str(p)]).exit_code == 0
    before = p.read_bytes()
    res = runner.invoke(app, [*base, "--out", str(p), "--pending", str(p)])
    assert res.exit_code == 2 and res.stderr.startswith("error: out:") and "--pending" in res.stderr
    assert p.read_bytes() == before  # the pending list survives
    res = runner.invoke(app, [*base, "--out", str(tmp_path / "q.json"), "--data", str(p)])
    assert res.exit_code == 2 and res.stderr.startswith("error: data:") and "is a file" in res.stderr


def test_suggest_names_pending_for_a_broken_pending_file(tmp_path: Path) -> None:
    bad = tmp_path / "pending.json"
    bad.write_text('{"proposals": [{"id": 3}]}')
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--pending", str(bad), "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2 and res.stderr.startswith("error: pending: ") and "planner suggest" in res.stderr
    race = tmp_path / "d"  # a race's summary for the pending proposals: no field of it to fix
    res = runner.invoke(app, ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--max-runs", "2", "--data", str(race), "--quiet"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--pending", str(race / "regimes.json"), "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2 and res.stderr.startswith(
        "error: pending: the file is a race's summary (regimes.json) with no 'proposals' list"), res.stderr
    assert not (tmp_path / "p.json").exists()


def test_suggest_leaves_out_a_design_point_that_failed_twice_in_a_store_of_failures(tmp_path: Path) -> None:
    from planner.schema import run_id_for

    base = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]
    assert runner.invoke(app, [*base, "--out", str(tmp_path / "p.json")]).exit_code == 0
    first = read_proposals(tmp_path / "p.json").proposals[0]
    store = PilotStore(tmp_path / "d")  # only failed/: no run has succeeded yet
    from runners.engines.sim import SimEngine

    rec = SimEngine("paper").run(first, 0)
    for attempt in (1, 2):
        store.add(rec.model_copy(update={"status": "failed", "error": "error: oom", "attempt": attempt}))
    assert not (tmp_path / "d" / "runs").exists()
    res = runner.invoke(app, [*base, "--data", str(tmp_path / "d"), "--out", str(tmp_path / "q.json")])
    assert res.exit_code == 0, res.output
    again = {p.id for p in read_proposals(tmp_path / "q.json").proposals}
    assert first.id not in again and run_id_for(first.id, 0) == rec.run_id


def test_suggest_does_not_design_a_setting_again_whose_pilots_are_pending_from_a_wider_suggest(tmp_path: Path) -> None:
    """A setting's design (pilot budget, rho shift) depends on which settings are asked:
    pending pilots of 7b from a suggest over 1.5b and 7b were none of a 7b-only design's
    points, so it proposed 4 more 7b pilots at another budget (twice the pilot spend, and
    no longer one IsoFLOP set)."""
    data = tmp_path / "data"
    wide = tmp_path / "wide.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b,qwen2.5-7b",
                              "--rewards", "sparse", "--data", str(data), "--out", str(wide)])
    assert res.exit_code == 0, res.output
    pending_7b = [p for p in read_proposals(wide).proposals if p.model == "qwen2.5-7b"]
    assert len(pending_7b) == 4
    for models, new in (("qwen2.5-7b", set()), ("qwen2.5-7b,qwen2.5-3b", {"qwen2.5-3b"})):
        out = tmp_path / f"{models}.json"
        res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", models, "--rewards", "sparse",
                                  "--data", str(data), "--out", str(out), "--pending", str(wide)])
        assert res.exit_code == 0, res.output
        props = read_proposals(out).proposals
        assert {p.model for p in props} == new and not {p.id for p in props} & {p.id for p in pending_7b}


def test_suggest_says_when_every_call_is_decided_where_a_race_would_stop(tmp_path: Path) -> None:
    """A manual suggest/execute loop had no word that a race would have stopped."""
    data = str(tmp_path / "d")
    base = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--data", data]
    res = runner.invoke(app, ["race", *base, "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "d" / "regimes.json").read_text())["stop_reason"] == "confident"
    res = runner.invoke(app, ["suggest", *base, "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stderr.split())
    assert "note: every setting's call is decided (P >= 0.9, checked at the target budget): `planner race` would stop here" in said
    # Before the anchors have checked anything, no such note.
    early = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--data", str(tmp_path / "e")]
    assert runner.invoke(app, ["race", *early, "--quiet", "--max-runs", "4"]).exit_code == 0
    res = runner.invoke(app, ["suggest", *early, "--out", str(tmp_path / "q.json")])
    assert res.exit_code == 0 and "is decided" not in res.stderr, res.output


def test_suggest_marks_a_prediction_for_an_unfitted_reward_as_a_guess(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "p.json"
    res = runner.invoke(app, ["race", "--budget", "1e16", "--engine", "sim", "--world", "paper", "--models",
                              "qwen2.5-1.5b", "--rewards", "sparse", "--max-runs", "4", "--data", str(data), "--quiet"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse,prm",
                              "--data", str(data), "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    props = read_proposals(out).proposals
    assert {p.reward for p in props} == {"prm"} and all(p.prediction and p.prediction.extrapolated for p in props)
    rows = [line for line in res.stdout.splitlines() if "qwen2.5-1.5b/prm" in line and "initial design" in line]
    assert len(rows) == len(props) and all(f"({p.prediction.mean:.3f}±" in line  # type: ignore[union-attr]
                                           for p, line in zip(props, rows, strict=True))
    said = " ".join(res.stdout.split())
    assert "(...): a guess" in said and "qwen2.5-1.5b/prm: its reward system has no fitted run" in said
    # The prm pilots' budget was raised to 2.4x the sparse pilots': past any fitted run's, too.
    assert all(p.prediction and p.prediction.extrapolated_why
               == "its reward system has no fitted run and no fitted run reached its budget and one fitted "
               "setting without seed replicates (its run noise is the fit's guess; --seeds 2 measures it, "
               "--noise-sd states a known one)"
               for p in props)


def test_suggest_names_a_budget_no_run_reached_as_what_makes_the_anchors_a_guess(tmp_path: Path) -> None:
    """After pilots only, the anchors at the target budget are predicted from the pilots'
    level (a user's one-setting loop: 0.558 +- 0.007 predicted, 0.638 measured): marked,
    and the note says why."""
    data, out = tmp_path / "data", tmp_path / "p.json"
    base = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--data", str(data)]
    assert runner.invoke(app, ["race", *base, "--engine", "sim", "--max-runs", "4", "--quiet"]).exit_code == 0
    res = runner.invoke(app, ["suggest", *base, "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    props = read_proposals(out).proposals
    assert props and all(p.budget == 1e16 and p.reason.startswith("anchor") for p in props)
    assert all(p.prediction and (p.prediction.extrapolated_why or "").startswith("no fitted run reached its budget")
               for p in props)
    assert "qwen2.5-1.5b/sparse: no fitted run reached its budget" in " ".join(res.stdout.split())


@pytest.mark.parametrize("name", ["run[v2]", "a[/b]"])
def test_suggest_prints_an_output_path_with_brackets_as_written(tmp_path: Path, name: str) -> None:
    # Printed as rich markup, "run[v2]" lost its "[v2]" and "a[/b]" (a closing tag) was a
    # MarkupError traceback after proposals.json had been written.
    out = tmp_path / name / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.exists() and f"wrote{out}" in "".join(res.output.split())  # however rich wraps it
