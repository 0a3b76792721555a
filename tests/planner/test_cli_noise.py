"""``--noise-sd`` through typer's CliRunner: ``planner race`` records it and its calls rest
on it, ``planner report`` refits with it, ``planner suggest`` takes it, and bad values are
one line before any run."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
RACE = ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse,prm", "--max-runs", "10",
        "--quiet", "--seed", "3"]


def test_a_race_told_the_noise_records_it_and_the_report_refits_with_it(tmp_path: Path) -> None:
    data = tmp_path / "d"
    res = runner.invoke(app, [*RACE, "--data", str(data), "--noise-sd", "sparse=0.01,prm=0.02"])
    assert res.exit_code == 0, res.output
    race = json.loads((data / "regimes.json").read_text())
    assert race["noise_sd"] == {"prm": 0.02, "sparse": 0.01}
    by_reward = {e["reward"]: e for e in race["settings"]}
    assert {r: (e["noise_source"], e["noise_sd"]) for r, e in by_reward.items()} == {
        "sparse": ("stated", 0.01), "prm": ("stated", 0.02)}
    said = " ".join(res.output.split())
    assert "sd*" not in said and "as --noise-sd stated it" in said  # a stated noise is not the fit's guess
    res = runner.invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "r"), "-q"])
    assert res.exit_code == 0, res.output
    refit = json.loads((tmp_path / "r" / "regimes.json").read_text())
    at_target = {e["reward"]: e for e in refit["settings"] if e["budget"] == 1e16 and e["target"] == "native"}
    for e in race["settings"]:
        r = at_target[e["reward"]]  # the same calls: the report fits with the noise the race was told
        assert (r["regime"], r["rho_star"], r["probabilities"]) == (e["regime"], e["rho_star"], e["probabilities"])
        assert (r["noise_source"], r["noise_sd"]) == (e["noise_source"], e["noise_sd"])
    text = (tmp_path / "r" / "report.md").read_text()
    assert "the run noise the race was told (--noise-sd prm=0.02, sparse=0.01)" in text
    # suggest on the race's store without it (or a resumed race) says its calls rest on the guess
    note = (f"note: the race in {data} was told --noise-sd prm=0.02,sparse=0.01; without it these calls rest on the "
            "fit's own guess of the noise")
    base = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse,prm", "--data", str(data)]
    res = runner.invoke(app, [*base, "--out", str(tmp_path / "a.json")])
    assert res.exit_code == 0 and note in " ".join(res.stderr.split()), res.stderr
    res = runner.invoke(app, [*base, "--out", str(tmp_path / "b.json"), "--noise-sd", "sparse=0.01,prm=0.02"])
    assert res.exit_code == 0 and "note: the race in" not in res.stderr, res.stderr
    # A narrower problem is told the race's value for its own reward systems, which it can pass.
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--data", str(data), "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    assert f"note: the race in {data} was told --noise-sd sparse=0.01;" in " ".join(res.stderr.split())
    res = runner.invoke(app, [*RACE, "--data", str(data)])  # resumed: nothing more to run at this cap
    assert res.exit_code == 0 and note in " ".join(res.stderr.split()), res.stderr


def test_no_note_where_the_races_noise_does_not_cover_the_question(tmp_path: Path) -> None:
    data = tmp_path / "d"
    one = ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--max-runs", "4",
           "--quiet", "--data", str(data), "--noise-sd", "0.01"]
    assert runner.invoke(app, one).exit_code == 0
    for rewards, target in (("sparse,prm", "native"), ("sparse", "pass1")):
        res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", rewards,
                                  "--target", target, "--data", str(data), "--out", str(tmp_path / "p.json")])
        assert res.exit_code == 0 and "note: the race in" not in res.stderr, (rewards, target, res.stderr)


def test_the_stated_noise_changes_the_calls_it_rests_on(tmp_path: Path) -> None:
    # The same 8 runs (4 pilots per setting; without a statement the fit guesses 0.006):
    # told a small noise, their spread is signal and the calls sharpen; told a large one,
    # it is noise and they stay near the prior's even split.
    docs = {}
    for name, extra in (("guessed", []), ("quiet", ["--noise-sd", "0.002"]), ("loud", ["--noise-sd", "0.05"])):
        res = runner.invoke(app, [*RACE, "--max-runs", "8", "--data", str(tmp_path / name), *extra])
        assert res.exit_code == 0, res.output
        docs[name] = {e["reward"]: e for e in json.loads((tmp_path / name / "regimes.json").read_text())["settings"]}
    assert {e["noise_source"] for e in docs["guessed"].values()} == {"inferred"}
    for r in ("sparse", "prm"):
        quiet, loud = docs["quiet"][r], docs["loud"][r]
        assert (quiet["noise_sd"], loud["noise_sd"]) == (0.002, 0.05)
        assert max(quiet["probabilities"].values()) > max(loud["probabilities"].values()) + 0.05
        assert quiet["stake_sd"] > 10 * loud["stake_sd"]  # the same gap, in 25 times smaller sds


def test_bad_noise_sd_is_one_line_before_any_run(tmp_path: Path) -> None:
    data = tmp_path / "d"
    for extra, says in (
        (["--noise-sd", "sparse=0.01"], "error: noise-sd: no value for prm; give one sd for every reward system"),
        (["--noise-sd", "-1"], "error: noise-sd: a run noise sd must be a positive finite number, got '-1'"),
        (["--noise-sd", "sparse=0.01,dense=0.02,prm=0.01"], "error: noise-sd: dense is not a reward system of this race"),
        (["--noise-sd", "0.01", "--strategy", "grid"],
         "error: noise-sd: only the ours strategy models the run noise, not 'grid'; drop --noise-sd"),
    ):
        res = runner.invoke(app, [*RACE, "--data", str(data), *extra])
        assert res.exit_code == 2 and res.stderr.startswith(says), res.output
        assert len(res.stderr.strip().splitlines()) == 1
        assert not (data / "runs").exists() and not (data / "regimes.json").exists()


def test_suggest_takes_the_noise_and_refuses_a_bad_one(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert runner.invoke(app, [*RACE, "--max-runs", "8", "--data", str(data)]).exit_code == 0
    base = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse,prm", "--data", str(data)]
    stds = {}
    for sd in ("0.001", "0.05"):
        out = tmp_path / f"p{sd}.json"
        res = runner.invoke(app, [*base, "--noise-sd", sd, "--out", str(out)])
        assert res.exit_code == 0, res.output
        stds[sd] = [p["prediction"]["std"] for p in json.loads(out.read_text())["proposals"]]
    assert len(stds["0.05"]) == len(stds["0.001"]) >= 1
    assert max(stds["0.05"]) > max(stds["0.001"])  # a noisier world leaves the frontier less certain
    res = runner.invoke(app, [*base, "--noise-sd", "sparse=abc"])
    assert res.exit_code == 2 and res.stderr.startswith("error: noise-sd sparse: 'abc' is not a number"), res.output
    # Before anything else is said or written: no note on the missing store, no proposals.
    nowhere = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse,prm",
               "--data", str(tmp_path / "none"), "--out", str(tmp_path / "p.json"), "--noise-sd", "sparse=0.01"]
    res = runner.invoke(app, nowhere)
    assert res.exit_code == 2 and res.stderr.strip().splitlines() == [
        "error: noise-sd: no value for prm; give one sd for every reward system (--noise-sd 0.01) or one per reward "
        "system (--noise-sd sparse=0.01,prm=0.02)"], res.stderr
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "none").exists()


def test_an_sd_given_in_percent_is_warned_of_and_used(tmp_path: Path) -> None:
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--out", str(tmp_path / "p.json"), "--noise-sd", "1"])
    assert res.exit_code == 0, res.output
    assert "warning: noise-sd: 1 is more than the sd of any metric in [0, 1] can be (0.5)" in res.stderr
