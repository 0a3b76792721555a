"""GPU-path benchmark: a few GRPO + LoRA rounds of a random-initialised Qwen2.5-1.5B-shaped
policy, metered; prints FLOPs, wall time and achieved TFLOP/s per phase.

It runs the code a real GPU run uses -- ``runners.grpo.run.grpo_config`` (bf16 on CUDA,
activation checkpointing, TRL's fused LM head with Triton), ``RaceGRPOTrainer`` with
max-variance down-sampling, the :class:`runners.meter.FlopMeter` hooks -- on GSM8K-train
prompts from ``runners.tasks`` (``--data``: a local JSONL; the Hub is not reachable on the
benchmark machine) and the ``sparse`` math reward (math-verify).

Over the 1.5B vocabulary random weights hardly ever sample EOS (about 1 in 151,936 a
token), so every completion runs to ``--completion-len``: fixed shapes, comparable
timings. ``--tiny``'s 512-id vocabulary does sample it (on CPU completions averaged ~310 of
512 tokens), but TRL pads a batch to its longest completion and the forward and backward
passes run over the padding, so the meter still counts ``--completion-len`` per completion:
compute spent, not tokens kept. The Qwen tokenizer cannot be fetched offline, so without
``--policy`` the prompts are tokenised by a character-level stand-in whose vocabulary
fills the model's (151,936 ids), with a Qwen-style chat template; prompt lengths are then
character counts (~300-600 tokens for GSM8K), which only changes how many tokens a prompt
costs, not how the meter counts them.

    python benchmarks/gpu_path.py --data ../shared/data/gsm8k/train.jsonl       # CUDA
    python benchmarks/gpu_path.py --tiny --device cpu --data ../shared/data/gsm8k/train.jsonl
    python benchmarks/gpu_path.py --stored benchmarks/results/gpu_path_h200_*.json   # no run

``--stored`` reads result JSONs and prints their levers and the tokens per completion
(prompt and completion, from the meter's token counts), which docs/meter.md quotes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

def gsm8k_rows(path: Path, n: int) -> list[dict[str, Any]]:
    """GSM8K-train prompts as TRL rows via ``runners.tasks`` (polars-free fallback reader)."""
    from runners.tasks import MathItem, extract_gsm8k_answer, to_grpo_rows

    try:
        from runners.tasks import load_math

        items = load_math("gsm8k", split="train", path=path, limit=n)
    except ImportError:  # the benchmark machine may lack polars: read the JSONL directly
        items = []
        with open(path) as fh:
            for line in fh:
                row = json.loads(line)
                gold = extract_gsm8k_answer(row["answer"])
                if gold:
                    items.append(MathItem(row["question"], gold, "gsm8k"))
                if len(items) >= n:
                    break
    return to_grpo_rows(items, chat=True)


def bench_plan(arch: Any, a: argparse.Namespace) -> Any:
    """A RunPlan with the benchmark's levers (not from the compiler: ``--tiny`` is no registry model)."""
    from planner.architecture import LINEAR_MODULES
    from planner.compiler import CompileOptions, per_completion
    from planner.registry import get_reward
    from planner.schema import FlopsSplit, RunPlan

    opts = CompileOptions(prompt_len=a.prompt_len, completion_len=a.completion_len, lora_rank=a.rank,
                          gradient_checkpointing=not a.no_checkpointing, lm_head_positions="completion")
    unit = per_completion(arch, get_reward("sparse"), opts.resolve(arch))
    split = unit.per_prompt(a.generations, a.kept, a.iterations, 0.0)
    total = split.scaled(a.prompts * a.rounds)
    return RunPlan(
        model=arch.name, reward="sparse", budget=total.total, rho_target=max(1e-3, min(0.999, split.rho)),
        rho=split.rho, prompt_len=a.prompt_len, completion_len=a.completion_len,
        max_completion_length=a.completion_len, prompts_per_round=a.prompts, total_prompts=a.prompts * a.rounds,
        rounds=a.rounds, completions_per_prompt=a.generations, completions_kept=a.kept,
        num_iterations=a.iterations, old_logprobs=a.iterations > 1, beta=0.0,
        gradient_checkpointing=not a.no_checkpointing, lm_head_positions="completion", lora_rank=a.rank,
        lora_alpha=2 * a.rank, lora_targets=LINEAR_MODULES, flops=FlopsSplit(**total.as_dict()),
        flops_per_prompt=FlopsSplit(**split.as_dict()),
    )


def build_model(arch: Any, tok: Any, device: str, policy: str | None) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    attn = "sdpa" if cuda else "eager"
    if policy:
        return AutoModelForCausalLM.from_pretrained(policy, dtype=dtype, attn_implementation=attn).to(device)
    cfg = Qwen2Config(vocab_size=arch.vocab_size, hidden_size=arch.hidden_size,
                      intermediate_size=arch.intermediate_size, num_hidden_layers=arch.num_hidden_layers,
                      num_attention_heads=arch.num_attention_heads, num_key_value_heads=arch.num_key_value_heads,
                      max_position_embeddings=arch.max_position_embeddings,
                      tie_word_embeddings=arch.tie_word_embeddings, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=None)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the GPU: a 1.5B CPU init takes minutes
        model = Qwen2ForCausalLM(cfg).to(dtype)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model


def per_completion(out: dict[str, Any]) -> dict[str, float]:
    """Completions generated and prompt / completion tokens per completion, from a result's
    levers and the meter's token counts (each completion's forward carries its prompt)."""
    lv = out["levers"]
    n = out["rounds"] * lv["prompts"] * lv["G"]
    t = out["tokens"]
    return {"completions": n, "prompt_tokens": t["prompt_generated"] / n,
            "completion_tokens": t["completion_generated"] / n}


def print_stored(paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        try:
            out = json.loads(path.read_text())
            pc = per_completion(out)
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as e:
            raise SystemExit(f"error: {path}: not a gpu_path.py result JSON ({e})") from None
        lv = out["levers"]
        print(f"{path.name}: {out.get('device')}, {out['model']}, {out['rounds']} rounds of {lv['prompts']} prompts, "
              f"G={lv['G']} K={lv['K']} mu={lv['mu']}: {pc['completions']} completions, "
              f"{pc['prompt_tokens']:.1f} prompt + {pc['completion_tokens']:.1f} completion tokens each")
        rows.append({"file": path.name, **pc})
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stored", type=Path, nargs="+", metavar="JSON",
                   help="print the levers and tokens per completion of stored results; runs nothing")
    p.add_argument("--tiny", action="store_true", help="a tiny Qwen2 (CPU smoke test) instead of 1.5B shapes")
    p.add_argument("--device", default="cuda")
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/gsm8k/train.jsonl")
    p.add_argument("--policy", help="folder of a real policy + tokenizer (default: random init)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompts", type=int, default=16, help="prompts per round")
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--kept", type=int, default=8)
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--prompt-len", type=int, default=256,
                   help="prompt length the plan is priced at (the prompts run are GSM8K's own lengths)")
    p.add_argument("--completion-len", type=int, default=512)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--no-checkpointing", action="store_true")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--flopcounter", action="store_true",
                   help="wrap training in FlopCounterMode and report meter / FlopCounterMode (slow on big models)")
    a = p.parse_args(argv)
    if a.stored:
        return {"stored": print_stored(a.stored)}

    import torch
    from datasets import Dataset
    from peft import LoraConfig

    from planner.accountant import LoRA
    from planner.registry import get_model
    from runners.grpo.loading import offline_chat_tokenizer
    from runners.grpo.run import grpo_config
    from runners.grpo.trainer import RaceGRPOTrainer
    from runners.meter import FlopMeter, FlopMeterCallback
    from runners.rewards import build_reward_system

    arch = get_model("qwen2.5-1.5b")
    if a.tiny:
        arch = dataclasses.replace(arch, name="qwen2.5-micro", hidden_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, intermediate_size=192,
                                   vocab_size=512)
    if a.policy:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(a.policy)
        tok.padding_side = "left"
    else:
        tok = offline_chat_tokenizer(arch.vocab_size)
    plan = bench_plan(arch, a)
    t0 = time.perf_counter()
    model = build_model(arch, tok, a.device, a.policy)
    load_s = time.perf_counter() - t0
    meter = FlopMeter(arch, lora=LoRA(plan.lora_rank, plan.lora_targets))
    config = grpo_config(plan, device=a.device, seed=0, learning_rate=1e-5)
    config.max_steps = plan.rounds * plan.num_iterations
    rows = gsm8k_rows(a.data, plan.total_prompts + plan.prompts_per_round)
    trainer = RaceGRPOTrainer(
        model=model, reward_funcs=build_reward_system("sparse", "qwen2.5").funcs, args=config,
        train_dataset=Dataset.from_list(rows), processing_class=tok, completions_kept=plan.completions_kept,
        peft_config=LoraConfig(r=plan.lora_rank, lora_alpha=plan.lora_alpha,
                               target_modules=list(plan.lora_targets), lora_dropout=0.0, task_type="CAUSAL_LM"),
        meter=meter,
    )
    cb = FlopMeterCallback.attach(trainer, meter=meter)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    counted = None
    if a.flopcounter:
        from torch.utils.flop_counter import FlopCounterMode

        def addmm(self_shape: Any, a_shape: Any, b_shape: Any, *_: Any, out_shape: Any = None, **__: Any) -> int:
            # In-place addmm_ (TRL's CPU LM-head grad) has no built-in formula, and torch
            # 2.11's misread addmm(..., out_dtype) (TRL's CUDA path; 2.13's takes the extra
            # keywords, docs/meter.md): count both as 2mkn.
            return 2 * a_shape[0] * a_shape[1] * b_shape[1]

        mapping = {torch.ops.aten.addmm_: addmm, torch.ops.aten.addmm: addmm}
        with FlopCounterMode(display=False, custom_mapping=mapping) as fc:
            trainer.train()
        counted = int(fc.get_total_flops())
    else:
        trainer.train()
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    train_s = time.perf_counter() - t1
    out: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
        "model": arch.name, "params": arch.num_parameters, "rounds": plan.rounds,
        "levers": {"prompts": plan.prompts_per_round, "G": plan.completions_per_prompt,
                   "K": plan.completions_kept, "mu": plan.num_iterations},
        "load_s": round(load_s, 2), "train_s": round(train_s, 2), "tokens": meter.tokens,
        "passes": meter.passes, "planned_flops": plan.flops.model_dump(), "phases": {},
        "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1) if a.device.startswith("cuda") else None,
    }
    for phase in ("search", "learning", "reward"):
        f, w = meter.flops[phase], meter.wall.get(phase, 0.0)
        out["phases"][phase] = {"flops": f, "wall_s": round(w, 3), "tflops_per_s": float(f"{f / w / 1e12:.4g}") if w else None}
    b = meter.breakdown()
    out["total"] = {"flops": b.total, "rho": round(b.rho, 4), "wall_s": round(cb.train_wall, 3),
                    "tflops_per_s": float(f"{b.total / cb.train_wall / 1e12:.4g}") if cb.train_wall else None}
    if counted is not None:
        out["flopcounter"] = {"flops": counted, "meter_over_flopcounter": b.total / counted}
    print(json.dumps(out, indent=2))
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
