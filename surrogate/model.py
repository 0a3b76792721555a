"""The frontier surrogate: a BoTorch GP over (policy size, reward system, rho, budget).

Model (why this and not ``MixedSingleTaskGP``): a ``SingleTaskGP`` whose kernel is the sum
of two products,

    k(x, x') = k_level(z, b) * B_level[c, c']  +  k_shape(z, rho, b) * B_shape[c, c']

with ``z`` = log10 policy parameters, ``b`` = log10 FLOPs, ``rho`` the update fraction and
``c`` the reward system. ``B_*`` are low-rank-plus-diagonal task covariances
(``gpytorch.kernels.IndexKernel``, the ICM kernel of ``MultiTaskGP``), so reward systems
share strength according to a learned similarity (rule rewards with each other, PRMs with
each other) rather than the single "same or not" correlation of a categorical kernel.

* The *level* term does not depend on rho. How good a policy gets with more compute is
  the largest and least certain effect when extrapolating from cheap pilot budgets to the
  target budget; carried by its own term, that uncertainty shifts a frontier's sample
  paths up and down together and leaves their argmax (rho*, the decision) alone.
* The *shape* term carries the rho dependence; its budget lengthscale says how far a
  frontier's shape measured at a pilot budget transfers to the target budget, learned
  from pilots at more than one budget (budget as a fidelity).
* It fits in ~0.2-1 s on 200 points on 2 cores; ``MixedSingleTaskGP`` takes 2-6 s there,
  too slow for an active loop that refits after every batch (``kernel="mixed"`` selects it).

Inputs are normalised to the unit cube with fixed bounds (:class:`Domain`) so that a
training set at a single budget still gives a well-defined budget axis; outcomes are
standardised; seed replicates are averaged and their pooled variance becomes
``train_Yvar`` (:func:`surrogate.data.group_replicates`).

Shapes: ``X`` is ``(n, 4)`` with columns :data:`surrogate.data.FEATURES`; means and stds
are ``(n,)``; frontier samples are ``(n_samples, G)`` for a rho grid of ``G`` points.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

from surrogate.data import RHO, B, C, TrainingData, Z, extract, group_replicates

__all__ = ["Domain", "FrontierSurrogate", "NotFittedError"]

DTYPE = torch.float64
KERNELS = ("additive", "mixed")


def _dense_index_kernel() -> type:
    """``IndexKernel`` evaluated densely.

    gpytorch multiplies lazy kernel matrices with ``MulLinearOperator``, which works through
    approximate root decompositions; with only a handful of reward systems the dense
    5x5-indexed matrix is exact and an order of magnitude faster to fit.
    """
    from gpytorch.kernels import IndexKernel

    class DenseIndexKernel(IndexKernel):
        def forward(self, i1: torch.Tensor, i2: torch.Tensor, **params: Any) -> torch.Tensor:
            return super().forward(i1, i2, **params).to_dense()

    return DenseIndexKernel


class NotFittedError(RuntimeError):
    """The surrogate has not been fitted (or had no usable records)."""


@dataclass(frozen=True)
class Domain:
    """Normalisation bounds of the continuous features (log10 units for params and FLOPs)."""

    log10_params: tuple[float, float]
    log10_budget: tuple[float, float]

    def bounds(self) -> torch.Tensor:
        """``(2, 4)`` bounds for ``Normalize`` (the reward column is not normalised)."""
        return torch.tensor(
            [
                [self.log10_params[0], 0.0, 0.0, self.log10_budget[0]],
                [self.log10_params[1], 1.0, 1.0, self.log10_budget[1]],
            ],
            dtype=DTYPE,
        )


def _span(values: Iterable[float], pad: float, min_width: float) -> tuple[float, float]:
    v = list(values)
    lo, hi = min(v) - pad, max(v) + pad
    if hi - lo < min_width:
        mid = (lo + hi) / 2
        lo, hi = mid - min_width / 2, mid + min_width / 2
    return lo, hi


class FrontierSurrogate:
    """GP surrogate of one target metric; scikit-learn style (``fit`` returns self).

    Args:
        target: metric to model: "native", "pass1" or "judge".
        rewards: every reward system that may be queried (fixes the category order); by
            default those in the training records.
        models: policy name -> parameter count, for queries by name; records add theirs.
        budget_range: (lo, hi) FLOPs spanned by the budget axis; by default the records'
            range padded by half a decade. The planner passes (pilot / 10, target).
        kernel: "additive" (see the module docstring) or "mixed" (``MixedSingleTaskGP``).
        task_rank: rank of the reward-system covariances of the additive kernel.

    Learned state (after :meth:`fit`): ``model_`` (the BoTorch model), ``data_``
    (:class:`~surrogate.data.TrainingData`), ``rewards_``, ``models_``, ``domain_``,
    ``n_records_``, ``fit_seconds_``.
    """

    def __init__(
        self,
        target: str = "native",
        *,
        rewards: Sequence[str] | None = None,
        models: Mapping[str, float] | None = None,
        budget_range: tuple[float, float] | None = None,
        kernel: str = "additive",
        task_rank: int = 1,
    ) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        self.target = target
        self.rewards = tuple(rewards) if rewards is not None else None
        self.models = dict(models or {})
        self.budget_range = budget_range
        self.kernel = kernel
        self.task_rank = task_rank

    # ------------------------------------------------------------------ fitting
    def fit(self, records: Iterable[Any]) -> FrontierSurrogate:
        """Fit on pilot records (``RunRecord`` objects or flat rows); returns self.

        Raises :class:`NotFittedError` when fewer than 2 records measured the target.
        """
        t0 = time.perf_counter()
        obs = extract(records, self.target)
        if len(obs) < 2:
            raise NotFittedError(
                f"surrogate: {len(obs)} record(s) with a {self.target!r} value; need at least 2"
            )
        rewards = list(self.rewards or ())
        rewards += sorted({o.reward for o in obs} - set(rewards))
        self.rewards_ = tuple(rewards)
        self.models_ = {**self.models, **{o.model: o.model_params for o in obs}}
        self.data_ = group_replicates(obs, self.rewards_)
        self.domain_ = self._domain(obs)
        self.model_ = self._build(self.data_)
        self._fit_hyperparameters(self.model_)
        self.n_records_ = len(obs)
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _domain(self, obs: Sequence[Any]) -> Domain:
        params = [math.log10(p) for p in self.models_.values()]
        budgets = [math.log10(o.flops) for o in obs]
        if self.budget_range is not None:
            budgets += [math.log10(b) for b in self.budget_range]
        return Domain(_span(params, 0.25, 1.0), _span(budgets, 0.0 if self.budget_range else 0.5, 1.0))

    def _build(self, data: TrainingData) -> Any:
        from botorch.models import MixedSingleTaskGP, SingleTaskGP
        from botorch.models.transforms.input import Normalize
        from botorch.models.transforms.outcome import Standardize

        X = torch.as_tensor(data.X, dtype=DTYPE)
        Y = torch.as_tensor(data.y, dtype=DTYPE).unsqueeze(-1)
        Yvar = None if data.yvar is None else torch.as_tensor(data.yvar, dtype=DTYPE).unsqueeze(-1)
        normalize = Normalize(d=4, indices=[Z, RHO, B], bounds=self.domain_.bounds())
        if self.kernel == "mixed":
            return MixedSingleTaskGP(
                X, Y, cat_dims=[C], train_Yvar=Yvar, input_transform=normalize,
                outcome_transform=Standardize(m=1),
            )
        return SingleTaskGP(
            X, Y, train_Yvar=Yvar, covar_module=self._additive_kernel(len(data.rewards)),
            input_transform=normalize, outcome_transform=Standardize(m=1),
        )

    def _additive_kernel(self, n_rewards: int) -> Any:
        from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior

        IndexKernel = _dense_index_kernel()
        rank = max(1, min(self.task_rank, n_rewards))
        level = get_covar_module_with_dim_scaled_prior(
            ard_num_dims=2, active_dims=[Z, B]
        ) * IndexKernel(num_tasks=n_rewards, rank=rank, active_dims=[C])
        shape = get_covar_module_with_dim_scaled_prior(
            ard_num_dims=3, active_dims=[Z, RHO, B]
        ) * IndexKernel(num_tasks=n_rewards, rank=rank, active_dims=[C])
        return level + shape

    @staticmethod
    def _fit_hyperparameters(model: Any) -> None:
        import warnings

        from botorch.fit import fit_gpytorch_mll
        from gpytorch.mlls import ExactMarginalLogLikelihood

        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        with warnings.catch_warnings():
            # Optimizer chatter (e.g. "ABNORMAL_TERMINATION_IN_LNSRCH") is not actionable
            # for users; a failed fit raises ModelFittingError instead.
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(mll)
        model.eval()

    def _check(self) -> None:
        if not hasattr(self, "model_"):
            raise NotFittedError("surrogate: call fit(records) first")

    # ------------------------------------------------------------------ encoding
    def encode(
        self, model: str | float, reward: str, rho: ArrayLike, budget: ArrayLike
    ) -> NDArray[np.float64]:
        """Feature rows ``(n, 4)`` for one (model, reward) at rho ``(n,)`` and budget
        (scalar or ``(n,)``, FLOPs). ``model`` is a name or a parameter count."""
        self._check()
        params = self.models_.get(model) if isinstance(model, str) else float(model)
        if params is None:
            raise KeyError(f"surrogate: unknown model {model!r}; pass models={{name: params}}")
        if reward not in self.rewards_:
            raise KeyError(f"surrogate: reward {reward!r} not in {self.rewards_}; pass rewards=")
        r = np.atleast_1d(np.asarray(rho, dtype=float))
        b = np.broadcast_to(np.log10(np.asarray(budget, dtype=float)), r.shape)
        return np.stack(
            [np.full(r.shape, math.log10(params)), np.full(r.shape, float(self.rewards_.index(reward))), r, b],
            axis=-1,
        )

    # ------------------------------------------------------------------ prediction
    def posterior(self, X: ArrayLike, observation_noise: bool = False) -> Any:
        """BoTorch posterior at ``X`` ``(..., n, 4)`` (joint over the ``n`` points)."""
        self._check()
        with torch.no_grad():
            return self.model_.posterior(torch.as_tensor(np.asarray(X), dtype=DTYPE), observation_noise=observation_noise)

    def predict(
        self, X: ArrayLike, observation_noise: bool = False
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Posterior mean and std ``(n,)`` of the target at ``X`` ``(n, 4)``; with
        ``observation_noise`` the std is that of a new run's measurement."""
        post = self.posterior(X, observation_noise=observation_noise)
        mean = post.mean.squeeze(-1).numpy()
        std = post.variance.clamp_min(0).sqrt().squeeze(-1).numpy()
        return mean, std

    def frontier(
        self, model: str | float, reward: str, budget: float, rho_grid: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Posterior mean and std ``(G,)`` of the frontier of one setting on ``rho_grid``."""
        return self.predict(self.encode(model, reward, rho_grid, budget))

    def sample_frontier(
        self,
        model: str | float,
        reward: str,
        budget: float,
        rho_grid: ArrayLike,
        n_samples: int = 256,
        seed: int = 0,
    ) -> NDArray[np.float64]:
        """Joint posterior sample paths ``(n_samples, G)`` of one setting's frontier."""
        from botorch.sampling import SobolQMCNormalSampler

        post = self.posterior(self.encode(model, reward, rho_grid, budget))
        # Quasi-MC base samples: lower-variance regime probabilities than iid draws.
        sampler = SobolQMCNormalSampler(sample_shape=torch.Size([n_samples]), seed=seed)
        with torch.no_grad():
            return sampler(post).squeeze(-1).numpy()

    def lookahead_samples(
        self,
        X_candidates: ArrayLike,
        X_grid: ArrayLike,
        n_fantasies: int = 8,
        n_samples: int = 128,
        seed: int = 0,
    ) -> NDArray[np.float64]:
        """Frontier samples after a fantasised observation at each candidate.

        Conditions the GP on ``n_fantasies`` draws of a new run's outcome at each of the
        ``C`` candidates ``(C, 4)`` (``Model.fantasize``) and samples the ``G`` grid points
        ``(G, 4)`` jointly. Returns ``(n_fantasies, C, n_samples, G)``; base samples are
        shared across candidates and with ``sample_frontier(..., n_samples, seed)``
        (common random numbers), so candidates and the current state compare fairly.
        """
        from botorch.sampling import SobolQMCNormalSampler

        self._check()
        Xc = torch.as_tensor(np.asarray(X_candidates), dtype=DTYPE).unsqueeze(-2)  # (C, 1, 4)
        Xg = torch.as_tensor(np.asarray(X_grid), dtype=DTYPE)
        fsampler = SobolQMCNormalSampler(sample_shape=torch.Size([n_fantasies]), seed=seed + 1)
        with torch.no_grad():
            fm = self.model_.fantasize(Xc, sampler=fsampler, observation_noise=self._noise_for(Xc))
            post = fm.posterior(Xg)  # batch (n_f, C) over G points
            # Same base samples as sample_frontier(..., seed): before/after compare fairly.
            gsampler = SobolQMCNormalSampler(sample_shape=torch.Size([n_samples]), seed=seed)
            s = gsampler(post).squeeze(-1)  # (S, n_f, C, G)
        return s.permute(1, 2, 0, 3).numpy()

    def _noise_for(self, X: torch.Tensor) -> torch.Tensor | None:
        """Noise of one new run, in the model's standardised outcome space (fixed-noise
        models need it given; inferred-noise models use their learned level)."""
        if self.data_.yvar is None:
            return None
        yvar = float(np.median(self.data_.yvar * self.data_.counts))  # one run, not a mean
        std = float(self.model_.outcome_transform.stdvs.squeeze())
        return torch.full((*X.shape[:-1], 1), yvar / std**2, dtype=DTYPE)

    def condition_on(self, X: ArrayLike, y: ArrayLike) -> FrontierSurrogate:
        """A copy conditioned on extra observations ``y`` ``(k,)`` at ``X`` ``(k, 4)``
        without refitting hyperparameters (pending runs, kriging believer)."""
        self._check()
        Xt = torch.as_tensor(np.asarray(X), dtype=DTYPE)
        Yt = torch.as_tensor(np.asarray(y), dtype=DTYPE).reshape(-1, 1)
        kwargs: dict[str, Any] = {}
        noise = self._noise_for(Xt)
        if noise is not None:
            kwargs["noise"] = noise
        new = object.__new__(FrontierSurrogate)
        new.__dict__.update(self.__dict__)
        with torch.no_grad():
            # condition_on_observations needs the prediction caches built once; it takes
            # raw X and Y (it applies the model's transforms) and standardised noise.
            self.model_.posterior(Xt)
            new.model_ = self.model_.condition_on_observations(Xt, Yt, **kwargs)
        return new

    # ------------------------------------------------------------------ validation
    def loo_cv(self) -> Any:
        """Leave-one-out cross-validation at the fitted hyperparameters
        (:func:`surrogate.cv.loo_cv`)."""
        from surrogate.cv import loo_cv

        return loo_cv(self)
