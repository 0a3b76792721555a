"""The local backend on a GPU machine: each run in a fresh process that owns one GPU
through CUDA_VISIBLE_DEVICES; a real CUDA out-of-memory is recorded as ``oom`` and does not
poison the runs after it. Skipped where no GPU is visible (CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planner.compiler import compile_plan
from planner.engine import ProgressFn
from planner.proposals import make_proposal
from planner.schema import Proposal, RunRecord
from runners.backends.local import visible_gpus


def _cuda() -> bool:
    if not visible_gpus():
        return False
    torch = pytest.importorskip("torch")
    return bool(torch.cuda.is_available())


pytestmark = pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")


class GpuProbe:
    """Does real work on the GPU, then returns the sim's record plus what the worker saw."""

    name = "gpu-probe"
    simulated = True

    def __init__(self, device: str = "cuda", **_: object) -> None:
        self.device = device

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        import torch

        from runners.engines.sim import SimEngine

        if seed == 0:  # ask for ~4 TB: a real torch.cuda.OutOfMemoryError
            torch.empty(2 * 10**12, dtype=torch.float16, device=self.device)
        x = torch.randn(4096, 4096, device=self.device)
        y = (x @ x).float()
        torch.cuda.synchronize()
        if progress is not None:
            progress("learning", proposal.budget, proposal.budget, {"loss": float(y.abs().mean())})
        rec = SimEngine().run(proposal, seed)
        seen = {
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "device_count": torch.cuda.device_count(),
            "device_name": torch.cuda.get_device_name(0),
            "pid": os.getpid(),
        }
        return rec.model_copy(update={"provenance": rec.provenance | seen})


def test_one_fresh_process_per_run_on_its_gpu(tmp_path: Path) -> None:
    from runners.execution import execute
    from runners.store import PilotStore

    prop = make_proposal(compile_plan("tiny-s", "sparse", 0.7, 1e12))
    res = execute([prop], data=tmp_path, engine=f"{__name__}:GpuProbe",
                  engine_options={"device": "cuda"}, seeds=3, retries=0, show_progress=False)
    store = PilotStore(tmp_path)
    ok = sorted(store.records(), key=lambda r: r.seed)
    failed = store.records(status="failed")
    print("ok runs:", [(r.seed, r.provenance["cuda_visible"], r.provenance["device_name"],
                        r.provenance["pid"]) for r in ok])
    print("failed:", [(r.seed, r.error) for r in failed])
    assert [r.seed for r in ok] == [1, 2] and len(res.ok) == 2
    assert [(r.seed, r.provenance["failure_kind"]) for r in failed] == [(0, "oom")]
    assert "out of memory" in (failed[0].error or "").lower()
    gpu = visible_gpus()[0]
    assert all(r.provenance["cuda_visible"] == gpu and r.provenance["device_count"] == 1 for r in ok)
    assert len({r.provenance["pid"] for r in ok}) == 2  # a fresh process per run on GPUs
