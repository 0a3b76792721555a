"""Drawing a noise-free frontier: where its regimes lie and how far apart they are in noise.

A frontier's regime call is only as decidable as the gap between the best allocation of
its regime and the best of any other, measured in one run's noise sd. This draws the
frontier with each rho point coloured by its regime, rho* marked, and a band one noise sd
below the optimum: every point inside the band is within one run's noise of the best, so
a regime with points there is a contender. Draws onto a matplotlib ``Axes``; saving is
the caller's (the ``runners truth --plot`` CLI, ``benchmarks/truth_figure.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from runners.sim.truth import Frontier, regime_gap

__all__ = ["REGIME_COLORS", "draw_frontier"]

# Same hues as the report's compute components (planner/report/figures.py): search blue,
# learning orange, reward green.
REGIME_COLORS = {"search-heavy": "#4C72B0", "update-heavy": "#DD8452", "reward-heavy": "#55A868"}


def draw_frontier(ax: Any, f: Frontier, noise: float | None = None, *, title: str | None = None) -> None:
    """Plot ``f`` on ``ax``: points coloured by regime, rho* starred, and (with ``noise``,
    the world's sd of one run) the one-sd band below the optimum and the gap in sd units."""
    from planner.regime import LABELS, regime_labels

    labels = np.asarray(regime_labels(f.shares))
    ax.plot(f.rho, f.value, color="#BBBBBB", lw=0.8, zorder=1)
    for i, name in enumerate(LABELS):
        on = labels == i
        if on.any():
            ax.plot(f.rho[on], f.value[on], "o", ms=2.5, color=REGIME_COLORS[name], label=name, zorder=2)
    ax.plot([f.rho_star], [f.value_star], "*", ms=11, color="black", zorder=3, label="rho* (truth)")
    gap = regime_gap(f)
    note = f"{f.regime}, rho* {f.rho_star:.2f}"
    if noise:
        ax.axhspan(f.value_star - noise, f.value_star, color="#999999", alpha=0.18, lw=0, zorder=0,
                   label="within 1 noise sd of the best")
        note += "\ngap to another regime: " + ("none" if np.isinf(gap) else f"{gap / noise:.2f} sd")
    ax.text(0.02, 0.04, note, transform=ax.transAxes, fontsize=7, va="bottom")
    ax.set_title(title or f"{f.model} / {f.reward}", fontsize=9)
