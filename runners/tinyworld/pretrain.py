"""Pretraining (SFT) of the tiny world's policies and process reward models, cached.

``ensure_policy(name)`` trains a Qwen2ForCausalLM (architecture from the registry) on
worked solutions drawn from the corpus noise model (``task.sample_solution``: a mix of
correct and flawed solutions, about half correct), loss on completion tokens only. The
policy inherits the corpus' misconceptions, so it succeeds sometimes but far from always,
under greedy decoding too. A share ``harder_share`` of pretraining problems come from the
harder split's length range (6-8 operations), so that split is hard but reachable.

``ensure_prm(name)`` trains a :class:`~runners.rewards.prm.ProcessRewardModel` with a
binary cross-entropy at every step position on ``task.grade``'s step labels, over
solutions from a noisier corpus (more slips, truncations, garbled lines) so it has seen
the kinds of errors a policy makes. ``tiny-prm-s`` is smaller, trained less and on
labels flipped with probability ``label_noise``: the proxy PRM.

Everything is deterministic in ``seed`` and cached under ``cache_dir`` (default
``$RACE_CACHE`` or ``~/.cache/race-planner``) in a folder named by model, seed, recipe
and a hash of everything that shapes the result; folders are written under a temporary
name and renamed, so concurrent callers never see half a model.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from planner.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from transformers import Qwen2Config

    from planner.architecture import Architecture
    from runners.rewards.prm import ProcessRewardModel
    from runners.tinyworld.task import Problem

__all__ = [
    "WORLD_VERSION",
    "Recipe",
    "cache_root",
    "ensure_policy",
    "ensure_prm",
    "policy_config",
    "recipe_for",
]

# Bump when the task, corpus or training code changes what a cached model would be.
WORLD_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    """SFT hyper-parameters. ``harder_share``: share of problems with 6-8 operations;
    ``slip``: corpus slip rate (PRMs see a noisier corpus); ``label_noise``: PRM labels
    flipped with this probability; ``corrupt``: share of PRM examples truncated/garbled;
    ``aux_lm``: weight of the PRMs' auxiliary next-token loss (see ``_prm_loss``)."""

    steps: int
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 30
    weight_decay: float = 0.01
    harder_share: float = 0.25
    slip: float = 0.04
    label_noise: float = 0.0
    corrupt: float = 0.0
    aux_lm: float = 1.0


# (role, quick) -> recipe; per-model step counts below. Quick recipes keep the test
# suite's policy + both PRMs under a minute on 2 cores.
_BASE: dict[tuple[str, bool], Recipe] = {
    ("policy", False): Recipe(steps=1500),
    # Copying the i-th operation out of the prompt (an induction-head skill) needs ~50k
    # examples before it appears; larger batches at a higher rate get there in fewer steps.
    ("policy", True): Recipe(steps=350, batch_size=128, lr=5e-3, warmup=20, harder_share=0.1),
    ("prm", False): Recipe(steps=1500, slip=0.12, corrupt=0.15),
    # Quick PRMs are weak scorers (they exist so the PRM code paths run in tests).
    ("prm", True): Recipe(steps=100, lr=5e-3, warmup=20, slip=0.12, corrupt=0.15),
}
_OVERRIDES: dict[tuple[str, bool], dict[str, float]] = {
    ("tiny-prm-s", False): {"steps": 1000, "label_noise": 0.1},
    ("tiny-prm-s", True): {"steps": 60, "label_noise": 0.1},
}


def recipe_for(name: str, quick: bool) -> Recipe:
    from planner.registry import get_model

    arch = get_model(name)
    base = _BASE[(arch.role, quick)]
    return replace(base, **_OVERRIDES.get((name, quick), {}))  # type: ignore[arg-type]


def cache_root(cache_dir: Path | None = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("RACE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "race-planner"


def _threads() -> int:
    """Intra-op threads for pretraining: ``RACE_THREADS`` or 1.

    One thread keeps results bit-identical whatever the machine's load (the summation
    order of a matmul depends on the thread count), tiny matmuls gain little from more,
    and on oversubscribed cores spinning OpenMP threads cost several-fold.
    """
    env = os.environ.get("RACE_THREADS")
    return max(1, int(env)) if env else 1


@contextmanager
def _torch_threads() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(_threads())
    try:
        yield
    finally:
        torch.set_num_threads(before)


def policy_config(name: str) -> Qwen2Config:
    """A ``Qwen2Config`` for tiny policy ``name`` with the tokenizer's special ids."""
    from transformers import Qwen2Config

    from runners.tinyworld.tokenizer import VOCAB_SIZE, special_id

    a = _tiny_arch(name, "policy")
    cfg = Qwen2Config(
        vocab_size=a.vocab_size,
        hidden_size=a.hidden_size,
        intermediate_size=a.intermediate_size,
        num_hidden_layers=a.num_hidden_layers,
        num_attention_heads=a.num_attention_heads,
        num_key_value_heads=a.num_key_value_heads,
        max_position_embeddings=a.max_position_embeddings,
        tie_word_embeddings=a.tie_word_embeddings,
        bos_token_id=special_id("<bos>"),
        eos_token_id=special_id("<eos>"),
        pad_token_id=special_id("<pad>"),
    )
    if a.vocab_size != VOCAB_SIZE:
        raise ConfigError(f"vocab_size: {name} has {a.vocab_size}, the tiny tokenizer {VOCAB_SIZE}; set {VOCAB_SIZE}")
    cfg._attn_implementation = "eager"  # FLOP-countable on CPU (SDPA counts 0 there)
    return cfg


def _tiny_arch(name: str, role: str) -> Architecture:
    from planner.registry import get_model

    a = get_model(name)
    if a.family != "tiny" or a.role != role:
        raise ConfigError(f"model: {name!r} is not a tiny-world {role}; use a tiny-* {role} from configs/models")
    return a


def _key(name: str, seed: int, quick: bool, recipe: Recipe) -> str:
    from planner.registry import get_model
    from runners.tinyworld.task import FlawModel

    blob = json.dumps(
        [WORLD_VERSION, asdict(get_model(name)), asdict(recipe), asdict(FlawModel()), seed],
        sort_keys=True, default=str,
    )
    digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
    return f"{name}-seed{seed}-{'quick' if quick else 'full'}-{digest}"


def _cached(
    name: str, seed: int, quick: bool, cache_dir: Path | None,
    train: Callable[[Path, Recipe, bool], dict[str, float]], progress: bool | None,
) -> Path:
    recipe = recipe_for(name, quick)
    root = cache_root(cache_dir)
    final = root / _key(name, seed, quick, recipe)
    if (final / "meta.json").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        show = sys.stderr.isatty() if progress is None else progress
        t0 = time.perf_counter()
        stats = train(tmp, recipe, show)
        meta = {"name": name, "seed": seed, "quick": quick, "world_version": WORLD_VERSION,
                "recipe": asdict(recipe), "train_seconds": time.perf_counter() - t0, **stats}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def ensure_policy(
    name: str, *, quick: bool = False, seed: int = 0, cache_dir: Path | None = None,
    progress: bool | None = None,
) -> Path:
    """Folder with the pretrained tiny policy ``name`` (``save_pretrained``) and its tokenizer.

    Load with ``Qwen2ForCausalLM.from_pretrained(path)`` and
    ``PreTrainedTokenizerFast.from_pretrained(path)``. ``meta.json`` records the recipe,
    training time and final loss. Trained on first call, then reused.
    """
    _tiny_arch(name, "policy")
    return _cached(name, seed, quick, cache_dir,
                   lambda out, r, show: _train_policy(name, seed, r, out, show), progress)


def ensure_prm(
    name: Literal["tiny-prm", "tiny-prm-s"], *, quick: bool = False, seed: int = 0,
    cache_dir: Path | None = None, progress: bool | None = None,
) -> Path:
    """Folder with the trained tiny PRM ``name`` (load with ``runners.rewards.prm.load_prm``).

    ``meta.json`` adds held-out step-label accuracy and the reduced (min) score's
    accuracy at predicting answer correctness.
    """
    _tiny_arch(name, "prm")
    return _cached(name, seed, quick, cache_dir,
                   lambda out, r, show: _train_prm(name, seed, r, out, show), progress)


# --------------------------------------------------------------------------- training


def _corpus_problem(rng: random.Random, harder_share: float) -> Problem:
    from runners.tinyworld.task import MOD, OPS, SPLIT_OPS, problem_from_ops

    lo, hi = SPLIT_OPS["harder" if rng.random() < harder_share else "train"]
    k = rng.randint(lo, hi)
    return problem_from_ops([rng.randrange(MOD) for _ in range(k + 1)], [rng.choice(OPS) for _ in range(k)])


def _lr_lambda(recipe: Recipe) -> Callable[[int], float]:
    def f(step: int) -> float:  # linear warmup, then linear decay to 10%
        if step < recipe.warmup:
            return (step + 1) / recipe.warmup
        frac = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
        return max(0.1, 1.0 - 0.9 * frac)

    return f


@contextmanager
def _bar(total: int, label: str, show: bool) -> Iterator[Callable[[float], None]]:
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if not show:
        yield lambda loss: None
        return
    cols = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn())
    with Progress(*cols, transient=False) as bar:
        task = bar.add_task(label, total=total, loss=float("nan"))
        yield lambda loss: bar.update(task, advance=1, loss=loss)


def _loss_stats(losses: list[float]) -> dict[str, float]:
    """Mean training loss over the first and the last 10% of steps (at least one step)."""
    k = max(1, len(losses) // 10)
    return {"initial_loss": sum(losses[:k]) / k, "final_loss": sum(losses[-k:]) / k}


def _optimizer(
    model: torch.nn.Module, recipe: Recipe
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(recipe))


def _train_policy(name: str, seed: int, recipe: Recipe, out: Path, show: bool) -> dict[str, float]:
    import torch
    from transformers import Qwen2ForCausalLM

    from runners.tinyworld.task import FlawModel, sample_solution
    from runners.tinyworld.tokenizer import build_tokenizer, char_ids, special_id

    bos, eos, pad = special_id("<bos>"), special_id("<eos>"), special_id("<pad>")
    flaws = replace(FlawModel(), slip=recipe.slip)
    rng = random.Random(f"pretrain:{name}:{seed}")
    with _torch_threads():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(policy_config(name))
        opt, sched = _optimizer(model, recipe)
        model.train()
        losses: list[float] = []
        with _bar(recipe.steps, f"pretrain {name}", show) as tick:
            for _ in range(recipe.steps):
                seqs, starts = [], []
                for _ in range(recipe.batch_size):
                    p = _corpus_problem(rng, recipe.harder_share)
                    prompt = [bos, *char_ids(p.prompt)]
                    seqs.append(prompt + char_ids(sample_solution(p, rng, flaws)) + [eos])
                    starts.append(len(prompt))
                width = max(map(len, seqs))
                ids = torch.full((len(seqs), width), pad, dtype=torch.long)
                labels = torch.full_like(ids, -100)
                mask = torch.zeros_like(ids)
                for i, (s, st) in enumerate(zip(seqs, starts, strict=True)):
                    ids[i, : len(s)] = torch.tensor(s)
                    mask[i, : len(s)] = 1
                    labels[i, st : len(s)] = ids[i, st : len(s)]  # loss on the completion only
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                losses.append(loss.item())
                tick(losses[-1])
        model.eval()
        model.generation_config.pad_token_id = pad
        model.generation_config.eos_token_id = eos
        model.generation_config.bos_token_id = bos
        model.save_pretrained(out)
        build_tokenizer().save_pretrained(out)
    return {**_loss_stats(losses), "steps": recipe.steps, "parameters": model.num_parameters()}


PrmExample = tuple[list[int], list[int], list[float]]  # token ids, scored positions, labels


def _prm_example(rng: random.Random, recipe: Recipe) -> PrmExample:
    from runners.rewards.prm import tiny_encode
    from runners.tinyworld.task import FlawModel, grade, sample_solution
    from runners.tinyworld.tokenizer import ALPHABET

    p = _corpus_problem(rng, recipe.harder_share)
    text = sample_solution(p, rng, replace(FlawModel(), slip=recipe.slip))
    if rng.random() < recipe.corrupt:  # truncate, or garble one character
        if rng.random() < 0.5:
            text = text[: rng.randrange(len(text))]
        else:
            i = rng.randrange(len(text))
            text = text[:i] + rng.choice(ALPHABET) + text[i + 1 :]
    labels = [float(x) for x in grade(p, text).step_labels]
    ids, pos = tiny_encode(p.prompt, text)
    if len(pos) != len(labels):  # an empty completion: one position, label "wrong"
        labels = [0.0] * len(pos)
    labels = [1.0 - y if rng.random() < recipe.label_noise else y for y in labels]
    return ids, pos, labels


def _train_prm(name: str, seed: int, recipe: Recipe, out: Path, show: bool) -> dict[str, float]:
    import torch

    from planner.registry import get_model
    from runners.rewards.prm import ProcessRewardModel, prm_config
    from runners.tinyworld.tokenizer import build_tokenizer, special_id

    pad = special_id("<pad>")
    rng = random.Random(f"prm:{name}:{seed}")
    with _torch_threads():
        torch.manual_seed(seed)
        model = ProcessRewardModel(prm_config(get_model(name), pad_token_id=pad))
        opt, sched = _optimizer(model, recipe)
        model.train()
        losses: list[float] = []
        with _bar(recipe.steps, f"train {name}", show) as tick:
            for _ in range(recipe.steps):
                batch = [_prm_example(rng, recipe) for _ in range(recipe.batch_size)]
                loss = _prm_loss(model, batch, pad, recipe.aux_lm)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                losses.append(loss.item())
                tick(losses[-1])
        model.eval()
        stats = _prm_heldout(model, pad, seed)
        model.save_pretrained(out)
        build_tokenizer().save_pretrained(out)
    return {**_loss_stats(losses), "steps": recipe.steps, **stats}


def _prm_batch(
    batch: list[PrmExample], pad: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    import torch

    width = max(len(ids) for ids, _, _ in batch)
    ids_t = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids_t)
    rows, cols, ys = [], [], []
    for i, (ids, pos, labels) in enumerate(batch):
        ids_t[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(ids)] = 1
        rows += [i] * len(pos)
        cols += pos
        ys += labels
    return ids_t, mask, torch.tensor(rows), torch.tensor(cols), torch.tensor(ys)


def _prm_loss(model: ProcessRewardModel, batch: list[PrmExample], pad: int, aux_lm: float) -> torch.Tensor:
    """BCE on step labels + ``aux_lm`` x next-token loss through the tied embeddings.

    The auxiliary language-model loss is dense (every token, not one label per step), so
    the body learns the arithmetic table and where operands sit far sooner than from the
    step labels alone -- the way real PRMs start from a pretrained LM. It adds no weights:
    logits are ``hidden @ embed_tokens.T``; only the body and the score head are saved.
    """
    from torch.nn import functional as F

    ids, mask, rows, cols, ys = _prm_batch(batch, pad)
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    loss = F.binary_cross_entropy_with_logits(model.score(hidden)[rows, cols, 0], ys)
    if aux_lm > 0:
        lm = hidden[:, :-1] @ model.model.embed_tokens.weight.T
        target = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
        loss = loss + aux_lm * F.cross_entropy(lm.reshape(-1, lm.shape[-1]), target.reshape(-1))
    return loss


def _prm_heldout(model: ProcessRewardModel, pad: int, seed: int, n: int = 512) -> dict[str, float]:
    """Step-label accuracy (true labels, no noise) and outcome accuracy of the min score."""
    import torch

    from runners.rewards.prm import tiny_step_scores
    from runners.tinyworld.task import FlawModel, grade, make_problems, sample_solution

    rng = random.Random(f"prm-eval:{seed}")
    probs = make_problems("heldout", n, seed + 7)
    texts = [sample_solution(p, rng, replace(FlawModel(), slip=0.08)) for p in probs]
    with torch.inference_mode():
        scores = tiny_step_scores(model, [p.prompt for p in probs], texts, [])
    step_hits = step_n = out_hits = 0
    for p, t, s in zip(probs, texts, scores, strict=True):
        g = grade(p, t)
        step_hits += sum((x > 0.5) == y for x, y in zip(s, g.step_labels, strict=True))
        step_n += len(s)
        out_hits += (min(s) > 0.5) == g.answer_correct
    return {"step_accuracy": step_hits / step_n, "outcome_accuracy": out_hits / n}
