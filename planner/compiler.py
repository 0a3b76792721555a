"""The budget compiler: (model, reward system, rho, budget) -> a GRPO/LoRA run plan.

Pure given its inputs: no clock, no GPU, no writes. The one read is name resolution:
``planner.registry`` loads the model and reward TOML files (``configs/``, or
``RACE_CONFIGS``) on the first lookup of a process and caches them, so the plans of one
process all come from one set of configs. The math itself (:func:`unit_costs`,
:func:`per_completion`, the lever search) takes typed ``Architecture`` / ``RewardSystem``
values. The levers (docs/accounting.md, "Budget compiler"):

* raise rho: more update passes per rollout batch (``num_iterations`` = mu);
* lower rho: generate ``G`` completions per prompt and train on the ``K <= G`` most
  informative (max-variance down-sampling, Xu et al. 2025);
* the budget then buys a number of prompts: ``total = prompts x cost per prompt``.

Per prompt (P prompt tokens, C completion tokens, S = P + C):

    search   = G * generation(P, C)
    reward   = G * scorer_forward(S)                       (0 for rule-based rewards)
    learning = K * (mu * train_pass(S) + [mu > 1] * forward(S) + [beta > 0] * ref_forward(S))

so rho depends only on (G/K, mu) and the budget only scales the prompt count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray

from planner.accountant import (
    FlopsBreakdown,
    LoRA,
    forward_flops,
    generation_flops,
    reward_model_flops,
    train_pass_flops,
)
from planner.architecture import LINEAR_MODULES, Architecture, lora_targets_problem
from planner.errors import ConfigError, InfeasibleError
from planner.registry import RewardSystem, get_model, get_reward, scorer_for
from planner.schema import FlopsSplit, RunPlan

__all__ = [
    "MATCH_RHO",
    "CompileOptions",
    "PerCompletion",
    "achievable_rho_range",
    "check_plan",
    "compile_pilot",
    "compile_plan",
    "per_completion",
    "unit_costs",
]

BUDGET_TOLERANCE = 0.02
# Requests are compiled at rho rounded to this many digits (a cache key that float noise
# does not split); anything that predicts the compiler's choice must round the same way.
RHO_DIGITS = 6
# How far a pilot's rho may move from the request to keep its target plan's mu.
MATCH_RHO = 0.02
KEPT_CHOICES = (16, 8, 4, 2)


@dataclass(frozen=True)
class CompileOptions:
    """Knobs of a compiled plan that are not levers. ``None`` takes the policy's defaults."""

    prompt_len: int | None = None
    completion_len: int | None = None
    prompts_per_round: int | None = None
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] = LINEAR_MODULES
    group_size: int = 8  # preferred completions trained on per prompt (TRL's num_generations)
    max_generated: int = 64
    max_iterations: int = 16
    beta: float = 0.0
    gradient_checkpointing: bool | None = None
    lm_head_positions: str | None = None
    rho_tolerance: float = 0.05

    def __post_init__(self) -> None:
        # A 0 would silently become the default through ``or`` in resolve(); a typo'd head
        # mode would silently mean "all".
        for name in ("prompt_len", "completion_len", "prompts_per_round", "lora_rank"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ConfigError(f"{name}: must be a positive integer or None, got {v!r}")
        for name, least in (("group_size", 2), ("max_generated", 2), ("max_iterations", 1)):
            # GRPO needs two completions of a prompt to have an advantage at all.
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < least:
                raise ConfigError(f"{name}: must be an integer >= {least}, got {v!r}")
        if not (isinstance(self.beta, int | float) and math.isfinite(self.beta) and self.beta >= 0):
            raise ConfigError(f"beta: must be a finite number >= 0 (the KL coefficient), got {self.beta!r}")
        if self.gradient_checkpointing is not None and not isinstance(self.gradient_checkpointing, bool | np.bool_):
            # bool() of any string is True: "no" or "false" would have meant checkpointing on.
            raise ConfigError(f"gradient_checkpointing: must be True, False or None (the policy's default), "
                              f"got {self.gradient_checkpointing!r}")
        if self.lm_head_positions not in (None, "completion", "all"):
            raise ConfigError(f"lm_head_positions: must be 'completion' or 'all', got {self.lm_head_positions!r}")
        if isinstance(self.lora_targets, str):
            raise ConfigError(f"lora_targets: a list of module names, e.g. ('q_proj', 'v_proj'), got {self.lora_targets!r}")
        # A list is what callers hold; plans are cached by their options, which must hash.
        # Set before the check: a generator would be spent by it.
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        if (problem := lora_targets_problem(self.lora_targets)) is not None:
            raise ConfigError(f"lora_targets: {problem}")
        tol = self.rho_tolerance
        if not (isinstance(tol, int | float) and not isinstance(tol, bool) and math.isfinite(tol) and tol > 0):
            raise ConfigError(f"rho_tolerance: must be a positive number, got {self.rho_tolerance!r}")

    def resolve(self, arch: Architecture) -> CompileOptions:
        d = arch.defaults
        return CompileOptions(
            prompt_len=self.prompt_len or d.prompt_len,
            completion_len=self.completion_len or d.completion_len,
            prompts_per_round=self.prompts_per_round or d.prompts_per_round,
            lora_rank=self.lora_rank or d.lora_rank,
            lora_targets=self.lora_targets,
            group_size=self.group_size,
            max_generated=self.max_generated,
            max_iterations=self.max_iterations,
            beta=self.beta,
            gradient_checkpointing=(
                d.gradient_checkpointing
                if self.gradient_checkpointing is None
                else self.gradient_checkpointing
            ),
            lm_head_positions=self.lm_head_positions or d.lm_head_positions,
            rho_tolerance=self.rho_tolerance,
        )


@dataclass(frozen=True)
class PerCompletion:
    """FLOPs per completion of each phase (the compiler's unit costs)."""

    generate: float
    score: float
    train_pass: float
    old_logprobs: float
    ref_logprobs: float

    def per_prompt(self, generated: int, kept: int, iterations: int, beta: float) -> FlopsBreakdown:
        learning = kept * (
            iterations * self.train_pass
            + (self.old_logprobs if iterations > 1 else 0.0)
            + (self.ref_logprobs if beta > 0 else 0.0)
        )
        return FlopsBreakdown(
            search=generated * self.generate, learning=learning, reward=generated * self.score
        )


def unit_costs(
    policy: Architecture,
    scorer: Architecture | None,
    *,
    prompt_len: int,
    completion_len: int,
    lora: LoRA,
    gradient_checkpointing: bool,
    lm_head_positions: str,
    checkpoint_early_stop: bool = True,
) -> PerCompletion:
    """FLOPs of each phase for one completion (P prompt + C completion tokens), as TRL 1.16
    runs them: KV-cached generation, the scorer's forward over P + C, a LoRA train pass and
    the old/ref log-prob forwards (fused LM head over completion tokens on GPUs, over all
    S - 1 positions elsewhere; its backward recomputes the logits). ``checkpoint_early_stop``
    is off under reentrant checkpointing, which recomputes every layer whole."""
    p, c = prompt_len, completion_len
    s = p + c
    positions = c if lm_head_positions == "completion" else s - 1
    return PerCompletion(
        generate=generation_flops(policy, p, c, lora=lora),
        # The scorer reads at most its context: the runner keeps the tail (the scored steps).
        score=reward_model_flops(scorer, 1, min(s, scorer.max_position_embeddings)) if scorer is not None else 0.0,
        train_pass=train_pass_flops(
            policy,
            1,
            s,
            lora,
            logit_positions=positions,
            gradient_checkpointing=gradient_checkpointing,
            lm_head_recompute=True,
            checkpoint_early_stop=checkpoint_early_stop,
        ),
        old_logprobs=forward_flops(policy, 1, s, logit_positions=positions, lora=lora),
        ref_logprobs=forward_flops(policy, 1, s, logit_positions=positions),
    )


def per_completion(
    arch: Architecture, reward: RewardSystem, opts: CompileOptions
) -> PerCompletion:
    """Unit costs for one completion of ``opts.completion_len`` tokens (``opts`` resolved)."""
    assert opts.prompt_len and opts.completion_len and opts.lora_rank
    return unit_costs(
        arch,
        scorer_for(reward, arch),
        prompt_len=opts.prompt_len,
        completion_len=opts.completion_len,
        lora=LoRA(opts.lora_rank, opts.lora_targets),
        gradient_checkpointing=bool(opts.gradient_checkpointing),
        lm_head_positions=str(opts.lm_head_positions),
    )


@cache
def _candidates(
    unit: PerCompletion, opts: CompileOptions
) -> list[tuple[float, int, int, int, FlopsBreakdown]]:
    """Every lever setting (rho, G, K, mu, per-prompt split), simplest first."""
    out = []
    for kept in KEPT_CHOICES:
        for generated in range(kept, opts.max_generated + 1):
            for mu in range(1, opts.max_iterations + 1):
                split = unit.per_prompt(generated, kept, mu, opts.beta)
                out.append((split.rho, generated, kept, mu, split))
    # Simplest first: the preferred group size, no waste, few passes.
    out.sort(key=lambda t: (abs(math.log2(t[2] / opts.group_size)), t[1] / t[2], t[3]))
    return out


@cache
def _lever_arrays(unit: PerCompletion, opts: CompileOptions) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """rho ``(n,)`` and mu ``(n,)`` of :func:`_candidates`, in its order."""
    cands = _candidates(unit, opts)
    return np.array([c[0] for c in cands], dtype=float), np.array([c[3] for c in cands], dtype=np.int64)


def achievable_rho_range(model: str, reward: str, opts: CompileOptions | None = None) -> tuple[float, float]:
    """The lowest and highest rho the compiler's levers reach for ``(model, reward)``: the
    rho of its candidate plans, whatever the budget."""
    arch, rs = get_model(model), get_reward(reward)
    o = (opts or CompileOptions()).resolve(arch)
    rhos = [c[0] for c in _candidates(per_completion(arch, rs, o), o)]
    return min(rhos), max(rhos)


def compile_plan(
    model: str,
    reward: str,
    rho: float,
    budget: float,
    opts: CompileOptions | None = None,
    *,
    iterations: int | None = None,
) -> RunPlan:
    """Compile a (model, reward, rho, budget) request into a run plan.

    The plan's total is within 2% of ``budget`` and its rho is the closest the levers get
    to ``rho`` (within ``opts.rho_tolerance``); otherwise :class:`InfeasibleError` names
    the nearest feasible rho or budget.

    ``iterations`` (mu) is a preference: levers with that many update passes are taken
    first when one of them lands within :data:`MATCH_RHO` of ``rho`` and 2% of the budget.
    A pilot uses it to run its target plan's recipe (see :func:`compile_pilot`).
    """
    if not (math.isfinite(rho) and 0 < rho < 1):
        raise ConfigError(f"rho: must lie in (0, 1), got {rho!r}")
    if not (math.isfinite(budget) and budget > 0):
        raise ConfigError(f"budget: must be a positive finite number of FLOPs, got {budget!r}")
    arch, rs = get_model(model), get_reward(reward)
    if arch.role != "policy":  # a PRM has no LM head to sample with: its "plan" would be nonsense
        raise ConfigError(f"model: {model!r} is a reward model, not a policy; pick a policy model")
    o = (opts or CompileOptions()).resolve(arch)
    assert o.prompt_len and o.completion_len  # resolve() fills them from the policy's defaults
    tokens = o.prompt_len + o.completion_len
    if tokens > arch.max_position_embeddings:  # a plan that cannot run, priced as if it could
        field = "prompt_len" if o.prompt_len > o.completion_len else "completion_len"
        raise ConfigError(f"{field}: prompt + completion = {tokens} tokens exceed {arch.name}'s context of "
                          f"{arch.max_position_embeddings}; shorten prompt_len or completion_len")
    unit = per_completion(arch, rs, o)
    cands = _candidates(unit, o)
    rhos, mus = _lever_arrays(unit, o)
    err = np.abs(rhos - rho)  # (n_candidates,), in the order of cands
    if float(err.min()) > o.rho_tolerance:
        lo, hi = float(rhos.min()), float(rhos.max())
        # A rho the levers actually reach (the range has gaps), not just the request clamped.
        # A request for it gets a plan within about 0.01 (near-ties go to simpler levers, and
        # small budgets to other prompt counts): said, since asking for 0.068 may give 0.072.
        nearest = float(rhos[int(np.argmin(err))])
        raise InfeasibleError(
            f"rho: {rho:.3f} is out of reach for {model} with {reward} rewards "
            f"(levers reach [{lo:.3f}, {hi:.3f}]); nearest feasible rho = {nearest:.3f} (a request "
            "gets the simplest plan within about 0.01 of it)",
            field="rho",
            nearest=nearest,
        )
    # Closest rho bin first (0.01 wide, so near-ties go to the simplest levers), then the
    # first setting whose prompt count lands the total within tolerance of the budget. A
    # stable sort of the candidates in range, which are in simplest-first order; numpy,
    # since a suggestion compiles thousands of requests over ~4000 candidates each.
    near = np.flatnonzero(err <= o.rho_tolerance)
    e = err[near]
    other_mu = np.ones(near.shape, dtype=bool) if iterations is None else (mus[near] != iterations) | (e > MATCH_RHO)
    ranked = (cands[i] for i in near[np.lexsort((np.rint(e / 0.01), other_mu))])
    nearest_budget = math.nan
    for _r, generated, kept, mu, split in ranked:
        if math.isnan(nearest_budget):
            nearest_budget = split.total
        prompts = max(1, round(budget / split.total))
        planned = split.scaled(prompts)
        if abs(planned.total - budget) <= BUDGET_TOLERANCE * budget:
            return _plan(arch, rs, o, rho, budget, generated, kept, mu, prompts, split, planned)
        if abs(planned.total - budget) < abs(nearest_budget - budget):
            nearest_budget = planned.total
    raise InfeasibleError(
        f"budget: {budget:.3g} FLOPs buys no {model}/{reward} plan at rho={rho:.2f} within 2%; "
        f"nearest feasible budget = {nearest_budget:.3g}, a plan's exact cost (within 2% of it compiles)",
        field="budget",
        nearest=nearest_budget,
    )


def _plan(
    arch: Architecture,
    rs: RewardSystem,
    o: CompileOptions,
    rho_target: float,
    budget: float,
    generated: int,
    kept: int,
    mu: int,
    prompts: int,
    per_prompt: FlopsBreakdown,
    planned: FlopsBreakdown,
) -> RunPlan:
    assert o.prompts_per_round and o.lora_rank and o.prompt_len and o.completion_len
    per_round = min(o.prompts_per_round, prompts)
    return RunPlan(
        model=arch.name,
        reward=rs.name,
        budget=budget,
        rho_target=rho_target,
        rho=planned.rho,
        prompt_len=o.prompt_len,
        completion_len=o.completion_len,
        max_completion_length=o.completion_len,
        prompts_per_round=per_round,
        total_prompts=prompts,
        rounds=math.ceil(prompts / per_round),
        completions_per_prompt=generated,
        completions_kept=kept,
        num_iterations=mu,
        old_logprobs=mu > 1,
        beta=o.beta,
        gradient_checkpointing=bool(o.gradient_checkpointing),
        lm_head_positions="completion" if o.lm_head_positions == "completion" else "all",
        lora_rank=o.lora_rank,
        lora_alpha=2 * o.lora_rank,
        lora_targets=tuple(o.lora_targets),
        flops=FlopsSplit(**planned.as_dict()),
        flops_per_prompt=FlopsSplit(**per_prompt.as_dict()),
    )


def compile_pilot(
    model: str,
    reward: str,
    rho: float,
    budget: float,
    target_budget: float,
    opts: CompileOptions | None = None,
) -> RunPlan:
    """Compile a pilot at ``budget`` that runs the recipe of the target-budget plan at ``rho``.

    At small budgets only a few prompt groups fit, so landing the budget within 2% can
    take levers with another mu (update passes) than the plan the same rho gets at the
    target budget. Pilots would then vary rho and mu together, and a surrogate fitted on
    them confounds the two (docs/planner.md, "the mu feature"). This keeps the target
    plan's mu when levers with it land within :data:`MATCH_RHO` of ``rho`` and 2% of
    ``budget``; otherwise it is :func:`compile_plan` at ``budget``. At or above the target
    budget it is :func:`compile_plan` itself.
    """
    if budget >= target_budget:
        return compile_plan(model, reward, rho, budget, opts)
    try:
        target = compile_plan(model, reward, rho, target_budget, opts)
    except InfeasibleError as exc:
        if exc.field != "budget":
            raise
        # The target budget buys no plan at this rho (a few prompt groups miss it by > 2%):
        # there is no target recipe to keep, and its nearest budget is not the pilot's.
        return compile_plan(model, reward, rho, budget, opts)
    return compile_plan(model, reward, rho, budget, opts, iterations=target.num_iterations)


def check_plan(plan: RunPlan, where: str = "plan") -> None:
    """Raise :class:`ConfigError` naming the first field of ``plan`` its own levers contradict.

    Engines run a plan's levers and meter what they spend, trusting the FLOPs it states
    to compare against; a plan edited by hand (a changed model, G, K, prompt count or
    FLOP figure) must fail where it is read, not become an odd record. Recomputes the
    per-prompt split from (G, K, mu, beta, lengths, LoRA) with :func:`unit_costs`, then
    the run's split as ``per prompt x total_prompts`` (relative tolerance 1e-6).
    """
    def bad(field: str, msg: str) -> ConfigError:
        return ConfigError(f"{where}.{field}: {msg}; recompile it (`planner plan` or `planner suggest`)")

    if plan.completions_kept > plan.completions_per_prompt:
        raise bad("completions_kept", f"{plan.completions_kept} kept of {plan.completions_per_prompt} generated")
    if plan.rounds != math.ceil(plan.total_prompts / plan.prompts_per_round):
        raise bad("rounds", f"{plan.rounds} rounds of {plan.prompts_per_round} prompts do not make "
                            f"{plan.total_prompts} prompts")
    if plan.max_completion_length < plan.completion_len:
        # The FLOPs are priced at completion_len; a cap below it generates shorter runs.
        raise bad("max_completion_length", f"{plan.max_completion_length} is below the expected "
                                           f"completion_len {plan.completion_len}")
    if plan.old_logprobs != (plan.num_iterations > 1):
        raise bad("old_logprobs", f"must be {plan.num_iterations > 1} with num_iterations {plan.num_iterations}")
    arch, rs = get_model(plan.model), get_reward(plan.reward)
    unit = unit_costs(
        arch, scorer_for(rs, arch), prompt_len=plan.prompt_len, completion_len=plan.completion_len,
        lora=LoRA(plan.lora_rank, tuple(plan.lora_targets)),
        gradient_checkpointing=plan.gradient_checkpointing, lm_head_positions=plan.lm_head_positions,
    )
    per = unit.per_prompt(plan.completions_per_prompt, plan.completions_kept, plan.num_iterations, plan.beta)
    for name, stated, levers in (("flops_per_prompt", plan.flops_per_prompt, per),
                                 ("flops", plan.flops, per.scaled(plan.total_prompts))):
        for comp, want in levers.as_dict().items():
            got = getattr(stated, comp)
            if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6):
                raise bad(f"{name}.{comp}", f"states {got:.6g} FLOPs but its levers cost {want:.6g} "
                                            f"for {plan.model}/{plan.reward}")
    if not math.isclose(plan.rho, plan.flops.rho, abs_tol=1e-9):
        raise bad("rho", f"states {plan.rho:.6g} but its FLOPs give {plan.flops.rho:.6g}")
    # The compiler lands every plan within BUDGET_TOLERANCE of its budget: a budget edited
    # alone was run at the old one and recorded, and reported, at the new.
    if abs(plan.flops.total - plan.budget) > BUDGET_TOLERANCE * plan.budget * (1 + 1e-9):
        raise bad("budget", f"{plan.budget:.6g} FLOPs, but its levers cost {plan.flops.total:.6g} (a plan lands "
                            f"within {BUDGET_TOLERANCE:.0%} of its budget)")
