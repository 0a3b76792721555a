"""A race's summary (``DIR/regimes.json``, written by ``planner race``) as the report reads
it: a hand-edited or half-written file must not sink the report, so what is wrong with one
comes back as a note the report prints and shows, and values of the wrong kind read as
missing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["read_race", "stated_noise"]


def read_race(data_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``DIR/regimes.json`` written by ``planner race`` (None if absent) and a note if unreadable."""
    import json

    from planner.files import shown_path

    path = data_dir / "regimes.json"
    where = shown_path(path)  # the notes are printed and written into the report
    if not path.is_file():
        return None, None
    try:
        doc = json.loads(path.read_text())
        budget = float(doc["budget"])
        pairs = [(e["model"], e["reward"]) for e in doc.get("settings", [])]
    except Exception as exc:  # a hand-edited or half-written file must not sink the report
        return None, f"{where} is not a readable race summary ({_why(exc)}); ignored"
    if not math.isfinite(budget) or budget <= 0 or not pairs:
        return None, f"{where} names no target budget or settings; ignored"
    bad = _race_field_problem(doc, pairs)
    if bad:
        return None, f"{where} is not a readable race summary ({bad}); ignored"
    odd = _race_value_problem(doc)
    sd = doc.get("noise_sd")
    if sd is not None and stated_noise(doc) is None:
        odd = "; ".join(x for x in (odd and f"{odd}; shown as missing",
                                    f"noise_sd {str(sd)[:60]} is not a positive sd for each reward system of its settings; "
                                    "the report fits without it") if x)
        return doc, f"{where}: {odd}"
    return doc, (f"{where}: {odd}; shown as missing" if odd else None)


def _why(exc: Exception) -> str:
    """What is wrong with a race summary, in its own words rather than Python's."""
    import json

    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r} field"
    if isinstance(exc, json.JSONDecodeError):
        # Some of json's messages end in "at" before the position it keeps apart.
        return f"not valid JSON: {exc.msg.removesuffix(' at')} at line {exc.lineno}"
    if isinstance(exc, TypeError | AttributeError):
        return "a field holds another kind of value than planner race writes (budget a number, settings a list)"
    return str(exc)[:120]


def _race_field_problem(doc: dict[str, Any], pairs: list[tuple[Any, Any]]) -> str:
    """What in a race summary the report would trip over ("" if nothing): the fields it
    uses, each of the type ``planner race`` writes."""
    from planner.schema import TARGETS

    if not all(isinstance(m, str) and isinstance(r, str) for m, r in pairs):
        return "a setting's model or reward is not a name"
    if "target" in doc and doc["target"] not in TARGETS:
        return f"target {doc['target']!r} is not one of {', '.join(TARGETS)}"
    pb = doc.get("pilot_budget")
    if pb is not None and not (_is_num(pb) and pb > 0):
        return f"pilot_budget {pb!r} is not a positive number"
    return ""


def _race_value_problem(doc: dict[str, Any]) -> str:
    """The first setting value in a race summary that is not what ``planner race`` writes
    ("" if none): the report shows it as missing, and says so."""
    from planner.regime import LABELS

    for e in doc.get("settings", []):
        where = f"{e['model']}/{e['reward']}"
        rho, regime, probs = e.get("rho_star"), e.get("regime"), e.get("probabilities")
        if rho is not None and not (_is_num(rho) and 0 <= rho <= 1):
            return f"{where}: rho_star {rho!r} is not a number in [0, 1]"
        if regime is not None and regime not in LABELS:
            return f"{where}: regime {regime!r} is not one of {', '.join(LABELS)}"
        if probs is not None and not (isinstance(probs, dict) and all(_is_num(v) for v in probs.values())):
            return f"{where}: probabilities is not a table of numbers"
    return ""


def stated_noise(doc: dict[str, Any] | None) -> dict[str, float] | None:
    """The run noise a race was told (``noise_sd``: {reward: sd}, one per reward system of
    its settings), None where it was told none or the field is not such a table (the
    report then fits as without one)."""
    sd = (doc or {}).get("noise_sd")
    if not (isinstance(sd, dict) and sd and all(isinstance(k, str) and _is_num(v) and v > 0 for k, v in sd.items())):
        return None
    # planner race writes one per reward system of its settings: another table is not its.
    if set(sd) != {e.get("reward") for e in (doc or {}).get("settings", []) if isinstance(e, dict)}:
        return None
    return {k: float(v) for k, v in sd.items()}


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
