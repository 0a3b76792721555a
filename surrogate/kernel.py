"""The kernel of the frontier surrogate (:class:`surrogate.model.FrontierSurrogate`).

The covariance (:func:`frontier_kernel`) of the surrogate's ``SingleTaskGP``:

    level(z, b) x cat(c)  +  shape(z, rho, b, m) x cat'(c)

with ``z`` = log10 policy parameters, ``b`` = log10 FLOPs, ``rho`` the update fraction,
``m`` = log2 of the plan's update passes per batch (mu) and ``c`` the reward system
(BoTorch's ``CategoricalKernel``, as in ``MixedSingleTaskGP``).

* The level term never varies along rho. It carries how good a policy gets with a reward
  system and a budget (tens of points of accuracy between policies, against a frontier
  that often varies by about one noise standard deviation over rho); its uncertainty at
  an unseen budget shifts a whole frontier and leaves the argmax (the decision) alone.
* The shape term carries the rho dependence. Its budget lengthscale is what lets cheap
  pilot budgets inform the target budget (budget as a fidelity); its categorical factor
  is bounded (:data:`MAX_SHAPE_CORRELATION`) because rewards moving rho* is the finding
  to reproduce, not noise to smooth over.
* The shape term also sees mu. The compiler buys neighbouring rho values with different
  levers (rho 0.714 with mu = 1, rho 0.716 with mu = 2), and reusing a batch changes what
  a run learns, so a frontier over rho is interleaved smooth branches, one per mu; a
  kernel in rho alone averages them and its rho* misses the best branch's peak
  (:data:`LENGTHSCALE_PRIOR`, docs/planner.md "Model").
* Continuous lengthscales get explicit LogNormal priors and bounds (``_cont_kernel``).

Why not ``MixedSingleTaskGP`` itself: its sum part shares the rho shape across all reward
systems, and on a 24-run race it fitted its interaction term to zero and called both
qwen2.5-1.5b settings (sparse, prm) wrong with p >= 0.9 (the PRM's runs dictated the
sparse frontier). We also measured an ICM variant (``IndexKernel`` task covariances):
no better calls, 5x slower fits.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from surrogate.data import MU, RHO, B, C, Z

__all__ = ["DTYPE", "LENGTHSCALE_MAX", "LENGTHSCALE_PRIOR", "LOG2_REUSE_SPAN", "MAX_SHAPE_CORRELATION", "frontier_kernel"]

DTYPE = torch.float64


# Prior modes, unit-cube units. mu spans log2 1..16 over the unit interval, so mu = 1 and
# mu = 2 sit 0.25 apart: one lengthscale, branches of different mu are related but distinct.
LENGTHSCALE_PRIOR = {Z: 0.5, RHO: 0.15, B: 0.4, MU: 0.25}
LOG2_REUSE_SPAN = (0.0, 4.0)  # normalisation bounds of the mu feature (mu = 1 .. 16)
LENGTHSCALE_PRIOR_SCALE = 1.0  # sd of log(lengthscale) under the prior


# Upper bounds, unit-cube units. A frontier is a hump with a flat top; a rho lengthscale
# longer than ~1/3 of the range turns a noisy slope across a few pilots into a confident
# global trend whose argmax sits at an end of the range. Measured on a 200-run race on
# paper.toml: without the bound 4 of 15 calls were confident (p >= 0.9) and wrong, with
# 0.3 none were.
LENGTHSCALE_MAX = {Z: 20.0, RHO: 0.3, B: 20.0, MU: 20.0}


def _ls_constraint(active_dims: Any, med: list[float]) -> Any:
    from gpytorch.constraints import Interval

    lo = torch.full((len(med),), 2.5e-2, dtype=DTYPE)
    hi = torch.tensor([LENGTHSCALE_MAX[d] for d in active_dims], dtype=DTYPE)
    return Interval(lo, hi, initial_value=torch.tensor(med, dtype=DTYPE))


def _cont_kernel(batch_shape: Any = None, ard_num_dims: int = 3, active_dims: Any = (Z, RHO, B)) -> Any:
    """RBF kernel over the continuous features with per-dimension LogNormal lengthscale
    priors (``MixedSingleTaskGP``'s ``cont_kernel_factory`` plug point).

    BoTorch's default dimension-scaled prior has a median lengthscale of ~7 unit-cube
    widths: with pilots at one budget it then assumes the frontier's shape carries over
    unchanged to a budget 10-100x larger, and with a frontier that varies by about the
    noise it explains rho away as flat. The modes here (:data:`LENGTHSCALE_PRIOR`) say
    "a frontier has one hump over the rho range, and its shape may change over a decade
    of budget"; on simulator data they gave better-calibrated regime calls than the
    default prior (Brier 0.19 vs 0.25 with one target-budget run per setting).
    """
    from gpytorch.kernels import RBFKernel
    from gpytorch.priors import LogNormalPrior

    mode = [LENGTHSCALE_PRIOR[d] for d in active_dims]
    sigma = LENGTHSCALE_PRIOR_SCALE
    # The fit is a MAP estimate, so where the data say nothing (the budget lengthscale while
    # every run is a pilot) it lands on the prior's *mode*, exp(loc - sigma^2). Placing the
    # mode (not the median) at the stated value matters: with loc = log(0.4) the budget
    # lengthscale sat at 0.15, pilots 10x below the target were 3.3 lengthscales away and
    # told the target nothing (posterior mean flat to 0.001 on shifted.toml after 6 pilots
    # per setting). Measured with the mode at 0.4 (fixed design, 4 worlds x 6 reps x 1-3
    # target runs): regime Brier 0.41 -> 0.38, on decidable settings 0.35 -> 0.27.
    loc = torch.log(torch.tensor(mode, dtype=DTYPE)) + sigma**2
    # A full-size scale, not a broadcast scalar: the prior buffers its scale expanded to
    # loc's shape (stride 0), and botorch's fit rolls the state back in place before a
    # retry, which torch refuses on such a tensor (every retried fit crashed).
    prior = LogNormalPrior(loc=loc, scale=torch.full_like(loc, sigma))
    return RBFKernel(
        ard_num_dims=ard_num_dims, batch_shape=batch_shape, active_dims=active_dims,
        lengthscale_prior=prior,
        lengthscale_constraint=_ls_constraint(active_dims, mode),
    )


# Largest correlation between the frontier *shapes* of two reward systems. Sharing shape
# across rewards is what lets one reward's runs inform another's, but the paper's central
# finding is that rewards move rho*; with an unbounded categorical lengthscale the
# likelihood happily explains a sparse-reward frontier by a PRM one and the call is
# confidently wrong (measured: MixedSingleTaskGP fitted its interaction term to zero on
# a 24-run race and called both settings of qwen2.5-1.5b wrong with p >= 0.9).
MAX_SHAPE_CORRELATION = 0.5


def frontier_kernel() -> Any:
    """``level(z, b) x cat(c)  +  shape(z, rho, b, mu) x cat'(c)``.

    The level term never varies along rho: it carries how good a policy gets with a
    reward system and a budget, the largest effect in the data, and its uncertainty at an
    unseen budget moves a whole frontier up or down without moving its argmax. The shape
    term carries everything rho and the update passes mu do; its categorical factor is bounded so that two reward
    systems share at most :data:`MAX_SHAPE_CORRELATION` of their shape.
    """
    from botorch.models.kernels.categorical import CategoricalKernel
    from gpytorch.constraints import Interval
    from gpytorch.kernels import ScaleKernel

    def cat(max_corr: float | None) -> Any:
        hi = 1e3 if max_corr is None else -1.0 / math.log(max_corr)
        return CategoricalKernel(active_dims=[C], lengthscale_constraint=Interval(1e-3, hi))

    level = ScaleKernel(_cont_kernel(ard_num_dims=2, active_dims=[Z, B]) * cat(None))
    shape = ScaleKernel(_cont_kernel(ard_num_dims=4, active_dims=[Z, RHO, B, MU]) * cat(MAX_SHAPE_CORRELATION))
    return level + shape
