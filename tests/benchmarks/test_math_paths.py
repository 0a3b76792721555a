"""benchmarks/math_paths.py: which environment each configuration runs under, and what counts
as the same race."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture()
def paths(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("math_paths")


def test_native_drops_the_callers_pins_and_portable_sets_them_all(paths: ModuleType) -> None:
    caller = {"PATH": "/bin", "MKL_CBWR": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
    configs = dict(paths.CONFIGS)
    assert paths.config_env(configs["native"], caller) == {"PATH": "/bin"}
    assert paths.config_env(configs["MKL COMPATIBLE"], caller) == {"PATH": "/bin", "MKL_CBWR": "COMPATIBLE"}
    portable = paths.config_env(configs["portable"], caller)
    assert portable["OPENBLAS_CORETYPE"] == "Katmai" and portable["MKL_CBWR"] == "COMPATIBLE"
    assert paths.CONFIGS[0][0] == "native" and configs["native again"] == {}


def _doc(flops: float, rho: list[float], same: list[bool]) -> dict[str, Any]:
    return {"outcomes": [{"flops_target_units": flops, "rho_hat": rho, "stake": [0.1] * len(rho), "same": same,
                          "regret_median": 0.001}],
            "wall_s": 40.0, "suggest_latency": {"records_200_s": 1.0},
            "machine": {"blas": [{"architecture": "Katmai"}], "torch_cpu_capability": "DEFAULT"}}


def test_a_race_that_differs_in_the_last_bit_of_one_estimate_is_another_race(paths: ModuleType) -> None:
    rho = [0.3, 0.7]
    nudged = [0.3, 0.7 + 2**-52]
    rows = paths.rows_of([("native", {}, _doc(36.0, rho, [True, True])),
                          ("native again", {}, _doc(36.0, list(rho), [True, True])),
                          ("MKL COMPATIBLE", {"MKL_CBWR": "COMPATIBLE"}, _doc(36.0, nudged, [True, True]))])
    assert [r["same_as_native"] for r in rows] == [True, True, False]
    assert rows[2]["right"] == 2 and rows[2]["blas"] == ["Katmai"] and rows[0]["cli_suggest_200_s"] is None
