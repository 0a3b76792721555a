"""``planner audit CONFIG``: where does an existing TRL GRPO recipe spend its compute?"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from planner.cli.app import command, emit_json
from planner.cli.paths import path_value


def load_recipe_file(path: Path) -> dict[str, Any]:
    from planner.errors import ConfigError

    if path.is_dir():
        raise ConfigError(f"config: {str(path)!r} is a directory; pass a GRPO recipe file (YAML or JSON)")
    if not path.is_file():
        raise ConfigError(f"config: no such file {str(path)!r}; pass a GRPO recipe (YAML or JSON)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config: {path} is not UTF-8 text; pass a GRPO recipe (YAML or JSON)") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:
        raise ConfigError(f"config: {path} does not parse ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config: {path} must hold a mapping of GRPOConfig keys")
    return data


@command(help="Audit a TRL GRPO recipe (YAML/JSON): its planned split, rho and shares.")
def audit(
    config: Annotated[Path, typer.Argument(parser=path_value, help="GRPO recipe: GRPOConfig keys + model + rewards.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    from planner.audit import audit_recipe
    from planner.recipe import recipe_from_trl, recipe_models, trl_defaults

    raw = load_recipe_file(config)
    policy, scorer = recipe_models(raw)
    recipe = recipe_from_trl(raw, trl_defaults(), layers=policy.num_hidden_layers,
                             context=policy.max_position_embeddings)
    result = audit_recipe(recipe, policy, scorer)
    if raw.get("eval_strategy") not in (None, False, "no") or raw.get("eval_on_start") is True:
        # YAML 1.1 reads an unquoted `no` as false.
        typer.echo("note: evaluation is on (eval_strategy / eval_on_start): TRL also generates and scores completions "
                   "for the eval split, which this audit does not cost", err=True)
    longest = recipe.prompt_len + recipe.max_completion_length
    if scorer is not None and longest > scorer.max_position_embeddings:
        typer.echo(f"note: {scorer.name}'s context is {scorer.max_position_embeddings} tokens; TRL scores the whole "
                   f"prompt + completion (up to {longest} tokens) without truncation, and it is costed so", err=True)
    data = {
        "model": policy.name,
        "reward_model": scorer.name if scorer else None,
        "reward_funcs": raw.get("reward_funcs"),
        "knobs": {k: v for k, v in dataclasses.asdict(recipe).items() if k != "lora"},
        "lora_rank": recipe.lora.rank if recipe.lora else None,
        "old_logprobs": recipe.old_logprobs,
        "completions_per_round": recipe.completions_per_round,
        "prompts_per_round": recipe.prompts_per_round,
        "optimizer_steps_per_round": recipe.optimizer_steps_per_round,
        "per_round": result.per_round.as_dict(),
        "per_step": result.per_step.as_dict(),
        "per_epoch": result.per_epoch.as_dict() if result.per_epoch else None,
        "rho": result.per_round.rho,
        "shares": result.per_round.shares(),
        "per_completion": result.per_completion,
        # Every completion padded to max_completion_length: the other end of what runs.
        "padded_round": result.padded_round.as_dict(),
        "padded_rho": result.padded_round.rho,
    }
    if as_json:
        emit_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"audit of {config.name}: {policy.name}, rho = {result.per_round.rho:.3f}")
    for col in ("component", "per optimizer step", "per epoch", "share"):
        t.add_column(col, justify="right")
    shares = result.per_round.shares()
    for k in ("search", "learning", "reward", "total"):
        step = result.per_step.as_dict()[k]
        epoch = result.per_epoch.as_dict()[k] if result.per_epoch else None
        t.add_row(k, f"{step:.3e}", f"{epoch:.3e}" if epoch is not None else "-", f"{shares.get(k, 1.0):.1%}")
    c = Console()
    c.print(t)
    c.print(
        f"{recipe.completions_per_round} completions ({recipe.prompts_per_round:g} prompts) per round, "
        f"{recipe.optimizer_steps_per_round:g} optimizer steps per round, "
        f"num_iterations={recipe.num_iterations}, beta={recipe.beta}, "
        f"checkpointing={recipe.gradient_checkpointing}"
        f"{'' if recipe.checkpoint_early_stop or not recipe.gradient_checkpointing else ' (reentrant)'}, "
        f"old log-probs: {recipe.old_logprobs}{', vLLM generation (no adapter FLOPs)' if recipe.use_vllm else ''}"
    )
    pad = result.padded_round
    if recipe.completion_len < recipe.max_completion_length:
        where = ("the training passes run on micro-batches padded to their longest completion"
                 if recipe.use_vllm else "HF generate runs to the longest completion of a batch")
        c.print(
            f"Costed at the expected {recipe.completion_len} completion tokens. With every completion padded to "
            f"max_completion_length={recipe.max_completion_length} ({where}) a round costs "
            f"{pad.total / result.per_round.total:.2f}x as much, at rho = {pad.rho:.3f} (prompts at their "
            "expected length: TRL 1.16 pads them to each batch's longest, unbounded).", highlight=False,
        )
