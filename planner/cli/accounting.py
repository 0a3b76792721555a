"""``planner flops`` and ``planner plan``: the accountant and the budget compiler."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import command, emit_json, parse_budget
from planner.cli.paths import check_output_file, path_value

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model name from configs/models.")]
DEFAULT_SEQ = 1024
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@command(help="FLOPs of one forward pass and one LoRA training step at a given shape.")
def flops(
    model: ModelOpt,
    batch: Annotated[int, typer.Option(min=1, max=10**12, help="Sequences per batch.")] = 1,
    seq: Annotated[int | None, typer.Option(min=1, max=10**12, help=(
        f"Tokens per sequence (default {DEFAULT_SEQ}, or the model's context where that is shorter)."))] = None,
    lora_rank: Annotated[int | None, typer.Option(min=1, help="LoRA rank (default: the model's).")] = None,
    checkpointing: Annotated[bool, typer.Option(
        "--checkpointing/--no-checkpointing",
        help="Activation checkpointing in the train step (recomputes the body in backward; TRL's default: on).",
    )] = True,
    as_json: JsonOpt = False,
) -> None:
    from planner.accountant import LoRA, forward_flops, train_pass_flops
    from planner.architecture import LINEAR_MODULES
    from planner.registry import get_model

    arch = get_model(model)
    # The default fits the model: tiny-s's 256-token context made the bare command warn.
    seq = seq if seq is not None else min(DEFAULT_SEQ, arch.max_position_embeddings)
    if seq > arch.max_position_embeddings:  # still countable (the what-if is legitimate), but say so
        typer.echo(f"note: {seq} tokens exceed {arch.name}'s context of {arch.max_position_embeddings}; "
                   "a real run cannot take them", err=True)
    rank = lora_rank or arch.defaults.lora_rank
    lora = LoRA(rank, LINEAR_MODULES)
    out = {
        "model": arch.name,
        "batch": batch,
        "seq": seq,
        "forward": forward_flops(arch, batch, seq),
        "forward_lora": forward_flops(arch, batch, seq, lora=lora),
        # One forward + backward with logits at every position (a plain LM head; TRL's GRPO
        # pass scores completion tokens and recomputes logits: `planner plan` costs that).
        "train_step": train_pass_flops(arch, batch, seq, lora, gradient_checkpointing=checkpointing),
        "gradient_checkpointing": checkpointing,
        "lora_rank": rank,
        "lora_targets": list(lora.targets),
        "parameters": arch.num_parameters,
        "non_embedding_parameters": arch.non_embedding_parameters,
    }
    if as_json:
        emit_json(out)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{arch.name}: batch {batch} x seq {seq}, LoRA r={rank} on all linears",
              caption=f"train step: forward + backward, logits at every position, "
                      f"{'with' if checkpointing else 'no'} activation checkpointing")
    t.add_column("quantity")
    t.add_column("FLOPs", justify="right")
    for k in ("forward", "forward_lora", "train_step"):
        t.add_row(k, f"{out[k]:.4e}")
    t.add_row("parameters", f"{arch.num_parameters:,}")
    Console().print(t)


@command(help="Compile (model, reward, rho, budget) into a GRPO/LoRA run plan.")
def plan(
    model: ModelOpt,
    reward: Annotated[str, typer.Option("--reward", "-r", help="Reward system.")],
    rho: Annotated[float, typer.Option(help="Requested update fraction, in (0, 1).")],
    budget: Annotated[str, typer.Option(help="FLOP budget, e.g. 1e16.")],
    prompt_len: Annotated[int | None, typer.Option(min=1, help="Expected prompt tokens.")] = None,
    completion_len: Annotated[int | None, typer.Option(min=1, help="Expected completion tokens.")] = None,
    target: Annotated[str, typer.Option(help="Evaluation target: native, pass1 or judge.")] = "native",
    out: Annotated[Path | None, typer.Option(parser=path_value, help="Write a one-proposal proposals.json here.")] = None,
    as_json: JsonOpt = False,
) -> None:
    from planner.compiler import CompileOptions, compile_plan
    from planner.errors import ConfigError
    from planner.proposals import make_proposal, write_proposals

    b = parse_budget(budget)
    if not 0 < rho < 1:
        raise ConfigError(f"rho: must lie in (0, 1), got {rho}; pick e.g. --rho 0.5")
    from planner.registry import get_model
    from planner.schema import TARGETS

    if target not in TARGETS:
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")
    arch = get_model(model)
    if arch.role != "policy":  # before the lengths: a PRM's short context is not the problem
        raise ConfigError(f"model: {model!r} is a reward model, not a policy; pick a policy model")
    prompt, completion = prompt_len or arch.defaults.prompt_len, completion_len or arch.defaults.completion_len
    tokens = prompt + completion
    if tokens > arch.max_position_embeddings:
        field = "prompt-len" if prompt > completion else "completion-len"  # the one that overflows it
        raise ConfigError(f"{field}: prompt + completion = {tokens} tokens exceed {arch.name}'s context "
                          f"of {arch.max_position_embeddings}; shorten --prompt-len or --completion-len")
    from planner.registry import get_reward, scorer_for

    scorer = scorer_for(get_reward(reward), arch)
    if scorer is not None and tokens > scorer.max_position_embeddings:
        typer.echo(f"note: {scorer.name} reads at most {scorer.max_position_embeddings} tokens: it scores the last "
                   f"{scorer.max_position_embeddings} of each {tokens}-token prompt + completion, and is costed so", err=True)
    if out is not None:
        check_output_file(out, "out")
    p = compile_plan(model, reward, rho, b, CompileOptions(prompt_len=prompt_len, completion_len=completion_len))
    if out is not None:
        prop = make_proposal(p, target=target, reason="requested with `planner plan`")
        write_proposals(out, [prop], target_budget=b)
    data = p.model_dump(mode="json")
    if as_json:
        emit_json(data)
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"{model} / {reward}: rho {p.rho:.3f} (asked {rho}), budget {b:.3g}")
    t.add_column("component")
    t.add_column("FLOPs", justify="right")
    t.add_column("share", justify="right")
    for k in ("search", "learning", "reward"):
        v = getattr(p.flops, k)
        t.add_row(k, f"{v:.3e}", f"{v / p.flops.total:.1%}")
    t.add_row("total", f"{p.flops.total:.3e}", f"{p.flops.total / b:.2%} of budget")
    knobs = Table(title="run knobs")
    knobs.add_column("knob")
    knobs.add_column("value")
    for name in (
        "prompts_per_round", "total_prompts", "rounds", "completions_per_prompt",
        "completions_kept", "num_iterations", "max_completion_length", "lora_rank",
        "gradient_checkpointing", "beta",
    ):
        knobs.add_row(name, str(getattr(p, name)))
    c = Console()
    c.print(t)
    c.print(knobs)
    if out is not None:
        c.print(f"wrote {escape(str(out))}")
