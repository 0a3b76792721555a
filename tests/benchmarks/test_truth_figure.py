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
