"""benchmarks/prediction_coverage.py: its grouping of unfitted settings and its summary."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def pc(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("prediction_coverage", "prediction_coverage_t")


def test_relation_groups_an_unfitted_setting_by_what_the_fit_knows(pc: ModuleType) -> None:
    fitted = [("qwen2.5-1.5b", "sparse"), ("qwen2.5-7b", "prm")]
    assert pc.relation("qwen2.5-3b", "dense", fitted) == "reward unfitted"
    assert pc.relation("qwen2.5-1.5b", "prm", fitted) == "crossed"
    assert pc.relation("qwen2.5-3b", "sparse", fitted) == "between sizes"
    assert pc.relation("qwen2.5-7b", "sparse", fitted[:1]) == "outside sizes"


def test_every_subset_leaves_settings_to_predict_and_the_subsets_cover_each_relation(pc: ModuleType) -> None:
    every = {(m, r) for m in pc.MODELS for r in pc.REWARDS}
    seen = set()
    for fitted in pc.SUBSETS:
        assert set(fitted) < every
        seen |= {pc.relation(m, r, fitted) for m, r in every - set(fitted)}
    assert seen == {"reward unfitted", "crossed", "between sizes", "outside sizes"}


def test_summarise_counts_the_share_inside_the_90_percent_interval(pc: ModuleType) -> None:
    rows = [("a", 0.0, 1.0, 1.0), ("a", 0.0, 1.0, 2.0), ("b", 0.5, 0.0, 0.6)]
    by = {s["kind"]: s for s in pc.summarise(rows)}
    assert by["a"]["n"] == 2 and by["a"]["inside90"] == 0.5 and by["a"]["mean_z"] == pytest.approx(1.5)
    assert by["b"]["inside90"] == 0.0 and math.isinf(by["b"]["mean_z"])  # a zero std misses
    assert by["all"]["n"] == 3


def test_repetitions_draw_their_own_noise(pc: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A repetition of ``race`` is another draw of the sim's noise, as in the benchmark: with
    every repetition's runs at seed 0, the deterministic part of ours' race (initial design,
    fit, anchors) repeated the same runs, measured the same, and counted them again."""
    import planner.loop
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal

    prop = make_proposal(compile_plan("qwen2.5-1.5b", "sparse", 0.5, 1e16), target="native")
    measured: list[float] = []

    def one_run(problem: object, strategy: object, engine: Any, store: object, **_: object) -> None:
        measured.append(float(engine.run(prop, 0).metrics.native))  # the race's first replicate

    monkeypatch.setattr(planner.loop, "run_race", one_run)
    for rep in (0, 1):
        pc.race("paper", rep, tmp_path)
    assert measured[0] != measured[1]


def test_a_transfer_subset_raced_again_draws_new_noise(pc: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """``--reps`` past the number of subsets races a subset again: at seed 0 it repeated the
    first round's runs exactly. The first round keeps seed 0 (the stored --reps 4 file)."""
    import planner.loop
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal

    prop = make_proposal(compile_plan("qwen2.5-1.5b", "sparse", 0.5, 1e16), target="native")
    measured: list[float] = []

    def one_run(problem: object, strategy: object, engine: Any, store: object, **_: object) -> None:
        measured.append(float(engine.run(prop, 0).metrics.native))

    monkeypatch.setattr(planner.loop, "run_race", one_run)
    n = len(pc.SUBSETS)
    for rep in (0, n, 2 * n):
        pc.transfer("paper", rep, tmp_path)
    assert len(set(measured)) == 3
    from planner.engine import load_engine

    assert measured[0] == load_engine("sim", world="paper").run(prop, 0).metrics.native


def test_the_stored_one_setting_rerun_marks_every_prediction_with_the_same_coverage() -> None:
    """docs/schema.md: since one fitted setting without replicates marks a prediction, the
    one-setting races of 12-03 re-run on 12-04 measure the same runs, every one marked."""
    import json

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

    def pooled(name: str) -> dict[str, tuple[int, float]]:
        doc = json.loads((results / name).read_text())
        return {r["kind"].removesuffix(" (marked)"): (r["n"], r["inside90"]) for r in doc["pooled"]} | {
            "marked": (sum(r["n"] for r in doc["pooled"] if r["kind"].endswith("(marked)")), 0.0)}

    before, after = pooled("prediction_coverage_one_setting_1203.json"), pooled("prediction_coverage_one_setting_1204.json")
    assert {k: v for k, v in after.items() if k != "marked"} == {k: v for k, v in before.items() if k != "marked"}
    assert before["marked"][0] == 40 and after["marked"][0] == after["all"][0] == 80


def test_loo_summary_widens_each_std_by_its_fits_rms_and_never_narrows_it(pc: ModuleType) -> None:
    tapped = [("a", 0.0, 1.0, 2.0, 2.0), ("a", 0.0, 1.0, 0.5, 0.5), ("b", 0.0, 1.0, 3.0, 1.5)]
    loo = pc.loo_summary(tapped)
    made = {s["kind"]: s["inside90"] for s in loo["as_made"]}
    wide = {s["kind"]: s["inside90"] for s in loo["widened"]}
    assert made == {"a": 0.5, "b": 0.0, "all": 1 / 3}
    # 2 / (1 x 2) is inside; an RMS below 1 keeps the std; 3 / 1.5 = 2 still misses
    assert wide == {"a": 1.0, "b": 0.0, "all": 2 / 3}
    assert loo["rms_quantiles"]["min"] == 0.5 and loo["rms_quantiles"]["max"] == 2.0


def test_loo_tap_gives_every_fitted_prediction_of_a_race_its_fits_rms(pc: ModuleType, tmp_path: Path) -> None:
    tapped: list[tuple[str, float, float, float, float]] = []
    rows = pc.race("paper", 0, tmp_path, settings=[("qwen2.5-1.5b", "sparse")], loo=tapped)
    assert rows and [t[:4] for t in tapped] == rows  # a prediction exists only once a fit does
    assert all(math.isfinite(t[4]) and t[4] > 0 for t in tapped)


def test_the_stored_loo_rerun_shows_the_fits_own_z_scores_cannot_widen_a_guessed_noise() -> None:
    """docs/schema.md: in the one-setting races the fits' LOO z RMS sits near 1, so a std
    widened by it covers what the std as made covers (the 1204 figures)."""
    import json

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    loo = json.loads((results / "prediction_coverage_one_setting_loo_1204.json").read_text())
    base = json.loads((results / "prediction_coverage_one_setting_1204.json").read_text())
    assert loo["pooled"] == base["pooled"] == loo["loo"]["as_made"]
    made = {s["kind"]: s["inside90"] for s in loo["loo"]["as_made"]}
    wide = {s["kind"]: s["inside90"] for s in loo["loo"]["widened"]}
    assert made == wide and made["acquisition (marked)"] == 0.6
    assert loo["loo"]["rms_quantiles"]["max"] < 1.2


def test_noise_sd_world_states_each_worlds_own_noise_to_ours(pc: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    import planner.loop
    import planner.strategies

    told: list[object] = []
    real = planner.strategies.make_strategy

    def capture(name: str, problem: Any, seed: int, **opts: Any) -> Any:
        told.append(opts.get("noise_sd"))
        return real(name, problem, seed, **opts)

    monkeypatch.setattr(planner.strategies, "make_strategy", capture)
    monkeypatch.setattr(planner.loop, "run_race", lambda *a, **k: None)
    for world, sd in (("contrast", "world"), ("paper", "world"), ("paper", "0.02"), ("paper", None)):
        pc.race(world, 0, tmp_path, settings=[("qwen2.5-1.5b", "sparse")], noise_sd=sd)
    assert told == [0.004, 0.010, 0.02, None]


def test_the_stored_stated_noise_rerun_covers_more_than_the_guess_and_is_unmarked_but_for_the_anchors() -> None:
    """docs/planner.md ("A stated noise") and docs/schema.md quote these figures."""
    import json

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

    def pooled(name: str) -> dict[str, tuple[int, float]]:
        doc = json.loads((results / name).read_text())
        return {r["kind"]: (r["n"], round(r["inside90"], 2)) for r in doc["pooled"]}

    guessed = pooled("prediction_coverage_one_setting_1204.json")
    stated = pooled("prediction_coverage_one_setting_stated_1204.json")
    assert guessed["acquisition (marked)"] == (25, 0.60) and guessed["validation (marked)"] == (15, 0.73)
    assert stated["acquisition"] == (50, 0.74) and stated["validation"] == (15, 0.87)
    assert stated["anchor (marked)"] == (40, 0.12)
