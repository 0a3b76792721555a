"""How far the usual FLOP shortcuts are from what actually executes.

For each policy and shape: FLOPs of a forward pass (logits at every position) and of a
LoRA training step (forward + backward, base frozen, adapters on every linear, no
activation checkpointing), counted three ways, side by side in one run:

* ``measured``: ``torch.utils.flop_counter.FlopCounterMode`` on a meta-device model
  (eager attention), the ground truth;
* ``accountant``: ``planner flops --no-checkpointing`` (closed form);
* ``2N`` / ``6N``: the shortcuts ``2 * N * tokens`` and ``6 * N * tokens`` with N = all
  parameters (embeddings included, as model cards quote N).

Usage: python benchmarks/flop_shortcuts.py [--models a,b] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from rich.console import Console
from rich.table import Table
from torch.utils.flop_counter import FlopCounterMode

from planner.accountant import LoRA, forward_flops, train_pass_flops
from planner.architecture import LINEAR_MODULES, Architecture
from planner.registry import get_model

SHAPES = [(2, 256), (1, 1024)]


def meta_model(arch: Architecture) -> torch.nn.Module:
    from runners.modeling import causal_lm

    return causal_lm(arch, max_position_embeddings=max(arch.max_position_embeddings, 1024))


def measure(arch: Architecture, batch: int, seq: int) -> tuple[int, int]:
    from peft import LoraConfig, get_peft_model

    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as fc:
        with torch.no_grad():
            meta_model(arch)(input_ids=ids)
    fwd = int(fc.get_total_flops())
    r = arch.defaults.lora_rank
    model = get_peft_model(
        meta_model(arch), LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(LINEAR_MODULES))
    )
    with FlopCounterMode(display=False) as fc:
        model(input_ids=ids).logits.float().sum().backward()
    return fwd, int(fc.get_total_flops())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny-s,qwen2.5-1.5b,qwen2.5-3b,qwen2.5-7b")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    for name in args.models.split(","):
        arch = get_model(name)
        for batch, seq in SHAPES:
            m_fwd, m_train = measure(arch, batch, seq)
            tokens = batch * seq
            n = arch.num_parameters
            rows.append(
                {
                    "model": name,
                    "batch": batch,
                    "seq": seq,
                    "params": n,
                    "fwd_measured": m_fwd,
                    "fwd_accountant": forward_flops(arch, batch, seq),
                    "fwd_2N": 2 * n * tokens,
                    "train_measured": m_train,
                    "train_accountant": train_pass_flops(
                        arch, batch, seq, LoRA(arch.defaults.lora_rank, LINEAR_MODULES)
                    ),
                    "train_6N": 6 * n * tokens,
                }
            )
    table = Table(title="FLOP shortcuts vs FlopCounterMode (error = estimate / measured - 1)")
    for col in ("model", "B x T", "fwd measured", "accountant", "2N", "train measured", "accountant", "6N"):
        table.add_column(col, justify="right")

    def err(a: float, b: float) -> str:
        return f"{a / b - 1:+.1%}"

    for r in rows:
        table.add_row(
            r["model"],
            f"{r['batch']} x {r['seq']}",
            f"{r['fwd_measured']:.3e}",
            err(r["fwd_accountant"], r["fwd_measured"]),
            err(r["fwd_2N"], r["fwd_measured"]),
            f"{r['train_measured']:.3e}",
            err(r["train_accountant"], r["train_measured"]),
            err(r["train_6N"], r["train_measured"]),
        )
    Console(width=140).print(table)
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
