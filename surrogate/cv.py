"""Leave-one-out cross-validation of a fitted :class:`~surrogate.model.FrontierSurrogate`.

Uses BoTorch's closed-form LOO (``botorch.cross_validation.loo_cv``) at the fitted
hyperparameters: O(n^3) once instead of n refits. With few points this is slightly
optimistic (hyperparameters saw the held-out point), which is the usual trade-off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from botorch.posteriors import GPyTorchPosterior

__all__ = ["LOOResult", "loo_cv"]

_Z90 = 1.6448536269514722  # two-sided 90% normal quantile


@dataclass(frozen=True)
class LOOResult:
    """Per-point LOO predictions (shape ``(n,)``, one per training row; replicate groups
    are one row) and their summaries.

    ``std`` is the predictive std of a held-out row's *measurement* (observation noise
    included: for a replicate group, the noise of its mean, not of one run), so ``coverage90`` is the share of rows inside ``mean +- 1.645 std`` and
    ``loglik`` the mean Gaussian log predictive density per row.
    """

    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    observed: NDArray[np.float64]
    X: NDArray[np.float64]
    rmse: float
    coverage90: float
    loglik: float

    @property
    def n(self) -> int:
        return int(self.observed.shape[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "rmse": self.rmse,
            "coverage90": self.coverage90,
            "loglik": self.loglik,
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "observed": self.observed.tolist(),
        }


def loo_cv(surrogate: Any) -> LOOResult:
    """LOO-CV of a fitted surrogate (anything with ``model_`` and ``data_``)."""
    from botorch.cross_validation import loo_cv as _botorch_loo

    res = _botorch_loo(surrogate.model_, observation_noise=True)
    # CVResults types it as the abstract Posterior, which has no mean; a GP's is this one.
    posterior = cast("GPyTorchPosterior", res.posterior)
    mean = posterior.mean.detach().reshape(-1).numpy().astype(float)
    std = posterior.variance.detach().clamp_min(1e-18).sqrt().reshape(-1).numpy().astype(float)
    obs = res.observed_Y.detach().reshape(-1).numpy().astype(float)
    z = (obs - mean) / std
    loglik = float(np.mean(-0.5 * z**2 - np.log(std) - 0.5 * math.log(2 * math.pi)))
    return LOOResult(
        mean=mean,
        std=std,
        observed=obs,
        X=np.asarray(surrogate.data_.X, dtype=float),
        rmse=float(np.sqrt(np.mean((obs - mean) ** 2))),
        coverage90=float(np.mean(np.abs(z) <= _Z90)),
        loglik=loglik,
    )
