"""The tiny world's model cache (``runners.tinyworld.pretrain._cached``) with a stand-in
trainer: what an unfinished copy or a SIGTERM mid-training leaves, and what the next call does."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from runners.tinyworld.pretrain import _cached, _key, cached_path, recipe_for


def _train(out: Path, recipe: object, show: bool) -> dict[str, float]:
    (out / "model.safetensors").write_text("weights")
    return {"parameters": 1.0}


def test_an_unfinished_copy_is_set_aside_and_the_model_trained_once(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # A copy cut short (no meta.json): the new model could not replace it, so every call
    # trained, threw the model away and failed on the missing meta.json.
    final = tmp_path / _key("tiny-s", 0, True, recipe_for("tiny-s", True))
    final.mkdir()
    (final / "model.safetensors").write_text("partial")
    assert cached_path("tiny-s", quick=True, cache_dir=tmp_path) is None
    got = _cached("tiny-s", 0, True, tmp_path, _train, False)
    assert got == final and (final / "model.safetensors").read_text() == "weights"
    assert json.loads((final / "meta.json").read_text())["name"] == "tiny-s"
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(".incomplete-")]
    assert len(aside) == 1 and (aside[0] / "model.safetensors").read_text() == "partial"
    assert "had no meta.json" in capsys.readouterr().err
    assert cached_path("tiny-s", quick=True, cache_dir=tmp_path) == final


def test_sigterm_mid_training_leaves_no_temporary_folder(tmp_path: Path) -> None:
    from planner.cli.app import Terminated, terminate_as_interrupt

    def killed(out: Path, recipe: object, show: bool) -> dict[str, float]:
        (out / "model.safetensors").write_text("half")
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt")

    with pytest.raises(Terminated), terminate_as_interrupt():
        _cached("tiny-s", 0, True, tmp_path, killed, False)
    assert list(tmp_path.iterdir()) == []
