"""Execution backends: where runs execute. One small interface, three implementations.

- ``local``: a pool of worker processes on this machine (one per GPU with ``--device cuda``);
- ``ray``: Ray tasks (a local Ray, or a cluster with ``--ray-address``);
- ``slurm``: submitit job arrays.

A backend only moves :class:`~runners.task.Task` objects to workers that call
:func:`~runners.task.run_task`; the workers write records into the store themselves.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from planner.errors import ConfigError

if TYPE_CHECKING:
    from runners.task import Outcome, Task

__all__ = ["BACKENDS", "MAX_WORKERS", "Backend", "Handle", "WorkerLost", "make_backend", "require"]

BACKENDS: tuple[str, ...] = ("local", "ray", "slurm")

# The most runs a backend keeps in flight: more is a typo, not a cluster. The local backend
# sizes its worker slots by it (--workers 99999999999999999999 was an OverflowError traceback,
# 2**40 a MemoryError).
MAX_WORKERS = 10_000


class WorkerLost(RuntimeError):
    """The worker died, was cancelled or killed by its scheduler before reporting a result."""


@dataclass(eq=False)
class Handle:
    """A submitted task. ``ref`` is the backend's own handle (future, ObjectRef, job)."""

    task: Task
    ref: Any = None
    timed_out: bool = False


@runtime_checkable
class Backend(Protocol):
    """Where runs execute: a pool of workers that takes :class:`~runners.task.Task` objects and
    hands back their :class:`~runners.task.Outcome` (``local``, ``ray``, ``slurm``; see
    docs/execution.md). Build one with :func:`make_backend`."""
    name: str

    def submit(self, tasks: Sequence[Task]) -> list[Handle]:
        """Queue tasks (all at once, so SLURM can make one job array)."""
        ...

    def poll(self, handle: Handle) -> bool:
        """True once ``handle`` finished (successfully or not); never blocks long."""
        ...

    def result(self, handle: Handle) -> Outcome:
        """The worker's outcome; raises :class:`WorkerLost` if it died without one."""
        ...

    def cancel(self, handle: Handle) -> None:
        """Stop a queued or running task (used for hard time limits)."""
        ...

    def close(self) -> None:
        """Release workers; tasks still running are stopped."""
        ...


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency or fail with a one-line, actionable error."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"backend: --backend {extra} needs the optional package {module!r}; "
            f"install it with: pip install 'race-planner[{extra}]'"
        ) from None


def make_backend(
    name: str,
    *,
    workers: int = 1,
    data: str | Path = ".",
    engine_options: Mapping[str, Any] | None = None,
    timeout_s: float | None = None,
    simulated: bool = False,
    **options: Any,
) -> Backend:
    """Build a backend by name. ``options`` are that backend's fields in
    :mod:`runners.backends.config` (validated there, so bad values name their field).
    ``simulated``: the engine runs on no device (the sim), so GPU settings do not concern it."""
    from runners.backends.config import validate_options

    if name not in BACKENDS:
        raise ConfigError(f"backend: unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
    if not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"workers: must be 1-{MAX_WORKERS} (runs in flight at once), got {workers}")
    opts = validate_options(name, options)
    device = str((engine_options or {}).get("device", ""))
    cuda = device.startswith("cuda")
    index = device.partition(":")[2]
    if cuda and index:
        # Workers see their GPU as device 0 (CUDA_VISIBLE_DEVICES): cuda:N names GPU N of
        # this machine, which a local worker is pinned to (and runs on as "cuda").
        if name != "local":
            raise ConfigError(f"device: {device} names a GPU of this machine, but the {name} scheduler places "
                              "runs itself; pass --device cuda")
        if opts.get("devices") and list(opts["devices"]) != [index]:
            raise ConfigError(f"device: {device} and [local].devices {list(opts['devices'])} disagree; give one")
        opts["devices"] = [index]
    # Not for a simulated engine: it ignores the device, and refuses --device cuda itself.
    if name == "local" and opts.get("devices") and not cuda and not simulated:
        # Ignored on the cpu: runs the user meant for GPUs would crawl on the CPU instead.
        raise ConfigError(f"devices: [local].devices {list(opts['devices'])} pins GPUs, but the runs are on "
                          "the cpu; pass --device cuda, or drop devices from --backend-config")
    if name == "local":
        from runners.backends.local import LocalBackend

        return LocalBackend(workers=workers, cuda=cuda, **opts)
    if name == "ray":
        from runners.backends.ray import RayBackend

        return RayBackend(workers=workers, cuda=cuda, **opts)
    from runners.backends.slurm import SlurmBackend

    opts.setdefault("folder", str(Path(data) / ".submitit"))
    return SlurmBackend(workers=workers, cuda=cuda, timeout_s=timeout_s, **opts)
