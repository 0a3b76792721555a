"""Executing proposals: the driver that turns (proposal, seed) pairs into records.

:func:`execute` skips runs already recorded ok, hands the rest as :class:`~runners.task.Task`
objects to a backend (whose workers call :func:`~runners.task.run_task`, which writes each
record itself), draws live progress, records workers that died without a word, and retries
failed runs. The loop itself is :class:`runners.backends.driver.Driver`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.engine import (
    check_engine_plans,
    check_engine_settings,
    check_same_source,
    check_same_weights,
    prepare_engine,
)
from planner.errors import ConfigError
from planner.proposals import proposal_id
from planner.schema import MAX_SEED, MAX_SEEDS, TARGETS, Proposal, ProposalSet, run_id_for
from runners.store import PilotStore
from runners.task import Outcome, Task, make_engine, placed_options

# A run's time limit, at most: past ~4.9 years (threading.TIMEOUT_MAX) the watchdog's wait
# overflowed and its thread died with a traceback per run, leaving no limit at all, so
# --timeout-min 1e9, a plausible "no limit", printed tracebacks and limited nothing.
MAX_TIMEOUT_S = 365 * 24 * 3600.0

__all__ = ["ExecutionResult", "execute"]

@dataclass
class ExecutionResult:
    """What one ``execute`` call did. ``failed`` holds runs still failed after all retries."""

    ok: list[str] = field(default_factory=list)
    failed: list[Outcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    attempts: int = 0
    corrupt: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    warnings: list[str] = field(default_factory=list)  # one line each, e.g. a library changed since the store's runs

    def summary(self) -> dict[str, Any]:
        return {
            "ok": len(self.ok), "failed": len(self.failed), "skipped": len(self.skipped),
            "attempts": self.attempts, "corrupt_files": self.corrupt, "warnings": self.warnings,
            "wall_s": round(self.wall_s, 2),
            "failures": [{"run_id": o.run_id, "attempt": o.attempt, "error": o.error} for o in self.failed],
        }


def execute(
    proposals: ProposalSet | Sequence[Proposal],
    *,
    data: str | Path,
    engine: str = "sim",
    engine_options: Mapping[str, Any] | None = None,
    seeds: int | Sequence[int] = 1,
    backend: str | Any = "local",
    workers: int = 1,
    retries: int = 1,
    timeout_s: float | None = None,
    backend_options: Mapping[str, Any] | None = None,
    show_progress: bool = True,
    console: Any | None = None,
    only: Collection[str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> ExecutionResult:
    """Run every (proposal, seed) not yet recorded ok in ``data``; see docs/execution.md.

    ``seeds`` is a count (seeds ``0..N-1``) or explicit seeds. ``backend`` is ``local``,
    ``ray``, ``slurm`` or a :class:`runners.backends.Backend`. Failed runs are retried up
    to ``retries`` times in this call; every attempt's record is kept. ``only``: run just
    these run ids of the (proposal, seed) grid (a race round's pairs, all in one go).
    ``warn(line)`` hears each warning before any run (``result.warnings`` keeps them).
    """
    from runners.backends import make_backend
    from runners.backends.driver import Driver
    from runners.backends.progress import sweep_progress
    from runners.lease import sweep_leases

    props = list(proposals.proposals if isinstance(proposals, ProposalSet) else proposals)
    n_seeds = seeds if isinstance(seeds, int) else len(seeds)
    if n_seeds > MAX_SEEDS:
        raise ConfigError(f"seeds: {n_seeds} seeds per proposal is more than {MAX_SEEDS}; "
                          "give a few (each is a run)")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list or any(s < 0 for s in seed_list):
        raise ConfigError(f"seeds: need at least one non-negative seed, got {seeds!r}")
    if any(s > MAX_SEED for s in seed_list):
        raise ConfigError(f"seeds: {max(seed_list)} is past the largest seed the store keeps "
                          f"({MAX_SEED}, an Int64); give a smaller one")
    # One run per (proposal id, seed): a repeat made two tasks of one run, and the second
    # came back "already done" (a repeated id with another plan: that plan never ran).
    if len(set(seed_list)) < len(seed_list):
        twice = next(s for i, s in enumerate(seed_list) if s in seed_list[:i])
        raise ConfigError(f"seeds: {twice} is given twice; give each seed once")
    by_id: dict[str, Proposal] = {}
    for p in props:
        if p.id in by_id and by_id[p.id] != p:
            raise ConfigError(f"proposals: {p.id} is the id of two different proposals; ids must be unique "
                              "(planner plan/suggest derive them from the content)")
        by_id.setdefault(p.id, p)
    props = list(by_id.values())  # the same proposal listed twice is one (two lists joined)
    if retries < 0:
        raise ConfigError(f"retries: must be >= 0, got {retries}")
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(f"timeout: must be a positive number of seconds, got {timeout_s}")
    if timeout_s is not None and timeout_s > MAX_TIMEOUT_S:
        raise ConfigError(f"timeout: at most {MAX_TIMEOUT_S:.0f} s (a year), got {timeout_s:g}; give None for no limit")
    options = dict(engine_options or {})
    eng = make_engine(engine, options)  # fail fast on a bad engine, world file or option
    check_engine_settings(eng, [(p.model, p.reward) for p in props])
    check_engine_plans(eng, [p.plan for p in props])

    store = PilotStore(Path(data))
    # Before any run: a store that cannot take records would waste every run's compute.
    # Checked without creating anything: a refusal must leave no empty store behind.
    store.check_writable("data")
    store.sweep_temporaries()
    # What workers killed outright left: never read again (keyed by their attempt's nonce).
    sweep_progress(store.root)
    sweep_leases(store.root)
    # Both folders: a wreck in failed/ belongs in the summary's corrupt_files too.
    scan = store.scan(status=None)
    ok = [r for r in scan.records if r.status == "ok"]
    check_same_source(ok, eng, store.root)  # (failed attempts feed no fit)
    done = {r.run_id: r for r in ok}
    # A run is its plan and seed (a record holds every target's metric): under a second id
    # it would be run and fitted twice (the sim gives it the same numbers). Only a run an
    # older store holds under its pre-12-01 id, content-derived for no target, may be
    # repeated by the content-derived id (docs/schema.md).
    # Keyed by the levers (plan_key), not the whole plan: two requests the compiler maps to
    # one plan differ only in rho_target, and the second was run at full cost again.
    from planner.strategies.base import plan_key

    ran = {(plan_key(r.plan), r.seed): r for r in ok}
    plan_of = {p.id: plan_key(p.plan) for p in props}
    first: dict[Any, str] = {}
    for p in props:
        if (other := first.setdefault(plan_of[p.id], p.id)) != p.id:
            raise ConfigError(f"proposals: {p.id}: the same plan as {other} in this file; it would be run and "
                              "fitted twice: drop one")
    result = ExecutionResult(corrupt=[f"{c.path.name}: {c.reason}" for c in scan.corrupt])
    tasks: list[Task] = []
    for p in props:
        for seed in seed_list:
            rid = run_id_for(p.id, seed)
            if only is not None and rid not in only:
                continue
            if rid in done:
                if done[rid].plan != p.plan:  # same id, other content: "done" would be a lie
                    raise ConfigError(
                        f"proposals: {p.id}: {store.root} already holds run {rid} made from another "
                        "plan; give a changed proposal a new id (planner plan/suggest derive it from the content)"
                    )
                result.skipped.append(rid)
                continue
            twin = ran.get((plan_of[p.id], seed))
            if twin is not None and (p.id != proposal_id(p.plan, p.target) or twin.proposal_id in
                                     {proposal_id(twin.plan, t) for t in TARGETS}):
                raise ConfigError(
                    f"proposals: {p.id}: {store.root} already holds run {twin.run_id} of the same plan and seed "
                    "(its record has every target's metric); under a second id it would be run and fitted "
                    "twice: drop it (or ask for other --seeds)"
                )
            tasks.append(Task(p, seed, store.failed_attempts(rid) + 1, engine, str(store.root),
                              options, timeout_s))
    if not tasks and isinstance(backend, str):  # all done: no backend to start (Ray takes seconds)
        return result
    from planner.versions import changed_since

    if tasks and (moved := changed_since(ok)):
        result.warnings.append(moved)
        if warn is not None:
            warn(moved)
    # A simulated engine ignores the device: no GPU to find, no worker per GPU.
    placed = placed_options(eng, options)
    # The backend first: a bad option, no sbatch or no GPU is one line before the engine's
    # preparation (minutes of pretraining for the trl engine), not after it.
    be = backend if not isinstance(backend, str) else make_backend(
        backend, workers=workers, data=store.root, engine_options=placed, timeout_s=timeout_s,
        simulated=getattr(eng, "simulated", False), **dict(backend_options or {}),
    )
    driver = Driver(be, store, retries=retries, timeout_s=timeout_s, result=result,
                    show_progress=show_progress, console=console)
    t0 = time.monotonic()
    try:
        prepare_engine(eng, [(t.proposal.model, t.proposal.reward) for t in tasks])
        # After the preparation: the weights a run starts from exist only once pretrained.
        check_same_weights(ok, eng, store.root)
        t0 = time.monotonic()  # the runs' wall time, as before, not the preparation's
        driver.run(tasks)
    finally:
        if isinstance(backend, str):
            be.close()
        result.wall_s = time.monotonic() - t0
    return result
