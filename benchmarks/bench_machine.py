"""The machine a benchmark ran on, and the pins that make its races portable across x86-64 CPUs.

A race feeds each GP fit back into its next proposals, so a last-bit rounding difference in
one fit becomes another race (docs/benchmark.md, "At HEAD on 12-04"). The races' floating
point goes through libraries whose kernels depend on the CPU: MKL (torch's BLAS and
LAPACK: the GP's matrix products and Cholesky factors), OpenBLAS (numpy's and scipy's: the
acquisition's L-BFGS-B), glibc's libm (``exp``, ``log``, ``pow``: FMA variants chosen at
load), ATen's own vector kernels and numpy's SIMD loops. ``benchmarks/math_paths.py``
replays one race with each pinned alone: on the 2-core AMD EPYC box of 12-04, MKL's path,
OpenBLAS's kernel and libm's variant each moved it; ATen's dispatch and numpy's loops did
not.

:data:`PORTABLE_MATH` pins each to the path every x86-64 CPU has (MKL's conditional numerical
reproducibility in its ``COMPATIBLE`` branch; OpenBLAS's generic SSE kernels, ``Katmai``, to
which numpy's build also sends ``Prescott`` and ``Core2``; libm's SSE2 variants, FMA and AVX2
masked through ``GLIBC_TUNABLES``, in glibc's names since 2.33 and before; ATen's
``default``, no vector ISA) and every library to one thread, whose reductions then split the
same way on any core count. MKL documents ``COMPATIBLE`` as reproducible across Intel and
compatible processors at a fixed thread count and MKL version; the whole recipe has been
checked on one machine only. Not pinned: numpy's own SIMD loops (turning its AVX2 and
AVX-512 loops off left the race alone). ``GLIBC_TUNABLES`` is read by the dynamic loader at
start-up only and replaces any tunables of the caller's; the libm pin applies on glibc
systems, and no library reports it back, so :func:`portable_in_effect` can only see that
it was in the environment. The libraries read these when they load, so a pinned run starts
a fresh interpreter (``planner_bench.py --portable-math`` restarts itself).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PORTABLE_MATH", "fingerprint", "pin_env", "pinned", "portable_in_effect"]

PORTABLE_MATH: dict[str, str] = {
    "MKL_CBWR": "COMPATIBLE",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_CORETYPE": "Katmai",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "ATEN_CPU_CAPABILITY": "default",
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4,-AVX512F,-AVX2_Usable,-FMA_Usable,-FMA4_Usable,-AVX512F_Usable",
}


def pinned(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` carries every pin of :data:`PORTABLE_MATH` (case as MKL reads it)."""
    return all(environ.get(k, "").lower() == v.lower() for k, v in PORTABLE_MATH.items())


def pin_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``environ`` with the pins of :data:`PORTABLE_MATH` set over it."""
    return {**environ, **PORTABLE_MATH}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _blas() -> list[dict[str, Any]]:
    """Every BLAS/OpenMP library loaded in this process, with the kernel it chose
    (threadpoolctl, a dependency of scikit-learn)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - scikit-learn brings it
        return []
    keys = ("internal_api", "prefix", "version", "architecture", "num_threads")
    return [{k: i.get(k) for k in keys} for i in threadpool_info()]


def portable_in_effect(blas: list[dict[str, Any]] | None = None) -> bool:
    """Whether this process runs on the pinned paths: the environment is pinned and every
    loaded OpenBLAS took the pinned kernel (a pin set after the library loaded is not).
    ``blas``: :func:`_blas` of this process once numpy and scipy are loaded, if in hand."""
    if blas is None:
        import numpy  # noqa: F401  (OpenBLAS picks its kernel when numpy loads it)
        import scipy.linalg  # noqa: F401

        blas = _blas()
    arch = [b.get("architecture") for b in blas if b.get("internal_api") == "openblas"]
    return pinned(os.environ) and all(a == PORTABLE_MATH["OPENBLAS_CORETYPE"] for a in arch)


def fingerprint() -> dict[str, Any]:
    """What a benchmark file should say about the machine and math that made it: CPU, core
    count, library versions, the kernels chosen and whether the portable pins were in effect."""
    import botorch
    import gpytorch
    import numpy
    import scipy.linalg  # scipy, and its own OpenBLAS loaded so that _blas lists it
    import torch

    blas = _blas()
    return {
        "cpu": _cpu_model(), "machine": platform.machine(), "cpus": os.cpu_count(),
        # What this process may run on (taskset, a cgroup): the cores it actually had.
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(), "platform": sys.platform,
        "libc": " ".join(platform.libc_ver()),
        "versions": {"torch": torch.__version__, "botorch": botorch.__version__,
                     "gpytorch": gpytorch.__version__, "numpy": numpy.__version__, "scipy": scipy.__version__},
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "blas": blas,
        "env": {k: os.environ.get(k) for k in PORTABLE_MATH},
        "portable_math": portable_in_effect(blas),
    }
