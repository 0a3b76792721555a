"""The three targets for Qwen2.5-family (GPU-path) runs, on fixed samples.

* ``native`` -- the run's own training reward on sampled completions (temperature 1, as
  in GRPO) of ``n`` training-distribution prompts the run does not train on;
* ``pass1``  -- greedy pass@1 on ``n`` GSM8K-test problems and ``n`` MATH-500 problems
  (mean of the two), answers checked with math-verify (``runners.tasks.verify``);
* ``judge``  -- a process judge model is configurable on GPU but not wired yet: None.

Data come from ``eval_data`` (a folder with ``gsm8k/test.jsonl`` and
``math500/test.jsonl``, as in ../shared/data) or the Hub. The prompts use the same chat
wording as training (``runners.tasks.to_grpo_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["evaluate_math", "generate_chat"]


def generate_chat(model: Any, tokenizer: Any, prompts: Sequence[Any], *, greedy: bool, max_new_tokens: int,
                  seed: int, device: str, batch_size: int = 32) -> list[str]:
    """One completion per chat prompt (left-padded batches, plain temperature-1 sampling)."""
    import torch

    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    out: list[str] = []
    was_training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        for start in range(0, len(texts), batch_size):
            enc = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True,
                            padding_side="left", add_special_tokens=False)
            enc = {k: v.to(device) for k, v in enc.items()}
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=not greedy,
                                 temperature=None if greedy else 1.0, top_k=None if greedy else 0,
                                 top_p=None if greedy else 1.0, pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=tokenizer.eos_token_id)
            out.extend(tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True))
    if was_training:
        model.train()
    return out


def _accuracy(completions: Sequence[str], golds: Sequence[str]) -> float:
    from runners.tasks import extract_answer, verify

    hits = [verify(extract_answer(c), g) for c, g in zip(completions, golds, strict=True)]
    return sum(hits) / max(1, len(hits))


def evaluate_math(model: Any, tokenizer: Any, rewards: Any, *, n: int, seed: int, device: str,
                  native_rows: Sequence[dict[str, Any]], eval_data: str | Path | None = None,
                  max_new_tokens: int = 512) -> dict[str, float | None]:
    """``{"native", "pass1", "judge"}`` of ``model`` (see the module docstring)."""
    from runners.tasks import load_math, to_grpo_rows

    rows = list(native_rows)[:n]
    sampled = generate_chat(model, tokenizer, [r["prompt"] for r in rows], greedy=False,
                            max_new_tokens=max_new_tokens, seed=seed, device=device)
    extra = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"} if rows else {}
    scores = rewards([r["prompt"] for r in rows], [[{"role": "assistant", "content": c}] for c in sampled], **extra)
    accs = []
    for name in ("gsm8k", "math500"):
        path = Path(eval_data) / name if eval_data is not None else None
        items = load_math(name, split="test", path=path, limit=n)
        done = generate_chat(model, tokenizer, [r["prompt"] for r in to_grpo_rows(items, chat=True)], greedy=True,
                             max_new_tokens=max_new_tokens, seed=seed, device=device)
        accs.append(_accuracy(done, [it.answer for it in items]))
    return {"native": sum(scores) / max(1, len(scores)), "pass1": sum(accs) / len(accs), "judge": None}
