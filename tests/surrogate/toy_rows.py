"""Records of a toy frontier with a known optimum per reward system (sparse 0.72, prm
0.44), a mild size and budget trend and Gaussian noise: what the surrogate tests fit."""

from __future__ import annotations

import math

import numpy as np

PARAMS = {"small": 1.5e9, "big": 7.6e9}
REWARDS = ("sparse", "prm")


def toy(m: str, r: str, rho: float, b: float) -> float:
    """The noiseless metric of policy ``m`` with reward ``r`` at ``rho`` and budget ``b``."""
    star = 0.72 if r == "sparse" else 0.44
    return 0.4 + 0.05 * math.log10(PARAMS[m] / 1e9) + 0.03 * (math.log10(b) - 15) - 0.3 * (rho - star) ** 2


def rows(n_rho: int = 6, seeds: int = 1, noise: float = 0.005, budgets: tuple[float, ...] = (1e15,)) -> list[dict]:
    """Record rows (``to_row()`` shape) of every policy x reward x budget at ``n_rho``
    evenly spaced rho values in [0.15, 0.9], ``seeds`` replicates each."""
    rng = np.random.default_rng(0)
    out = []
    for m in PARAMS:
        for r in REWARDS:
            for b in budgets:
                for rho in np.linspace(0.15, 0.9, n_rho):
                    for s in range(seeds):
                        out.append(dict(model=m, model_params=PARAMS[m], reward=r, budget=b, rho_planned=rho,
                                        rho=rho, flops_total=b, seed=s, status="ok",
                                        native=toy(m, r, rho, b) + rng.normal(0, noise)))
    return out
