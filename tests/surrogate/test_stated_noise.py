"""A stated run noise (``noise_sd``): where it replaces the fit's guess, how replicates
shrink toward it, what the surrogate says the noise rests on, and bad values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from surrogate import FrontierSurrogate
from surrogate.data import extract, group_replicates
from tests.surrogate.toy_rows import REWARDS, rows


def test_a_stated_noise_fixes_each_runs_variance_without_replicates() -> None:
    data = group_replicates(extract(rows(n_rho=4, noise=0.02), "native"), REWARDS, {"sparse": 4e-4, "prm": 1e-4})
    assert data.yvar is not None and data.noise_dof == 0 and data.stated_rewards == REWARDS
    prm = data.X[:, 1] == REWARDS.index("prm")
    assert np.allclose(data.yvar[prm], 1e-4) and np.allclose(data.yvar[~prm], 4e-4)
    assert np.all(data.counts == 1) and len(data.y) == 16  # one row per plan, as without one


def test_replicates_shrink_toward_the_stated_noise_and_are_averaged() -> None:
    # Two seeds per plan at sd 0.02: 16 replicate degrees of freedom pull the stated 0.005
    # most of the way to what they measure, and it is theirs, not the statement, that counts.
    obs = extract(rows(n_rho=4, seeds=2, noise=0.02), "native")
    measured = group_replicates(obs, REWARDS)
    stated = group_replicates(obs, REWARDS, {r: 0.005**2 for r in REWARDS})
    assert stated.stated_rewards == () and stated.noise_dof == measured.noise_dof == 16
    assert np.all(stated.counts == 2) and np.allclose(stated.y, measured.y)
    per_run = stated.yvar * stated.counts
    assert 0.005**2 < per_run.min() and per_run.max() < (measured.yvar * measured.counts).max()
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd=0.005).fit(rows(n_rho=4, seeds=2, noise=0.02))
    assert sur.noise_source("sparse") == "replicates"
    assert 0.005 < math.sqrt(sur.run_noise_variance("sparse")) < 0.03


def test_replicates_that_agree_take_the_stated_noise() -> None:
    # A metric coarser than the noise: without a statement the fit guesses ("identical
    # replicates"); with one, the statement stands.
    same = rows(n_rho=4, seeds=2, noise=0.0)
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd=0.01).fit(same)
    assert sur.data_.identical_rewards == REWARDS and sur.data_.stated_rewards == REWARDS
    assert sur.noise_source("prm") == "stated" and sur.run_noise_variance("prm") == pytest.approx(1e-4)
    assert np.all(sur.data_.counts == 2)


def test_the_stated_noise_replaces_the_guess_and_widens_the_posterior() -> None:
    # Few runs: the fit's own guess sits near its prior's mode, far below the runs' 0.02.
    rs = rows(n_rho=4, noise=0.02)
    guessed = FrontierSurrogate(rewards=REWARDS).fit(rs)
    told = FrontierSurrogate(rewards=REWARDS, noise_sd=0.02).fit(rs)
    assert guessed.noise_source("sparse") == "inferred" and told.noise_source("sparse") == "stated"
    assert math.sqrt(guessed.run_noise_variance("sparse")) < 0.01
    assert math.sqrt(told.run_noise_variance("sparse")) == pytest.approx(0.02)
    X = told.encode("small", "sparse", np.linspace(0.15, 0.9, 7), 1e15)
    assert np.all(told.predict(X)[1] > guessed.predict(X)[1])
    _, std_new_run = told.predict(X, observation_noise=True)
    assert np.all(std_new_run >= 0.02)


def test_a_reward_stated_nowhere_borrows_and_says_so() -> None:
    rs = rows(n_rho=4, noise=0.02)
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd={"sparse": 0.02}).fit(rs)
    assert sur.noise_source("sparse") == "stated" and sur.noise_source("prm") == "other stated"
    assert sur.run_noise_variance("prm") == pytest.approx(4e-4)
    with_replicates = [*rs, *(dict(r, seed=1, native=r["native"] + 0.01) for r in rs if r["reward"] == "sparse")]
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd={"prm": 0.03}).fit(with_replicates)
    assert sur.noise_source("sparse") == "replicates" and sur.noise_source("prm") == "stated"


def test_a_reward_without_runs_is_queried_at_its_stated_noise() -> None:
    rs = [r for r in rows(n_rho=4, noise=0.02) if r["reward"] == "sparse"]
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd={"sparse": 0.02, "prm": 0.04}).fit(rs)
    assert sur.noise_source("prm") == "stated" and sur.run_noise_variance("prm") == pytest.approx(0.04**2)


@pytest.mark.parametrize("bad", [0, -0.01, math.inf, math.nan, "0.01", {}, {"sparse": 0}, {1: 0.01}, True])
def test_a_bad_stated_noise_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ValueError, match=r"^noise_sd"):
        FrontierSurrogate(noise_sd=bad)  # type: ignore[arg-type]


def test_a_misspelt_reward_in_the_statement_or_a_query_is_refused_by_name() -> None:
    # "prn" was dropped unread and prm's noise borrowed sparse's: not what was stated.
    rs = rows(n_rho=4, noise=0.02)
    with pytest.raises(ValueError, match=r"^noise_sd: 'prn' is no reward system of the records or of rewards="):
        FrontierSurrogate(rewards=REWARDS, noise_sd={"sparse": 0.01, "prn": 0.05}).fit(rs)
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd={"sparse": 0.01, "prm": 0.05}).fit(rs)
    for ask in (sur.run_noise_variance, sur.noise_source):
        with pytest.raises(KeyError, match="'zzz' is not a reward system of this fit"):
            ask("zzz")


def test_a_few_replicates_leave_the_statement_the_source() -> None:
    # One replicated pair (1 dof) moves the value a fifth of the way from the statement:
    # still "stated", as it would be "inferred" without one; 3 dof of its own make it replicates.
    rs = rows(n_rho=4, noise=0.02)
    one_pair = [*rs, dict(rs[0], seed=1, native=rs[0]["native"] + 0.03)]
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd=0.01).fit(one_pair)
    assert sur.replicate_dof("sparse") == 1 and sur.noise_source("sparse") == "stated"
    assert 0.01 < math.sqrt(sur.run_noise_variance("sparse")) < 0.015
    sparse = [r for r in rs if r["reward"] == "sparse"][:3]
    three = [*one_pair, *(dict(r, seed=1, native=r["native"] - 0.02) for r in sparse[1:])]
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd=0.01).fit(three)
    assert sur.replicate_dof("sparse") == 3 and sur.noise_source("sparse") == "replicates"
    assert sur.noise_source("prm") == "stated"


def test_where_the_noise_comes_from_survives_conditioning_and_rewards_without_runs() -> None:
    sparse = [r for r in rows(n_rho=4, noise=0.02) if r["reward"] == "sparse"]
    sur = FrontierSurrogate(rewards=REWARDS, noise_sd={"sparse": 0.02}).fit(sparse)
    assert sur.noise_source("prm") == "other stated" and sur.noise_source(None) == "stated"
    told = FrontierSurrogate(rewards=REWARDS, noise_sd={"sparse": 0.02, "prm": 0.04}).fit(sparse)
    X = told.encode("small", "prm", [0.5], 1e15)
    pending = told.condition_on(X, [0.4])  # a pending prm run: a row, but no replicate
    assert pending.noise_source("prm") == "stated" and pending.run_noise_variance("prm") == pytest.approx(0.04**2)
