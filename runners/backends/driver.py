"""The driver loop of :func:`runners.execution.execute`: submit, poll, retry, show progress.

Backend-agnostic: it only uses the :class:`~runners.backends.Backend` interface, the store
and the progress files. It writes a record itself only when a worker died without writing
one (killed, out of memory, cancelled at its time limit).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from planner.errors import ConfigError
from runners.backends import Backend, Handle
from runners.backends.progress import RunView, read_progress, render
from runners.execution import ExecutionResult
from runners.store import PilotStore, attempt_of
from runners.task import Outcome, Task, failed_record, forget_attempt, make_engine, new_nonce

__all__ = ["Driver"]

_POLL_S = 0.1
# How long past its time limit a run may go before the driver kills it. The worker's own
# alarm normally fires first and records a partial card; this is for runs deaf to it.
HARD_KILL_GRACE_S = 30.0


class Driver:
    """Drives one ``execute`` call over a backend: :meth:`run` submits the tasks, polls them,
    stores what came back, retries failed runs up to ``retries`` times, enforces the time
    limit and shows progress; the tally goes to ``result``."""
    def __init__(
        self,
        backend: Backend,
        store: PilotStore,
        *,
        retries: int,
        timeout_s: float | None,
        result: ExecutionResult,
        show_progress: bool = True,
        console: Any | None = None,
    ) -> None:
        self.backend, self.store, self.retries, self.timeout_s = backend, store, retries, timeout_s
        self.result = result
        self.show_progress, self.console = show_progress, console
        self.views: dict[str, RunView] = {}
        self.tries: dict[str, int] = {}
        self._already_done = 0
        self._width = 120
        # Not a terminal (a log file, nohup, SLURM, CI): rich's live table would show only
        # at the end, so each finished attempt gets a line here instead.
        self._log: Any = None

    def run(self, tasks: Sequence[Task]) -> None:
        self._already_done = len(self.result.skipped)  # skipped before any task ran
        for t in tasks:
            self.views[t.run_id] = RunView(t.run_id, t.attempt, budget=t.proposal.budget)
            self.tries[t.run_id] = 0
        pending: list[Handle] = list(self.backend.submit(tasks)) if tasks else []
        self.result.attempts += len(pending)
        live = self._live()
        try:
            while pending:
                still: list[Handle] = []
                for h in pending:
                    if self.backend.poll(h):
                        retry = self._finish(h)
                        if retry is not None:
                            still.extend(self.backend.submit([retry]))
                            self.result.attempts += 1
                    else:
                        self._watch(h)
                        still.append(h)
                pending = still
                if live is not None:
                    live.update(self._render())
                if pending:
                    time.sleep(_POLL_S)
        finally:
            if live is not None:
                live.update(self._render())
                live.stop()
            elif self._log is not None:
                self._log.print(self._render())

    # -- per-handle steps ------------------------------------------------------------------

    def _watch(self, h: Handle) -> None:
        """Refresh the view from the progress file; enforce the hard time limit."""
        v = self.views[h.task.run_id]
        p = read_progress(self.store.root, h.task.run_id, h.task.nonce)
        if p is not None:
            info = p.get("info") or {}
            if p.get("phase") == "waiting":
                # Another attempt (another driver's) holds the run's lease: no time limit runs.
                v.state, v.phase = "waiting", f"on {info.get('holder', 'another driver')}"
                return
            v.state = "running"
            v.phase = str(p.get("phase", ""))
            v.flops = float(p.get("flops") or 0.0)
            v.started = float(p.get("started") or time.time())
            for key in ("reward", h.task.proposal.target):
                if isinstance(info.get(key), int | float):
                    v.reward = float(info[key])
                    v.reward_of = "train" if key == "reward" else key
                    break
        if v.state != "running" or v.started is None:
            return  # not started: a file gone since (swept by another driver) keeps the last start
        v.wall_s = time.time() - v.started
        # The worker stops itself at the limit (and records a partial card); this is the
        # backstop for a run stuck where no Python code runs (a hung CUDA kernel, a deadlock).
        if self.timeout_s and not h.timed_out and v.wall_s > self.timeout_s + max(HARD_KILL_GRACE_S, 0.1 * self.timeout_s):
            h.timed_out = True
            self.backend.cancel(h)

    def _finish(self, h: Handle) -> Task | None:
        """Book the outcome; return the next attempt if this one failed and retries are left."""
        task = h.task
        try:
            out = self.backend.result(h)
        except Exception as exc:
            out = self._lost(h, exc)
        if out.status == "refused":  # bad input: not a failure to retry; the other runs stop too
            self.result.attempts -= 1
            raise ConfigError(out.error or f"{task.run_id}: the engine refused the run's input")
        v = self.views[task.run_id]
        v.state, v.wall_s, v.error = out.status, out.wall_s or v.wall_s, out.error
        v.attempt = out.attempt  # the number its record took, if a collision moved it
        if out.reward is not None:
            v.reward, v.reward_of = out.reward, task.proposal.target
        if out.flops:
            v.flops = out.flops
        v.phase = "done" if out.status == "ok" else v.phase
        if out.status == "ok":
            self._say(v, out)
            self.result.ok.append(task.run_id)
            return None
        if out.status == "skipped":
            # Another driver finished it while this one waited on its lease: counted as
            # skipped, not as an attempt this call made.
            self._say(v, out)
            self.result.skipped.append(task.run_id)
            self.result.attempts -= 1
            return None
        self.tries[task.run_id] += 1
        if self.tries[task.run_id] <= self.retries:
            # Not finished: the log line says so, and does not count the run among the done.
            v.state = "retrying"
            nxt = max(self.store.failed_attempts(task.run_id), out.attempt, task.attempt) + 1
            self._say(v, out, retry=nxt)
            v.attempt = nxt
            # What the table shows of the retry comes from its own reports, not this attempt's.
            v.reward, v.flops, v.started = None, 0.0, None
            return replace(task, attempt=nxt, nonce=new_nonce())
        self._say(v, out)
        self.result.failed.append(out)
        return None

    def _lost(self, h: Handle, exc: BaseException) -> Outcome:
        """A worker died without reporting: record the attempt as failed (unless it had
        already written its ok record just before dying)."""
        task = h.task
        if self.store.has_ok(task.run_id):
            forget_attempt(task)
            return Outcome(task.run_id, "ok", task.attempt)
        if self.store.failed_by(task.run_id, task.nonce):
            # It wrote this attempt's failed record, then died before replying: a second
            # record would count one failure twice. (By the attempt's nonce, not its number:
            # another driver's failure under the same number is not this one's.)
            forget_attempt(task)
            return Outcome(task.run_id, "failed", task.attempt, f"{str(exc) or type(exc).__name__} (after recording "
                           "the attempt as failed)", "crash")
        last = read_progress(self.store.root, task.run_id, task.nonce)
        if last is not None and last.get("phase") == "waiting":
            last = None  # it died waiting for another attempt's lease: it ran nothing
        kind = "timeout" if h.timed_out else "crash"
        wall = time.time() - float(last["started"]) if last and last.get("started") else 0.0
        rec = failed_record(task, str(exc) or type(exc).__name__, kind, engine=_engine_of(task), wall_s=wall,
                            last_progress=last)
        path, _ = self.store.add(rec)
        forget_attempt(task)
        return Outcome(task.run_id, "failed", attempt_of(path, task.attempt), rec.error, kind, wall)


    # -- display ---------------------------------------------------------------------------

    def _say(self, v: RunView, out: Outcome, retry: int | None = None) -> None:
        """One line per finished attempt, where there is no live table (``retry``: the
        number of the attempt that follows it)."""
        if self._log is None:
            return
        finished = sum(1 for w in self.views.values() if w.state in ("ok", "failed", "skipped"))
        what = out.status if out.status != "failed" else f"failed ({(out.error or '')[:80]})"
        if retry is not None:
            what += f"; retrying as try {retry}"
        reward = "" if v.reward is None else f", {v.reward_of} {v.reward:.3f}"
        self._log.print(f"[{finished}/{len(self.views)}] {v.run_id} try {v.attempt}: {what}{reward}, "
                        f"{v.flops:.3g} FLOPs, {v.wall_s:.0f} s", highlight=False, soft_wrap=True, markup=False)

    def _live(self) -> Any:
        if not self.show_progress or not self.views:
            return None
        from rich.console import Console
        from rich.live import Live

        console = self.console or Console(stderr=True)
        if self.console is None and not console.is_terminal:
            console = Console(stderr=True, width=160)  # logs and CI: no terminal to fit
        self._width = console.width
        if not console.is_terminal:
            self._log = console
            return None
        live = Live(self._render(), console=console, refresh_per_second=4, transient=False)
        live.start()
        return live

    def _render(self) -> Any:
        counts: dict[str, int] = {}
        for v in self.views.values():
            counts[v.state] = counts.get(v.state, 0) + 1
        counts["skipped"] = counts.get("skipped", 0) + self._already_done
        total = len(self.views) + self._already_done
        return render(list(self.views.values()), counts, total, self._width, data=self.store.root)


def _engine_of(task: Task) -> Any:
    """The task's engine as this process built it (``execute`` made it before any run, so
    this is a cache hit): the failed record of a worker that died must carry the engine's
    source (the sim's world) like any other record, or the store would refuse to resume
    with that engine. None if it cannot be built here."""
    try:
        return make_engine(task.engine, task.engine_options)
    except Exception:
        return None
