"""The tiny world's character-level tokenizer, built with the ``tokenizers`` library.

One token per character of the task alphabet (:data:`ALPHABET`) plus four special tokens.
Deterministic: the vocabulary is a fixed list, so ids never depend on data or seeds.

Conventions the rest of the tiny world relies on:

* ``tokenizer(text)`` prepends ``<bos>`` (TRL tokenizes non-chat prompts with the default
  ``add_special_tokens=True``, so pretraining does the same and the two agree);
* ``<eos>`` ends every completion; generation stops there and TRL masks after it;
* ``<pad>`` pads (left for generation, right for training); decoding fuses characters
  back into the original string (no spaces between tokens);
* decoding with ``skip_special_tokens=True`` (how TRL and the evaluation decode
  completions for the rewards) follows :func:`~runners.tinyworld.task.clean_completion`: it drops the framing
  (leading ``<pad>`` tokens, one ``<bos>``), cuts at the first ``<eos>``, and keeps any other
  special token as its literal text, so a stray ``<pad>`` between two digits breaks the
  line it sits in instead of vanishing and joining them into a valid-looking answer.

Load a saved copy with ``PreTrainedTokenizerFast.from_pretrained`` (not ``AutoTokenizer``:
on a folder whose config says qwen2 it silently swaps in ``Qwen2Tokenizer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# At module level, not in build_tokenizer, so the subclass below pickles by reference;
# every importer of this module loads transformers anyway.
from transformers import PreTrainedTokenizerFast

from runners.tinyworld.task import clean_completion

__all__ = [
    "ALPHABET",
    "SPECIALS",
    "VOCAB_SIZE",
    "TinyTokenizer",
    "build_tokenizer",
    "char_ids",
    "decode_completion",
    "special_id",
]

SPECIALS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>")
# Digits, the three operators, '=' for results, ':' after the Q/A tags, newline between
# steps. Everything the task writes; anything else maps to <unk>.
ALPHABET: str = "0123456789+-*=:QA\n"
VOCAB_SIZE: int = len(SPECIALS) + len(ALPHABET)


def build_tokenizer() -> TinyTokenizer:
    """A fresh character-level :class:`TinyTokenizer` (vocabulary :data:`VOCAB_SIZE`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = {tok: i for i, tok in enumerate((*SPECIALS, *ALPHABET))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # Every character is its own pre-token; [\s\S] also matches the newline (Oniguruma has no (?s)).
    core.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    tok = TinyTokenizer(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=256,
    )
    return tok


_TOKENS: tuple[str, ...] = (*SPECIALS, *ALPHABET)
_IDS: dict[str, int] = {tok: i for i, tok in enumerate(_TOKENS)}


class TinyTokenizer(PreTrainedTokenizerFast):
    """``PreTrainedTokenizerFast`` whose skip-special decoding is :func:`~runners.tinyworld.task.clean_completion`'s.

    Saved copies name this class but load as plain ``PreTrainedTokenizerFast`` (without the
    rule), which is why the evaluation decodes with :func:`decode_completion` instead.
    """

    def _decode(self, token_ids: int | list[int], skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> str:
        text = super()._decode(token_ids, skip_special_tokens=False,
                               clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs)
        return clean_completion(text) if skip_special_tokens else text


def special_id(token: str) -> int:
    """Id of a special token (``"<pad>"``, ``"<bos>"``, ``"<eos>"``, ``"<unk>"``)."""
    return _IDS[token]


def char_ids(text: str) -> list[int]:
    r"""``len(text)`` ids, one per character: a character of :data:`ALPHABET` gets
    ``len(SPECIALS) + ALPHABET.index(c)`` (4-21), every other character (a space, ``\r``,
    a non-ASCII digit, ``<``...) the ``<unk>`` id 3. No ``<bos>`` is added, and special
    tokens written as text are not recognised: ``"<eos>"`` is five ``<unk>`` ids.

    So ``build_tokenizer()(text)["input_ids"] == [<bos>, *char_ids(text)]`` for text that
    holds no ``<pad>``/``<bos>``/``<eos>``/``<unk>`` string (the tokenizer maps those to
    their special ids), without the tokenizer's per-call overhead.
    """
    unk = _IDS["<unk>"]
    return [_IDS.get(c, unk) for c in text]


def decode_completion(ids: Sequence[int]) -> str:
    """Completion ``ids`` as text by :func:`~runners.tinyworld.task.clean_completion`'s rule, from the fixed
    vocabulary (so a tokenizer reloaded from disk, without that rule, cannot change it)."""
    return clean_completion("".join(_TOKENS[int(i)] for i in ids))
