"""Building, reading and writing proposals (``proposals.json``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from planner.errors import ConfigError
from planner.files import atomic_write_text
from planner.schema import Prediction, Proposal, ProposalSet, RunPlan

__all__ = ["MAX_PROPOSALS_BYTES", "make_proposal", "proposal_id", "read_proposals", "write_proposals"]

MAX_PROPOSALS_BYTES = 64 * 1024 * 1024


def proposal_id(plan: RunPlan, target: str) -> str:
    """Content-derived id: the same plan always gets the same id (so reruns skip it), and
    two plans that differ in any lever get different ids, even for the same (model, reward,
    rho, budget) request (the grid's and ours' compilers, other compile options): a store
    must never take one plan's record for another's. The digest covers the request and the
    discrete levers, not the derived FLOP floats, whose last bits may differ by platform."""
    levers = (plan.prompt_len, plan.completion_len, plan.max_completion_length, plan.prompts_per_round,
              plan.total_prompts, plan.rounds, plan.completions_per_prompt, plan.completions_kept,
              plan.num_iterations, plan.old_logprobs, f"{plan.beta:.6g}", plan.gradient_checkpointing,
              plan.lm_head_positions, plan.lora_rank, plan.lora_alpha, ",".join(plan.lora_targets))
    key = f"{plan.model}|{plan.reward}|{plan.rho_target:.4f}|{plan.budget:.6g}|{target}|" + "|".join(map(str, levers))
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    return f"{plan.model}.{plan.reward}.r{plan.rho_target:.3f}{_budget_part(plan.budget)}{digest}"


def _budget_part(budget: float) -> str:
    return f".b{budget:.2e}.".replace("+", "")


def id_spells(run_id: str, model: str, reward: str, budget: float) -> bool:
    """Whether ``run_id`` spells its model, reward and budget as :func:`proposal_id` writes
    them (a hand-written id may not)."""
    return run_id.startswith(f"{model}.{reward}.") and _budget_part(budget) in run_id


def make_proposal(
    plan: RunPlan, *, target: str = "native", prediction: Prediction | None = None, reason: str = ""
) -> Proposal:
    """The proposal to run ``plan`` and measure ``target``, under its content-derived id
    (:func:`proposal_id`)."""
    return Proposal(
        id=proposal_id(plan, target),
        model=plan.model,
        reward=plan.reward,
        rho=plan.rho_target,
        budget=plan.budget,
        target=target,  # type: ignore[arg-type]
        plan=plan,
        prediction=prediction,
        reason=reason,
    )


def write_proposals(
    path: str | Path, proposals: Iterable[Proposal], *, target_budget: float | None = None
) -> Path:
    """Write ``proposals`` as a proposals file (a :class:`~planner.schema.ProposalSet`) at
    ``path``, atomically; returns the path."""
    body = ProposalSet(proposals=tuple(proposals), target_budget=target_budget)
    return atomic_write_text(path, body.model_dump_json(indent=2))


def read_proposals(path: str | Path, *, field: str = "proposals") -> ProposalSet:
    """Read and validate a proposals file; one-line :class:`ConfigError` on any problem,
    naming ``field`` (the option that gave the path) for a missing file."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{field}: {str(path)!r} is a directory; give the proposals.json file in it")
    if not path.is_file():
        raise ConfigError(f"{field}: no such file {str(path)!r}; "
                          + ("run `planner suggest` first" if field == "proposals"
                             else "give the proposals.json of the runs still executing"))
    if path.stat().st_size > MAX_PROPOSALS_BYTES:
        raise ConfigError(
            f"{field}: {path} is {path.stat().st_size} bytes, over the "
            f"{MAX_PROPOSALS_BYTES} byte limit; split it into smaller files"
        )
    pset = ProposalSet.load_json(path.read_bytes(), field)
    from planner.compiler import check_plan

    for i, p in enumerate(pset.proposals):
        check_plan(p.plan, where=f"{field}: proposals.{i}.plan")
    return pset
