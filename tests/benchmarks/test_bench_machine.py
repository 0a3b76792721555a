"""benchmarks/bench_machine.py: the pins of --portable-math and the machine a results file names."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.fixture()
def machine(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("bench_machine")


def test_pin_env_sets_every_pin_over_the_caller_and_keeps_the_rest(machine: ModuleType) -> None:
    env = machine.pin_env({"PATH": "/bin", "MKL_CBWR": "AVX2"})
    assert env["PATH"] == "/bin" and env["MKL_CBWR"] == "COMPATIBLE"
    assert machine.pinned(env) and not machine.pinned({"PATH": "/bin"})


@pytest.mark.parametrize("drop", ["MKL_CBWR", "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "ATEN_CPU_CAPABILITY",
                                  "GLIBC_TUNABLES"])
def test_pinned_needs_every_pin(machine: ModuleType, drop: str) -> None:
    env = machine.pin_env({})
    assert machine.pinned({k: v.lower() for k, v in env.items()})  # MKL reads the branch in any case
    del env[drop]
    assert not machine.pinned(env)


def test_fingerprint_names_the_kernels_and_says_an_unpinned_process_is_not_portable(
        machine: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKL_CBWR", raising=False)
    fp = machine.fingerprint()
    assert fp["portable_math"] is False and fp["env"]["MKL_CBWR"] is None
    assert fp["cpus"] >= 1 and fp["cpu"] and fp["versions"]["torch"].startswith("2.")
    # numpy's and scipy's OpenBLAS are loaded by now, each with the kernel it chose.
    assert [b for b in fp["blas"] if b["internal_api"] == "openblas" and b["architecture"]]
    assert fp["torch_cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256", "SVE128")
