"""benchmarks/math_paths.py: which environment each configuration runs under, and what counts
as the same race."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
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


def test_the_baseline_cpu_row_is_the_portable_recipe_with_more_masked_on_one_core(paths: ModuleType) -> None:
    import os

    configs = dict(paths.CONFIGS)
    row = configs["portable on baseline CPU"]
    portable = configs["portable"]
    # Every pin of the recipe is there, libm's mask only grows, and numpy loses its extensions.
    assert set(portable) < set(row)
    assert {k: v for k, v in row.items() if k != "GLIBC_TUNABLES"}.items() >= {
        k: v for k, v in portable.items() if k != "GLIBC_TUNABLES"}.items()
    masked = set(row["GLIBC_TUNABLES"].split("=", 1)[1].split(","))
    assert set(portable["GLIBC_TUNABLES"].split("=", 1)[1].split(",")) < masked and "-AVX" in masked
    assert set(paths.CORES) <= set(configs) and paths.CORES["portable on baseline CPU"] == 1
    mine = os.sched_getaffinity(0)
    assert paths.first_cores(None) is None
    assert paths.first_cores(1) == {min(mine)}
    with pytest.raises(ValueError, match=r"cores: .* asked"):
        paths.first_cores(len(mine) + 1)


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


def test_the_stored_pinned_benchmark_holds_the_pinned_race_of_math_paths(load_script: Callable[..., ModuleType]) -> None:
    """docs/benchmark.md (Portable math): the pinned benchmark's paper repetition 6 is the
    race math_paths.py ran alone under the same pins, to the last bit, and the file says it
    was pinned; the unpinned 12-04 file holds the native row's race (the same box)."""
    import json

    machine = load_script("bench_machine")
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    rows = {r["config"]: r for r in json.loads((results / "math_paths_1204.json").read_text())["rows"]}
    assert rows["portable"]["pins"] == machine.PORTABLE_MATH and rows["portable"]["key"] == rows["portable again"]["key"]
    for name, row in (("planner_bench_portable_1204_reps0-9.json", rows["portable"]),
                      ("planner_bench_head_1204_reps0-9.json", rows["native"])):
        doc = json.loads((results / name).read_text())
        race = next(o for o in doc["outcomes"] if (o["strategy"], o["world"], o["rep"]) == ("ours", "paper", 6))
        assert [race["flops_target_units"], race["rho_hat"], race["stake"]] == row["key"], name
    pinned = json.loads((results / "planner_bench_portable_1204_reps0-9.json").read_text())["machine"]
    assert pinned["portable_math"] is True and pinned["env"] == machine.PORTABLE_MATH


def test_the_stored_baseline_cpu_race_is_the_portable_race(load_script: Callable[..., ModuleType]) -> None:
    """docs/benchmark.md (Portable math): the pinned race replayed with numpy and glibc
    offered nothing above the x86-64 baseline, on one core, is the pinned race to the last
    bit, and the run that stored it was held to one core."""
    import json

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    earlier = {r["config"]: r for r in json.loads((results / "math_paths_1204.json").read_text())["rows"]}
    rows = {r["config"]: r for r in json.loads((results / "math_paths_baseline_1204.json").read_text())["rows"]}
    baseline = rows["portable on baseline CPU"]
    assert baseline["key"] == rows["portable"]["key"] == earlier["portable"]["key"]
    assert rows["native"]["key"] == earlier["native"]["key"] != baseline["key"]
    assert baseline["usable_cpus"] == 1 and rows["native"]["usable_cpus"] > 1
    assert baseline["torch_cpu_capability"] == "DEFAULT" and set(baseline["blas"]) == {"Katmai"}
