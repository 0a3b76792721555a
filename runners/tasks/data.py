"""Math prompt sets for the GPU path: GSM8K, MATH-500 and Polaris-53K.

Each loads from the Hugging Face Hub (``datasets.load_dataset``) or from a local JSONL /
parquet / JSON-array file (or a folder holding ``<split>.jsonl`` / ``<split>.parquet`` /
``<split>.json``), and yields
:class:`MathItem` rows with a gold answer ready for :func:`runners.tasks.answers.verify`.
Nothing is downloaded unless a Hub id is actually used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.errors import ConfigError

__all__ = ["DATASETS", "INSTRUCTION", "MathItem", "load_math", "split_file", "to_grpo_rows"]

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class DatasetSpec:
    hub_id: str
    config: str | None
    default_split: str
    question: str  # column holding the problem text
    gold: str  # "gsm8k" (#### in `answer`) or "answer" (the `answer` column)


DATASETS: dict[str, DatasetSpec] = {
    "gsm8k": DatasetSpec("openai/gsm8k", "main", "test", "question", "gsm8k"),
    "math500": DatasetSpec("HuggingFaceH4/MATH-500", None, "test", "problem", "answer"),
    "polaris": DatasetSpec("POLARIS-Project/Polaris-Dataset-53K", None, "train", "problem", "answer"),
}


@dataclass(frozen=True)
class MathItem:
    """One problem: its text, the gold answer (a string math-verify can parse) and its source."""

    question: str
    answer: str
    source: str


def split_file(folder: Path, split: str) -> Path | None:
    """The file a data folder holds for ``split`` (``<split>.jsonl``, ``.parquet`` or
    ``.json``, in that order), or None."""
    return next((f for ext in ("jsonl", "parquet", "json") if (f := folder / f"{split}.{ext}").exists()), None)


def _rows_from_path(path: Path, split: str) -> Iterable[Mapping[str, Any]]:
    import polars as pl

    if path.is_dir():
        found = split_file(path, split)
        if found is None:
            raise ConfigError(f"path: {path} has no {split}.jsonl or {split}.parquet; point at a file")
        path = found
    if not path.exists():
        raise ConfigError(f"path: {path} does not exist; give a JSONL or parquet file")
    if path.suffix == ".json" and _first_char(path) == "[":
        return _json_array(path)  # a .json file is JSON lines or, as here, one array of rows
    try:
        if path.suffix == ".parquet":
            return pl.read_parquet(path).to_dicts()
        return pl.read_ndjson(path, infer_schema_length=None).to_dicts()
    except (pl.exceptions.PolarsError, OSError) as exc:
        if path.suffix != ".parquet" and (bad := _bad_json_line(path)) is not None:
            line, why = bad
            raise ConfigError(f"path: {path} could not be read: line {line} is not a JSON object ({why}); "
                              "give JSON lines, one object per line") from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"path: {path} could not be read ({first}); give JSON lines (one object per "
                          "line), a JSON array of objects or a parquet file") from None


def _bad_json_line(path: Path) -> tuple[int, str] | None:
    """The first line of a JSON-lines file that is not blank and not a JSON object, and why
    (1-based); None when every line is one (or the file cannot be read as text)."""
    try:
        with path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    return number, str(exc).splitlines()[0]
                if not isinstance(row, dict):
                    return number, f"a JSON {type(row).__name__}"
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _first_char(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace") as f:
        while chunk := f.read(4096):
            if text := chunk.lstrip():
                return text[0]
    return ""


def _json_array(path: Path) -> list[Mapping[str, Any]]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"path: {path} is not valid JSON ({exc}); give a JSON array of objects "
                          "or JSON lines") from None
    if not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"path: {path} is a JSON array of other things than objects; give one "
                          "object per row")
    return rows


def _rows_from_hub(spec: DatasetSpec, split: str) -> Iterable[Mapping[str, Any]]:
    from datasets import load_dataset

    return load_dataset(spec.hub_id, spec.config, split=split)


def load_math(
    name: str, *, split: str | None = None, path: str | Path | None = None, limit: int | None = None
) -> list[MathItem]:
    """Problems of dataset ``name`` (gsm8k|math500|polaris), from ``path`` or the Hub.

    Gold answers: GSM8K's ``#### N`` value; MATH-500 and Polaris' ``answer`` column.
    Rows without a usable gold answer are skipped (Polaris has a few).
    """
    from runners.tasks.answers import extract_gsm8k_answer

    if name not in DATASETS:
        raise ConfigError(f"dataset: unknown dataset {name!r}; use one of: {', '.join(DATASETS)}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit: must be at least 1 (got {limit}); leave it out to load every row")
    spec = DATASETS[name]
    split = split or spec.default_split
    if path is not None:
        source = _source_file(Path(path), split)
        rows = _rows_from_path(source, split)
    else:
        source, rows = None, _rows_from_hub(spec, split)
    out: list[MathItem] = []
    first_miss: str | None = None
    for number, row in enumerate(rows, 1):
        question = row.get(spec.question) or row.get("problem") or row.get("question")
        raw = row.get("answer")
        gold = extract_gsm8k_answer(str(raw)) if spec.gold == "gsm8k" and raw else raw
        if not question or gold is None or str(gold).strip() == "":
            if first_miss is None:
                first_miss = f"row {number} {_missing(spec, row, bool(question))}"
            continue
        out.append(MathItem(str(question), str(gold).strip(), name))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        where = source if source is not None else f"{spec.hub_id} ({split})"
        need = ("a 'question' and an 'answer' whose last '#### N' line is the gold answer"
                if spec.gold == "gsm8k" else f"a '{spec.question}' and a non-empty 'answer'")
        raise ConfigError(f"dataset: {name}: {where} gave no usable rows ({first_miss or 'it has no rows'}); "
                          f"each row needs {need}")
    return out


def _source_file(path: Path, split: str) -> Path:
    """The file ``path`` names for ``split``: itself, or a folder's ``<split>`` file."""
    return (split_file(path, split) or path) if path.is_dir() else path


def _missing(spec: DatasetSpec, row: Mapping[str, Any], has_question: bool) -> str:
    """What a skipped row lacks, in words ("has no 'question'")."""
    if not has_question:
        return f"has no '{spec.question}' (columns: {', '.join(map(str, row)) or 'none'})"
    raw = row.get("answer")
    if raw is None or str(raw).strip() == "":
        return "has no 'answer'"
    return "has an 'answer' without a '#### N' line"


def to_grpo_rows(items: Iterable[MathItem], *, chat: bool = True) -> list[dict[str, Any]]:
    """Rows for ``datasets.Dataset.from_list`` as TRL's GRPOTrainer expects them.

    ``prompt`` is a one-message chat (the instruct models' template is applied by TRL) or
    plain text; ``answer`` is the column the qwen2.5 rule rewards read, ``question`` the
    problem alone, which the PRMs read (TRL passes every column to the rewards).
    """
    rows = []
    for it in items:
        text = f"{it.question}\n{INSTRUCTION}"
        prompt: Any = [{"role": "user", "content": text}] if chat else text
        rows.append({"prompt": prompt, "answer": it.answer, "question": it.question})
    return rows
