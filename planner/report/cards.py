"""Compute cards: one run's planned and metered compute, rendered for people.

The card is the allocation-aware record the paper asks the field to publish: total FLOPs,
the search/learning/reward split, rho, tokens and wall time by phase, hardware and
software. :func:`card_fields` is the single source of what a card says; the terminal
(:func:`rich_card`), markdown and HTML renderers all format those fields, so the
``runners card`` output and the report's card table cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from planner.schema import RunRecord

__all__ = [
    "CARD_COLUMNS",
    "card_fields",
    "card_rows",
    "engine_label",
    "fmt_flops",
    "fmt_seconds",
    "rich_card",
]

COMPONENTS: tuple[str, ...] = ("search", "learning", "reward")

# Columns of the report's table of all cards (keys of card_fields()).
CARD_COLUMNS: tuple[str, ...] = (
    "run",
    "status",
    "engine",
    "setting",
    "total",
    "split",
    "rho",
    "tokens",
    "wall",
    "hardware",
    "software",
)


def fmt_flops(x: float | None) -> str:
    """``3.2e17`` style; FLOP counts span too many decades for fixed notation."""
    if x is None or not math.isfinite(x):
        return "n/a"
    return "0" if x == 0 else f"{x:.3g}"


def fmt_seconds(x: float | None) -> str:
    """A duration for people: ms below 1 s, then s, min and h; ``n/a`` for None or NaN."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x < 1:
        return f"{x * 1000:.0f} ms" if x > 0 else "0 s"
    if x < 120:
        return f"{x:.1f} s"
    if x < 7200:
        return f"{x / 60:.1f} min"
    return f"{x / 3600:.1f} h"


def _tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1_000_000 else f"{n / 1e3:.1f}k" if n >= 10_000 else str(n)


def _prompts(card: Any, plan: Any) -> str:
    """Prompts the run trained on (its rounds, as the meter's budget guard let them run)
    beside the plan's, where they differ."""
    rounds = getattr(card, "rounds", None) or (card.model_extra or {}).get("rounds")
    ran = sum(int(r) for r in rounds) if isinstance(rounds, list) and rounds else None
    if ran is None or ran == plan.total_prompts:
        return str(plan.total_prompts)
    return f"{ran} ({plan.total_prompts} planned)"


def _split(flops: Any) -> str:
    parts = sum(getattr(flops, c) for c in COMPONENTS)
    if not parts:  # a partial card may keep only a total: no split was metered
        return "n/a"
    return " / ".join(f"{getattr(flops, c) / parts:.0%}" for c in COMPONENTS)


def engine_label(simulated: bool, engine: str) -> str:
    """What every figure and card says about where its numbers came from."""
    return f"{engine} (SIMULATED)" if simulated else f"{engine} (real)"


def _extras(card: Any) -> str:
    """Engine-specific card fields (trl: passes, stop_reason, rounds; failed runs: partial,
    phase), shortened: a per-round list is summarised by its length."""
    parts = []
    for k, v in (card.model_extra or {}).items():
        if isinstance(v, list | tuple):
            text = f"{len(v)} entries"
        elif isinstance(v, dict):
            text = ", ".join(f"{a} {_num(b)}" for a, b in v.items())
        else:
            text = _num(v)
        parts.append(f"{k}: {text[:120]}")
    return "; ".join(parts)


def _num(v: Any) -> str:
    # FLOP counts arrive as floats with every digit ("29998671872.0"): 4 significant ones.
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def card_fields(record: RunRecord) -> dict[str, str]:
    """Display strings of one card, keyed by :data:`CARD_COLUMNS` plus detail keys.

    ``split`` is search / learning / reward as shares of the metered total; the planned
    split and the planned-vs-metered budget use are kept apart in ``planned`` and
    ``budget_use`` so a run that over- or under-spent its budget shows it.
    """
    card, plan = record.card, record.plan
    tokens = ", ".join(f"{k} {_tokens(v)}" for k, v in card.tokens.items()) or "n/a"
    wall = dict(card.wall_s)
    if "total" not in wall and record.wall_s:
        wall["total"] = record.wall_s
    wall_txt = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in wall.items()) or "n/a"
    software = ", ".join(f"{k} {v}" for k, v in card.software.items()) or "n/a"
    use = card.flops.total / record.budget if record.budget else float("nan")
    split = _split(card.flops)
    status = record.status if record.status == "ok" else f"failed (attempt {record.attempt})"
    extra = card.model_extra or {}
    # The phase a failed run stopped in: the rebuilt card's own, else the record's (an
    # engine's card, such as trl's, carries none: its failed cards named no phase).
    phase = extra.get("phase") or (record.provenance.get("phase") if record.status != "ok" else None)
    if extra.get("partial"):
        # a failed run's card holds what was metered before it stopped
        status += f", partial card{' in ' + str(phase) if phase else ''}"
    elif phase:
        status += f", stopped in {phase}"
    return {
        "run": record.run_id,
        "status": status,
        "engine": engine_label(record.simulated, record.engine),
        "setting": f"{record.model} / {record.reward} / {record.budget:.4g}",
        "total": fmt_flops(card.flops.total),
        "split": split,
        "rho": "n/a" if (rho := card.metered_rho) is None else f"{rho:.3f}",
        "tokens": tokens,
        "wall": wall_txt,
        "hardware": card.hardware or "n/a",
        "software": software,
        # details (the terminal card and the per-run HTML cards show these too)
        "planned": f"{fmt_flops(plan.flops.total)} = {_split(plan.flops)} (rho {plan.rho:.3f})",
        "budget_use": f"{use:.1%} of {record.budget:.3g}" if math.isfinite(use) else "n/a",
        "search": fmt_flops(card.flops.search),
        "learning": fmt_flops(card.flops.learning),
        "reward": fmt_flops(card.flops.reward),
        "levers": (
            f"G={plan.completions_per_prompt} K={plan.completions_kept} "
            f"mu={plan.num_iterations} prompts={_prompts(card, plan)}"
        ),
        "seed": str(record.seed),
        "metrics": ", ".join(
            f"{t} {v:.3f}" + (f" (base {b:.3f})" if (b := getattr(record.metrics, f"{t}_base")) is not None else "")
            for t in ("native", "pass1", "judge")
            if (v := getattr(record.metrics, t)) is not None
        )
        or "n/a",
        "error": record.error or "",
        "extras": _extras(card),
    }


def card_rows(records: Iterable[RunRecord]) -> list[dict[str, str]]:
    """The compute card of each record as display strings (:func:`card_fields`), in order."""
    return [card_fields(r) for r in records]


def rich_card(record: RunRecord) -> Any:
    """A ``rich`` panel of one card (``runners card``)."""
    from rich import box
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    f = card_fields(record)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    rows: Sequence[tuple[str, str]] = (
        ("status", f["status"]),
        ("engine", f["engine"]),
        ("setting", f"{f['setting']}  (model / reward / budget)"),
        ("seed", f["seed"]),
        ("total FLOPs", f"{f['total']}  ({f['budget_use']} budget)"),
        ("search", f["search"]),
        ("learning", f["learning"]),
        ("reward", f["reward"]),
        ("split s/l/r", f["split"]),
        ("rho", f"{f['rho']} metered"),
        ("planned", f["planned"]),
        ("levers", f["levers"]),
        ("tokens", f["tokens"]),
        ("wall time", f["wall"]),
        ("hardware", f["hardware"]),
        ("software", f["software"]),
        ("metrics", f["metrics"]),
        *((("engine extras", f["extras"]),) if f["extras"] else ()),
    )
    # Text, not markup strings: values such as "[Errno 2] ..." must print literally.
    for key, value in rows:
        grid.add_row(key, Text(value))
    if f["error"]:
        grid.add_row("error", Text(f["error"], style="red"))
    title = f"compute card: {record.run_id}"
    style = "red" if record.status != "ok" else ("yellow" if record.simulated else "green")
    return Panel(grid, title=title, title_align="left", border_style=style, box=box.ROUNDED)
