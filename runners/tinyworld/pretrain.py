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

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from planner.errors import ConfigError
from planner.files import umask

if TYPE_CHECKING:
    from transformers import Qwen2Config

    from planner.architecture import Architecture

__all__ = [
    "WORLD_VERSION",
    "Recipe",
    "cache_root",
    "cached_path",
    "ensure_policy",
    "ensure_prm",
    "is_cached",
    "no_transformers_bars",
    "policy_config",
    "pretrain_threads",
    "recipe_for",
]

# Bump when the task, corpus or training code changes what a cached model would be.
WORLD_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    """SFT hyper-parameters. ``harder_share``: share of problems with 6-8 operations;
    ``slip``: corpus slip rate (PRMs see a noisier corpus); ``label_noise``: PRM labels
    flipped with this probability; ``corrupt``: share of PRM examples truncated/garbled;
    ``aux_lm``: weight of the PRMs' auxiliary next-token loss (see ``_prm_loss``);
    ``micro_batch``: a policy step runs length-sorted parts of this many sequences, each
    padded to its own longest (0: the batch as one padded pass). The longest problems are
    twice the average length, so one padded pass of 128 spends ~1/3 of its compute on
    padding; parts of 32 cut a quick step by ~30% on one thread, at the same gradient up to
    rounding. Only the quick recipe uses it: the full policy's copy skill emerges late in
    training, and a rounding-level change to its steps left tiny-s without it (final loss
    0.28 instead of 0.20, greedy heldout 0.19 instead of 0.46; docs/tinyworld.md)."""

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
    micro_batch: int = 0


# (role, quick) -> recipe; per-model step counts below. Quick recipes keep the test
# suite's policy + both PRMs under a minute on 2 cores.
_BASE: dict[tuple[str, bool], Recipe] = {
    ("policy", False): Recipe(steps=1500),
    # Copying the i-th operation out of the prompt (an induction-head skill) needs ~50k
    # examples before it appears; larger batches at a higher rate get there in fewer steps.
    ("policy", True): Recipe(steps=350, batch_size=128, lr=5e-3, warmup=20, harder_share=0.1, micro_batch=32),
    ("prm", False): Recipe(steps=1500, slip=0.12, corrupt=0.15),
    # Quick PRMs are weak scorers (they exist so the PRM code paths run in tests).
    ("prm", True): Recipe(steps=100, lr=5e-3, warmup=20, slip=0.12, corrupt=0.15),
}
_OVERRIDES: dict[tuple[str, bool], dict[str, float]] = {
    ("tiny-prm-s", False): {"steps": 1000, "label_noise": 0.1},
    ("tiny-prm-s", True): {"steps": 60, "label_noise": 0.1},
}


def recipe_for(name: str, quick: bool) -> Recipe:
    """The SFT recipe of the tiny-world model ``name`` (a policy or a PRM), the short one with
    ``quick``."""
    from planner.registry import get_model

    arch = get_model(name)
    base = _BASE[(arch.role, quick)]
    return replace(base, **_OVERRIDES.get((name, quick), {}))  # type: ignore[arg-type]


def cache_root(cache_dir: Path | None = None) -> Path:
    """Where pretrained tiny-world models are cached: ``cache_dir``, else ``$RACE_CACHE``, else
    ``~/.cache/race-planner``."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("RACE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "race-planner"


def pretrain_threads() -> int:
    """Intra-op threads for pretraining: ``RACE_THREADS`` or 1.

    One thread keeps results bit-identical whatever the machine's load (the summation
    order of a matmul depends on the thread count), tiny matmuls gain little from more,
    and on oversubscribed cores spinning OpenMP threads cost several-fold. ConfigError
    when it is set to anything but a whole number >= 1 (an empty value is unset).
    """
    env = os.environ.get("RACE_THREADS", "").strip()
    if not env:
        return 1
    try:
        n = int(env)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"RACE_THREADS: {env!r} is not a thread count; set a whole number of threads >= 1 "
                          "(e.g. 1, the default), or unset it")
    return n


def policy_config(name: str) -> Qwen2Config:
    """A ``Qwen2Config`` for tiny policy ``name`` with the tokenizer's special ids."""
    from runners.modeling import qwen2_config
    from runners.tinyworld.tokenizer import VOCAB_SIZE, special_id

    a = _tiny_arch(name, "policy")
    cfg = qwen2_config(
        a,
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

    fields = asdict(recipe)
    if not fields["micro_batch"]:  # the one-pass step of models cached before the field: same folder
        del fields["micro_batch"]
    blob = json.dumps(
        [WORLD_VERSION, asdict(get_model(name)), fields, asdict(FlawModel()), seed],
        sort_keys=True, default=str,
    )
    digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
    return f"{name}-seed{seed}-{'quick' if quick else 'full'}-{digest}"


def cached_path(name: str, *, quick: bool = False, seed: int = 0, cache_dir: Path | None = None) -> Path | None:
    """The cache folder of ``name`` with this recipe if it is pretrained already, else None
    (nothing is trained)."""
    folder = cache_root(cache_dir) / _key(name, seed, quick, recipe_for(name, quick))
    return folder if (folder / "meta.json").exists() else None


def is_cached(name: str, *, quick: bool = False, seed: int = 0, cache_dir: Path | None = None) -> bool:
    """Whether ``name`` with this recipe is already pretrained in the cache."""
    return cached_path(name, quick=quick, seed=seed, cache_dir=cache_dir) is not None


def _set_aside_incomplete(final: Path) -> None:
    """Move a cache folder without ``meta.json`` out of the way, saying so. This process
    writes ``meta.json`` before its rename, so such a folder is a copy cut short (the docs
    say cache folders may be copied between machines): the new model could not replace it,
    and every run trained, threw the model away and failed on the missing meta.json."""
    if not final.exists() or (final / "meta.json").exists():
        return
    aside = final.with_name(f".incomplete-{final.name}-{os.getpid()}-{time.time_ns()}")
    try:
        os.replace(final, aside)
    except FileNotFoundError:  # another process moved it first
        return
    print(f"warning: {final} had no meta.json (an unfinished copy?); moved it to {aside.name} and "
          "pretraining anew", file=sys.stderr)


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
    _set_aside_incomplete(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    os.chmod(tmp, 0o777 & ~umask())  # mkdtemp's 0700 would keep a shared cache from its other users
    try:
        show = sys.stderr.isatty() if progress is None else progress
        t0 = time.perf_counter()
        with no_transformers_bars():
            stats = train(tmp, recipe, show)
        meta = {"name": name, "seed": seed, "quick": quick, "world_version": WORLD_VERSION,
                "recipe": asdict(recipe), "train_seconds": time.perf_counter() - t0, **stats}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished first: keep theirs
            if not (final / "meta.json").exists():  # not theirs: a copy cut short since the check above
                _set_aside_incomplete(final)
                os.replace(tmp, final)
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


@contextlib.contextmanager
def no_transformers_bars() -> Iterator[None]:
    """Transformers 5 draws "Writing model shards" and "Loading weights" bars for a 100k
    model, torn lines under the pretraining bar in every log (the main job's included);
    the pretraining bar is the progress shown. Restored after: a library caller's own."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


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
                   lambda out, r, show: _sft().train_policy(name, seed, r, out, show), progress)


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
                   lambda out, r, show: _sft().train_prm(name, seed, r, out, show), progress)


def _sft() -> ModuleType:
    from runners.tinyworld import sft

    return sft
