"""Drawing a noise-free frontier: the regime gap and what the panel shows."""

from __future__ import annotations

import numpy as np
import pytest

from runners.sim.figure import REGIME_COLORS, draw_frontier
from runners.sim.truth import Frontier, frontier, regime_gap


def _frontier(rho: list[float], value: list[float]) -> Frontier:
    r = np.array(rho)
    # rho is the learning share; the rest split so search outweighs reward.
    shares = np.stack([0.7 * (1 - r), r, 0.3 * (1 - r)], axis=1)
    return Frontier("hand", "m", "sparse", "native", 1e16, r, np.array(value), shares)


def test_gap_is_what_the_best_point_of_another_regime_loses() -> None:
    # search-heavy below rho 0.7/1.7 ~ 0.41, update-heavy above; best at 0.6 (update-heavy).
    f = _frontier([0.2, 0.35, 0.5, 0.6, 0.8], [0.50, 0.58, 0.59, 0.60, 0.55])
    assert f.regime == "update-heavy"
    assert regime_gap(f) == pytest.approx(0.60 - 0.58)
    one = _frontier([0.5, 0.6, 0.8], [0.59, 0.60, 0.55])
    assert regime_gap(one) == float("inf")


@pytest.mark.parametrize(("model", "reward", "regime", "gap_sd"), [
    ("qwen2.5-1.5b", "sparse", "update-heavy", 2.83), ("qwen2.5-1.5b", "prm", "reward-heavy", 0.84),
    ("qwen2.5-3b", "sparse", "update-heavy", 1.37), ("qwen2.5-3b", "prm", "reward-heavy", 0.14),
    ("qwen2.5-7b", "sparse", "update-heavy", 0.45), ("qwen2.5-7b", "prm", "search-heavy", 0.03),
])
def test_gap_of_the_contrast_world_is_the_one_the_benchmark_page_quotes(
        model: str, reward: str, regime: str, gap_sd: float) -> None:
    """Known values (docs/benchmark.md, "Read this first"): gap in contrast's native noise
    sd (0.004) at 1e16; the world's comment quotes the first."""
    f = frontier("contrast", model, reward, 1e16)
    assert f.regime == regime
    assert round(regime_gap(f) / 0.004, 2) == gap_sd


def test_panel_stars_the_optimum_colours_regimes_and_bands_one_noise_sd() -> None:
    from matplotlib.figure import Figure

    f = _frontier([0.2, 0.35, 0.5, 0.6, 0.8], [0.50, 0.58, 0.59, 0.60, 0.55])
    ax = Figure().subplots()
    draw_frontier(ax, f, noise=0.04)
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    star = lines["rho* (truth)"]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (0.6, 0.6)
    assert list(lines["search-heavy"].get_xdata()) == [0.2, 0.35]
    assert lines["update-heavy"].get_color() == REGIME_COLORS["update-heavy"]
    band = next(p for p in ax.patches if p.get_label() == "within 1 noise sd of the best")
    lo, hi = band.get_y(), band.get_y() + band.get_height()  # axhspan: a Rectangle in data y
    assert (lo, hi) == (pytest.approx(0.56), pytest.approx(0.60))
    assert "gap to another regime: 0.50 sd" in " ".join(t.get_text() for t in ax.texts)
