"""``runners pretrain``: pretrain (SFT) the tiny world's policies and PRMs, report the base.

Models are cached (``ensure_policy`` / ``ensure_prm``), so a second call only evaluates.
For each policy it prints the base greedy and sampled success on held-out training
problems, pass1 (greedy, harder split) and judge (rule share of correct steps).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner.cli.app import SEED_MAX
from planner.cli.paths import path_value
from runners.cli.app import command

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["pretrain"]


@command(name="pretrain")
def pretrain(
    model: str = typer.Option("tiny-s", "--model", help="tiny policies, comma-separated (tiny-s,tiny-m,tiny-l)"),
    quick: bool = typer.Option(False, "--quick", help="the reduced pretraining the test suite uses"),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="pretraining seed (models are cached per seed)"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", parser=path_value, help="default: $RACE_CACHE or ~/.cache/race-planner"),
    prms: bool = typer.Option(True, "--prms/--no-prms", help="also train the tiny PRMs (tiny-prm, tiny-prm-s)"),
    n: int = typer.Option(256, "--n", min=16, help="evaluation problems per split"),
) -> None:
    """Pretrain tiny-world policies (and PRMs) and print their base success rates."""
    from rich.console import Console
    from rich.table import Table

    from planner.cli.app import parse_list
    from planner.errors import ConfigError
    from planner.registry import get_model

    names = parse_list(model, "model") or []
    if not names:
        raise ConfigError("model: give at least one tiny policy, e.g. --model tiny-s,tiny-m")
    for name in names:
        arch = get_model(name)
        if arch.family != "tiny" or arch.role != "policy":
            raise ConfigError(f"model: {name!r} is not a tiny-world policy; use tiny-s, tiny-m or tiny-l")
    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise ConfigError(f"cache-dir: {str(cache_dir)!r} is a file; give a directory for the model cache")

    console = Console(stderr=True)
    table = Table(title=f"tiny-world base policies ({'quick' if quick else 'full'} pretraining, seed {seed})")
    for col in ("model", "params", "train s", "greedy", "sampled", "pass1", "pass1 sampled", "judge"):
        table.add_column(col, justify="right")
    from planner.cli.app import interrupted_code, terminate_as_interrupt

    try:
        # SIGTERM (timeout, scancel) as Ctrl-C: the unfinished model's temporary folder is
        # removed (it was left behind for good), and a line says what is kept.
        with terminate_as_interrupt():
            _pretrain_all(names, prms, quick, seed, cache_dir, n, console, table)
    except KeyboardInterrupt as exc:
        typer.echo("interrupted: models finished before it stay cached; rerun to pretrain the rest", err=True)
        raise typer.Exit(interrupted_code(exc)) from None
    Console().print(table)


def _pretrain_all(names: list[str], prms: bool, quick: bool, seed: int, cache_dir: Path | None, n: int,
                  console: Console, table: Table) -> None:
    import json

    import torch
    from rich.markup import escape
    from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

    from planner.threads import torch_threads
    from runners.tinyworld.evaluate import policy_report
    from runners.tinyworld.pretrain import (
        ensure_policy,
        ensure_prm,
        no_transformers_bars,
        pretrain_threads,
    )

    for name in names:
        path = ensure_policy(name, quick=quick, seed=seed, cache_dir=cache_dir, progress=True)
        meta = json.loads((path / "meta.json").read_text())
        with no_transformers_bars():
            policy = Qwen2ForCausalLM.from_pretrained(path, attn_implementation="eager")
        tok = PreTrainedTokenizerFast.from_pretrained(path)
        with torch_threads(pretrain_threads()), torch.inference_mode():
            rep = policy_report(policy, tok, n=n)
        table.add_row(name, f"{meta['parameters']:,}", f"{meta['train_seconds']:.0f}",
                      *(f"{rep[k]:.3f}" for k in ("greedy", "sampled", "pass1", "pass1_sampled", "judge")))
        console.print(f"{name}: {escape(str(path))}")
    if prms:
        for prm in ("tiny-prm", "tiny-prm-s"):
            path = ensure_prm(prm, quick=quick, seed=seed, cache_dir=cache_dir, progress=True)
            meta = json.loads((path / "meta.json").read_text())
            console.print(f"{prm}: {escape(str(path))}  step accuracy {meta['step_accuracy']:.3f}, "
                          f"outcome accuracy of the min score {meta['outcome_accuracy']:.3f}, "
                          f"{meta['train_seconds']:.0f} s")
