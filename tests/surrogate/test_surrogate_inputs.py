"""Bad input to the surrogate's Python API: a one-line error naming the argument, where
numpy, torch or botorch failed deep inside (or returned NaN without a word)."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate import FrontierSurrogate, NotFittedError, extract, group_replicates
from surrogate.data import TARGETS
from tests.surrogate.toy_rows import REWARDS, rows


@pytest.fixture(scope="module")
def fitted() -> FrontierSurrogate:
    return FrontierSurrogate(rewards=REWARDS, budget_range=(1e14, 1e16), max_iter=30).fit(rows(n_rho=4))


def test_targets_match_the_planners() -> None:
    from planner.schema import TARGETS as PLANNER_TARGETS

    assert TARGETS == PLANNER_TARGETS


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"target": "nope"}, "target"),
    ({"rewards": "prm"}, "rewards"),  # a string is not a list of names
    ({"models": {"x": 0}}, "models['x']"),
    ({"models": {"x": float("nan")}}, "models['x']"),
    ({"budget_range": ("1e14", "1e16")}, "budget_range"),
    ({"max_iter": 0}, "max_iter"),  # 0 used to mean "to convergence"
])
def test_constructor_names_the_bad_argument(kwargs: dict, field: str) -> None:
    with pytest.raises((ValueError, TypeError), match=f"^{field.replace('[', '.').replace(']', '.')}:"):
        FrontierSurrogate(**kwargs)


@pytest.mark.parametrize(("call", "field"), [
    (lambda s: s.encode(0, "prm", [0.5], 1e15), "model"),
    (lambda s: s.encode(float("nan"), "prm", [0.5], 1e15), "model"),
    (lambda s: s.encode("small", "prm", [0.5], 0), "budget"),
    (lambda s: s.frontier("small", "prm", -1, [0.5]), "budget"),
    (lambda s: s.encode("small", "prm", [0.2, np.nan], 1e15), "rho"),
    (lambda s: s.encode("small", "prm", [1.2], 1e15), "rho"),
    (lambda s: s.encode("small", "prm", [0.5], 1e15, reuse=[0]), "reuse"),
    # "budget (scalar or (n,))": another length was numpy's broadcast error, naming neither.
    (lambda s: s.encode("small", "prm", [0.3, 0.5, 0.7], [1e15, 1e16]), "budget"),
    (lambda s: s.encode("small", "prm", [0.3, 0.5, 0.7], 1e15, reuse=[1, 2]), "reuse"),
    (lambda s: s.sample_frontier("small", "prm", 1e15, [0.5], n_samples=0), "n_samples"),
    (lambda s: s.sample_frontier("small", "prm", 1e15, []), "rho_grid"),
    (lambda s: s.predict(np.zeros((3, 4))), "X"),
    (lambda s: s.predict(np.zeros(5)), "X"),
    (lambda s: s.predict(np.full((2, 5), np.nan)), "X"),
    (lambda s: s.predict(s.encode("small", "prm", [0.5], 1e15) + np.array([0, 3, 0, 0, 0])), "X"),  # reward index 4
    (lambda s: s.condition_on(s.encode("small", "prm", [0.3, 0.5], 1e15), [0.5, 0.6, 0.7]), "condition_on"),
    (lambda s: s.condition_on(s.encode("small", "prm", [0.3], 1e15), [np.nan]), "y"),
])
def test_queries_name_the_bad_argument(fitted: FrontierSurrogate, call, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        call(fitted)


def test_lookahead_counts_are_checked(fitted: FrontierSurrogate) -> None:
    X = fitted.encode("small", "prm", [0.3, 0.5], 1e15)
    for kw, field in (({"n_fantasies": 0}, "n_fantasies"), ({"n_samples": 0}, "n_samples")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            fitted.lookahead_samples(X[:1], X, **kw)


def test_loo_before_fit_is_not_fitted() -> None:
    with pytest.raises(NotFittedError):
        FrontierSurrogate().loo_cv()


@pytest.mark.parametrize(("field", "value"), [
    ("model_params", 0.0), ("rho", float("nan")), ("num_iterations", 0), ("budget", -1.0),
    # None or no number at all: a bare TypeError naming no record before.
    ("budget", None), ("model_params", "1.5B"), ("num_iterations", float("nan")), ("seed", "first"),
])
def test_a_record_that_cannot_be_a_feature_is_named(field: str, value: float) -> None:
    recs = rows(n_rho=3)
    recs[1] = {**recs[1], field: value, "run_id": "p-bad-s0"}
    with pytest.raises(ValueError, match=rf"^record p-bad-s0: {field} ="):
        extract(recs, "native")


def test_a_row_whose_plan_json_is_no_json_object_is_named() -> None:
    recs = rows(n_rho=3)
    recs[1] = {k: v for k, v in recs[1].items() if k != "num_iterations"} | {"plan_json": "{oops", "run_id": "p-bad-s0"}
    with pytest.raises(ValueError, match=r"^record p-bad-s0: num_iterations ="):
        extract(recs, "native")


def test_a_row_without_any_rho_is_named() -> None:
    recs = rows(n_rho=3)
    recs[1] = {**recs[1], "rho": None, "rho_planned": None, "run_id": "p-bad-s0"}
    with pytest.raises(ValueError, match=r"^record p-bad-s0: rho = nan"):
        extract(recs, "native")


def test_group_replicates_names_a_missing_reward() -> None:
    obs = extract(rows(n_rho=3), "native")
    with pytest.raises(ValueError, match=r"^rewards: .*'sparse'"):
        group_replicates(obs, ("prm",))


def test_rewards_given_as_a_generator_keep_their_order() -> None:
    sur = FrontierSurrogate(rewards=(r for r in ("sparse", "prm")))
    assert sur.rewards == ("sparse", "prm")
