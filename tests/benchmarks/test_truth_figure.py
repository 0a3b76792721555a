"""The truth figure: every shipped world x setting, with the regime gap it prints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from runners.sim.truth import frontier, regime_gap
from runners.sim.world import list_worlds, load_world


def test_truth_figure_draws_every_world_and_prints_the_gaps(
    load_script: Callable[..., ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("truth_figure", "truth_figure_t")
    out = mod.main(["--out", str(tmp_path / "truth.png")])
    assert out.read_bytes()[:4] == b"\x89PNG"
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()
            if line.split() and line.split()[0] in {p.stem for p in list_worlds()}}
    assert len(rows) == len(list_worlds())
    # Columns follow (1.5b, 3b, 7b) x (sparse, prm): contrast 7b prm is the last.
    expect = regime_gap(frontier("contrast", "qwen2.5-7b", "prm", 1e16)) / load_world("contrast").noise["native"]
    assert float(rows["contrast"][5]) == pytest.approx(expect, abs=0.005)


def test_binary_gap_looks_across_the_update_line_only(load_script: Callable[..., ModuleType]) -> None:
    import numpy as np

    from runners.sim.truth import Frontier

    mod = load_script("truth_figure", "truth_figure_t")
    # Optimum search-heavy (0.70); reward-heavy 0.69 is the closest other regime, but on the
    # same side of the paper's binary call; the closest update-heavy point is 0.60.
    shares = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.2, 0.7, 0.1]])
    f = Frontier("w", "m", "prm", "native", 1e16, np.array([0.3, 0.2, 0.7]),
                 np.array([0.70, 0.69, 0.60]), shares)
    assert regime_gap(f) == pytest.approx(0.01)
    assert mod.binary_gap(f) == pytest.approx(0.10)
    one_side = Frontier("w", "m", "prm", "native", 1e16, np.array([0.3, 0.2]), np.array([0.7, 0.6]), shares[:2])
    assert mod.binary_gap(one_side) == float("inf")
