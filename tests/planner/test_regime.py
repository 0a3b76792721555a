"""Regime logic on hand-built posteriors whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from planner.regime import (
    LABELS,
    RegimeCall,
    classify,
    expected_loss,
    regime_entropy,
    regime_labels,
    regime_probabilities,
    regime_stake,
    rho_star_interval,
    sample_argmax,
    shares_for_rho,
)

GRID = np.linspace(0.05, 0.95, 91)
RULE = shares_for_rho(GRID, 0.0)  # rule reward: no reward FLOPs


def humps(centres: np.ndarray, width: float = 0.15) -> np.ndarray:
    """One quadratic hump per sample, peaking at ``centres`` (S,) -> (S, G)."""
    return -((GRID[None, :] - centres[:, None]) ** 2) / width**2


def test_shares_sum_to_one_and_learning_is_rho() -> None:
    s = shares_for_rho(GRID, 0.3)
    assert s.shape == (91, 3)
    np.testing.assert_allclose(s.sum(-1), 1.0)
    np.testing.assert_allclose(s[:, 1], GRID)
    np.testing.assert_allclose(s[:, 2] / (s[:, 0] + s[:, 2]), 0.3)


def test_rule_reward_is_update_heavy_iff_rho_above_half() -> None:
    labels = regime_labels(shares_for_rho(np.array([0.3, 0.5, 0.5001, 0.9]), 0.0))
    assert [LABELS[i] for i in labels] == ["search-heavy", "search-heavy", "update-heavy", "update-heavy"]


def test_reward_heavy_when_scorer_dominates() -> None:
    # 80% of the non-learning FLOPs go to the scorer: at rho 0.2 reward is 0.64 of the total.
    labels = regime_labels(shares_for_rho(np.array([0.2, 0.7]), 0.8))
    assert [LABELS[i] for i in labels] == ["reward-heavy", "update-heavy"]


def test_certain_posterior() -> None:
    samples = humps(np.full(200, 0.72))
    call = classify(samples, GRID, RULE)
    assert call.regime == "update-heavy"
    assert call.probabilities == {"search-heavy": 0.0, "update-heavy": 1.0, "reward-heavy": 0.0}
    assert call.rho_star == pytest.approx(0.72)
    assert call.rho_star_ci == pytest.approx((0.72, 0.72))
    assert call.confidence == 1.0


def test_split_posterior_known_probabilities() -> None:
    # 30% of samples peak at 0.3 (search-heavy), 70% at 0.8 (update-heavy).
    centres = np.array([0.3] * 30 + [0.8] * 70)
    probs = regime_probabilities(humps(centres), RULE)
    np.testing.assert_allclose(probs, [0.3, 0.7, 0.0])
    call = classify(humps(centres), GRID, RULE, level=0.9)
    assert call.regime == "update-heavy"
    assert call.confidence == pytest.approx(0.7)
    # The interval is of the best rho within the call: the 30% peaking at 0.3 are best, among
    # update-heavy allocations, at the regime's edge (0.51); all argmaxes span (0.3, 0.8).
    assert call.rho_star_ci == pytest.approx((0.51, 0.8))
    assert rho_star_interval(humps(centres), GRID, level=0.9) == pytest.approx((0.3, 0.8))


def test_rho_star_ci_is_within_the_called_regime_and_holds_rho_star() -> None:
    # Bimodal within update-heavy (0.6 and 0.9) plus 20% search-heavy mass at 0.2; the mean
    # peaks at 0.6. The interval stays inside the regime and contains rho_star.
    centres = np.array([0.2] * 20 + [0.6] * 45 + [0.9] * 35)
    samples = humps(centres, width=0.05)
    call = classify(samples, GRID, RULE, mean=samples.mean(axis=0))
    assert call.regime == "update-heavy"
    lo, hi = call.rho_star_ci
    assert 0.5 < lo <= call.rho_star <= hi
    assert (lo, hi) == pytest.approx((0.51, 0.9))


def test_rho_star_ci_from_uniform_argmaxes() -> None:
    centres = GRID[10:81]  # argmaxes spread uniformly over [0.15, 0.85]
    lo, hi = rho_star_interval(humps(centres), GRID, level=0.9)
    assert 0.15 <= lo <= 0.2 and 0.8 <= hi <= 0.85


def test_mean_sets_rho_star() -> None:
    samples = humps(np.array([0.4, 0.6, 0.65]))
    call = classify(samples, GRID, RULE, mean=humps(np.array([0.62]))[0])
    assert call.rho_star == pytest.approx(0.62)
    call2 = classify(samples, GRID, RULE)  # median of the sample argmaxes
    assert call2.rho_star == pytest.approx(0.6)


def test_batched_probabilities_and_entropy() -> None:
    a = humps(np.full(10, 0.2))
    b = humps(np.array([0.2] * 5 + [0.8] * 5))
    probs = regime_probabilities(np.stack([a, b]), RULE)  # (2, S, G) -> (2, 3)
    np.testing.assert_allclose(probs, [[1, 0, 0], [0.5, 0.5, 0]])
    np.testing.assert_allclose(regime_entropy(probs), [0.0, 1.0])
    assert sample_argmax(np.stack([a, b])).shape == (2, 10)


def test_bad_shapes_raise() -> None:
    with pytest.raises(ValueError):
        classify(np.zeros((3, 5)), GRID, RULE)
    with pytest.raises(ValueError):
        regime_labels(np.zeros((5, 2)))
    with pytest.raises(ValueError):
        classify(humps(np.array([0.5])), GRID, RULE, level=1.0)
    # Shares of another grid would label points by the wrong allocations.
    with pytest.raises(ValueError, match="shares must be"):
        classify(humps(np.array([0.5])), GRID, shares_for_rho(np.linspace(0.05, 0.95, 92), 0.0))


def test_non_finite_samples_raise_instead_of_calling_the_first_regime() -> None:
    s = humps(np.array([0.8, 0.8]))  # update-heavy
    s[0, 0] = np.nan  # np.argmax would take this NaN at rho 0.05 as the maximum
    with pytest.raises(ValueError, match="finite"):
        classify(s, GRID, RULE)


def test_expected_loss_of_a_call() -> None:
    # 40% of the samples peak at 0.3 (height 0), 60% at 0.8; committing to update-heavy
    # loses, on the search-heavy 40%, the gap between the peak and the best rho > 0.5.
    samples = humps(np.array([0.3] * 4 + [0.8] * 6))
    label = LABELS.index("update-heavy")
    gap = -float(humps(np.array([0.3]))[0][GRID > 0.5].max())
    assert expected_loss(samples, RULE, label) == pytest.approx(0.4 * gap)
    assert expected_loss(humps(np.full(4, 0.8)), RULE, label) == 0.0
    assert classify(samples, GRID, RULE).expected_loss == pytest.approx(0.4 * gap)
    assert expected_loss(samples, RULE, LABELS.index("reward-heavy")) == float("inf")


def test_stake_is_how_far_apart_the_regimes_best_allocations_are() -> None:
    # Every path peaks at 0.8: the best update-heavy value is 0, the best search-heavy one
    # (rho 0.5) is -(0.3 / 0.15)^2 = -4, so the regime question is worth 4 on every path.
    sure = humps(np.full(6, 0.8))
    up, search = LABELS.index("update-heavy"), LABELS.index("search-heavy")
    edge = -float(humps(np.array([0.8]))[0][GRID <= 0.5].max())
    assert edge == pytest.approx(4.0)
    assert regime_stake(sure, RULE, up) == pytest.approx(edge)
    assert regime_stake(sure, RULE, search) == pytest.approx(edge)
    # Paths peaking either side of the boundary (rho 0.50 is the last search-heavy grid
    # point, 0.51 the first update-heavy one): a 50/50 call on regimes that differ by
    # (0.06 / 0.15)^2 on every path. Unsure which way, not unimportant.
    split = humps(np.array([0.45, 0.56] * 3))
    assert regime_stake(split, RULE, up) == pytest.approx(0.16)
    # Confident is not the same as consequential: every path peaks update-heavy at 0.52,
    # yet the best search-heavy rho (0.5) is within (0.02 / 0.15)^2 of it.
    close = humps(np.full(6, 0.52))
    call = classify(close, GRID, RULE)
    assert call.regime == "update-heavy" and call.confidence == 1.0
    assert call.stake == pytest.approx((0.02 / 0.15) ** 2) and call.stake < 0.02 * edge
    assert call.to_dict()["stake"] == call.stake
    assert np.isnan(call.stake_sd)  # no noise scale given
    call.extra["noise_sd"] = 0.5
    assert call.stake_sd == pytest.approx(call.stake / 0.5)
    # Flat paths: the regimes tie exactly.
    assert regime_stake(np.zeros((4, GRID.size)), RULE, up) == 0.0
    # No other regime on the grid (rule rewards never reach reward-heavy), or no call: NaN.
    assert np.isnan(regime_stake(sure[:, GRID > 0.5], RULE[GRID > 0.5], up))
    assert np.isnan(regime_stake(sure, RULE, LABELS.index("reward-heavy")))


def test_a_regime_may_be_named_and_a_bad_label_raises() -> None:
    """A name used to match none of the integer labels: NaN or inf, without a word."""
    samples = humps(np.array([0.3] * 4 + [0.8] * 6))
    for name in LABELS:
        i = LABELS.index(name)
        assert expected_loss(samples, RULE, name) == expected_loss(samples, RULE, i)
        a, b = regime_stake(samples, RULE, name), regime_stake(samples, RULE, i)
        assert a == b or (np.isnan(a) and np.isnan(b))
    assert regime_stake(samples, RULE, "update-heavy") > 0
    with pytest.raises(ValueError, match="label: unknown regime 'update'"):
        regime_stake(samples, RULE, "update")
    with pytest.raises(ValueError, match="label: regime index 3"):
        expected_loss(samples, RULE, 3)


def test_to_dict_is_json_without_nan_or_inf() -> None:
    import dataclasses
    import json

    call = classify(humps(np.full(4, 0.8)), GRID, RULE)
    odd = dataclasses.replace(call, expected_loss=float("inf"), stake=float("nan"))
    d = odd.to_dict()
    assert d["expected_loss"] is None and d["stake"] is None
    json.dumps(d, allow_nan=False)


def test_call_is_the_most_probable_regime_and_rho_star_lies_inside_it() -> None:
    """The regime is the Bayes call (most probable label); rho* is the best posterior mean
    within it, so the call never contradicts its own rho* (docs/planner.md, "Words")."""
    # 60% of paths peak at rho 0.4 (search-heavy), 40% at 0.8 (update-heavy), but the
    # update-heavy paths peak far higher, so the unrestricted posterior mean peaks at 0.8.
    centres = np.array([0.4] * 60 + [0.8] * 40)
    heights = np.array([1.0] * 60 + [5.0] * 40)
    samples = heights[:, None] * np.exp(-((GRID[None, :] - centres[:, None]) ** 2) / (2 * 0.05**2))
    mean = samples.mean(axis=0)
    assert GRID[np.argmax(mean)] == pytest.approx(0.8, abs=0.02)
    call = classify(samples, GRID, RULE, mean=mean)
    assert call.regime == "search-heavy"
    assert call.rho_star == pytest.approx(0.4, abs=0.02)
    assert call.confidence == pytest.approx(0.6)
    assert LABELS[int(regime_labels(shares_for_rho(np.array([call.rho_star]), 0.0))[0])] == call.regime
    # Without a mean: the median argmax among the samples carrying the label.
    assert classify(samples, GRID, RULE).rho_star == pytest.approx(0.4, abs=0.02)


def test_eligible_points_restrict_rho_star_within_the_regime() -> None:
    samples = humps(np.array([0.62, 0.7, 0.75]))
    mean = humps(np.array([0.7]))[0]
    eligible = np.abs(GRID - 0.6) <= 0.05
    assert classify(samples, GRID, RULE, mean=mean, eligible=eligible).rho_star == pytest.approx(0.65)
    # No eligible point in the called regime: the best mean within the regime.
    far = np.abs(GRID - 0.2) <= 0.05
    assert classify(samples, GRID, RULE, mean=mean, eligible=far).rho_star == pytest.approx(0.7)


def test_a_guessed_noise_is_marked_whether_no_replicates_or_identical_ones_gave_it() -> None:
    def call(source: str | None) -> RegimeCall:
        return RegimeCall(0.5, (0.4, 0.6), "update-heavy", {"update-heavy": 1.0}, extra={"noise_source": source})

    assert call("inferred").noise_guessed and call("identical replicates").noise_guessed
    assert not any(call(s).noise_guessed for s in ("replicates", "other replicates", None))


@pytest.mark.parametrize("call", [
    lambda: regime_probabilities(humps(np.array([0.3]))[:, :5], RULE),  # another grid's paths
    lambda: regime_probabilities(np.full((4, GRID.size), np.nan), RULE),
    lambda: expected_loss(humps(np.array([0.3]))[:, :5], RULE, 1),
    lambda: regime_stake(np.zeros((0, GRID.size)), RULE, 1),
    lambda: classify(np.zeros((0, GRID.size)), GRID, RULE),
    lambda: classify(humps(np.array([0.3])), GRID, RULE, mean=np.zeros(5)),
    lambda: classify(humps(np.array([0.3])), GRID, RULE, mean=np.full(GRID.size, np.nan)),
    lambda: rho_star_interval(humps(np.array([0.3])), GRID, -1),
    lambda: rho_star_interval(humps(np.array([0.3])), GRID, 1.5),
    lambda: shares_for_rho([0.5, 1.2], 0.0),
    lambda: shares_for_rho([0.5], 2.0),
])
def test_malformed_paths_and_levels_are_refused(call) -> None:
    # Each used to return a wrong answer silently (probabilities of another grid, a NaN
    # read as the first regime, a reversed interval, negative shares) or fail in numpy.
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize(("p", "kw", "shown"), [
    (0.8984375, {}, "0.89"),  # 230/256 beside a 0.9 confidence: never printed as the threshold
    (0.9, {}, "0.90"),
    (0.29, {}, "0.29"),  # 0.29 * 100 is 28.999...: still on its step
    (1.0, {}, "1.00"),
    (0.0, {}, "0.00"),
    (0.8984375, {"decimals": 0, "percent": True}, "89"),
    (0.29, {"decimals": 0, "percent": True}, "29"),
    (float("nan"), {}, "nan"),
])
def test_a_probability_is_shown_rounded_down(p: float, kw: dict, shown: str) -> None:
    from planner.regime import format_probability

    assert format_probability(p, **kw) == shown


def test_shares_take_the_ends_of_the_range() -> None:
    # rho 0 (nothing learned: search and reward split the whole budget) and rho 1 are
    # allocations, not errors.
    np.testing.assert_allclose(shares_for_rho([0.0, 1.0], 0.25), [[0.75, 0.0, 0.25], [0.0, 1.0, 0.0]])


def test_one_sample_path_is_a_posterior() -> None:
    # S >= 1: a single path's argmax is both ends of every interval.
    one = humps(np.array([0.72]))
    assert rho_star_interval(one, GRID) == pytest.approx((0.72, 0.72))
    call = classify(one, GRID, RULE)
    assert call.rho_star == pytest.approx(0.72) and call.confidence == 1.0


def test_without_a_mean_rho_star_is_the_median_argmax_of_the_call() -> None:
    # Five update-heavy paths peaking at 0.6 .. 0.95 and one search-heavy one: the median of
    # the five (the third) is 0.8.
    call = classify(humps(np.array([0.3, 0.95, 0.6, 0.9, 0.7, 0.8])), GRID, RULE)
    assert call.regime == "update-heavy" and call.rho_star == pytest.approx(0.8)


def test_stake_and_loss_are_differences_so_a_shift_of_the_metric_leaves_them() -> None:
    # The humps peak at 0; a metric that peaks at 1 must give the same stake and loss.
    up = LABELS.index("update-heavy")
    for samples in (humps(np.full(6, 0.8)), humps(np.array([0.3] * 4 + [0.8] * 6))):
        assert regime_stake(samples + 1.0, RULE, up) == pytest.approx(regime_stake(samples, RULE, up))
        assert expected_loss(samples + 1.0, RULE, up) == pytest.approx(expected_loss(samples, RULE, up))
    assert regime_stake(humps(np.full(6, 0.8)) + 1.0, RULE, up) == pytest.approx(4.0)


def test_a_stake_in_noise_sd_needs_a_positive_sd() -> None:
    call = classify(humps(np.full(4, 0.8)), GRID, RULE)
    for sd in (0.0, -0.1, float("nan")):
        call.extra["noise_sd"] = sd
        assert np.isnan(call.stake_sd), sd


def test_to_dict_carries_the_optimum_interval_where_there_is_one() -> None:
    call = classify(humps(np.array([0.3] * 4 + [0.8] * 6)), GRID, RULE)
    assert call.to_dict()["optimum_ci"] == pytest.approx([0.3, 0.8])
    bare = RegimeCall(0.5, (0.4, 0.6), "update-heavy", {"update-heavy": 1.0})
    assert "optimum_ci" not in bare.to_dict()


@pytest.mark.parametrize("call", [
    lambda: rho_star_interval(humps(np.array([0.3]))[:, :5], GRID),  # another grid's paths
    lambda: rho_star_interval(humps(np.array([0.3])), GRID, 0.0),
    lambda: rho_star_interval(humps(np.array([0.3])), GRID, 1.0),
    # A NaN path read as peaking at the grid's first point: (0.05, 0.8) for paths all at 0.8.
    lambda: rho_star_interval(np.where(np.arange(GRID.size) == 0, np.nan, humps(np.full(4, 0.8))), GRID),
    # A mask of another length broadcast (length 1: every point) or failed inside numpy.
    lambda: rho_star_interval(humps(np.array([0.3])), GRID, within=np.ones(1, dtype=bool)),
    lambda: rho_star_interval(humps(np.array([0.3])), GRID, within=np.ones(GRID.size - 1, dtype=bool)),
    lambda: classify(humps(np.array([0.3])), np.where(GRID > 0.9, np.nan, GRID), RULE),
    # Length-1 arrays broadcast against the grid: they would silently apply to every point.
    lambda: classify(humps(np.array([0.3])), GRID, RULE, mean=np.zeros(1)),
    lambda: classify(humps(np.array([0.3])), GRID, RULE, eligible=np.ones(1, dtype=bool)),
])
def test_interval_and_call_inputs_are_checked_where_they_enter(call) -> None:
    with pytest.raises(ValueError, match=r"samples must be|level must|rho_grid must|mean must|eligible must|within must"):
        call()
