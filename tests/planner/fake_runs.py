"""Records a strategy's proposals would make, without running anything: each setting's
metric is a parabola in rho (:func:`bump`), so where its peak lies is known. Shared by
the strategy tests (test_strategies, test_ours, test_quadratic, test_guess)."""

from __future__ import annotations

from planner.frontier import Setting
from planner.schema import ComputeCard, Metrics, Proposal, RunRecord, run_id_for
from planner.strategies import RaceProblem

S = Setting("qwen2.5-1.5b", "sparse")
P = Setting("qwen2.5-1.5b", "prm")
PROBLEM = RaceProblem((S, P), budget=1e16, pilot_budget=1e15)


def bump(rho: float, peak: float) -> float:
    """The metric at ``rho`` of a setting whose best rho is ``peak`` (0.6 there)."""
    return 0.6 - 2.0 * (rho - peak) ** 2


def run(p: Proposal, peak: dict[Setting, float], seed: int = 0) -> RunRecord:
    """The record of ``p``'s run at ``seed``: planned FLOPs spent, metric :func:`bump` at
    its setting's ``peak``."""
    plan = p.plan
    return RunRecord(
        run_id=run_id_for(p.id, seed), proposal_id=p.id, status="ok", engine="fake", simulated=True,
        model=plan.model, model_params=1.5e9, reward=plan.reward, budget=plan.budget,
        rho_planned=plan.rho, seed=seed, plan=plan, card=ComputeCard(flops=plan.flops, rho=plan.rho),
        metrics=Metrics(native=bump(plan.rho, peak[Setting(plan.model, plan.reward)])),
    )
