"""Regime logic: rho*, its credible interval and regime probabilities from posterior samples.

Pure functions on arrays (numpy only; no surrogate, no compiler), so they are tested on
hand-built posteriors with known answers. The planner feeds them

* ``samples``: joint posterior sample paths of one setting's frontier on a rho grid,
  shape ``(S, G)`` (``S`` samples, ``G`` grid points); :func:`regime_probabilities` and
  :func:`sample_argmax` also take leading batch dims ``(..., S, G)``;
* ``rho_grid``: shape ``(G,)``, increasing;
* ``shares``: the planned allocation at each grid point, shape ``(G, 3)`` with columns
  ``(search, learning, reward)`` (see :data:`COMPONENTS`), rows summing to 1.

A sample's argmax over the grid is that sample's rho*; the largest component of the
allocation at that rho is its regime label (docs/planner.md, "Words"). The regime's probability
is the share of samples carrying its label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "COMPONENTS",
    "GUESSED_NOISE",
    "LABELS",
    "RegimeCall",
    "classify",
    "expected_loss",
    "format_probability",
    "format_stake",
    "regime_entropy",
    "regime_labels",
    "regime_probabilities",
    "regime_stake",
    "rho_star_interval",
    "sample_argmax",
    "shares_for_rho",
]

COMPONENTS: tuple[str, ...] = ("search", "learning", "reward")
# LABELS[i] is the regime whose largest component is COMPONENTS[i].
LABELS: tuple[str, ...] = ("search-heavy", "update-heavy", "reward-heavy")


# What the ``*`` of a stake in noise sd (``sd*``) means, in the race's table and the report.
GUESSED_NOISE = ("that noise is the fit's guess, no seed replicates measured it (or theirs all agreed): "
                 "with few runs it can be "
                 "several times too small, and P and the stake too sure (--seeds 2 measures it; --noise-sd "
                 "states a known one)")

@dataclass(frozen=True)
class RegimeCall:
    """The regime call of one setting.

    ``regime`` is the most probable label; ``rho_star`` the argmax of the posterior-mean
    frontier within that regime (the recommendation); ``rho_star_ci`` the central
    ``level`` interval of the best rho within that regime over the samples (where the
    best allocation lies if one commits to the call; how likely the call is right is
    ``probabilities``); ``optimum_ci`` the central ``level`` interval of the sample argmaxes
    over all regimes (None where a strategy has no samples), which is what tells two
    calls apart by more than their uncertainty; ``probabilities`` every label's posterior
    probability;
    ``expected_loss`` the metric expected to be lost by committing to ``regime``
    (:func:`expected_loss`; NaN where a strategy has no posterior); ``stake`` the expected
    size of the difference between the best allocations of the called regime and of the
    closest other one (:func:`regime_stake`; NaN without a posterior or another regime):
    near zero, the regime question hardly matters, however sure the call is.
    """

    rho_star: float
    rho_star_ci: tuple[float, float]
    regime: str
    probabilities: dict[str, float]
    level: float = 0.9
    extra: dict[str, Any] = field(default_factory=dict)
    expected_loss: float = float("nan")
    optimum_ci: tuple[float, float] | None = None
    stake: float = float("nan")

    @property
    def noise_guessed(self) -> bool:
        """Whether ``extra["noise_sd"]`` is the fit's own noise level, no seed replicates
        measured (``extra["noise_source"]`` is ``"inferred"``, or ``"identical replicates"``
        where they agreed to within the conditioning floor): tables mark its stakes ``sd*``."""
        return self.extra.get("noise_source") in ("inferred", "identical replicates")

    @property
    def stake_sd(self) -> float:
        """``stake`` in one run's noise sd, where the caller put that sd in
        ``extra["noise_sd"]`` (the planner does, from its surrogate); NaN otherwise."""
        sd = self.extra.get("noise_sd")
        if sd is None or not np.isfinite(sd) or sd <= 0 or not np.isfinite(self.stake):
            return float("nan")
        return float(self.stake / sd)

    @property
    def confidence(self) -> float:
        """Probability of the called regime (the loop stops when it reaches the target)."""
        return self.probabilities[self.regime]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rho_star": self.rho_star,
            "rho_star_ci": list(self.rho_star_ci),
            "regime": self.regime,
            "probabilities": dict(self.probabilities),
            "level": self.level,
            # JSON has no NaN or inf (expected_loss is inf for a regime absent from the grid)
            "expected_loss": self.expected_loss if np.isfinite(self.expected_loss) else None,
            "stake": self.stake if np.isfinite(self.stake) else None,
            **({} if self.optimum_ci is None else {"optimum_ci": list(self.optimum_ci)}),
            **self.extra,
        }


def shares_for_rho(rho: ArrayLike, reward_fraction: ArrayLike) -> NDArray[np.float64]:
    """Allocation shares ``(G, 3)`` at update fractions ``rho`` ``(G,)``.

    ``reward_fraction`` (scalar or ``(G,)``) is reward / (search + reward) of the non-learning
    FLOPs. The compiler's levers scale search and reward together (both are per generated
    completion), so for one setting this fraction is nearly constant in rho.
    """
    r = np.asarray(rho, dtype=float)
    f = np.broadcast_to(np.asarray(reward_fraction, dtype=float), r.shape)
    if not (np.all((r >= 0) & (r <= 1)) and np.all((f >= 0) & (f <= 1))):  # NaN fails too
        raise ValueError("rho and reward_fraction are fractions in [0, 1]; a share outside it would be negative")
    rest = 1.0 - r
    return np.stack([rest * (1.0 - f), r, rest * f], axis=-1)


def format_probability(p: float, decimals: int = 2, *, percent: bool = False) -> str:
    """``p`` rounded *down* to ``decimals`` places (of a percentage with ``percent``): a
    probability of 0.898 beside a 0.9 confidence and an "open" call printed as 0.90, the
    threshold it missed. Non-finite values print as given."""
    if not math.isfinite(p):
        return f"{p}"
    scale = 10**decimals * (100 if percent else 1)
    # The epsilon keeps a value that is exactly on a step (0.29 * 100 = 28.999...) on it.
    down = math.floor(p * scale + 1e-9) / (10**decimals)
    return f"{down:.{decimals}f}"


def format_stake(call: RegimeCall) -> str:
    """A call's stake as the report prints it: ``0.0092 (1.1 sd)``, ``sd*`` where that noise
    is the fit's guess (no seed replicates); without a noise scale the bare value, without
    a stake ``-``."""
    if not math.isfinite(call.stake):
        return "-"
    if not math.isfinite(call.stake_sd):
        return f"{call.stake:.4f}"
    mark = "*" if call.noise_guessed else ""
    return f"{call.stake:.4f} ({call.stake_sd:.1f} sd{mark})"


def regime_labels(shares: ArrayLike) -> NDArray[np.int64]:
    """Label index (into :data:`LABELS`) of each allocation: ``(G, 3) -> (G,)``.

    Ties go to the earlier component (search before learning before reward), so a split
    exactly at 50/50 is not called update-heavy: "update-heavy iff rho* > 0.5".
    """
    s = np.asarray(shares, dtype=float)
    if s.ndim != 2 or s.shape[-1] != 3:
        raise ValueError(f"shares must have shape (G, 3), got {s.shape}")
    if not np.isfinite(s).all():  # argmax reads the first NaN as the largest component
        raise ValueError("shares must be finite; a NaN or inf allocation has no largest component")
    return np.argmax(s, axis=-1)


def _paths(
    samples: ArrayLike, shares: ArrayLike, *, batched: bool = True
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Sample paths ``(..., S, G)`` (``(S, G)`` unless ``batched``) checked against the
    grid's shares ``(G, 3)``, and the grid's labels ``(G,)``: a path of another grid's
    length would be labelled by the wrong allocations, and argmax reads the first NaN as
    the maximum."""
    s = np.asarray(samples, dtype=float)
    labels = regime_labels(shares)
    if (s.ndim < 2 or (s.ndim > 2 and not batched) or s.shape[-1] != labels.shape[0]
            or s.shape[-2] == 0):
        lead = "..., " if batched else ""
        raise ValueError(f"samples must be ({lead}S, {labels.shape[0]}) with S >= 1 for this grid's shares, got {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError("samples must be finite; the surrogate returned NaN or inf sample paths")
    return s, labels


def sample_argmax(samples: ArrayLike) -> NDArray[np.int64]:
    """Grid index of each sample path's maximum: ``(..., S, G) -> (..., S)``. A maximum
    reached at several grid points goes to the first (the lowest rho on an increasing
    grid), so an exactly flat path peaks at the grid's first point."""
    return np.argmax(np.asarray(samples, dtype=float), axis=-1)


def regime_probabilities(samples: ArrayLike, shares: ArrayLike) -> NDArray[np.float64]:
    """Posterior probability of each label: ``(..., S, G), (G, 3) -> (..., 3)``."""
    s, labels = _paths(samples, shares)
    idx = labels[sample_argmax(s)]  # (..., S)
    onehot = idx[..., None] == np.arange(len(LABELS))
    return onehot.mean(axis=-2)


def regime_entropy(probabilities: ArrayLike) -> NDArray[np.float64]:
    """Entropy in bits of label probabilities ``(..., 3) -> (...)`` (0 when certain)."""
    p = np.asarray(probabilities, dtype=float)
    if not np.all((p >= 0) & (p <= 1)):  # NaN fails too: its terms were dropped, 0 bits
        raise ValueError("probabilities must lie in [0, 1]; NaN would read as a certain call")
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1)


def _index(label: int | str) -> int:
    """A regime's index in :data:`LABELS`, given the index or the name: a name compared
    with the integer labels matched nothing and gave NaN or inf without a word."""
    if isinstance(label, str):
        if label not in LABELS:
            raise ValueError(f"label: unknown regime {label!r}; use one of {', '.join(LABELS)}")
        return LABELS.index(label)
    if not 0 <= int(label) < len(LABELS):
        raise ValueError(f"label: regime index {label} is not in 0..{len(LABELS) - 1}")
    return int(label)


def expected_loss(samples: ArrayLike, shares: ArrayLike, label: int | str) -> float:
    """Expected metric lost by committing to regime ``label``: the mean over sample paths
    ``(S, G)`` of (best value anywhere) - (best value within the regime); ``inf`` when no
    grid point carries the label (committing to it is impossible). Small values mean the
    regime hardly matters."""
    # One posterior: a batch (B, S, G) indexed as (S, G) took the grid's mask to the
    # sample axis and returned a mix of the batch's posteriors.
    s, labels = _paths(samples, shares, batched=False)
    inside = labels == _index(label)
    if not inside.any():
        return float("inf")
    return float(np.mean(s.max(axis=-1) - s[:, inside].max(axis=-1)))


def regime_stake(samples: ArrayLike, shares: ArrayLike, label: int | str) -> float:
    """How much the regime question matters: ``min`` over the other labels present on the
    grid of the mean over sample paths ``(S, G)`` of |(best value within ``label``) - (best
    value within the other label)|, in target-metric units.

    The call's probability says which regime's best allocation is ahead; this says by how
    much. Near zero: the called regime and the closest alternative score alike on (nearly)
    every path, so even a confident call changes little. Large with a low probability: the
    regimes differ but the runs do not yet say which way. NaN when ``label`` or every other
    label is absent from the grid.
    """
    s, labels = _paths(samples, shares, batched=False)
    label = _index(label)
    inside = labels == label
    others = [k for k in range(len(LABELS)) if k != label and (labels == k).any()]
    if not inside.any() or not others:
        return float("nan")
    best = s[:, inside].max(axis=-1)
    return float(min(np.mean(np.abs(best - s[:, labels == k].max(axis=-1))) for k in others))


def rho_star_interval(
    samples: ArrayLike, rho_grid: ArrayLike, level: float = 0.9, within: ArrayLike | None = None
) -> tuple[float, float]:
    """Central ``level`` credible interval of rho* from sample argmaxes ``(S, G)``.

    ``within`` ``(G,)`` bool restricts each sample's argmax to those grid points (e.g. one
    regime's, at least one), giving the interval of the best rho there; None: the whole grid.
    """
    grid = np.asarray(rho_grid, dtype=float)
    s = np.asarray(samples, dtype=float)
    if grid.ndim != 1 or s.ndim != 2 or s.shape[0] == 0 or s.shape[1] != grid.shape[0]:
        raise ValueError(f"samples must be (S, {grid.shape[0] if grid.ndim == 1 else 'G'}) with S >= 1 for a 1-D rho grid, got {s.shape}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if not np.isfinite(s).all():  # argmax reads the first NaN as the maximum
        raise ValueError("samples must be finite; the surrogate returned NaN or inf sample paths")
    if within is not None:
        w = np.asarray(within, dtype=bool)
        if w.shape != grid.shape:  # a length-1 mask would broadcast to every grid point
            raise ValueError(f"within must be ({grid.shape[0]},) like rho_grid, got {w.shape}")
        if not w.any():  # ignored, it gave the whole grid's interval as the selection's
            raise ValueError("within selects no grid point; pass None for the whole grid")
        s = np.where(w, s, -np.inf)
    stars = grid[sample_argmax(s)]
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(stars, [a, 1.0 - a], method="inverted_cdf")
    return float(lo), float(hi)


def classify(
    samples: ArrayLike,
    rho_grid: ArrayLike,
    shares: ArrayLike,
    *,
    mean: ArrayLike | None = None,
    eligible: ArrayLike | None = None,
    level: float = 0.9,
) -> RegimeCall:
    """The regime call of one setting from ``S`` joint sample paths on its rho grid.

    The call is the Bayes decision under 0-1 loss on the regime: the label carried by the
    most sample argmaxes (labels tied in probability go to the earlier one in
    :data:`LABELS`; a path tied at its top peaks at its lowest rho, :func:`sample_argmax`). ``rho_star`` is then the best rho *within* that regime (argmax of
    ``mean`` over its grid points), so the regime is, as docs/planner.md's "Words" has it, the largest
    component of the allocation at the reported rho*, and a report never contradicts
    itself. Where the posterior is open the label at the unrestricted argmax of the mean
    can differ; that rule was measured to be right less often (docs/planner.md).

    Args:
        samples: ``(S, G)`` posterior sample paths of the frontier.
        rho_grid: ``(G,)`` rho values of the grid.
        shares: ``(G, 3)`` allocation shares (search, learning, reward) at each grid rho.
        mean: ``(G,)`` posterior mean; its argmax within the called regime is
            ``rho_star``. Without it, the median argmax of the samples with that label.
        eligible: ``(G,)`` bool, grid points allowed as ``rho_star`` (e.g. those measured
            at the budget); ignored where it leaves none in the called regime.
        level: credible level of ``rho_star_ci``.
    """
    s = np.asarray(samples, dtype=float)
    grid = np.asarray(rho_grid, dtype=float)
    if grid.ndim != 1 or not np.isfinite(grid).all():
        raise ValueError(f"rho_grid must be a finite 1-D array, got shape {grid.shape}")
    if s.ndim != 2 or s.shape[1] != grid.shape[0] or s.shape[0] == 0:
        raise ValueError(f"samples must be (S, {grid.shape[0]}) with S >= 1, got {s.shape}")
    for name, v in (("mean", mean), ("eligible", eligible)):
        if v is not None and np.shape(v) != grid.shape:
            raise ValueError(f"{name} must be ({grid.shape[0]},) like rho_grid, got {np.shape(v)}")
    if mean is not None and not np.isfinite(np.asarray(mean, dtype=float)).all():
        raise ValueError("mean must be finite; the surrogate returned NaN or inf")
    if np.shape(shares) != (grid.shape[0], 3):
        # A longer shares array would label grid points by another grid's allocations.
        raise ValueError(f"shares must be ({grid.shape[0]}, 3) for this grid, got {np.shape(shares)}")
    if not np.isfinite(s).all():
        # argmax takes the first NaN as the maximum: a broken posterior would read as
        # certainty about the grid's first regime.
        raise ValueError("samples must be finite; the surrogate returned NaN or inf sample paths")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    probs = regime_probabilities(s, shares)
    labels = regime_labels(shares)
    label = int(np.argmax(probs))  # ties go to the earlier label
    inside = labels == label
    if mean is not None:
        m = np.asarray(mean, dtype=float)
        ok = inside if eligible is None else inside & np.asarray(eligible, dtype=bool)
        star = int(np.argmax(np.where(ok if ok.any() else inside, m, -np.inf)))
    else:
        argmaxes = sample_argmax(s)
        argmaxes = np.sort(argmaxes[labels[argmaxes] == label])
        star = int(argmaxes[(len(argmaxes) - 1) // 2])  # the median sample argmax
    return RegimeCall(
        rho_star=float(grid[star]),
        # Within the called regime, as rho_star is: the interval of all argmaxes straddled
        # regimes, and a support-restricted rho_star could fall outside it.
        rho_star_ci=rho_star_interval(s, grid, level, within=inside),
        optimum_ci=rho_star_interval(s, grid, level),
        regime=LABELS[label],
        probabilities={lab: float(p) for lab, p in zip(LABELS, probs, strict=True)},
        level=level,
        expected_loss=expected_loss(s, shares, label),
        stake=regime_stake(s, shares, label),
    )
