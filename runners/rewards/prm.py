"""Process reward models: a Qwen2 body with a per-position score head, and how they score.

One class serves both families. :class:`ProcessRewardModel` is a ``Qwen2Model`` plus
``score``, a head applied at every position (``configs/models/*.toml`` ``score_head``):

* ``[o]``     -> ``Linear(d, o)`` (the tiny PRMs, o = 1; Skywork's value head);
* ``[h, o]``  -> ``Linear(d, h) -> ReLU -> Linear(h, o)`` (Qwen2.5-Math-PRM, o = 2).

The step probability at a scored position is ``sigmoid(logit)`` for o = 1 and
``softmax(logits)[1]`` (the "correct" class) for o = 2. **Reduction**: a completion's
reward is the *minimum* step probability over its steps -- a chain of reasoning is as
good as its worst step (Lightman et al. 2023; the Qwen2.5-Math-PRM report).

Scored positions. Tiny world: ``<bos> prompt completion <eos>`` in the character
tokenizer, one position per non-empty completion line -- the newline that ends it, or
``<eos>`` for the last line (the PRM is trained at exactly these positions). Qwen2.5:
the layout each released checkpoint was trained on (Qwen2.5-Math-PRM's chat with
``<extra_0>`` step tags, Skywork's newline-ended lines: :mod:`runners.rewards.prm_formats`),
with the problem's own text where the dataset has it (the ``question`` column).

Every forward the scorer runs appends ``(batch, padded_seq_len)`` to ``scored`` -- the
FLOP meter converts those with the accountant (``reward_model_flops``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from transformers import Qwen2Config
from transformers.models.qwen2.modeling_qwen2 import Qwen2Model, Qwen2PreTrainedModel

from planner.architecture import shape_mismatch
from planner.errors import ConfigError

if TYPE_CHECKING:
    from planner.architecture import Architecture

__all__ = [
    "ProcessRewardModel",
    "load_prm",
    "prm_config",
    "qwen_step_scores",
    "tiny_encode",
    "tiny_step_scores",
]

_SPECIAL_RE = re.compile(r"<(?:eos|pad|bos|unk)>")
# A tiny-world completion's tokens: a special token's text, or one character.
_PIECE_RE = re.compile(r"<(?:eos|pad|bos|unk)>|[\s\S]")
# Skywork's checkpoints call the head ``v_head.summary``; ours and Qwen's call it ``score``.
KEY_MAPPING = {r"^v_head\.summary\.": "score."}


class ProcessRewardModel(Qwen2PreTrainedModel):
    """Qwen2 body + per-position score head; ``forward`` returns logits ``[B, T, o]``."""

    def __init__(self, config: Qwen2Config) -> None:
        super().__init__(config)
        self.model = Qwen2Model(config)
        head = tuple(getattr(config, "score_head", (1,)))
        d = config.hidden_size
        if len(head) == 1:
            self.score: nn.Module = nn.Linear(d, head[0])
        else:
            self.score = nn.Sequential(nn.Linear(d, head[0]), nn.ReLU(), nn.Linear(head[0], head[1]))
        self.post_init()

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any
    ) -> torch.Tensor:
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.score(hidden)

    @staticmethod
    def step_probs(logits: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` probability that the step ending at each position is correct."""
        if logits.shape[-1] == 1:
            return torch.sigmoid(logits[..., 0].float())
        return torch.softmax(logits.float(), dim=-1)[..., 1]


def prm_config(arch: Architecture, **overrides: Any) -> Qwen2Config:
    """A ``Qwen2Config`` for a registry PRM architecture (eager attention: FLOP-countable)."""
    from runners.modeling import qwen2_config

    cfg = qwen2_config(arch, **{"tie_word_embeddings": False, **overrides})
    cfg.score_head = list(arch.score_head or (1,))
    cfg._attn_implementation = "eager"
    return cfg


def load_prm(path: str | Path, arch: Architecture, *, device: str = "cpu") -> ProcessRewardModel:
    """Load a PRM saved in the body+``score`` layout (ours, Qwen2.5-Math-PRM, Skywork).

    ``path`` is a local folder or a Hub id (resolved by ``from_pretrained``; the tests
    only ever pass local folders). The head shape is the checkpoint's own ``score_head``
    (ours save it) or else the registry ``arch``'s (the Hub PRMs' configs lack it).
    """
    cfg = Qwen2Config.from_pretrained(str(path))
    # The meter bills the registry scorer's shape: another PRM would be mis-billed.
    if (off := shape_mismatch(cfg, arch)) is not None:
        raise ConfigError(f"scorer_path: {path} has {off}; point at a checkpoint of {arch.name}")
    if not getattr(cfg, "score_head", None):
        cfg.score_head = list(arch.score_head or (1,))
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = ProcessRewardModel.from_pretrained(
        str(path), config=cfg, dtype=dtype, attn_implementation="eager", key_mapping=KEY_MAPPING
    )
    return model.to(device).eval()  # type: ignore[arg-type]  # transformers types to() as functools.wraps(nn.Module.to)


# --------------------------------------------------------------------------- tiny world


def tiny_encode(prompt: str, completion: str) -> tuple[list[int], list[int]]:
    """Token ids of ``<bos> prompt completion <eos>`` and the scored positions (see module doc).

    The character tokenizer maps each character to one id, so positions are offsets. The
    completion is read as the grade reads it (``task.clean_completion``: cut at ``<eos>``),
    and a special token left in it is scored as its own id, not dropped: dropped, it would
    join its neighbours into a line the PRM may call correct.
    """
    from runners.tinyworld.task import clean_completion
    from runners.tinyworld.tokenizer import char_ids, special_id

    prompt = _SPECIAL_RE.sub("", prompt)
    pieces = _PIECE_RE.findall(clean_completion(completion))
    ids = [special_id("<bos>"), *char_ids(prompt),
           *(special_id(t) if len(t) > 1 else char_ids(t)[0] for t in pieces), special_id("<eos>")]
    base = 1 + len(prompt)
    positions, start = [], 0
    for i, piece in enumerate([*pieces, "\n"]):
        if piece == "\n":  # index i: the '\n' ending this line, or <eos> after the last
            if "".join(pieces[start:i]).strip():
                positions.append(base + i)
            start = i + 1
    if not positions:
        positions.append(len(ids) - 1)
    return ids, positions


def _pad_batch(seqs: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


@torch.inference_mode()
def _score(
    model: ProcessRewardModel,
    encoded: Sequence[tuple[list[int], list[int]]],
    pad_id: int,
    scored: list[tuple[int, int]],
    batch_size: int,
) -> list[list[float]]:
    device = next(model.parameters()).device
    out: list[list[float]] = []
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start : start + batch_size]
        ids, mask = _pad_batch([c[0] for c in chunk], pad_id)
        probs = model.step_probs(model(ids.to(device), mask.to(device))).cpu()
        scored.append((ids.shape[0], ids.shape[1]))
        out.extend(probs[i, pos].tolist() for i, (_, pos) in enumerate(chunk))
    return out


def tiny_step_scores(
    model: ProcessRewardModel,
    prompts: Sequence[str],
    completions: Sequence[str],
    scored: list[tuple[int, int]],
    *,
    batch_size: int = 256,
) -> list[list[float]]:
    """Per-step probabilities for each tiny-world completion (one list per completion)."""
    from runners.tinyworld.tokenizer import special_id

    enc = [tiny_encode(p, c) for p, c in zip(prompts, completions, strict=True)]
    return _score(model, enc, special_id("<pad>"), scored, batch_size)


# --------------------------------------------------------------------------- qwen2.5


def qwen_step_scores(
    model: ProcessRewardModel,
    tokenizer: Any,
    problems: Sequence[str],
    completions: Sequence[str],
    scored: list[tuple[int, int]],
    *,
    batch_size: int = 8,
    max_length: int = 4096,
) -> list[list[float]]:
    """Per-step probabilities for math completions, each encoded in the layout its
    checkpoint was trained on (:mod:`runners.rewards.prm_formats`). A sequence past
    ``max_length`` keeps its tail: the steps being scored."""
    from runners.rewards.prm_formats import prm_encoder

    encode = prm_encoder(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("the PRM tokenizer has neither a pad nor an eos token to pad batches with")
    enc: list[tuple[list[int], list[int]]] = []
    for p, c in zip(problems, completions, strict=True):
        ids, pos = encode(tokenizer, p, c)
        if len(ids) > max_length:
            cut = len(ids) - max_length
            ids, pos = ids[cut:], [q - cut for q in pos if q >= cut] or [max_length - 1]
        enc.append((ids, pos))
    return _score(model, enc, pad, scored, batch_size)
