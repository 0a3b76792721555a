from __future__ import annotations

from planner.engine import failure_kind


class _Failed(Exception):
    def __init__(self, kind: object) -> None:
        super().__init__("boom")
        self.kind = kind


def test_failure_kind_passes_on_an_engine_s_own_kind() -> None:
    assert [failure_kind(_Failed(k)) for k in ("error", "oom", "nan", "timeout", "crash")] == [
        "error", "oom", "nan", "timeout", "crash"]


def test_failure_kind_ignores_a_kind_attribute_that_is_no_failure_kind() -> None:
    """An exception of another library with a ``kind`` of its own gave the failed record
    that string as its failure kind (and RunFailed a kind outside its five)."""
    assert failure_kind(_Failed("disk")) == "error"
    assert failure_kind(_Failed(3)) == "error"
    lost = RuntimeError("CUDA out of memory")
    lost.kind = "cuda"  # type: ignore[attr-defined]
    assert failure_kind(lost) == "oom"  # classified as one without a kind
