"""Calibrating a world's policy capacities from runs: recovery on simulated runs whose
truth is known, the base rule, bad input, and the shipped tiny entries against the
stored real campaign."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from planner.schema import TARGETS
from runners.sim.calibrate import (
    MeasuredRuns,
    calibrate,
    huber,
    measured_base,
    measured_runs,
    prompts_trained,
    world_text_with,
)
from runners.sim.dynamics import base_metrics, learn
from runners.sim.levers import levers_at
from runners.sim.world import Capacity, load_world
from runners.store import PilotStore

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = ROOT / "reports" / "tiny-campaign" / "data"

TRUE = {"native": Capacity(0.40, 0.80, 3000.0), "pass1": Capacity(0.20, 0.45, 6000.0),
        "judge": Capacity(0.60, 0.90, 2000.0)}


def _simulated_runs(world, model: str, rewards=("sparse", "dense", "prm"), true=TRUE) -> MeasuredRuns:
    """Noise-free runs of ``model`` at capacities ``true``, spread over rho and budgets
    from the start of the curve to its shoulder (so the ceiling is identified)."""
    w = dataclasses.replace(world, models={**world.models, model: true})
    cols: dict[str, list] = {k: [] for k in ("reward", "budget", "n", "g", "k", "mu")}
    metrics: dict[str, list] = {t: [] for t in TARGETS}
    base: dict[str, list] = {t: [] for t in TARGETS}
    for reward in rewards:
        rho = np.repeat([0.3, 0.5, 0.7, 0.85], 3)
        budget = np.tile([3e11, 3e12, 3e13], 4)
        lv = levers_at(model, reward, rho, budget)
        out = learn(w, model, reward, lv.prompts, lv.generated, lv.kept, lv.iterations)
        b = base_metrics(w, model, reward)
        cols["reward"] += [reward] * rho.size
        cols["budget"] += list(budget)
        for key, arr in zip(("n", "g", "k", "mu"), (lv.prompts, lv.generated, lv.kept, lv.iterations),
                            strict=True):
            cols[key] += list(arr)
        for t in TARGETS:
            metrics[t] += list(out[t])
            base[t] += [b[t]] * rho.size
    return MeasuredRuns(
        reward=np.array(cols["reward"]), budget=np.array(cols["budget"]), prompts=np.array(cols["n"]), generated=np.array(cols["g"]),
        kept=np.array(cols["k"]), iterations=np.array(cols["mu"]),
        metrics={t: np.array(v) for t, v in metrics.items()},
        base={t: np.array(v) for t, v in base.items()},
    )


def test_calibrate_recovers_known_capacities_from_simulated_runs() -> None:
    world = load_world("paper")
    runs = _simulated_runs(world, "tiny-m")
    scales = np.logspace(2, 5, 31)  # 0.1-decade steps; 10**3.5 = 3162 is the nearest to 3000
    cal = calibrate(world, "tiny-m", runs, ceilings=21, scales=scales)
    assert cal.runs == len(runs) == 36
    for t, truth in TRUE.items():
        got = cal.targets[t].capacity
        assert got.base == pytest.approx(truth.base, abs=1e-12)  # measured, not fitted
        step = (1.0 - truth.base - 0.01) / 20
        assert abs(got.ceiling - truth.ceiling) <= step + 1e-9, (t, got)
        assert abs(np.log10(got.scale / truth.scale)) <= 0.1 + 1e-9, (t, got)
        assert cal.targets[t].ceiling_range[0] <= got.ceiling <= cal.targets[t].ceiling_range[1]
        assert cal.targets[t].predicted_gain == pytest.approx(cal.targets[t].observed_gain, abs=0.02)


def test_calibrate_never_fits_a_ceiling_above_one_for_a_base_near_one(tmp_path: Path) -> None:
    """A judge base of 0.993 (a strong policy on easy prompts): the ceiling grid started at
    base + 0.01 = 1.003, the fit picked 1.00008, and the world written with it did not load."""
    world = load_world("paper")
    true = {**TRUE, "judge": Capacity(0.993, 1.0, 2.2e5)}
    runs = _simulated_runs(world, "tiny-m", true=true)
    cal = calibrate(world, "tiny-m", runs, scales=np.logspace(4, 7, 61))
    fit = cal.targets["judge"]
    assert fit.capacity.base == pytest.approx(0.993)
    assert fit.capacity.base < fit.capacity.ceiling <= 1.0, fit.capacity
    assert fit.ceiling_range[1] <= 1.0
    out = tmp_path / "fitted.toml"
    out.write_text(world_text_with(Path(world.path).read_text(), {"tiny-m": cal}, note="test", name="fitted"))
    assert load_world(out).capacity("tiny-m", "judge").ceiling <= 1.0


def test_calibrate_names_the_fix_for_a_native_base_below_zero() -> None:
    """prm runs alone, in a world whose prm lift exceeds their base reward: the base mapped
    back is negative, and the error said to evaluate on harder prompts (that makes it worse)."""
    world = load_world("paper")
    lifted = dataclasses.replace(world.reward("prm"), native_lift=0.6)
    world = dataclasses.replace(world, rewards={**world.rewards, "prm": lifted})
    runs = _simulated_runs(world, "tiny-m", rewards=("prm",))
    runs = dataclasses.replace(runs, base={**runs.base, "native": np.full(len(runs), 0.45)})
    with pytest.raises(ValueError, match=r"native base.* is -0\.375.*rule reward \(sparse\)") as exc:
        calibrate(world, "tiny-m", runs, ceilings=3, scales=np.logspace(2, 4, 3))
    assert "harder prompts" not in str(exc.value)


def test_measured_base_reads_native_from_rewards_without_partial_credit() -> None:
    world = load_world("paper")
    runs = _simulated_runs(world, "tiny-m")
    base = measured_base(world, runs)
    assert base == pytest.approx({t: c.base for t, c in TRUE.items()})  # not the dense/prm lifted rates
    graded = runs.subset(runs.reward != "sparse")  # only lifted native: mapped back through the lift
    assert measured_base(world, graded)["native"] == pytest.approx(TRUE["native"].base)


def test_calibrate_refuses_too_few_runs() -> None:
    world = load_world("paper")
    runs = _simulated_runs(world, "tiny-m").subset(np.arange(36) < 2)
    with pytest.raises(ValueError, match="tiny-m has 2 runs; at least 3"):
        calibrate(world, "tiny-m", runs)


def test_huber_is_quadratic_inside_and_linear_outside() -> None:
    r = np.array([-0.05, -0.01, 0.0, 0.01, 0.05])
    assert huber(r, 0.02) == pytest.approx([0.0008, 0.00005, 0.0, 0.00005, 0.0008])


@pytest.mark.parametrize("world_name", ["paper", "contrast", "flat", "noisy", "shifted"])
def test_shipped_tiny_bases_are_the_campaign_measurements(world_name: str) -> None:
    """The worlds' tiny-s/tiny-m bases are what the stored real campaign measured
    (benchmarks/calibrate_tiny.py prints them); a rerun campaign that moves them fails here."""
    world = load_world(world_name)
    runs = measured_runs(PilotStore(CAMPAIGN).records())
    assert set(runs) == {"tiny-s", "tiny-m"}
    for model, mr in runs.items():
        measured = measured_base(load_world("paper"), mr)
        for t in TARGETS:
            assert world.capacity(model, t).base == pytest.approx(measured[t], abs=0.0005), (model, t)


def test_prompts_trained_reads_the_rounds_the_run_really_had() -> None:
    """A trl record's card carries its guard-sized rounds: calibration simulates those
    prompts, not the plan's; a record without them (older, or another engine) falls back
    to the plan."""
    recs = [r for r in PilotStore(CAMPAIGN).records() if r.status == "ok"]
    off = [r for r in recs if sum(r.card.model_extra["rounds"]) != r.plan.total_prompts]
    assert off, "the stored campaign has runs whose guard moved the prompt count"
    r = off[0]
    assert prompts_trained(r) == sum(r.card.model_extra["rounds"]) != r.plan.total_prompts
    bare = r.model_copy(update={"card": r.card.model_copy(update={"rounds": None})})
    assert prompts_trained(bare) == r.plan.total_prompts
    runs = measured_runs([r])[r.model]
    assert runs.prompts.tolist() == [prompts_trained(r)]
