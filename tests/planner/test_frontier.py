"""planner.frontier: what a request for each rho buys, as the surrogate's reuse plug sees it."""

from __future__ import annotations

import numpy as np

from planner.compiler import compile_plan
from planner.frontier import reuse_at, rho_grid


def test_reuse_at_is_the_compilers_choice_and_switches_between_neighbours() -> None:
    m, r = "qwen2.5-1.5b", "sparse"
    grid = rho_grid(m, r, 121)
    mu = reuse_at(m, r, grid, 1e16)
    assert mu.shape == grid.shape
    for rho in grid[::10]:
        assert reuse_at(m, r, np.array([rho]), 1e16)[0] == compile_plan(m, r, float(rho), 1e16).num_iterations
    # The compiler does switch mu between neighbouring rho values: the frontier over rho
    # is several branches (why the surrogate needs mu as an input).
    assert len(set(mu.tolist())) >= 2 and np.count_nonzero(np.diff(mu)) >= 3
    # Out of the levers' reach: no plan, treated as mu = 1.
    assert reuse_at(m, r, np.array([1.2]), 1e16)[0] == 1


def test_reuse_at_reads_the_exact_budget() -> None:
    # Below ~20 prompt groups the levers change within 1% of budget: no rounding of the budget.
    import numpy as np

    from planner.compiler import compile_plan
    from planner.frontier import reuse_at

    for b in (1.13296e16, 1.13e16):
        want = compile_plan("qwen2.5-7b", "sparse", 0.5694, b).num_iterations
        assert reuse_at("qwen2.5-7b", "sparse", np.array([0.5694]), b)[0] == want


def test_a_frontier_band_takes_any_central_level() -> None:
    import pytest

    from planner.frontier import FrontierBand

    f = FrontierBand("m", "r", "native", 1e16, np.array([0.3, 0.6]), np.array([0.5, 0.6]), np.array([0.1, 0.2]))
    lo, hi = f.band(0.9)
    assert np.allclose(hi - f.mean, 1.6448536 * f.std)
    lo8, hi8 = f.band(0.8)  # was a KeyError: only 0.5 and 0.9 were tabled
    assert np.allclose(hi8 - f.mean, 1.2815516 * f.std) and np.all(lo8 > lo)
    for bad in (0.0, 1.0, 90):
        with pytest.raises(ValueError, match="level"):
            f.band(bad)


def test_grid_and_reuse_refuse_what_they_cannot_answer() -> None:
    import pytest

    from planner.errors import ConfigError

    for n in (0, 1, -3):  # an empty grid failed in the Sobol engine; one point is no range
        with pytest.raises(ConfigError, match=r"^n: "):
            rho_grid("qwen2.5-1.5b", "prm", n)
    # reuse_at answered mu = 1 for anything it could not compile, a typo'd model included.
    with pytest.raises(ConfigError, match=r"^model: "):
        reuse_at("nope", "prm", np.array([0.2]), 1e16)
    for b in (0.0, float("nan")):
        with pytest.raises(ConfigError, match=r"^budget: "):
            reuse_at("qwen2.5-1.5b", "prm", np.array([0.2]), b)
