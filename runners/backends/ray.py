"""The ``ray`` backend: each run is a Ray task (``num_gpus`` per run with ``cuda``).

Connects to a running cluster with ``address`` (``--ray-address``); otherwise uses the Ray
already initialised in this process, or starts a local one and stops it on close. On a
cluster the data directory must be on a filesystem every node sees: workers write records
there themselves.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from planner.errors import ConfigError
from runners.backends import Handle, WorkerLost, require
from runners.backends.queue import ThrottledQueue
from runners.task import Outcome, forget_attempt, run_task

__all__ = ["CLOSE_GRACE_S", "RayBackend"]

CLOSE_GRACE_S = 5.0  # how long close() waits for force-cancelled tasks to end


class RayBackend(ThrottledQueue):
    """Runs tasks as Ray remote functions, at most ``workers`` in flight, each with the given
    GPUs and CPUs; uses the Ray already initialised, else starts or joins one at ``address``."""
    name = "ray"

    def __init__(
        self,
        workers: int = 1,
        *,
        cuda: bool = False,
        address: str | None = None,
        gpus_per_run: float | None = None,
        cpus_per_run: float = 1.0,
    ) -> None:
        self._ray = ray = require("ray", "ray")
        self._started = False
        if not ray.is_initialized():
            # include_dashboard=False: the dashboard costs seconds of start-up and a port.
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                kwargs["address"] = address
                _check_answers(address)
            try:
                with _keep_sigterm_handler():
                    ray.init(**kwargs)
            except Exception as exc:  # ConnectionError, ValueError (address format), RuntimeError
                why = " ".join(str(exc).split())[:200] or type(exc).__name__
                if address:
                    raise ConfigError(
                        f"ray-address: cannot connect to {address!r} ({why}); give a running cluster's "
                        "address (ray://HOST:10001 or HOST:6379), or leave it out to start a local Ray"
                    ) from None
                raise ConfigError(f"backend: could not start a local Ray ({why})") from None
            self._started = True
        num_gpus = gpus_per_run if gpus_per_run is not None else (1.0 if cuda else 0.0)
        if not address:
            # A Ray on this machine (started here or before) has the CPUs and GPUs it will ever
            # have: a task asking for more waits forever, without a word. (A cluster may add
            # nodes as tasks queue, so there it is the scheduler's call.)
            have = ray.cluster_resources()
            cpus, gpus = float(have.get("CPU", 0.0)), float(have.get("GPU", 0.0))
            refusal: str | None = None
            if num_gpus > 0 and gpus < num_gpus:
                refusal = (f"device: each run asks Ray for {num_gpus:g} GPU but this machine's Ray has {gpus:g}; "
                           "use --device cpu, or --ray-address of a cluster with GPUs")
            elif cpus_per_run > cpus:
                refusal = (f"cpus-per-run: each run asks Ray for {cpus_per_run:g} CPUs but this machine's Ray has "
                           f"{cpus:g}; ask for at most {cpus:g}, or give --ray-address of a cluster with larger nodes")
            if refusal:
                if self._started:
                    ray.shutdown()
                raise ConfigError(refusal)
        # max_retries=0: retries are ours (they count attempts and keep failed records).
        self._remote = ray.remote(num_cpus=cpus_per_run, num_gpus=num_gpus, max_retries=0)(run_task)
        super().__init__(limit=workers)  # at most this many runs in flight, whatever the cluster size

    def _launch(self, batch: list[Handle]) -> None:
        for h in batch:
            h.ref = self._remote.remote(h.task)

    def poll(self, handle: Handle) -> bool:
        if handle.ref is None:
            self._fill()
            return False
        ready, _ = self._ray.wait([handle.ref], timeout=0)
        if ready:
            self._finished(handle)
        return bool(ready)

    def result(self, handle: Handle) -> Outcome:
        try:
            out = self._ray.get(handle.ref)
        except self._ray.exceptions.RayError as exc:  # worker crashed, task cancelled, node lost
            lines = str(exc).strip().splitlines()
            raise WorkerLost(f"{type(exc).__name__}: {lines[0] if lines else ''}") from None
        if isinstance(out, WorkerLost):
            raise out
        return out

    def cancel(self, handle: Handle) -> None:
        if handle.ref is None:
            self._waiting.remove(handle)
            handle.ref = self._ray.put(WorkerLost("cancelled before it started"))
            return
        self._ray.cancel(handle.ref, force=True)

    def close(self) -> None:
        stopped = list(self._running)
        for h in stopped:
            self._ray.cancel(h.ref, force=True)
        if stopped:
            try:  # a force-cancelled task's worker is killed: give that a moment
                self._ray.wait([h.ref for h in stopped], num_returns=len(stopped), timeout=CLOSE_GRACE_S)
            except self._ray.exceptions.RayError:
                pass
        self._running.clear()
        self._waiting.clear()
        if self._started:
            self._ray.shutdown()  # every worker of a Ray started here ends with it
        for h in stopped:
            # Their leases would keep these runs from a resumed race or another driver for
            # the lease's TTL. Only these attempts' leases (by nonce) go (a task that had
            # finished released its own already); on a cluster, past the wait, the cancel stands.
            forget_attempt(h.task)


PROBE_S = 10.0


def _check_answers(address: str, timeout_s: float | None = None) -> None:
    """Refuse a ``HOST:PORT`` (or ``ray://HOST:PORT``) where no gRPC server answers within
    ``timeout_s`` (default :data:`PROBE_S`): ``ray.init`` retries such an address for many
    minutes, logging warnings, before it gives up (measured: still waiting after 5 min).
    Ray's GCS and its client server both speak gRPC. Other forms (``auto``, ``local``) are
    left to Ray."""
    import grpc  # a dependency of ray

    timeout_s = PROBE_S if timeout_s is None else timeout_s
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not (sep and host and port.isdigit()):
        return  # not HOST:PORT: ray.init says what is wrong with it
    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        raise ConfigError(
            f"ray-address: nothing answers at {address!r} within {timeout_s:g} s; start the cluster "
            "(`ray start --head`) or give its address (HOST:6379, or ray://HOST:10001)"
        ) from None
    finally:
        channel.close()


@contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    """``ray.init`` installs its own SIGTERM handler (``sys.exit``): the CLI's, which stops
    the workers and exits 143 with what is kept, must stay in place."""
    main = threading.current_thread() is threading.main_thread()
    old = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and old is not None:
            signal.signal(signal.SIGTERM, old)
