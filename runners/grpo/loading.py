"""Policies, tokenizers and prompt sets for GRPO runs, on the CPU (tiny world) or a GPU (Qwen2.5).

* tiny family: the pretrained tiny-world policy (``runners.tinyworld.pretrain.ensure_policy``)
  or a given folder, the character tokenizer, tiny-world training prompts;
* qwen2.5 family: a Hub id or local folder (``policy_path``), its own tokenizer, prompts
  from ``runners.tasks`` (Polaris-53K or GSM8K-train, Hub or a local JSONL/parquet).

Models load with eager attention on CPU (FLOP-countable: the fused CPU SDPA kernel has no
FlopCounterMode formula) and in bf16 with SDPA on CUDA.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.architecture import Architecture, shape_mismatch
from planner.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["load_policy", "load_tokenizer", "offline_chat_tokenizer", "random_policy", "train_rows"]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _qwen2_config(arch: Architecture, **extra: Any) -> Any:
    from runners.modeling import qwen2_config

    return qwen2_config(arch, **extra)


def random_policy(arch: Architecture, folder: str | Path, *, seed: int = 0, tokenizer: Any = None) -> Path:
    """Save a random-initialised Qwen2 causal LM shaped like ``arch`` (and ``tokenizer``) to ``folder``.

    For tests and the GPU-path benchmark: FLOPs depend on shapes, not weights.
    """
    import torch
    from transformers import Qwen2ForCausalLM

    extra: dict[str, Any] = {}
    if tokenizer is not None:
        extra = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
                 "bos_token_id": tokenizer.bos_token_id}
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(_qwen2_config(arch, **extra))
    folder = Path(folder)
    model.save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder


def offline_chat_tokenizer(vocab_size: int) -> Any:
    """A character-level stand-in for a Hub chat tokenizer, ``vocab_size`` ids, Qwen-style
    chat template. For offline tests and benchmarks of the GPU path on random-initialised
    policies (no Hub): printable ASCII, newline and filler ids up to the model's vocabulary."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    if vocab_size < len(specials) + len(chars):
        raise ValueError(f"vocab_size must be at least {len(specials) + len(chars)}")
    fill = [f"<{i}>" for i in range(vocab_size - len(specials) - len(chars))]
    vocab = {t: i for i, t in enumerate(specials + chars + fill)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("<\\|im_(?:start|end)\\|>|[\\s\\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                  unk_token="<unk>", additional_special_tokens=["<|im_start|>"],
                                  padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def load_tokenizer(arch: Architecture, path: str | Path | None) -> Any:
    """The policy's tokenizer; left padding (TRL generates from left-padded prompts)."""
    tok: PreTrainedTokenizerBase
    if arch.family == "tiny":
        # Never AutoTokenizer on a qwen2 folder: it swaps in Qwen2Tokenizer.
        from runners.tinyworld.tokenizer import build_tokenizer

        tok = build_tokenizer()
    else:
        import json

        from transformers import AutoTokenizer, PreTrainedTokenizerFast

        where = str(path or arch.hub_id)
        cfg = Path(where) / "tokenizer_config.json"
        named = json.loads(cfg.read_text()).get("tokenizer_class") if cfg.is_file() else None
        # A folder that names the generic fast class (our offline stand-in) must not be
        # re-typed from its qwen2 model config.
        generic = ("PreTrainedTokenizerFast", "TokenizersBackend")  # the latter: how transformers 5 saves it
        loader = PreTrainedTokenizerFast if named in generic else AutoTokenizer
        tok = loader.from_pretrained(where)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def resolve_policy_path(arch: Architecture, policy_path: str | Path | None, *, quick: bool,
                        cache_dir: str | Path | None) -> str:
    """Where the base policy's weights come from: an explicit path, the tiny-world cache, or the Hub."""
    if policy_path:
        return str(policy_path)
    if arch.family == "tiny":
        from runners.tinyworld.pretrain import ensure_policy

        kwargs: dict[str, Any] = {"quick": quick}
        if cache_dir is not None:
            kwargs["cache_dir"] = Path(cache_dir)
        return str(ensure_policy(arch.name, **kwargs))
    if not arch.hub_id:
        raise ConfigError(f"policy_path: {arch.name!r} has no hub_id; pass policy_path=FOLDER")
    return arch.hub_id


# Weights up to this size are hashed for a record's provenance (the tiny world's are under
# 10 MB; a 7B checkpoint's 15 GB would take minutes of every run).
FINGERPRINT_MAX_BYTES = 1 << 30


def weights_fingerprint(path: str) -> str | None:
    """``sha256:<hex>`` over a local checkpoint folder's ``*.safetensors`` (sorted by name),
    or None for a Hub id, a folder without them, or more than :data:`FINGERPRINT_MAX_BYTES`.

    Two machines can pretrain the tiny world's policy to different weights (float rounding
    moves the draw), and a record names only the cache folder: the hash says which weights
    a run started from."""
    import hashlib

    folder = Path(path)
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files or sum(f.stat().st_size for f in files) > FINGERPRINT_MAX_BYTES:
        return None
    h = hashlib.sha256()
    for f in files:
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return f"sha256:{h.hexdigest()}"


def load_policy(path: str, arch: Architecture, tokenizer: Any, *, device: str) -> Any:
    """The causal LM at ``path`` on ``device``; checks it has the registry's shape."""
    import torch
    from transformers import AutoModelForCausalLM

    cuda = device.startswith("cuda")
    model = AutoModelForCausalLM.from_pretrained(
        path,
        dtype=torch.bfloat16 if cuda else torch.float32,
        attn_implementation="sdpa" if cuda else "eager",
    )
    # The meter converts tokens with the registry's shapes: any other size would mis-bill
    # (a wider MLP alone made a run cost more than its card said).
    if (off := shape_mismatch(model.config, arch)) is not None:
        raise ConfigError(f"policy_path: {path} has {off}; point at a checkpoint of {arch.name}")
    gen = model.generation_config
    gen.pad_token_id = tokenizer.pad_token_id
    gen.eos_token_id = tokenizer.eos_token_id
    return model.to(device)  # type: ignore[arg-type]  # transformers types to() as functools.wraps(nn.Module.to)


def train_rows(arch: Architecture, n: int, seed: int, *, dataset: str = "polaris",
               data_path: str | Path | None = None) -> list[dict[str, Any]]:
    """``n`` training prompts as TRL rows (``{"prompt": ...}`` plus the gold answer for math)."""
    if arch.family == "tiny":
        from runners.tinyworld.task import make_problems

        return [{"prompt": p.prompt} for p in make_problems("train", n, seed)]
    from runners.tasks import load_math, to_grpo_rows

    items = load_math(dataset, split="train", path=data_path, limit=n)
    return to_grpo_rows(items, chat=True)
