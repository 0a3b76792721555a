"""Live progress of runs, from the workers to the driver, through the data directory.

Workers may be local processes, Ray tasks or SLURM jobs; the one channel they all share
with the driver is the data directory (which must be on a shared filesystem for Ray
clusters and SLURM anyway, since workers write their records there). Each running attempt
keeps ``DIR/.progress/<run_id>.<task nonce>.json`` up to date (atomic replace, throttled);
the driver reads the files of the attempts it has in flight and draws a rich table from
them. Keyed by the attempt's nonce, not the run alone: another driver's attempt at the same
run (a rerun while a killed driver's workers finish) has a file of its own.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.files import remove_idle

__all__ = ["ProgressFile", "RunView", "read_progress", "sweep_progress"]

_MIN_INTERVAL_S = 0.5


def progress_dir(data: str | Path) -> Path:
    return Path(data) / ".progress"


def progress_path(data: str | Path, run_id: str, task: str) -> Path:
    return progress_dir(data) / f"{run_id}.{task}.json"


def _clean(info: dict[str, Any]) -> dict[str, Any]:
    """Only JSON-safe scalars travel (engines may put tensors or NaN in ``info``)."""
    out: dict[str, Any] = {}
    for k, v in info.items():
        if isinstance(v, bool | int | str) or v is None:
            out[str(k)] = v
        elif isinstance(v, float):
            out[str(k)] = v if math.isfinite(v) else str(v)
        else:
            try:
                f = float(v)
                out[str(k)] = f if math.isfinite(f) else str(f)
            except (TypeError, ValueError):
                continue
    return out


@dataclass
class ProgressFile:
    """The worker side: one run attempt's progress file (``task``: the attempt's nonce)."""

    data: str | Path
    run_id: str
    attempt: int
    task: str
    started: float = field(default_factory=time.time)
    _last: float = 0.0
    _phase: str = ""

    @property
    def path(self) -> Path:
        return progress_path(self.data, self.run_id, self.task)

    def update(self, phase: str, flops: float, budget: float, info: dict[str, Any], *, force: bool = False) -> None:
        now = time.time()
        # Throttled so that an engine calling back every step costs nothing measurable;
        # phase changes always go through.
        if not force and phase == self._phase and now - self._last < _MIN_INTERVAL_S:
            return
        self._last, self._phase = now, phase
        body = {
            "run_id": self.run_id,
            "attempt": self.attempt,
            "phase": phase,
            "flops": float(flops) if math.isfinite(float(flops)) else None,
            "budget": float(budget),
            "info": _clean(info),
            "started": self.started,
            "updated": now,
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(body))
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is a nicety: never fail a run because it cannot be shown

    def clear(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass


@dataclass
class RunView:
    """What the driver knows about one in-flight run."""

    run_id: str
    attempt: int
    state: str = "queued"  # queued, waiting, running, ok, failed, retrying, skipped
    phase: str = ""
    flops: float = 0.0
    budget: float = 0.0
    reward: float | None = None
    # What ``reward`` is: the training batch's reward while the run trains ("train"), the
    # target metric once it is evaluated (its name, e.g. "native").
    reward_of: str = "train"
    started: float | None = None
    wall_s: float = 0.0
    error: str | None = None


def read_progress(data: str | Path, run_id: str, task: str) -> dict[str, Any] | None:
    """The last report of the attempt ``task`` (its nonce) at ``run_id``, if any."""
    try:
        return json.loads(progress_path(data, run_id, task).read_text())
    except (OSError, ValueError):
        return None  # not started yet, or being replaced right now


def sweep_progress(data: str | Path, older_than_s: float = 3600.0) -> int:
    """Delete progress files no attempt has updated for ``older_than_s``: those of workers
    killed outright (a live run rewrites its own at every phase and step)."""
    return remove_idle(progress_dir(data), older_than_s)


def render(views: list[RunView], counts: dict[str, int], total: int, width: int = 120,
           data: str | Path | None = None) -> Any:
    """A rich renderable: one line of counts, then at most 12 runs (running ones first) and,
    when some are left out, a line saying how many."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    order = {"running": 0, "retrying": 1, "waiting": 1, "queued": 3, "failed": 2, "ok": 2, "skipped": 4}
    shown = sorted(views, key=lambda v: order.get(v.state, 5))[:12]
    t = Table(expand=False, box=None, pad_edge=False)
    # The other columns need ~73 characters; the run id takes what is left (ids are long).
    t.add_column("run", overflow="ellipsis", no_wrap=True, max_width=max(16, min(60, width - 75)))
    for col, just in (
        ("try", "right"), ("state", "left"), ("phase", "left"), ("FLOPs", "right"),
        # Training reward while a run trains, then its target's value: each says which.
        ("of budget", "right"), ("reward | target", "right"), ("wall", "right"),
    ):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    style = {"ok": "green", "failed": "red", "running": "cyan", "retrying": "yellow", "waiting": "yellow"}
    for v in shown:
        pct = f"{v.flops / v.budget:.0%}" if v.budget else ""
        reward = "" if v.reward is None else f"{v.reward:.3f} {v.reward_of}"
        state = v.state if not v.error else f"{v.state}: {v.error[:40]}"
        t.add_row(
            v.run_id, str(v.attempt), Text(state, style=style.get(v.state, "")), v.phase,
            f"{v.flops:.2e}", pct, reward, f"{v.wall_s:.0f}s",
        )
    head = Text(
        f"{counts.get('ok', 0)} ok, {counts.get('failed', 0)} failed, "
        f"{counts.get('running', 0)} running, "
        + (f"{counts['retrying']} retrying, " if counts.get("retrying") else "")
        + (f"{counts['waiting']} waiting on another driver, " if counts.get("waiting") else "")
        + f"{counts.get('queued', 0)} queued, "
        f"{counts.get('skipped', 0)} already done, of {total}"
    )
    if len(views) > len(shown):  # a long execute's closing table: say what it leaves out
        more = f"... and {len(views) - len(shown)} more run(s) not shown"
        return Group(head, t, Text(more + (f"; `runners status --data {data}` lists every record" if data else "")))
    return Group(head, t)
