"""benchmarks/gpu_path.py --stored: tokens per completion of the stored H200 runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_stored_runs_give_about_500_prompt_tokens_per_completion(
        load_script: Callable[..., ModuleType], capsys: pytest.CaptureFixture[str]) -> None:
    gpu = load_script("gpu_path", "gpu_path_t")
    # docs/meter.md quotes these: the prompts are ~500 tokens, not 1,025 (prompt + completion).
    rows = {r["file"]: r for r in gpu.main(["--stored", str(RESULTS / "gpu_path_h200_g8k8mu1.json"),
                                            str(RESULTS / "gpu_path_h200_g16k8mu2.json")])["stored"]}
    assert rows["gpu_path_h200_g8k8mu1.json"]["prompt_tokens"] == pytest.approx(499.7, abs=0.05)
    assert rows["gpu_path_h200_g16k8mu2.json"]["prompt_tokens"] == pytest.approx(512.5, abs=0.05)
    assert {r["completion_tokens"] for r in rows.values()} == {512.0}
    assert "384 completions" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"not a gpu_path\.py result JSON"):
        gpu.main(["--stored", str(RESULTS / "call_rules_ours_cap6.json")])
