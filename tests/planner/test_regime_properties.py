"""Property tests (hypothesis) of the pure regime core and the acquisition's pure helpers:
invariants docs/planner.md and the docstrings promise, on random hand-built posteriors."""

from __future__ import annotations

import numpy as np
import pytest

from planner.regime import (
    LABELS,
    expected_loss,
    regime_entropy,
    regime_labels,
    regime_stake,
    rho_star_interval,
    shares_for_rho,
)

GRID = np.array([0.1, 0.2, 0.3, 0.9])
RULE = shares_for_rho(GRID, 0.0)  # one update-heavy point (0.9), three search-heavy ones


@pytest.mark.parametrize("f", [expected_loss, regime_stake])
def test_loss_and_stake_refuse_a_batch_of_posteriors(f) -> None:
    # (B, S, G) with S == G used to index the sample axis with the grid's regime mask and
    # return a number that was neither posterior's (0.66 where they were 0.35 and 0.82).
    s = np.random.default_rng(0).normal(size=(2, GRID.size, GRID.size))
    with pytest.raises(ValueError, match=r"samples must be \(S, 4\)"):
        f(s, RULE, LABELS.index("update-heavy"))
    assert np.isfinite(f(s[0], RULE, "update-heavy"))


@pytest.mark.parametrize("p", [[np.nan] * 3, [0.5, 0.5, np.nan], [1.5, -0.5, 0.0], [np.inf, 0.0, 0.0]])
def test_entropy_refuses_what_is_no_probability(p) -> None:
    # NaN terms were dropped: NaN probabilities read as 0 bits, a certain call, and a
    # negative probability gave a negative entropy.
    with pytest.raises(ValueError, match="probabilities must"):
        regime_entropy(p)
    assert regime_entropy([0.5, 0.5, 0.0]) == pytest.approx(1.0)


def test_labels_refuse_non_finite_shares() -> None:
    # argmax took the first NaN as the largest component: a broken allocation was labelled
    # search-heavy (or whichever column held the NaN).
    with pytest.raises(ValueError, match="shares must be finite"):
        regime_labels([[np.nan, 0.1, 0.9], [0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match="shares must be finite"):
        regime_labels([[0.2, np.inf, 0.5]])


def test_an_interval_within_no_grid_point_is_refused() -> None:
    # An all-False mask was ignored: the interval of the whole grid came back as if it were
    # the interval within the (empty) selection, e.g. one regime's on a grid without it.
    s = -((GRID[None, :] - np.array([[0.2], [0.3]])) ** 2)
    with pytest.raises(ValueError, match="within selects no grid point"):
        rho_star_interval(s, GRID, within=np.zeros(GRID.size, dtype=bool))
    assert rho_star_interval(s, GRID, within=GRID > 0.5) == (0.9, 0.9)
