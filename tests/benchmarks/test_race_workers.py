"""benchmarks/race_workers.py: its arms are checked before any (half-hour) race starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


def test_an_unknown_arm_fails_before_racing(load_script: Callable[..., ModuleType], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_script("race_workers")
    with pytest.raises(SystemExit) as exc:
        bench.main(["--arms", "fill,fast", "--out", str(tmp_path / "r.json")])
    assert exc.value.code == 2
    assert "--arms: unknown arm 'fast'; use fill, no-fill" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
