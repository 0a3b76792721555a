"""A race round's runs in parallel: the workers of one backend, kept for the whole race.

``planner race --workers N [--backend local|ray|slurm]`` hands each round's runnable
(proposal, seed) pairs to :class:`ParallelBatches`, which runs them through
:func:`runners.execution.execute` on a backend built once (its workers stay warm from
round to round: no re-import of torch and TRL per round) and returns their records, read
back from the store, in the order it was given. A run is the same function of (plan,
seed) in any worker, so where runs succeed a parallel race writes the records a
sequential one would (a test checks it) and only its wall time changes. Retries stay the
race's business: a failed run comes back failed (an engine exception too, as it does in
an in-process race), and the race decides whether to ask for it again. Workers stay warm
on CPU; on GPUs the local backend starts a fresh process per run (device memory goes back
between runs) and Slurm runs each as its own job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from planner.errors import RaceError
from planner.schema import Proposal, RunRecord, run_id_for
from runners.store import PilotStore

__all__ = ["ParallelBatches"]


class ParallelBatches:
    """Callable ``(pairs) -> records`` for :func:`planner.loop.run_race`; close it (or use
    it as a context manager) to stop the workers."""

    def __init__(
        self,
        *,
        engine: str,
        data: str | Path,
        workers: int = 2,
        backend: str = "local",
        engine_options: Mapping[str, Any] | None = None,
        backend_options: Mapping[str, Any] | None = None,
        backend_config: str | Path | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """``backend_config``: a ``--backend-config`` TOML; its table for ``backend`` is
        read, and ``backend_options`` win over it (as flags do in ``runners execute``)."""
        from runners.backends import BACKENDS, make_backend
        from runners.backends.config import backend_options as settings
        from runners.task import make_engine, placed_options

        self.engine, self.data, self.workers = engine, Path(data), workers
        self.engine_options = dict(engine_options or {})
        self.timeout_s = timeout_s
        # An unknown backend: make_backend names it and the known ones.
        opts = settings(backend, backend_config, dict(backend_options or {})) if backend in BACKENDS else {}
        eng = make_engine(engine, self.engine_options)
        placed = placed_options(eng, self.engine_options)
        self._backend = make_backend(backend, workers=workers, data=self.data, engine_options=placed,
                                     timeout_s=timeout_s, simulated=getattr(eng, "simulated", False), **opts)

    def __call__(self, pairs: Sequence[tuple[Proposal, int]]) -> list[RunRecord]:
        from runners.execution import execute

        props = list({p.id: p for p, _ in pairs}.values())
        seeds = sorted({s for _, s in pairs})
        # One call for the whole round (every seed at once); ``only`` keeps it to the pairs.
        execute(props, data=self.data, engine=self.engine, engine_options=self.engine_options,
                seeds=seeds, backend=self._backend, workers=self.workers, retries=0,
                timeout_s=self.timeout_s, show_progress=False,
                only={run_id_for(p.id, s) for p, s in pairs})
        latest: dict[str, RunRecord] = {}
        for rec in PilotStore(self.data).records(status=None):
            have = latest.get(rec.run_id)
            if have is None or (have.status != "ok" and (rec.status == "ok" or rec.attempt > have.attempt)):
                latest[rec.run_id] = rec
        missing = [run_id_for(p.id, s) for p, s in pairs if run_id_for(p.id, s) not in latest]
        if missing:
            raise RaceError(f"data: runs {', '.join(missing[:3])} left no record in {self.data}; "
                            "check the store is writable from the workers")
        return [latest[run_id_for(p.id, s)] for p, s in pairs]

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> ParallelBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
