"""``--noise-sd``: reading its two forms and checking them against a race's reward systems."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.errors import ConfigError
from planner.noise import check_noise_sd, parse_noise_sd, unlikely_noise_sd
from planner.strategies import make_strategy
from tests.planner.fake_runs import PROBLEM


def test_one_value_or_one_per_reward_system() -> None:
    assert parse_noise_sd("0.01") == 0.01
    assert parse_noise_sd(" sparse=0.01, prm = 2e-2 ") == {"sparse": 0.01, "prm": 0.02}


@given(st.dictionaries(st.sampled_from(["sparse", "prm", "dense", "judge", "pass1"]),
                       st.floats(min_value=1e-6, max_value=10, allow_nan=False), min_size=1))
def test_the_mapping_form_reads_back_what_was_written(sds: dict[str, float]) -> None:
    assert parse_noise_sd(",".join(f"{k}={v!r}" for k, v in sds.items())) == sds


@pytest.mark.parametrize(("text", "says"), [
    ("abc", "'abc' is not a number"), ("0", "positive finite"), ("-0.01", "positive finite"), ("inf", "positive finite"),
    ("nan", "positive finite"), ("sparse=0.01,prm", "'prm' is not REWARD=SD"), ("=0.01", "is not REWARD=SD"),
    ("sparse=0.01,sparse=0.02", "sparse is given twice"), ("sparse=x", "noise-sd sparse: 'x' is not a number"),
    ("1_0", "'1_0' is not a number"), ("", "'' is not a number"), ("0.01,", "'0.01,' is not a number"),
])
def test_bad_text_is_one_line_naming_the_option_and_both_forms(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_noise_sd(text)
    msg = str(err.value)
    assert msg.startswith("noise-sd") and says in msg and "--noise-sd 0.01" in msg and "\n" not in msg


def test_a_mapping_names_each_reward_system_of_the_race_and_no_other() -> None:
    assert check_noise_sd({"prm": 0.02, "sparse": 0.01}, PROBLEM) == {"prm": 0.02, "sparse": 0.01}
    assert check_noise_sd(0.01, PROBLEM) == 0.01 and check_noise_sd(None, PROBLEM) is None
    with pytest.raises(ConfigError, match=r"^noise-sd: no value for prm;"):
        check_noise_sd({"sparse": 0.01}, PROBLEM)
    with pytest.raises(ConfigError, match=r"^noise-sd: dense is not a reward system of this race \(prm, sparse\);"):
        check_noise_sd({"sparse": 0.01, "prm": 0.01, "dense": 0.01}, PROBLEM)
    for bad in (0, -1.0, math.nan, True, "0.01"):
        with pytest.raises(ConfigError, match=r"^noise-sd"):
            check_noise_sd(bad, PROBLEM)
    with pytest.raises(ConfigError, match=r"^noise-sd prm: a run noise sd must be a positive"):
        check_noise_sd({"sparse": 0.01, "prm": 0.0}, PROBLEM)


def test_ours_takes_it_and_its_surrogate_uses_it() -> None:
    from tests.planner.fake_runs import P, S, run

    strat = make_strategy("ours", PROBLEM, 0, noise_sd={"sparse": 0.02, "prm": 0.03})
    strat.tell([run(p, {S: 0.7, P: 0.4}) for p in strat.ask(8)])
    sur = strat.surrogate()
    assert sur is not None and sur.noise_source("sparse") == sur.noise_source("prm") == "stated"
    assert sur.run_noise_variance("sparse") == pytest.approx(4e-4)
    assert sur.run_noise_variance("prm") == pytest.approx(9e-4)
    call = strat.decide()[S]
    assert call.extra["noise_source"] == "stated" and call.extra["noise_sd"] == pytest.approx(0.02)
    assert not call.noise_guessed
    with pytest.raises(ConfigError, match=r"^noise-sd: no value for sparse"):
        make_strategy("ours", PROBLEM, 0, noise_sd={"prm": 0.01})


def test_an_sd_no_rate_can_have_is_flagged_not_refused() -> None:
    assert unlikely_noise_sd(None) is None and unlikely_noise_sd(0.5) is None
    assert unlikely_noise_sd({"sparse": 0.01, "prm": 0.2}) is None
    said = unlikely_noise_sd({"sparse": 0.01, "prm": 2.0})
    assert said is not None and said.startswith("noise-sd: 2 is more than") and "0.01, not 1 for one percent" in said


def test_the_stored_real_runs_are_what_docs_quote() -> None:
    """docs/planner.md ("A stated noise"): the tiny world's noise measured by replicated
    trl pilots, and the main job's race told it."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tiny_noise_1204"
    noise = json.loads((folder / "replicated_pilots_noise.json").read_text())["noise"]["native"]
    assert {r: (round(n["sd"], 5), n["source"], n["replicate_dof"]) for r, n in noise.items()} == {
        "dense": (0.00624, "replicates", 4), "sparse": (0.0051, "replicates", 4)}
    race = json.loads((folder / "stated_race_regimes.json").read_text())
    assert race["engine"] == "trl" and race["noise_sd"] == {"dense": 0.00624, "sparse": 0.0051}
    calls = {e["reward"]: e for e in race["settings"]}
    assert (calls["sparse"]["regime"], round(calls["sparse"]["probabilities"]["update-heavy"], 2)) == ("update-heavy", 0.97)
    assert round(calls["sparse"]["stake_sd"], 1) == 2.7 and calls["sparse"]["noise_source"] == "stated"
    assert (calls["dense"]["regime"], calls["dense"]["confident"]) == ("update-heavy", False)
    # 0.598: the race's table shows probabilities rounded down (59%), not up to a call they did not reach
    assert int(100 * calls["dense"]["probabilities"]["update-heavy"]) == 59 and round(calls["dense"]["stake_sd"], 1) == 0.9
