"""The paper's RACE regime call: a local quadratic fit of the target vs rho (scikit-learn).

Used by the ``grid`` and ``random`` baselines. The fit uses the best observed rho and up
to two neighbours on each side (a *local* fit: a quadratic is a poor global model of a
skewed frontier). Regime probabilities come from a residual bootstrap of that fit, so the
baselines report a confidence too (the paper's protocol itself reports none). Where the fit
is exact (three rho values in the window and no replicates: the grid's edges with one
seed) there is no residual to resample: the call is marked ``exact_fit`` and its
probability of 1 is the point call, not a confidence. Runs that all measured one value show
no trend: the call is the prior's, open, as ours' is then.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.errors import ConfigError
from planner.frontier import Setting, allocation_shares
from planner.regime import LABELS, RegimeCall, regime_labels
from planner.strategies.base import RaceProblem, flat_prior_call

__all__ = ["quadratic_call"]


def _vertex(coef: np.ndarray, lo: float, hi: float, fallback: np.ndarray) -> np.ndarray:
    """argmax over [lo, hi] of c0 + c1 r + c2 r^2 for rows of ``coef`` ``(B, 3)`` -> ``(B,)``;
    a convex or flat fit peaks at an end of the window."""
    c1, c2 = coef[:, 1], coef[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(c2 < 0, -c1 / (2 * c2), np.nan)
    ends = np.where(c1 + c2 * (lo + hi) >= 0, hi, lo)  # larger of the two endpoint values
    out = np.where(np.isfinite(v), np.clip(v, lo, hi), ends)
    return np.where(np.isfinite(out), out, fallback)


def quadratic_call(
    setting: Setting,
    problem: RaceProblem,
    rho: Sequence[float],
    y: Sequence[float],
    *,
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.9,
) -> RegimeCall:
    """Regime call of one setting from pilot runs ``(rho, y)`` (replicates allowed)."""
    from sklearn.linear_model import LinearRegression
    from sklearn.preprocessing import PolynomialFeatures

    r, v = np.asarray(rho, dtype=float), np.asarray(y, dtype=float)
    for name, a in (("rho", r), ("y", v)):
        if not np.isfinite(a).all():  # sklearn's own error is a multi-line ValueError about dtypes
            raise ConfigError(f"{name}: {setting.key}'s runs include a non-finite value "
                              f"({a[~np.isfinite(a)][0]}); the local quadratic fits finite values only")
    if r.size == 0 or np.all(v == v[0]):
        # Every run measured the same value (pass@1 of a policy that never solves a problem):
        # no trend to fit, and a flat fit's "vertex" is an end of the window, a confident
        # call of whichever regime lies there. The prior's call, open, as ours' is.
        call = flat_prior_call(setting, problem, level)
        if r.size:
            call.extra["no_trend"] = True
        return call
    uniq = np.unique(np.round(r, 4))
    means = np.array([v[np.round(r, 4) == u].mean() for u in uniq])
    best = int(np.argmax(means))
    def shares_of(x: float | np.ndarray) -> np.ndarray:  # of the plans each rho compiles to at the target budget
        return allocation_shares(setting.model, setting.reward, np.atleast_1d(x), problem.opts, problem.budget)

    exact = True  # no residual to resample: the shares below are then 0 or 1, not a confidence
    fitted: tuple[float, float, np.ndarray] | None = None  # the fit's window and coefficients
    if uniq.size < 3:  # no curvature to fit: the best observed rho, no uncertainty
        rs = np.array([uniq[best]])
        stars = rs
    else:
        # Three or more rho values: at an edge the window still spans three of them.
        lo_i, hi_i = max(0, best - 2), min(uniq.size, best + 3)
        lo, hi = float(uniq[lo_i]), float(uniq[hi_i - 1])
        mask = (np.round(r, 4) >= uniq[lo_i]) & (np.round(r, 4) <= uniq[hi_i - 1])
        poly = PolynomialFeatures(2)
        X = poly.fit_transform(r[mask, None])
        fit = LinearRegression(fit_intercept=False).fit(X, v[mask])
        coef = fit.coef_[None, :]
        rs = _vertex(coef, lo, hi, np.array([uniq[best]]))
        # Residual bootstrap: refit on fitted + resampled residuals, all at once
        # (LinearRegression fits the B bootstrap columns as one multi-output problem).
        resid = v[mask] - fit.predict(X)
        # Three distinct rho values without replicates fit exactly (no residual degree of
        # freedom): every bootstrap refit is the fit itself.
        exact = bool(mask.sum() <= 3 or np.allclose(resid, 0.0, atol=1e-12 * max(1.0, float(np.abs(v).max()))))
        rng = np.random.default_rng(seed)
        Yb = fit.predict(X)[:, None] + rng.choice(resid, size=(resid.size, n_boot), replace=True)
        cb = LinearRegression(fit_intercept=False).fit(X, Yb).coef_  # (B, 3)
        stars = _vertex(cb, lo, hi, np.full(n_boot, uniq[best]))
        fitted = (lo, hi, coef[0])
    labels = regime_labels(shares_of(stars))
    probs = np.bincount(labels, minlength=len(LABELS)) / labels.size
    top = int(np.argmax(probs))
    rho_star = float(rs[0])
    if fitted is not None and int(regime_labels(shares_of(rho_star))[0]) != top:
        # The fit's vertex lies in another regime than most refits' vertices (it sits near
        # a boundary): rho* is then the fit's best rho within the called regime, as ours'
        # is (RegimeCall), so that the label at rho* is the call. The called regime holds
        # refit vertices, all inside the window, so the window has such a rho.
        lo, hi, c = fitted
        cand = np.concatenate([np.linspace(lo, hi, 401), stars])
        cand = cand[regime_labels(shares_of(cand)) == top]
        rho_star = float(cand[np.argmax(c[0] + c[1] * cand + c[2] * cand**2)])
    tail = (1 - level) / 2
    inside = stars[labels == top]  # never empty: the called regime is the refits' majority
    return RegimeCall(
        rho_star=rho_star,
        # As RegimeCall defines them: rho_star_ci over the refits that land in the called
        # regime (where the optimum lies if one commits to the call), optimum_ci over all
        # refits (how far the optimum itself is pinned down).
        rho_star_ci=(float(np.quantile(inside, tail)), float(np.quantile(inside, 1 - tail))),
        optimum_ci=(float(np.quantile(stars, tail)), float(np.quantile(stars, 1 - tail))),
        regime=LABELS[top],
        probabilities={lab: float(p) for lab, p in zip(LABELS, probs, strict=True)},
        level=level,
        # exact_fit: the probabilities carry no noise estimate (a 3-point window without
        # replicates, or fewer than 3 rho values); read them as the point call.
        extra={"method": "local-quadratic", "exact_fit": exact},
    )
