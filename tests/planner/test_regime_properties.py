"""Property tests (hypothesis) of the pure regime core and the acquisition's pure helpers:
invariants docs/planner.md and the docstrings promise, on random hand-built posteriors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from planner.acquisition import fidelity_ladder, utility
from planner.design import initial_design, space_filling_rho
from planner.frontier import Setting, allocation_shares, rho_grid
from planner.regime import (
    LABELS,
    classify,
    expected_loss,
    format_probability,
    regime_entropy,
    regime_labels,
    regime_probabilities,
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



# ---------------------------------------------------------------- random posteriors

@st.composite
def posteriors(draw: st.DrawFn, whole: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(samples (S, G), increasing grid (G,), shares (G, 3)). Whole-number paths (``whole``)
    keep exact ties and make a shift or a scale of a path exact in floating point."""
    n_grid, n_samples = draw(st.integers(2, 12)), draw(st.integers(1, 12))
    lo = draw(st.floats(0.0, 0.45))
    grid = np.linspace(lo, lo + draw(st.floats(0.05, 1.0 - lo)), n_grid)
    shares = shares_for_rho(grid, draw(st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0])))
    values = st.integers(-20, 20) if whole else st.floats(-1e3, 1e3)
    samples = draw(hnp.arrays(float, (n_samples, n_grid), elements=values))
    return samples, grid, shares


def _call_parts(call):  # type: ignore[no-untyped-def]
    return call.regime, call.probabilities, call.rho_star, call.rho_star_ci, call.optimum_ci


@settings(max_examples=50, deadline=None)
@given(posteriors(), st.sampled_from([0.5, 0.8, 0.9, 0.95]))
def test_a_call_is_the_argmax_label_and_its_intervals_lie_on_the_grid_in_its_regime(post, level) -> None:
    samples, grid, shares = post
    call = classify(samples, grid, shares, level=level)
    p = np.array([call.probabilities[lab] for lab in LABELS])
    assert list(call.probabilities) == list(LABELS)
    assert ((p >= 0) & (p <= 1)).all() and p.sum() == pytest.approx(1.0, abs=1e-12)
    assert call.regime == LABELS[int(np.argmax(p))] and call.confidence == p.max() >= 1 / 3
    labels = regime_labels(shares)
    at = {float(r): LABELS[k] for r, k in zip(grid, labels, strict=True)}
    # rho* and both ends of its interval are grid points in the called regime ("Words").
    lo, hi = call.rho_star_ci
    assert at[call.rho_star] == at[lo] == at[hi] == call.regime and lo <= hi
    olo, ohi = call.optimum_ci
    assert grid[0] <= olo <= ohi <= grid[-1] and olo in at and ohi in at
    # Without a mean rho* is the median argmax of the paths carrying the call, which holds
    # at least a third of the paths, so a central interval of level >= 1/3 keeps it.
    assert lo <= call.rho_star <= hi
    assert call.expected_loss >= 0 and (np.isnan(call.stake) or call.stake >= 0)


@settings(max_examples=50, deadline=None)
@given(posteriors(), st.randoms(use_true_random=False), st.integers(-3, 3))
def test_a_call_ignores_the_order_of_the_paths_a_shift_of_each_and_a_common_scale(post, rnd, power) -> None:
    samples, grid, shares = post
    base = _call_parts(classify(samples, grid, shares))
    order = list(range(samples.shape[0]))
    rnd.shuffle(order)
    assert _call_parts(classify(samples[order], grid, shares)) == base
    offsets = np.array([rnd.randint(-1000, 1000) for _ in order], dtype=float)[:, None]
    assert _call_parts(classify(samples + offsets, grid, shares)) == base
    assert _call_parts(classify(samples * 2.0**power, grid, shares)) == base
    probs = regime_probabilities(samples + offsets, shares)
    assert probs.tolist() == regime_probabilities(samples, shares).tolist()


@settings(max_examples=50, deadline=None)
@given(posteriors(whole=False))
def test_with_a_mean_rho_star_is_its_best_point_within_the_call(post) -> None:
    samples, grid, shares = post
    mean = samples.mean(axis=0)
    call = classify(samples, grid, shares, mean=mean)
    inside = regime_labels(shares) == LABELS.index(call.regime)
    assert call.rho_star == grid[inside][np.argmax(mean[inside])]


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 10), st.integers(2, 15), st.data())
def test_paths_that_all_peak_at_one_rho_give_a_certain_call_and_a_point_interval(n, g, data) -> None:
    grid = np.linspace(0.1, 0.9, g)
    k = data.draw(st.integers(0, g - 1))
    heights = np.array(data.draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), dtype=float)
    samples = heights[:, None] - np.abs(np.arange(g) - k)[None, :]
    call = classify(samples, grid, shares_for_rho(grid, 0.0))
    assert call.confidence == 1.0 and call.rho_star == grid[k]
    assert call.rho_star_ci == call.optimum_ci == (grid[k], grid[k])
    assert call.expected_loss == 0.0


def test_ties_are_broken_towards_the_earlier_label_and_the_lower_rho() -> None:
    """A 50/50 posterior calls the earlier label (search before update before reward); a
    path whose top is flat over several grid points peaks at the lowest of them."""
    grid = np.array([0.2, 0.4, 0.6, 0.8])
    rule = shares_for_rho(grid, 0.0)
    split = np.array([[1.0, 0, 0, 0], [0, 0, 0, 1.0]])
    call = classify(split, grid, rule)
    assert call.probabilities["search-heavy"] == call.probabilities["update-heavy"] == 0.5
    assert call.regime == "search-heavy"
    flat_top = np.array([[0, 0, 1.0, 1.0]])
    assert classify(flat_top, grid, rule).rho_star == 0.6
    # An exactly flat posterior (no fitted surrogate gives one: it refuses data without a
    # trend) therefore calls the grid's first regime.
    assert classify(np.zeros((3, 4)), grid, rule).regime == "search-heavy"


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(float, st.integers(1, 20), elements=st.floats(0, 1)), st.floats(0, 1))
def test_shares_split_the_budget_and_label_by_the_largest_component(rho, f) -> None:
    shares = shares_for_rho(rho, f)
    assert (shares >= 0).all() and shares.sum(axis=-1) == pytest.approx(np.ones(rho.size))
    assert shares[:, 1].tolist() == rho.tolist()
    labels = regime_labels(shares)
    for row, k in zip(shares, labels, strict=True):
        assert row[k] == row.max() and all(row[j] < row[k] for j in range(k))  # earlier wins ties
    if f == 0.0:
        assert ((labels == 1) == (rho > 0.5)).all()  # "update-heavy iff rho* > 0.5"


@settings(max_examples=50, deadline=None)
@given(posteriors(whole=False))
def test_entropy_is_between_zero_and_log2_3_bits(post) -> None:
    samples, _, shares = post
    h = float(regime_entropy(regime_probabilities(samples, shares)))
    assert 0.0 <= h <= np.log2(3) + 1e-12


@settings(max_examples=50, deadline=None)
@given(st.floats(0, 1), st.integers(0, 3), st.booleans())
def test_a_probability_is_never_printed_above_itself(p, decimals, percent) -> None:
    shown = float(format_probability(p, decimals, percent=percent))
    value = p * (100 if percent else 1)
    assert value - 10.0**-decimals < shown <= value + 1e-9


# ---------------------------------------------------------------- acquisition helpers

@settings(max_examples=50, deadline=None)
@given(posteriors(), st.floats(0, 1))
def test_utility_is_non_negative_and_zero_when_every_path_peaks_at_one_rho(post, weight) -> None:
    samples, grid, shares = post
    assert float(utility(samples, grid, shares, weight)) >= 0.0
    same = np.tile(samples[:1], (4, 1)) + np.arange(4.0)[:, None]
    assert float(utility(same, grid, shares, weight)) == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.floats(6, 20), st.one_of(st.just(0.0), st.floats(0.01, 4)), st.integers(2, 6))
def test_the_fidelity_ladder_runs_from_the_pilot_to_the_target_budget(log_pilot, decades, n) -> None:
    pilot = 10.0**log_pilot
    target = pilot * 10.0**decades
    ladder = fidelity_ladder(pilot, target, n)
    if target > pilot:
        assert len(ladder) == n and ladder[0] == pilot and ladder[-1] == target
        assert (np.diff(ladder) > 0).all()
    else:
        assert ladder == [pilot]


# ---------------------------------------------------------------- designs

@settings(max_examples=50, deadline=None)
@given(st.floats(0, 0.5), st.floats(0.01, 0.5), st.integers(1, 30), st.floats(0, 1, exclude_max=True))
def test_a_space_filling_design_has_one_point_per_stratum(lo, width, n, shift) -> None:
    hi = lo + width
    pts = space_filling_rho(lo, hi, n, shift)
    assert pts.shape == (n,) and (np.diff(pts) > 0).all()
    assert (pts >= lo).all() and (pts < hi + 1e-12).all()
    pos = (pts - lo) / (hi - lo) * n - np.arange(n)  # position within each stratum
    assert pos == pytest.approx(np.full(n, shift), abs=1e-6)


MODELS = ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "tiny-s")
REWARDS = ("sparse", "structured", "dense", "proxy-prm", "prm")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.builds(Setting, st.sampled_from(MODELS), st.sampled_from(REWARDS)),
                min_size=1, max_size=4, unique=True), st.integers(1, 8))
def test_the_initial_design_gives_distinct_rhos_inside_each_range_the_same_every_time(settings_, n) -> None:
    design = initial_design(settings_, 1e15, n)
    assert len(design) == n * len(settings_) and design == initial_design(settings_, 1e15, n)
    for s in settings_:
        lo, hi = rho_grid(s.model, s.reward, 2)
        rhos = [d.rho for d in design if d.setting == s]
        assert len(set(rhos)) == n and rhos == sorted(rhos)
        assert all(lo < r < hi for r in rhos) and all(0 < r < 1 for r in rhos)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(REWARDS), st.integers(2, 40))
def test_a_settings_grid_spans_its_range_and_its_shares_are_allocations(model, reward, n) -> None:
    grid = rho_grid(model, reward, n)
    assert 0 < grid[0] and grid[-1] < 1 and (np.diff(grid) > 0).all()
    shares = allocation_shares(model, reward, grid)
    assert (shares >= 0).all() and shares.sum(axis=-1) == pytest.approx(np.ones(n))
    regime_labels(shares)  # finite: every grid point has a regime
