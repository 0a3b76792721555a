"""``planner report`` on a sim campaign: every file, self-contained HTML, honest labels,
regimes.json, and the empty / all-failed cases.

The campaign and its report are built once (``test_report_support.built_report``); the
GP fits behind them are the slow part.
"""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_report_support import (
    FAILED_ERROR,
    MODELS,
    REWARDS,
    TARGET_BUDGET,
    built_report,
    make_campaign,
)
from typer.testing import CliRunner

from planner.cli import app
from planner.report import build_report
from planner.report.race_summary import read_race
from planner.schema import RunRecord

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIXED_FIGURES = ("flop-split", "rho-star-vs-size", "target-disagreement", "loo-diagnostics")


@pytest.fixture(scope="module")
def built():
    return built_report()


def _figure_stems(out: Path) -> set[str]:
    return {p.stem for p in (out / "figures").iterdir()}


def test_report_writes_every_file(built) -> None:
    out = built.out
    for name in ("report.md", "report.html", "regimes.json"):
        assert (out / name).stat().st_size > 500, name
    stems = _figure_stems(out)
    for stem in FIXED_FIGURES:
        assert stem in stems
    # one frontier per (model, reward) at the pilot budget and at the race's target budget
    frontiers = {s for s in stems if s.startswith("frontier-native-")}
    assert len(frontiers) == len(MODELS) * len(REWARDS) * 2
    for stem in stems:
        png, svg = out / "figures" / f"{stem}.png", out / "figures" / f"{stem}.svg"
        assert png.read_bytes()[:8] == PNG_MAGIC
        root = ET.parse(svg).getroot()  # well-formed XML
        assert root.tag.endswith("svg")
    assert sorted(built.result.figures) == sorted((out / "figures").iterdir())


def test_html_is_self_contained(built) -> None:
    html = (built.out / "report.html").read_text()
    assert "http://" not in html and "https://" not in html
    n_figures = len(_figure_stems(built.out))
    imgs = re.findall(r"<img [^>]*>", html)
    assert len(imgs) == n_figures
    assert all('src="data:image/png;base64,' in i for i in imgs)
    # nothing else is loaded: no src/href but data: URLs and in-page anchors
    for ref in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert ref.startswith(("data:", "#")), ref
    # the failed run's error (which holds a web address) is shown, defused
    assert "pytorch.org" in html and "https:&#47;&#47;pytorch.org" in html


def test_every_figure_states_engine_and_data(built) -> None:
    data_dir = str(built.data)
    html = (built.out / "report.html").read_text()
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)
    assert len(captions) == len(_figure_stems(built.out))
    for cap in captions:
        assert "SIMULATED" in cap and data_dir in cap
    for svg in (built.out / "figures").glob("*.svg"):
        text = svg.read_text()
        assert "SIMULATED" in text and data_dir in text, svg.name


def test_regimes_json(built) -> None:
    doc = json.loads((built.out / "regimes.json").read_text())
    assert doc["status"] == "ok" and doc["simulated"] is True and doc["target"] == "native"
    from planner.versions import tool_version

    assert doc["software"] == {"race-planner": {tool_version(): 30}}  # the sim's cards name no trl
    from importlib.metadata import version

    assert doc["fitted_with"]["race-planner"] == tool_version()
    assert doc["fitted_with"]["botorch"] == version("botorch") and doc["fitted_with"]["torch"] == version("torch")
    assert doc["runs"] == {"ok": 30, "failed": 2, "failed_attempts": 2, "corrupt": 0}
    # The race's decision budget has no runs: its calls are predictions, and the status says so.
    assert (f"and {len(MODELS) * len(REWARDS)} at a budget with no run of its own (the race's decision "
            "budget): predicted from the others") in doc["message"]
    assert len(doc["settings"]) == len(MODELS) * len(REWARDS) * 2
    for s in doc["settings"]:
        lo, hi = s["rho_star_ci"]
        assert 0 < lo <= hi < 1 and 0 < s["rho_star"] < 1
        assert sum(s["probabilities"].values()) == pytest.approx(1.0)
        assert s["regime"] in s["probabilities"]
        assert s["stake"] is None or 0.0 <= s["stake"] < 1.0
        assert s["noise_sd"] > 0  # the stake's scale, from the surrogate
        if s["reward"] in ("sparse", "structured", "dense"):  # rule rewards: no reward FLOPs, so
            assert (s["regime"] == "update-heavy") == (s["rho_star"] > 0.5)  # update-heavy iff rho* > 0.5
            # and the interval is of the optimum within the called regime
            assert (lo > 0.5) if s["regime"] == "update-heavy" else (hi <= 0.5)
    assert set(doc["by_target"]) == {"native", "pass1", "judge"}
    for t, body in doc["by_target"].items():
        assert body["fitted"], t
        assert 0.0 <= body["loo"]["coverage90"] <= 1.0 and body["loo"]["n"] >= 8
    assert len(doc["disagreements"]) == len(doc["settings"])
    for d in doc["disagreements"]:
        for a, b in d["flagged"]:  # flagged pairs really have disjoint intervals
            (la, ha), (lb, hb) = d["optimum_ci"][a], d["optimum_ci"][b]
            assert ha < lb or hb < la
    assert {f["run_id"] for f in doc["failed_runs"]} == {r for r in _failed_ids(built)}
    assert doc["race"]["strategy"] == "ours"


def _failed_ids(built) -> set[str]:
    from planner.engine import open_store

    return {r.run_id for r in open_store(built.data).records(status="failed")}


def test_markdown_sections(built) -> None:
    md = (built.out / "report.md").read_text()
    from planner.versions import tool_version

    assert f"Made with race-planner {tool_version()}." in md
    for heading in ("## Race", "## Regime calls", "## Frontiers", "## rho* against model size",
                    "## Target disagreement", "## FLOP split of every run", "## Surrogate diagnostics",
                    "## Failed runs", "## Compute cards"):
        assert heading in md, heading
    calls = md.split("## Regime calls")[1].split("##")[0]
    assert "| stake |" in calls and "hardly matters" in calls
    assert re.search(r"\| \d\.\d{4} \(\d+\.\d sd\) \|", calls)  # e.g. "| 0.0092 (0.4 sd) |"
    failed = md.split("## Failed runs")[1].split("##")[0]
    for run_id in _failed_ids(built):
        assert run_id in failed
    assert FAILED_ERROR.split(";")[0] in failed
    cards = md.split("## Compute cards")[1]
    assert len([ln for ln in cards.splitlines() if ln.startswith("| ")]) == 1 + 32  # header + every record
    # settings at the race's target budget have no runs there: said so, not hidden
    assert f"{TARGET_BUDGET:.2g}" in md and "extrapolated" in md
    # every figure is referenced with a file that exists
    for rel in re.findall(r"\]\((figures/[^)]+)\)", md):
        assert (built.out / rel).is_file(), rel


def test_the_untrained_policy_is_tabled_and_drawn_and_open_calls_are_bold(built) -> None:
    # A frontier wholly below the untrained policy read as training gains; a P of 0.63 sat
    # unmarked beside the confident calls.
    import numpy as np

    from planner.report.data import base_score
    from runners.store import PilotStore

    ok = PilotStore(built.data).records()
    md = (built.out / "report.md").read_text()
    calls = md.split("## Regime calls")[1].split("\n## ")[0]
    lines = [ln for ln in calls.splitlines() if ln.startswith("| ")]
    assert lines[0].endswith("| untrained |")
    rows = [[c.strip().strip("*") for c in ln.strip("|").split("|")] for ln in lines[2:]]
    assert rows
    for ln, row in zip(lines[2:], rows, strict=True):
        model, reward, p = row[0], row[1], float(row[7])
        want = np.median([r.metrics.native_base for r in ok if (r.model, r.reward) == (model, reward)])
        assert row[-1] == f"{want:.3f}" == f"{base_score(ok, model, reward, 'native'):.3f}"
        # Open as the race holds it: below its confidence, or at its budget with no run there.
        unchecked = float(row[2]) == TARGET_BUDGET and row[3] == "0"
        assert ln.startswith("| **") == (p < 0.9 or unchecked), ln
    assert ("open, a lean, not a call: P below 0.9" in calls) == any(ln.startswith("| **") for ln in lines)
    frontiers = md.split("## Frontiers")[1].split("\n## ")[0]
    assert frontiers.count("Dash-dotted: the untrained policy's native") == frontiers.count("![")
    assert base_score(ok, "no-such-model", "sparse", "native") is None


def test_a_frontier_says_why_its_mean_steps_where_the_plans_mu_changes() -> None:
    import numpy as np

    from planner.regime import RegimeCall
    from planner.report.data import Frontier, SettingAt
    from planner.report.figures import _reuse_note

    grid = np.linspace(0.1, 0.9, 5)
    call = RegimeCall(rho_star=0.5, rho_star_ci=(0.4, 0.6), probabilities={"search-heavy": 1.0}, regime="search-heavy")
    one = Frontier(SettingAt("m", "sparse", 1e16), "native", grid, grid, grid, call, 0.0, reuse=np.ones(5))
    assert _reuse_note(one) == "" and _reuse_note(dataclasses.replace(one, reuse=None)) == ""
    steps = dataclasses.replace(one, reuse=np.array([1.0, 1, 2, 2, 4]))
    assert "(mu: 1 to 4 across this grid)" in _reuse_note(steps)


def test_report_cli_on_empty_dataset(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "No runs found" in res.output
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "No runs found" in md and "No runs found" in html
    assert "http://" not in html and "https://" not in html
    assert json.loads((out / "regimes.json").read_text())["status"] == "empty"
    assert not (out / "figures").exists() or not any((out / "figures").iterdir())


def test_report_cli_writes_beside_the_runs_without_out(tmp_path: Path) -> None:
    """--out defaults to DATA/report (where the main job writes it); the store stays a store."""
    data = tmp_path / "data"
    data.mkdir()
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--quiet"])
    assert res.exit_code == 0, res.output
    assert (data / "report" / "report.md").is_file() and (data / "report" / "report.html").is_file()
    again = CliRunner().invoke(app, ["report", "--data", str(data), "--quiet"])
    assert again.exit_code == 0, again.output  # a second report replaces the first


@pytest.mark.parametrize(("terminated", "code"), [(False, 130), (True, 143)])
@pytest.mark.parametrize("earlier", [False, True])
def test_an_interrupted_report_says_what_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, terminated: bool, code: int, earlier: bool,
) -> None:
    """Ctrl-C or SIGTERM (`timeout`) during `planner report` exited 130 or 143 without a
    word, where race and execute say what they kept: the user could not tell whether OUT
    held a report, nor that an earlier one there may have some figures of the new one."""
    import planner.report as report_pkg
    from planner.cli.app import Terminated

    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    if earlier:
        res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(out), "--quiet"])
        assert res.exit_code == 0, res.output

    def stopped(*args: object, **kwargs: object) -> None:
        raise Terminated() if terminated else KeyboardInterrupt()

    monkeypatch.setattr(report_pkg, "build_report", stopped)
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(out), "--quiet"])
    assert res.exit_code == code, res.output
    said = " ".join(res.stderr.split())
    assert said.startswith("interrupted:") and "rerun the same command" in said, said
    if earlier:
        assert "earlier report" in said
    else:
        assert "no report was written" in said


def test_report_on_all_failed_dataset(tmp_path: Path) -> None:
    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=2,
                         seeds=(0,), only_failed=True)
    res = build_report(data, tmp_path / "out")
    assert res.status == "all-failed"
    md = res.markdown.read_text()
    assert "All 2 attempt(s) of 2 run(s)" in md and "failed" in md and "## Failed runs" in md and "## Compute cards" in md
    doc = json.loads(res.regimes.read_text())
    assert doc["status"] == "all-failed" and doc["settings"] == [] and len(doc["failed_runs"]) == 2
    # the FLOP split of the failed runs is still drawn (their cards are what is left)
    assert {p.name for p in res.figures} == {"flop-split.png", "flop-split.svg"}


def test_report_cli_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["report", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "data:" in res.output
    (tmp_path / "d").mkdir()
    res = runner.invoke(app, ["report", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"),
                              "--target", "pass2"])
    assert res.exit_code == 2 and "target:" in res.output and "pass1" in res.output
    # Into the data directory itself, the report's regimes.json would replace the race's.
    (tmp_path / "d" / "regimes.json").write_text("{}")
    res = runner.invoke(app, ["report", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and res.stderr.startswith("error: out:") and "data directory" in res.stderr
    assert (tmp_path / "d" / "regimes.json").read_text() == "{}"


def test_the_run_noise_each_fit_used_is_shown_with_what_a_later_race_can_state(built) -> None:
    # The campaign's plans ran twice (seeds 0 and 1) in the paper world, whose noise sd is 0.010.
    doc = json.loads((built.out / "regimes.json").read_text())
    for target in ("native", "pass1", "judge"):
        noise = doc["by_target"][target]["noise"]
        assert set(noise) == set(REWARDS)
        assert all(n["source"] == "replicates" and n["replicate_dof"] >= 4 for n in noise.values()), noise
    native = doc["by_target"]["native"]["noise"]
    assert all(0.005 < n["sd"] < 0.02 for n in native.values()), native
    text = " ".join((built.out / "report.md").read_text().split())
    said = ",".join(f"{r}={native[r]['sd']:.3g}" for r in sorted(REWARDS))
    assert f"--target native --rewards prm,sparse --noise-sd {said}" in text
    assert f"| native | sparse | {native['sparse']['sd']:.3g} | seed replicates ({native['sparse']['replicate_dof']} dof) |" in text


def test_only_a_reward_systems_own_replicates_are_offered_to_state() -> None:
    # prm's single replicated pair (1 dof) is mostly the others' pool: not offered; the
    # command names its reward systems, as a race's --noise-sd must.
    from planner.report.data import RunNoise, TargetFit
    from planner.report.document import _noise_blocks

    fit = TargetFit("native", noise={"prm": RunNoise(0.0089, "replicates", 1), "sparse": RunNoise(0.0101, "replicates", 6)})
    notes = [b.text for b in _noise_blocks([fit]) if b.kind == "note"]
    assert len(notes) == 1 and notes[0].endswith("--target native --rewards sparse --noise-sd sparse=0.0101"), notes
    from planner.noise import parse_noise_sd

    assert parse_noise_sd(notes[0].rsplit(" ", 1)[1]) == {"sparse": 0.0101}  # what it offers, the option reads
    alone = TargetFit("native", noise={"prm": RunNoise(0.0089, "replicates", 1)})
    assert not [b for b in _noise_blocks([alone]) if b.kind == "note"]


def test_a_guessed_run_noise_is_shown_as_the_guess_with_nothing_to_state(tmp_path: Path) -> None:
    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS, n_rho=3, seeds=(0,), n_failed=0)
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "o"), "--quiet"])
    assert res.exit_code == 0, res.output
    noise = json.loads((tmp_path / "o" / "regimes.json").read_text())["by_target"]["native"]["noise"]
    assert {r: (n["source"], n["replicate_dof"]) for r, n in noise.items()} == {r: ("inferred", 0) for r in REWARDS}
    text = " ".join((tmp_path / "o" / "report.md").read_text().split())
    assert "| native | sparse |" in text and "the fit's guess (sd\\*)" in text
    assert "Measured by seed replicates" not in text


def test_unreadable_race_summary_is_a_note(tmp_path: Path) -> None:
    (tmp_path / "regimes.json").write_text("{not json")
    doc, note = read_race(tmp_path)
    assert doc is None and note and "ignored" in note
    assert read_race(tmp_path / "missing") == (None, None)


@pytest.mark.parametrize("bad", [0.01, {"sparse": -1}, {"sparse": "x"}, {}, ["sparse", 0.01], {"dense": 0.01},
                                 {"sparse": 0.01, "dense": 0.01}])
def test_a_race_summarys_unusable_noise_sd_is_a_note_and_the_report_fits_without_it(tmp_path: Path, bad: object) -> None:
    from planner.report.race_summary import stated_noise

    race = {"budget": 1e16, "target": "native", "settings": [{"model": "m", "reward": "sparse"}]}
    (tmp_path / "regimes.json").write_text(json.dumps({**race, "noise_sd": {"sparse": 0.01}}))
    doc, note = read_race(tmp_path)
    assert note is None and stated_noise(doc) == {"sparse": 0.01}
    (tmp_path / "regimes.json").write_text(json.dumps({**race, "noise_sd": bad}))
    doc, note = read_race(tmp_path)
    assert doc is not None and stated_noise(doc) is None
    assert note is not None and "noise_sd" in note and note.endswith("the report fits without it"), note


def test_a_truncated_race_summary_is_named_in_plain_words(tmp_path: Path) -> None:
    """A summary cut mid-string read "Unterminated string starting at at line 4": json's
    message ends in "at", before the position it no longer carries."""
    (tmp_path / "regimes.json").write_text('{\n  "schema_version": 1,\n  "strategy": "ou')
    _, note = read_race(tmp_path)
    assert note is not None and "not valid JSON: Unterminated string starting at line 3" in note, note
    assert " at at " not in note


def test_report_cli_warns_of_skipped_records_and_an_unreadable_race_summary(tmp_path: Path) -> None:
    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=1,
                         seeds=(0,), n_failed=0)
    victim = sorted((data / "runs").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    (data / "regimes.json").write_text("{not json")
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "o"), "--quiet"])
    assert res.exit_code == 0, res.output
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 2
    assert any("regimes.json" in w and "ignored" in w for w in warnings)
    assert any("1 unreadable record file(s)" in w and victim.name in w for w in warnings)


def test_a_race_whose_runs_all_failed_says_why_its_refit_is_missing(tmp_path: Path) -> None:
    """The race table's n/a note gives the reason inline: with every run failed no fit was
    tried, so there is no fit note "below" to point at."""
    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=2,
                         seeds=(0,), only_failed=True)
    race = {"budget": TARGET_BUDGET, "target": "native", "strategy": "ours", "rounds": 1, "runs": 2,
            "stop_reason": "max-runs", "confidence": 0.9,
            "settings": [{"model": MODELS[0], "reward": REWARDS[0], "budget": TARGET_BUDGET, "rho_star": 0.5,
                          "rho_star_ci": [0.4, 0.6], "regime": "update-heavy",
                          "probabilities": {"search-heavy": 0.5, "update-heavy": 0.5, "reward-heavy": 0.0},
                          "runs": 0, "decided": "open"}]}
    (data / "regimes.json").write_text(json.dumps(race))
    md = build_report(data, tmp_path / "out").markdown.read_text()
    assert "n/a: the native surrogate could not be fitted (no ok run measured it)." in md
    assert "(below)" not in md


def test_report_with_too_few_runs_to_fit(tmp_path: Path) -> None:
    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=1,
                         seeds=(0,), n_failed=0)
    res = build_report(data, tmp_path / "out", progress=True)  # progress display on a non-tty
    assert res.status == "no-fit"
    md = res.markdown.read_text()
    assert "could not be fitted" in md and "need at least 2" in md
    assert "## Compute cards" in md and "## Regime calls" not in md
    doc = json.loads(res.regimes.read_text())
    assert doc["status"] == "no-fit" and not doc["by_target"]["native"]["fitted"]


def test_predicted_value_is_the_mean_at_rho_star_not_the_frontier_maximum() -> None:
    import numpy as np

    from planner.regime import RegimeCall
    from planner.report.data import Frontier, SettingAt

    grid = np.linspace(0.1, 0.9, 9)
    mean = np.array([0.9, 0.5, 0.5, 0.5, 0.6, 0.7, 0.5, 0.5, 0.5])  # peak at 0.1, call at 0.6
    call = RegimeCall(0.6, (0.5, 0.7), "update-heavy", {"search-heavy": 0.2, "update-heavy": 0.8, "reward-heavy": 0})
    f = Frontier(SettingAt("m", "sparse", 1e16), "native", grid, mean, np.full(9, 0.01), call, 0.0)
    assert f.predicted_at_rho_star == pytest.approx(0.7) and f.to_dict()["predicted_at_rho_star"] == pytest.approx(0.7)


def test_race_calls_the_refit_does_not_repeat_are_flagged_and_odd_summaries_render(tmp_path: Path) -> None:
    from test_report_support import write_race_summary

    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=("sparse",), n_rho=5)
    doc = write_race_summary(data)
    for e in doc["settings"]:
        e["regime"] = "reward-heavy"  # no rule-reward refit calls that
    doc["settings"][0]["rho_star"] = None  # a hand-edited summary must not sink the report
    (data / "regimes.json").write_text(json.dumps(doc))
    res = build_report(data, tmp_path / "out", target="native", progress=False)
    md = res.markdown.read_text()
    race = md.split("## Race")[1].split("## Regime calls")[0]
    assert "The refit calls another regime than the race for" in race and re.search(r"\| (\*\*)?nan(\*\*)? \|", race)
    assert "decided" in race and "decided the" not in race  # no claim the race decided anything
    # Rounds are the last invocation's, runs every attempt in the store: said as such.
    assert f"its last invocation ran {doc['rounds']} round(s)" in race
    assert f"Its settings have {doc['runs']} attempt(s) in the store" in race
    for line in md.splitlines():  # captions: rho* is a name, never the end of the italics
        if line.startswith("*") and "rho" in line:
            assert "rho\\*" in line and "rho* " not in line


def test_report_and_suggest_name_the_path_option_that_is_wrong(tmp_path: Path) -> None:
    runner = CliRunner()
    afile = tmp_path / "proposals.json"
    afile.write_text("{}")
    res = runner.invoke(app, ["report", "--data", str(afile), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "data: " in res.output and "is a file" in res.output
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--data", str(tmp_path / "d"),
                              "--pending", str(tmp_path / "nosuch.json"), "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2 and "pending: no such file" in res.output, res.output
    assert not (tmp_path / "r").exists() and not (tmp_path / "p.json").exists()


def test_a_dollar_in_the_data_path_is_text_and_a_hand_edited_summary_does_not_sink_the_report(tmp_path: Path) -> None:
    # "$" would start matplotlib mathtext: unbalanced, savefig raised and no report came out.
    data = make_campaign(tmp_path / "cost_$5_$6", models=MODELS[:1], rewards=REWARDS[:1], n_rho=4,
                         seeds=(0,), n_failed=0)
    res = build_report(data, tmp_path / "out")
    assert res.status == "ok" and res.figures
    # The race summary names the setting but its interval and probabilities were edited into
    # shapes read_race lets through: they read as missing, the rest of the report is written.
    first = json.loads(res.regimes.read_text())["settings"][0]
    race = {"budget": first["budget"], "target": "native", "settings": [
        {"model": first["model"], "reward": first["reward"], "rho_star_ci": [None, None], "regime": "search-heavy",
         "probabilities": [0.2, 0.8]},
        {"model": first["model"], "reward": first["reward"], "rho_star_ci": "0.4-0.6", "probabilities": None}]}
    (data / "regimes.json").write_text(json.dumps(race))
    res = build_report(data, tmp_path / "out2")
    assert "## Race" in res.markdown.read_text() and "[nan, nan]" in res.markdown.read_text()
    assert any("probabilities is not a table of numbers; shown as missing" in w for w in res.warnings)


def test_a_data_and_out_folder_whose_names_are_not_utf_8_get_their_report(tmp_path: Path) -> None:
    """A folder named in latin-1 is held by Python with a surrogate (runs_\\udcff), which no
    UTF-8 writer takes: the figure footers, pages and the lines printed after naming it were
    a traceback and no report. The report is written and names the folder with that byte
    escaped; its regimes.json keeps the path itself, for a reader to open."""
    import os

    data = make_campaign(tmp_path / os.fsdecode(b"runs_\xff"), models=MODELS[:1], rewards=REWARDS[:1], n_rho=4,
                         seeds=(0,), n_failed=0)
    victim = sorted((data / "runs").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:100])  # its path in the corrupt table and the warning
    (data / "regimes.json").write_text("{not json")  # its path in a note and a warning
    out = tmp_path / os.fsdecode(b"report_\xe9")
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    shown, shown_out = str(data).replace("\udcff", "\\xff"), str(out).replace("\udce9", "\\xe9")
    assert f"report: {shown_out}{os.sep}report.html" in res.stdout
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 2 and all(shown in w for w in warnings), res.stderr
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert shown in md and shown in html and victim.name in md
    assert all(shown in svg.read_text() for svg in (out / "figures").glob("*.svg"))
    assert json.loads((out / "regimes.json").read_text())["data"] == str(data)


def test_a_model_outside_the_registry_is_called_as_any_other(tmp_path: Path) -> None:
    from runners.store import PilotStore

    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=4, seeds=(0,), n_failed=0)
    mine = PilotStore(tmp_path / "mine")
    for r in PilotStore(data).records():
        plan = r.plan.model_copy(update={"model": "my-policy"})
        mine.add(r.model_copy(update={"model": "my-policy", "plan": plan}))
    res = build_report(mine.root, tmp_path / "out")
    (entry,) = json.loads(res.regimes.read_text())["settings"]
    assert entry["model"] == "my-policy"
    # rho* held to measured allocations, and the stake on its noise scale, as for a registry model.
    assert entry.get("rho_star_support") in ("measured", "posterior-mean") and entry.get("noise_sd", 0) > 0


def test_out_that_is_another_campaign_or_would_clash_is_refused_before_any_fit(tmp_path: Path) -> None:
    """--out at another campaign replaced its race summary; a file or folder where the
    report writes was found only after every fit, and named a temporary."""
    runner = CliRunner()
    data = tmp_path / "d"
    data.mkdir()

    def refused(out: Path) -> str:
        res = runner.invoke(app, ["report", "--data", str(data), "--out", str(out), "--quiet"])
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
        return res.stderr.strip()

    other = tmp_path / "other"
    (other / "runs").mkdir(parents=True)
    assert refused(other).startswith(f"error: out: {str(other)!r} is a pilot store")
    race = tmp_path / "race"
    race.mkdir()
    (race / "regimes.json").write_text('{"budget": 1e16, "settings": []}')
    assert "is not an earlier report's (a race's summary?)" in refused(race)
    assert (race / "regimes.json").read_text() == '{"budget": 1e16, "settings": []}'
    for name in ("report.md", "report.html", "regimes.json"):  # report.md read "give a file name"
        clash = tmp_path / f"clash-{name}"
        (clash / name).mkdir(parents=True)
        assert "is a directory where the report writes a file" in refused(clash)
    figs = tmp_path / "figs"
    figs.mkdir()
    (figs / "figures").write_text("x")
    assert "is a file where the report writes its figures" in refused(figs)
    assert refused(tmp_path / ("x" * 300)).startswith("error: out: the name")
    res = runner.invoke(app, ["report", "--data", str(data / "runs"), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "data:" in res.output  # no such directory
    (data / "runs").mkdir()
    (data / "failed").mkdir()  # a store's folders (a lone empty runs/ could be anything)
    res = runner.invoke(app, ["report", "--data", str(data / "runs"), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and res.stderr.strip() == (
        f"error: data: {str(data / 'runs')!r} is a pilot store's runs/ folder; pass the store itself, {str(data)!r}")
    # Nor into a store's folders, empty or not: in corrupt/ its files were listed as wrecks.
    for folder in ("corrupt", "runs"):
        res = runner.invoke(app, ["report", "--data", str(data), "--out", str(data / folder)])
        assert res.exit_code == 2 and res.stderr.strip() == (
            f"error: out: {str(data / folder)!r} is a pilot store's {folder}/ folder; give a folder of its own, "
            f"e.g. {str(data / 'report')!r}")
    # An earlier report's folder is fine to write again.
    ok = runner.invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "r"), "--quiet"])
    assert ok.exit_code == 0, ok.output
    again = runner.invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "r"), "--quiet"])
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize(("edit", "why"), [
    ({"model": 5}, "a setting's model or reward is not a name"),
    ({"target": "bogus"}, "target 'bogus' is not one of"),
    ({"pilot_budget": "abc"}, "pilot_budget 'abc' is not a positive number"),
])
def test_a_race_summary_with_a_field_of_the_wrong_kind_is_ignored_with_a_note(
        tmp_path: Path, edit: dict, why: str) -> None:
    """These crashed the report (a model that is a number), blamed --target for the file's
    target, or failed every fit with advice to run more pilots."""
    from test_report_support import write_race_summary

    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,),
                         n_failed=0)
    doc = write_race_summary(data)
    if "model" in edit:
        doc["settings"][0].update(edit)
    else:
        doc.update(edit)
    (data / "regimes.json").write_text(json.dumps(doc))
    _, note = read_race(data)
    assert note is not None and why in note and note.endswith("ignored")
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "o"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert any(why in ln for ln in res.stderr.splitlines() if ln.startswith("warning: "))
    assert json.loads((tmp_path / "o" / "regimes.json").read_text())["status"] == "ok"


@pytest.mark.parametrize(("edit", "why"), [
    ({"rho_star": "abc"}, "rho_star 'abc' is not a number in [0, 1]"),
    ({"regime": "balanced"}, "regime 'balanced' is not one of search-heavy"),
    ({"probabilities": {"update-heavy": "high"}}, "probabilities is not a table of numbers"),
])
def test_a_hand_edited_call_in_a_race_summary_is_shown_as_missing_with_a_note(
        tmp_path: Path, edit: dict, why: str) -> None:
    """These showed as nan in the report without a word."""
    from test_report_support import write_race_summary

    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,),
                         n_failed=0)
    doc = write_race_summary(data)
    doc["settings"][0].update(edit)
    (data / "regimes.json").write_text(json.dumps(doc))
    race, note = read_race(data)
    assert race is not None and note is not None and why in note and note.endswith("; shown as missing")
    res = CliRunner().invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "o"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert any(why in ln for ln in res.stderr.splitlines() if ln.startswith("warning: "))
    assert "## Race" in (tmp_path / "o" / "report.md").read_text()


def _store_with_a_retried_run(tmp_path: Path) -> tuple[Path, RunRecord]:
    """A store with one run that never succeeded and one ok run (returned) that failed
    twice before it."""
    from runners.store import PilotStore

    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,),
                         n_failed=1)
    store = PilotStore(data)
    ok = store.records()[0]
    for attempt in (1, 2):
        store.add(ok.model_copy(update={"status": "failed", "error": FAILED_ERROR, "attempt": attempt}))
    return data, ok


def test_status_line_counts_failed_attempts_on_runs_that_later_succeeded(tmp_path: Path) -> None:
    """Two failed attempts before an ok record and one run that never succeeded: "3 failed
    attempt(s), 2 of them on runs that later succeeded" (it said 1, counting runs)."""
    data, _ = _store_with_a_retried_run(tmp_path)
    res = build_report(data, tmp_path / "out", progress=False)
    assert "1 failed run(s) (3 failed attempt(s), 2 of them on runs that later succeeded)" in (
        res.markdown.read_text())
    # The summary's counts say the same: runs that never succeeded, and every attempt apart.
    runs = json.loads(res.regimes.read_text())["runs"]
    assert runs == {"ok": 2, "failed": 1, "failed_attempts": 3, "corrupt": 0}  # 3 rho, one failing


def test_budgets_a_few_percent_apart_are_told_apart_and_undrawn_panels_are_named(tmp_path: Path) -> None:
    """Five budgets: the size figure draws four (holding as many runs, the larger ones) and
    its caption names the fifth (it was dropped without a word); 1e16 and 1.04e16 read
    "1e+16" twice."""
    data = tmp_path / "data"
    for b in (1e16, 1.04e16, 3e16, 1e17, 3e17):
        make_campaign(data, models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,), n_failed=0, budget=b)
    res = build_report(data, tmp_path / "out", progress=False)
    md = res.markdown.read_text()
    assert "| 1e+16 |" in md and "| 1.04e+16 |" in md
    cap = next(ln for ln in md.splitlines() if ln.startswith("*rho\\* (argmax"))
    assert "Panels for the 4 budgets holding the most runs (then settings, then the larger); not drawn: 1e+16 FLOPs" in cap
    # 1e16 and 1.04e16 count as measured at each other (rho* is held to both's allocations):
    # the table and the frontier figure say so; 3e16 is too far for either.
    rows = {ln.split("|")[3].strip(): ln.split("|")[4].strip() for ln in md.replace("**", "").splitlines()
            if ln.startswith(f"| {MODELS[0]} | {REWARDS[0]} |")}  # bold: a call below the confidence
    assert rows["1e+16"] == "3 (+3 near)" and rows["1.04e+16"] == "3 (+3 near)" and rows["3e+16"] == "3"
    assert "runs (+k near): k more runs at budgets within 1.5x" in md
    caps = [ln for ln in md.splitlines() if ln.startswith("*Frontier of")]
    assert sum("Hollow diamonds: 3 run(s) at budgets within 1.5x" in c for c in caps) == 2


def test_a_report_written_again_leaves_no_figure_of_the_earlier_one(tmp_path: Path) -> None:
    """Figures the new report no longer draws stayed in figures/, passing for its own."""
    ok = make_campaign(tmp_path / "ok", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,), n_failed=0)
    failed = make_campaign(tmp_path / "failed", models=MODELS[:1], rewards=REWARDS[:1], n_rho=2, seeds=(0,),
                           only_failed=True)
    out = tmp_path / "out"
    first = build_report(ok, out, progress=False)
    assert len(first.figures) > 2
    (out / "figures" / "mine.txt").write_text("not a figure")  # not the report's: kept
    (out / "figures" / "mine.png").write_bytes(b"a user's own image")  # nor this: once deleted
    again = build_report(failed, out, progress=False)
    assert {p.name for p in (out / "figures").iterdir()} == {p.name for p in again.figures} | {"mine.txt",
                                                                                                "mine.png"}


def test_a_guessed_noise_and_a_predicted_rho_star_are_marked(tmp_path: Path) -> None:
    """One seed per plan: the stake's sd is the fit's guess (sd*), as the race table marks
    it; a budget whose runs lie far from rho* shows rho* as a prediction (rho*+)."""
    data = make_campaign(tmp_path / "d", models=MODELS[:1], rewards=REWARDS[:1], n_rho=4, seeds=(0,), n_failed=0)
    res = build_report(data, tmp_path / "out", target="native", progress=False)
    calls = res.markdown.read_text().split("## Regime calls")[1].split("\n## ")[0]
    assert re.search(r"\| \d\.\d{4} \(\d+\.\d sd\\\*\) \|", calls)
    assert "> sd*: that noise is the fit's guess" in calls
    doc = json.loads((tmp_path / "out" / "regimes.json").read_text())
    supports = {s.get("rho_star_support") for s in doc["settings"]}
    assert ("posterior-mean" in supports) == ("rho*+: a prediction" in calls)


def test_the_race_table_says_decided_not_merely_confident() -> None:
    # A call at the confidence that its validation runs had not checked was "confident yes"
    # beside a paragraph counting it undecided.
    from planner.report.document import _decided

    assert _decided({"decided": "open", "confident": True}) == "open (unchecked)"
    assert _decided({"decided": "open", "confident": False}) == "open"
    assert _decided({"decided": "confident", "confident": True}) == "confident"
    assert _decided({"decided": "indifferent", "confident": False}) == "indifferent"
    assert _decided({"confident": True}) == "confident"  # a summary from before "decided"
    assert _decided({"decided": 7, "confident": False}) == "open"  # hand-edited: read as missing


def test_a_store_whose_runs_started_from_different_weights_is_warned_of(tmp_path: Path) -> None:
    """Stores written before such runs were refused (planner.engine.check_same_weights) can
    mix two pretraining draws; the report's fits then answer for neither."""
    from planner.report.data import mixed_weights
    from runners.store import PilotStore

    src = make_campaign(tmp_path / "src", models=MODELS[:1], rewards=REWARDS[:1], n_rho=2, seeds=(0,), n_failed=0)
    recs = PilotStore(src).records()
    assert mixed_weights(recs) == []  # sim runs name no weights
    data = PilotStore(tmp_path / "data")
    for i, r in enumerate(recs):
        digest = f"sha256:{'a' if i % 2 else 'b'}{i % 2}" + "0" * 62
        data.write(r.model_copy(update={"provenance": {**r.provenance, "policy_weights": digest}}))
    mixed = mixed_weights(data.records())
    assert len(mixed) == 1 and f"policy {MODELS[0]} started from 2 different weights" in mixed[0]
    assert recs[0].run_id in mixed[0] and recs[1].run_id in mixed[0]
    res = CliRunner().invoke(app, ["report", "--data", str(data.root), "--out", str(tmp_path / "o"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert any(ln.startswith(f"warning: The runs of policy {MODELS[0]} started from 2") for ln in res.stderr.splitlines())
    md = (tmp_path / "o" / "report.md").read_text()
    assert "**Warning:** The runs of policy" in md
    assert json.loads((tmp_path / "o" / "regimes.json").read_text())["mixed_weights"] == mixed


def test_a_store_that_mixes_worlds_is_warned_of_by_report_and_suggest(tmp_path: Path) -> None:
    """race and execute refuse such runs (check_same_source); a store put together by hand
    was fitted by suggest and report without a word."""
    from planner.cli import app as planner_app
    from planner.engine import mixed_sources
    from runners.store import PilotStore

    src = make_campaign(tmp_path / "src", models=MODELS[:1], rewards=REWARDS[:1], n_rho=2, seeds=(0,), n_failed=0)
    recs = PilotStore(src).records()
    assert mixed_sources(recs) is None
    old = [r.model_copy(update={"provenance": {k: v for k, v in r.provenance.items() if k != "world_sha256"}})
           for r in recs]
    assert mixed_sources(old[:1] + recs[1:]) is None  # a key older records lack is not compared
    other = recs[1].model_copy(update={"provenance": {**recs[1].provenance, "world_sha256": "0" * 64}})
    assert mixed_sources([old[0], recs[0], other]) is not None  # ... but the next record's is
    data = PilotStore(tmp_path / "data")
    for i, r in enumerate(recs):
        data.write(r.model_copy(update={"provenance": {**r.provenance, "world": "noisy" if i else r.provenance["world"]}}))
    line = mixed_sources(data.records())
    assert line is not None and "world 'noisy'" in line and recs[0].run_id in line and recs[1].run_id in line
    res = CliRunner().invoke(app, ["report", "--data", str(data.root), "--out", str(tmp_path / "o"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "The store mixes runs of engine 'sim'" in (tmp_path / "o" / "report.md").read_text()
    res = CliRunner().invoke(planner_app, ["suggest", "--budget", "1e16", "--models", MODELS[0], "--rewards",
                                           REWARDS[0], "--data", str(data.root), "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 0 and "warning: the store mixes runs of" in res.stderr


def test_the_race_paragraph_does_not_call_runs_measuring_its_target_all_its_ok_runs(tmp_path: Path) -> None:
    """A race setting's ``runs`` counts its runs that measured the race's target (ok runs
    without a value are among ``failed_runs``, docs/planner.md): with 2 of 12 ok runs lacking
    the target, the paragraph said "10 of them ok runs" of a store holding 12 and no failure."""
    from test_report_support import write_race_summary

    from runners.store import PilotStore

    src = make_campaign(tmp_path / "src", models=MODELS[:1], rewards=REWARDS[:1], n_rho=4, seeds=(0, 1, 2),
                        n_failed=0)
    store = PilotStore(tmp_path / "data")
    for i, r in enumerate(PilotStore(src).records()):  # two runs did not measure pass1
        store.write(r.model_copy(update={"metrics": r.metrics.model_copy(update={"pass1": None})}) if i < 2 else r)
    data = store.root
    doc = write_race_summary(data, budget=1e16)
    doc.update(target="pass1", runs=12)
    doc["settings"] = [{**doc["settings"][0], "target": "pass1", "runs": 10, "failed_runs": 2}]
    (data / "regimes.json").write_text(json.dumps(doc))
    res = build_report(data, tmp_path / "out", progress=False)
    race = res.markdown.read_text().split("## Race")[1].split("\n## ")[0]
    assert "10 of them ok runs." not in race
    assert "10 of them ok runs measuring pass1" in race


def test_runs_counted_at_a_budget_are_those_that_measured_the_target(tmp_path: Path) -> None:
    """Runs at 1.2e16 without a native value: the table counted them at 1e16 ("3 (+3 near)")
    and the frontier's caption promised 3 hollow diamonds the figure cannot draw (it draws
    runs with a value); at 1.2e16 "3" runs, none of which the native fit saw."""
    from runners.store import PilotStore

    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,), n_failed=0)
    src = make_campaign(tmp_path / "src", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,), n_failed=0,
                        budget=1.2e16)
    store = PilotStore(data)
    for r in PilotStore(src).records():
        store.write(r.model_copy(update={"metrics": r.metrics.model_copy(update={"native": None})}))
    res = build_report(data, tmp_path / "out", target="native", progress=False)
    md = res.markdown.read_text()
    rows = {ln.split("|")[3].strip(): ln.split("|")[4].strip() for ln in md.replace("**", "").splitlines()
            if ln.startswith(f"| {MODELS[0]} | {REWARDS[0]} |")}  # bold: a call below the confidence
    assert rows == {"1e+16": "3", "1.2e+16": "0 (+3 near)"}
    caps = [ln for ln in md.splitlines() if ln.startswith("*Frontier of")]
    assert not any("Hollow diamonds" in c for c in caps if "/ 1e+16 under" in c)


def test_the_failed_runs_table_marks_attempts_of_runs_that_later_succeeded(tmp_path: Path) -> None:
    """The status line says "1 failed run(s) (3 failed attempt(s), 2 of them on runs that
    later succeeded)"; the "Failed runs" table listed the 3 attempts alike, the 2 of a run
    the report fits as ok among them."""
    data, ok = _store_with_a_retried_run(tmp_path)
    md = build_report(data, tmp_path / "out", progress=False).markdown.read_text()
    rows = [ln for ln in md.split("## Failed runs")[1].split("\n## ")[0].splitlines() if ln.startswith("| ")][1:]
    assert len(rows) == 3
    later = [ln for ln in rows if "later ok" in ln]
    assert len(later) == 2 and all(ln.startswith(f"| {ok.run_id} |") for ln in later)


def test_a_race_setting_the_report_does_not_refit_is_explained(tmp_path: Path) -> None:
    """A race capped before a setting's first run still calls it (its surrogate's prediction
    from the other settings; runs 0); the report fits no setting without a run of the target
    and showed "n/a" in the refit column without a word."""
    from test_report_support import write_race_summary

    data = make_campaign(tmp_path / "data", models=MODELS[:1], rewards=REWARDS[:1], n_rho=3, seeds=(0,), n_failed=0)
    write_race_summary(data)  # four settings, one with runs
    md = build_report(data, tmp_path / "out", progress=False).markdown.read_text()
    race = md.split("## Race")[1].split("\n## ")[0]
    assert race.count("| n/a |") + race.count("| **n/a** |") == 3
    assert "n/a: no run of the setting measured native" in race


def test_a_race_reward_whose_runs_all_failed_leaves_the_others_stated_noise_to_the_fit() -> None:
    """The race stated sparse and prm; a store whose prm runs all failed has no prm to state
    it for, and the surrogate refuses a statement for a reward system it does not fit."""
    from planner.report.data import _fit
    from planner.strategies import RaceProblem, make_strategy
    from tests.planner.fake_runs import S, run

    ok = [run(p, {S: 0.6}) for p in make_strategy("ours", RaceProblem((S,), budget=1e16, pilot_budget=1e15), 0).ask()]
    race = {"target": "native", "noise_sd": {"sparse": 0.02, "prm": 0.03},
            "settings": [{"model": S.model, "reward": "sparse"}, {"model": S.model, "reward": "prm"}]}
    model, fit = _fit("native", ok, race)
    assert fit.error is None and model is not None
    assert model.noise_source("sparse") == "stated"
    assert model.run_noise_variance("sparse") == pytest.approx(0.02**2)


@pytest.mark.parametrize(("rmse", "coverage", "source", "warns"), [
    (0.019, 0.80, "inferred", True),  # the main job's store: sd* 0.0047, P = 1.00
    (0.019, 0.90, "inferred", False),  # the intervals held: the fit knew its error
    (0.008, 0.80, "inferred", False),  # an error of under two guessed sds
    (0.019, 0.80, "replicates", False),  # measured noise is not a guess
])
def test_a_guessed_noise_the_held_out_runs_contradict_is_warned_of(rmse: float, coverage: float, source: str,
                                                                  warns: bool) -> None:
    from types import SimpleNamespace

    from planner.regime import RegimeCall
    from planner.report.document import _too_sure

    call = RegimeCall(rho_star=0.75, rho_star_ci=(0.75, 0.97), regime="update-heavy",
                      probabilities={"update-heavy": 1.0}, extra={"noise_sd": 0.0047, "noise_source": source})
    fit = SimpleNamespace(loo=SimpleNamespace(rmse=rmse, coverage90=coverage),
                          frontiers={"s": SimpleNamespace(call=call)})
    said = _too_sure(fit)
    assert (said is not None) == warns
    if said:
        assert said.startswith("The fit's guessed run noise (sd* 0.0047) is 4.0x smaller than its leave-one-out "
                               "error (RMSE 0.019), and 80% of the held-out runs")
    assert _too_sure(SimpleNamespace(loo=None, frontiers=fit.frontiers)) is None


def test_a_rho_star_on_one_unreplicated_run_is_said_and_the_words_come_first(tmp_path: Path) -> None:
    one = make_campaign(tmp_path / "one", models=MODELS[:1], rewards=REWARDS[:1], n_rho=4, seeds=(0,), n_failed=0)
    md = build_report(one, tmp_path / "o1", target="native", progress=False).markdown.read_text()
    calls = md.split("## Regime calls")[1].split("\n## ")[0]
    held = [ln for ln in calls.splitlines() if ln.startswith("| ") and re.search(r"\| \d\.\d\d \|", ln)]
    assert held  # a rho* held to a run, which is then that one run
    assert "> rho* rests on one run for " in calls
    two = make_campaign(tmp_path / "two", models=MODELS[:1], rewards=REWARDS[:1], n_rho=4, seeds=(0, 1), n_failed=0)
    md2 = build_report(two, tmp_path / "o2", target="native", progress=False).markdown.read_text()
    assert "rests on one run" not in md2
    # Defined before the first table uses them.
    assert md.index("> Words: rho is the update fraction") < md.index("| model |")
    assert f"<title>RACE regime report: {tmp_path.name}/one</title>" in (tmp_path / "o1" / "report.html").read_text()


def test_bold_calls_follow_the_races_own_decision_rule_and_the_title_names_the_campaign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A call the race counted "indifferent" (expected loss under --indifference) was bold as
    # "a lean, not a call"; a hand-edited confidence of 0.3, which no race takes, unbolded all.
    from test_report_support import write_race_summary

    camp = tmp_path / "camp"
    data = make_campaign(camp / "data", models=MODELS[:1], rewards=REWARDS, n_rho=3, seeds=(0,), n_failed=0)
    doc = write_race_summary(data)

    def bold(**edit: object) -> int:
        (data / "regimes.json").write_text(json.dumps({**doc, **edit}))
        md = build_report(Path("data"), camp / "out", target="native", progress=False).markdown.read_text()
        calls = md.split("## Regime calls")[1].split("\n## ")[0]
        return sum(ln.startswith("| **") for ln in calls.splitlines())

    monkeypatch.chdir(camp)
    plain = bold()
    assert plain, "this campaign's calls have a P below 0.9"
    # Every call's expected loss is below it: decided, as the race says, except at the race's
    # budget, where no run has checked the calls (the race holds them open there too).
    assert bold(indifference=0.99) == len(REWARDS)
    assert bold(indifference=0.99, budget=1e16) == 0  # a race at the runs' own budget: every call checked
    assert bold(confidence=0.3) == plain  # read as the default, not as "everything is decided"
    assert bold(target="pass1", confidence=0.35) == plain  # another target's race judged other calls
    # Run from inside the campaign with a relative --data: the tab names camp/data, not "data".
    assert "<title>RACE regime report: camp/data</title>" in (camp / "out" / "report.html").read_text()
