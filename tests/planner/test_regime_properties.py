"""Property tests (hypothesis) of the pure regime core and the acquisition's pure helpers:
invariants docs/planner.md and the docstrings promise, on random hand-built posteriors."""

from __future__ import annotations

import numpy as np
import pytest

from planner.regime import (
    LABELS,
    expected_loss,
    regime_stake,
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
