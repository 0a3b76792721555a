"""The budget compiler: totals within 2% of the budget, rho within reach, clear errors otherwise."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.accountant import FlopsBreakdown
from planner.compiler import (
    MATCH_RHO,
    CompileOptions,
    achievable_rho_range,
    compile_pilot,
    compile_plan,
)
from planner.errors import InfeasibleError
from planner.registry import REWARD_SYSTEMS, get_reward, list_models

POLICIES = list_models("policy")
GRID = list(itertools.product(POLICIES, REWARD_SYSTEMS, [0.3, 0.45, 0.6, 0.72, 0.9], [1e16, 1e18]))


def test_an_unknown_model_lists_policies_apart_from_reward_models() -> None:
    from planner.errors import ConfigError
    from planner.registry import get_model

    with pytest.raises(ConfigError) as info:
        get_model("qwen2.5-15b")
    msg = str(info.value)
    policies, _, prms = msg.partition("(reward models:")
    assert "qwen2.5-7b" in policies and "tiny-s" in policies and "prm" not in policies
    assert "qwen2.5-math-prm-7b" in prms and "tiny-prm" in prms


def test_registry_has_every_policy() -> None:
    assert set(POLICIES) == {"qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "tiny-s", "tiny-m", "tiny-l"}


@pytest.mark.parametrize(("model", "reward", "rho", "budget"), GRID)
def test_grid_meets_budget_and_rho_or_says_why(model: str, reward: str, rho: float, budget: float) -> None:
    try:
        plan = compile_plan(model, reward, rho, budget)
    except InfeasibleError as exc:
        assert "nearest feasible" in str(exc)
        assert exc.nearest is not None
        return
    assert abs(plan.flops.total - budget) <= 0.02 * budget
    assert abs(plan.rho - rho) <= 0.05
    assert plan.flops.rho == pytest.approx(plan.rho)
    # The per-prompt split times the prompt count is the planned split.
    assert plan.flops.total == pytest.approx(plan.flops_per_prompt.total * plan.total_prompts)
    assert plan.completions_kept <= plan.completions_per_prompt
    assert plan.rounds * plan.prompts_per_round >= plan.total_prompts
    if get_reward(reward).is_rule:
        assert plan.flops.reward == 0


@pytest.mark.parametrize("model", POLICIES)
@pytest.mark.parametrize("reward", ["sparse", "structured", "dense"])
def test_rule_rewards_reach_quarter_to_095(model: str, reward: str) -> None:
    lo, hi = achievable_rho_range(model, reward)
    assert lo <= 0.25 and hi >= 0.95


def test_levers_move_rho_the_right_way() -> None:
    low = compile_plan("qwen2.5-1.5b", "sparse", 0.3, 1e17)
    high = compile_plan("qwen2.5-1.5b", "sparse", 0.92, 1e17)
    assert low.completions_per_prompt > low.completions_kept  # down-sampling lowers rho
    assert high.num_iterations > 1 and high.old_logprobs  # reuse raises rho


def test_prm_reward_eats_budget() -> None:
    rule = compile_plan("qwen2.5-1.5b", "sparse", 0.45, 1e17)
    prm = compile_plan("qwen2.5-1.5b", "prm", 0.45, 1e17)
    assert prm.flops.reward > 0.2 * prm.flops.total
    assert prm.total_prompts < rule.total_prompts


def test_infeasible_rho_names_nearest() -> None:
    _lo, hi = achievable_rho_range("tiny-s", "prm")
    with pytest.raises(InfeasibleError, match="nearest feasible rho") as info:
        compile_plan("tiny-s", "prm", min(0.99, hi + 0.07), 1e13)
    assert info.value.nearest == pytest.approx(hi)


def test_budget_below_one_group_names_nearest() -> None:
    with pytest.raises(InfeasibleError, match="nearest feasible budget") as info:
        compile_plan("qwen2.5-7b", "prm", 0.3, 1e13)
    assert info.value.field == "budget" and info.value.nearest and info.value.nearest > 1e13


def test_options_change_the_plan() -> None:
    short = compile_plan("qwen2.5-3b", "dense", 0.6, 1e17, CompileOptions(completion_len=128))
    long = compile_plan("qwen2.5-3b", "dense", 0.6, 1e17, CompileOptions(completion_len=1024))
    assert short.total_prompts > long.total_prompts
    ckpt = compile_plan("qwen2.5-3b", "dense", 0.6, 1e17, CompileOptions(gradient_checkpointing=True))
    assert ckpt.gradient_checkpointing


@settings(max_examples=150, deadline=None)
@given(
    model=st.sampled_from(POLICIES),
    reward=st.sampled_from(REWARD_SYSTEMS),
    rho=st.floats(0.02, 0.98),
    log_budget=st.floats(11.0, 21.0),
)
def test_property_random_requests(model: str, reward: str, rho: float, log_budget: float) -> None:
    budget = 10.0**log_budget
    try:
        plan = compile_plan(model, reward, rho, budget)
    except InfeasibleError as exc:
        msg = str(exc)
        assert "\n" not in msg and exc.field in ("rho", "budget") and exc.nearest is not None
        if exc.field == "rho":
            lo, hi = achievable_rho_range(model, reward)
            assert not lo - 0.05 <= rho <= hi + 0.05 or abs(exc.nearest - rho) > 0.05
        return
    assert abs(plan.flops.total - budget) <= 0.02 * budget
    assert abs(plan.rho - rho) <= 0.05


def test_breakdown_arithmetic() -> None:
    a = FlopsBreakdown(1.0, 3.0, 0.0)
    assert a.total == 4.0 and a.rho == 0.75
    assert (a + a).scaled(0.5) == a
    assert FlopsBreakdown().rho == 0.0


# --------------------------------------------------------------------------- pilots
def test_pilot_keeps_the_target_plans_mu_where_the_plain_compile_does_not() -> None:
    # At 1e15 the plain compiler lands the budget with 15 passes at rho 0.89; the target
    # plan at 1e16 uses 3. The pilot keeps 3, stays within MATCH_RHO and 2% of the budget.
    target = compile_plan("qwen2.5-1.5b", "sparse", 0.89, 1e16)
    plain = compile_plan("qwen2.5-1.5b", "sparse", 0.89, 1e15)
    pilot = compile_pilot("qwen2.5-1.5b", "sparse", 0.89, 1e15, 1e16)
    assert plain.num_iterations != target.num_iterations
    assert pilot.num_iterations == target.num_iterations
    assert abs(pilot.rho - 0.89) <= MATCH_RHO
    assert abs(pilot.flops.total - 1e15) <= 0.02 * 1e15


@settings(max_examples=40, deadline=None)
@given(
    model=st.sampled_from(["qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "tiny-s"]),
    reward=st.sampled_from(sorted(REWARD_SYSTEMS)),
    u=st.floats(0.05, 0.95),
)
def test_pilot_meets_the_plain_contract_and_matches_mu_at_least_as_often(model: str, reward: str, u: float) -> None:
    lo, hi = achievable_rho_range(model, reward)
    rho = lo + u * (hi - lo)
    target_budget = 1e16 if not model.startswith("tiny") else 1e12
    budget = target_budget / 10
    try:
        plain = compile_plan(model, reward, rho, budget)
    except InfeasibleError:
        return
    pilot = compile_pilot(model, reward, rho, budget, target_budget)
    mu = compile_plan(model, reward, rho, target_budget).num_iterations
    assert abs(pilot.flops.total - budget) <= 0.02 * budget
    assert abs(pilot.rho - rho) <= CompileOptions().rho_tolerance
    if plain.num_iterations == mu:  # nothing to fix
        assert pilot.num_iterations == mu
    elif pilot.num_iterations != mu:  # no levers with mu land the budget: the plain plan
        assert pilot == plain


def test_pilot_at_or_above_target_is_the_plain_plan() -> None:
    assert compile_pilot("qwen2.5-3b", "prm", 0.6, 1e16, 1e16) == compile_plan("qwen2.5-3b", "prm", 0.6, 1e16)


def test_feasible_pilot_notes_a_mu_it_could_not_keep() -> None:
    from planner.design import compile_feasible
    from planner.frontier import Setting

    # qwen2.5-7b/prm at rho 0.65: the target plan has mu 8, no 8-pass levers land 1e15.
    plan, note = compile_feasible(Setting("qwen2.5-7b", "prm"), 0.65, 1e15, target_budget=1e16)
    assert plan is not None and plan.num_iterations != 8
    assert "not the target plan's 8" in note
    plan, note = compile_feasible(Setting("qwen2.5-1.5b", "sparse"), 0.89, 1e15, target_budget=1e16)
    assert plan is not None and plan.num_iterations == 3 and "mu" not in note


def test_a_pilot_is_never_dearer_than_its_target() -> None:
    from planner.design import compile_feasible
    from planner.frontier import Setting

    # qwen2.5-7b/sparse at rho 0.97 needs ~3e14 FLOPs: no pilot of a 1.2e14 decision.
    plan, note = compile_feasible(Setting("qwen2.5-7b", "sparse"), 0.97, 1.2e13, target_budget=1.2e14)
    assert plan is None and "below the target budget" in note
    plan, _ = compile_feasible(Setting("qwen2.5-7b", "sparse"), 0.97, 1.2e13, target_budget=1e15)
    assert plan is not None and 1.2e13 < plan.budget < 1e15  # raised, but still a pilot


@pytest.mark.parametrize(("args", "field"), [
    (("qwen2.5-1.5b", "sparse", float("nan"), 1e16), "rho"),
    (("qwen2.5-1.5b", "sparse", 0.0, 1e16), "rho"),
    (("qwen2.5-1.5b", "sparse", 0.5, float("inf")), "budget"),
])
def test_compile_plan_refuses_what_is_not_a_request(args: tuple, field: str) -> None:
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^{field}:"):
        compile_plan(*args)


@pytest.mark.parametrize("kw", [
    {"prompt_len": 0}, {"lm_head_positions": "completions"}, {"lora_targets": ("qproj",)},
    # Once a ZeroDivisionError, an empty min() and a raw pydantic error deep in the compiler.
    {"group_size": 0}, {"max_generated": 1}, {"max_iterations": 0}, {"beta": float("nan")}, {"beta": -0.1},
    # A repeated module doubled the adapter's forward FLOPs but not its backward.
    {"lora_targets": ("q_proj", "q_proj")},
    # bool("no") is True: a string here compiled a checkpointed plan; a string tolerance
    # failed as a bare TypeError naming no option.
    {"gradient_checkpointing": "no"}, {"gradient_checkpointing": "false"}, {"rho_tolerance": "0.05"},
    {"rho_tolerance": 0},
])
def test_compile_options_refuse_values_that_would_silently_mean_something_else(kw: dict) -> None:
    from planner.compiler import CompileOptions
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^{next(iter(kw))}:"):
        CompileOptions(**kw)


def test_nearest_feasible_rho_is_one_the_levers_reach() -> None:
    from planner.compiler import CompileOptions
    from planner.errors import InfeasibleError

    opts = CompileOptions(rho_tolerance=0.0005)
    with pytest.raises(InfeasibleError) as err:
        compile_plan("qwen2.5-7b", "prm", 0.100, 1e17, opts)
    compile_plan("qwen2.5-7b", "prm", err.value.nearest, 1e17, opts)  # the suggestion compiles


def test_a_few_prompt_groups_are_not_monotone_in_budget() -> None:
    # docs/accounting.md quotes this pair: 1% more budget, fewer prompts and other levers.
    def levers(b: float) -> tuple[int, int, int, int]:
        p = compile_plan("qwen2.5-1.5b", "sparse", 0.3, b)
        return p.total_prompts, p.completions_per_prompt, p.completions_kept, p.num_iterations

    assert (levers(1.30e14), levers(1.31e14)) == ((3, 12, 2, 1), (1, 41, 2, 2))


def test_a_scorer_is_costed_over_at_most_its_context() -> None:
    """The runner feeds a PRM the last 4096 tokens (its context); costed over all 6144 the
    plan overstated reward FLOPs by 58% and set rho and the prompt count by that."""
    from typer.testing import CliRunner

    from planner.accountant import reward_model_flops
    from planner.cli import app
    from planner.compiler import CompileOptions, per_completion
    from planner.registry import get_model, scorer_for

    pol, prm = get_model("qwen2.5-1.5b"), get_reward("prm")
    scorer = scorer_for(prm, pol)
    assert scorer is not None and scorer.max_position_embeddings == 4096
    long = CompileOptions(prompt_len=2048, completion_len=4096).resolve(pol)
    assert per_completion(pol, prm, long).score == reward_model_flops(scorer, 1, 4096)
    fits = CompileOptions(prompt_len=1024, completion_len=2048).resolve(pol)
    assert per_completion(pol, prm, fits).score == reward_model_flops(scorer, 1, 3072)
    res = CliRunner().invoke(app, ["plan", "-m", "qwen2.5-1.5b", "-r", "prm", "--rho", "0.5", "--budget", "1e18",
                                   "--prompt-len", "2048", "--completion-len", "4096", "--json"])
    assert res.exit_code == 0 and res.stderr.startswith("note: qwen2.5-math-prm-7b reads at most 4096 tokens")


def test_a_reward_model_gets_no_plan() -> None:
    """Library callers too: compile_plan refuses a PRM as the policy, as `planner plan` does."""
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match="reward model, not a policy"):
        compile_plan("qwen2.5-math-prm-7b", "sparse", 0.5, 1e17)


def test_a_pilot_whose_target_budget_buys_no_plan_is_the_plain_plan() -> None:
    from planner.compiler import compile_pilot
    from planner.design import compile_feasible
    from planner.frontier import Setting

    # At 2e14 the few prompt groups of qwen2.5-3b prm at rho 0.2 miss the budget by > 2%;
    # that error escaped and compile_feasible "raised" the pilot to the target's nearest budget.
    with pytest.raises(InfeasibleError):
        compile_plan("qwen2.5-3b", "prm", 0.2, 2e14)
    plain = compile_plan("qwen2.5-3b", "prm", 0.2, 1.5e14)
    assert compile_pilot("qwen2.5-3b", "prm", 0.2, 1.5e14, 2e14) == plain
    assert compile_feasible(Setting("qwen2.5-3b", "prm"), 0.2, 1.5e14, target_budget=2e14) == (plain, "")


def test_options_take_a_list_of_targets_and_plans_fit_the_context() -> None:
    from planner.compiler import CompileOptions
    from planner.errors import ConfigError

    listed = compile_plan("qwen2.5-1.5b", "sparse", 0.5, 1e17, CompileOptions(lora_targets=["q_proj", "v_proj"]))
    assert listed == compile_plan("qwen2.5-1.5b", "sparse", 0.5, 1e17, CompileOptions(lora_targets=("q_proj", "v_proj")))
    with pytest.raises(ConfigError, match=r"^lora_targets: "):
        CompileOptions(lora_targets="q_proj")
    # tiny-s reads 256 tokens: a 1015-token plan used to compile for library callers.
    with pytest.raises(ConfigError, match=r"^completion_len: .* exceed tiny-s's context of 256"):
        compile_plan("tiny-s", "sparse", 0.5, 1e12, CompileOptions(completion_len=1000))


def test_reuse_at_rounds_rho_as_the_proposals_do() -> None:
    import numpy as np

    from planner.frontier import reuse_at

    # Rounded to 4 digits this rho compiled to other levers (mu 3 against the plan's 8).
    rho = 0.541727
    assert reuse_at("qwen2.5-7b", "prm", np.array([rho]), 1e16)[0] == compile_plan("qwen2.5-7b", "prm", rho, 1e16).num_iterations


def test_options_take_a_generator_of_targets() -> None:
    from planner.compiler import CompileOptions

    assert CompileOptions(lora_targets=(m for m in ["q_proj", "v_proj"])).lora_targets == ("q_proj", "v_proj")


def test_a_zero_budget_is_no_request_not_an_infeasible_one() -> None:
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^budget: must be a positive"):
        compile_plan("qwen2.5-1.5b", "sparse", 0.5, 0.0)


def test_options_take_the_least_values_they_name() -> None:
    # One-token prompts, a group of two and one pass are the documented minima, not errors.
    o = CompileOptions(prompt_len=1, completion_len=1, group_size=2, max_generated=2, max_iterations=1)
    assert (o.prompt_len, o.group_size, o.max_generated, o.max_iterations) == (1, 2, 2, 1)


def test_the_levers_are_the_documented_space() -> None:
    """docs/accounting.md: K in {2, 4, 8, 16}, G in [K, 64], mu in [1, 16]."""
    from planner.compiler import _candidates, per_completion
    from planner.registry import get_model

    arch = get_model("qwen2.5-1.5b")
    o = CompileOptions().resolve(arch)
    got = [(g, k, mu) for _, g, k, mu, _ in _candidates(per_completion(arch, get_reward("prm"), o), o)]
    want = {(g, k, mu) for k in (2, 4, 8, 16) for g in range(k, 65) for mu in range(1, 17)}
    assert len(got) == len(want) and set(got) == want


def test_a_request_just_beyond_the_rho_tolerance_is_out_of_reach() -> None:
    lo, _ = achievable_rho_range("qwen2.5-1.5b", "sparse")
    compile_plan("qwen2.5-1.5b", "sparse", lo - 0.0497, 1e18)
    with pytest.raises(InfeasibleError, match="out of reach"):
        compile_plan("qwen2.5-1.5b", "sparse", lo - 0.0503, 1e18)


def test_a_plan_may_fill_the_context_exactly() -> None:
    # tiny-s reads 256 tokens; only more than that is refused.
    plan = compile_plan("tiny-s", "sparse", 0.5, 1e12, CompileOptions(prompt_len=128, completion_len=128))
    assert plan.prompt_len + plan.completion_len == 256


def test_an_all_positions_head_scores_every_position_but_the_last() -> None:
    """unit_costs: the fused LM head projects C completion tokens on GPUs and S - 1 = P + C - 1
    positions elsewhere; a train pass pays a position three times (forward, its gradient
    and the chunked head's recompute), a log-prob forward once."""
    from planner.accountant import lm_head_flops_per_token
    from planner.compiler import per_completion
    from planner.registry import get_model

    arch, rs = get_model("qwen2.5-1.5b"), get_reward("sparse")
    opts = dict(prompt_len=100, completion_len=50)
    gpu = per_completion(arch, rs, CompileOptions(lm_head_positions="completion", **opts).resolve(arch))
    cpu = per_completion(arch, rs, CompileOptions(lm_head_positions="all", **opts).resolve(arch))
    extra = (100 - 1) * lm_head_flops_per_token(arch)
    assert cpu.old_logprobs - gpu.old_logprobs == extra
    assert cpu.ref_logprobs - gpu.ref_logprobs == extra
    assert cpu.train_pass - gpu.train_pass == 3 * extra
    assert cpu.generate == gpu.generate


@pytest.mark.parametrize(("model", "reward", "rho", "budget"), [
    ("qwen2.5-1.5b", "prm", 0.5, 1e16),  # the head over completions (GPU default)
    ("tiny-s", "structured", 0.7, 1e12),  # over all positions (CPU default)
    ("qwen2.5-7b", "sparse", 0.3, 3e17),
])
def test_a_compiled_plan_passes_its_own_check_and_each_edit_fails_it(
    model: str, reward: str, rho: float, budget: float,
) -> None:
    import math

    from planner.compiler import check_plan
    from planner.errors import ConfigError
    from planner.registry import get_model

    plan = compile_plan(model, reward, rho, budget)
    check_plan(plan)
    assert plan.rounds == math.ceil(plan.total_prompts / plan.prompts_per_round)
    assert plan.lm_head_positions == get_model(model).defaults.lm_head_positions
    f, fp = plan.flops, plan.flops_per_prompt
    edits = {
        "completions_kept": {"completions_kept": plan.completions_per_prompt + 1},
        "rounds": {"rounds": plan.rounds + 1},
        "max_completion_length": {"max_completion_length": plan.completion_len - 1},
        "old_logprobs": {"old_logprobs": not plan.old_logprobs},
        "flops_per_prompt.search": {"flops_per_prompt": fp.model_copy(update={"search": fp.search * 1.001})},
        "flops.total": {"flops": f.model_copy(update={"total": f.total * 1.001})},
        "rho": {"rho": plan.rho + 0.001},
        "budget": {"budget": plan.budget * 2},  # run at the old budget, reported at the new
    }
    for field, update in edits.items():
        with pytest.raises(ConfigError, match=rf"^plan\.{re.escape(field)}: .*recompile it"):
            check_plan(plan.model_copy(update=update))


def test_a_budget_a_few_groups_miss_names_the_closest_plan_cost() -> None:
    # At 2e14 qwen2.5-3b prm's rho-0.2 plans (a few prompt groups) all miss by over 2%; the
    # nearest feasible budget is a plan's cost close to the request, not one group's.
    with pytest.raises(InfeasibleError) as info:
        compile_plan("qwen2.5-3b", "prm", 0.2, 2e14)
    nearest = info.value.nearest
    assert info.value.field == "budget" and abs(nearest - 2e14) < 0.05 * 2e14
    assert abs(compile_plan("qwen2.5-3b", "prm", 0.2, nearest).flops.total - nearest) <= 0.02 * nearest
