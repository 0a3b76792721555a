"""Plug points the planner drives without importing ``runners``: engines and the pilot store.

Implementations register under entry-point groups (see ``pyproject.toml``):
``race_planner.engines`` (``sim``, ``trl``), ``race_planner.stores`` (``parquet``) and
``race_planner.batches`` (the runners' parallel round runner, behind ``--workers``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from planner.errors import ConfigError
from planner.schema import Proposal, RunPlan, RunRecord

__all__ = [
    "FAILURE_KINDS", "Engine", "FailureKind", "ProgressFn", "RecordStore", "StoreScan", "available_engines",
    "check_engine_device", "check_engine_plans", "check_engine_settings", "check_same_source", "check_same_weights", "diverged", "engine_source",
    "failure_kind", "is_device", "load_engine", "nonfinite_fields", "one_line", "open_batches", "open_store", "prepare_engine",
    "tied_settings",
]


def is_device(value: object) -> bool:
    """Whether ``value`` names a device the trl engine runs on: ``cpu``, ``cuda`` or ``cuda:N``
    (checked at each door: ``--device``, ``-o device=``, the engine itself)."""
    return isinstance(value, str) and re.fullmatch(r"cpu|cuda(:\d+)?", value) is not None


# progress(phase, flops_so_far, budget, info) -- called by engines during a run.
ProgressFn = Callable[[str, float, float, dict[str, Any]], None]


@runtime_checkable
class Engine(Protocol):
    """Runs one proposal with one seed and returns its record (``status`` ok or failed).

    Optional hooks: ``check_settings([(model, reward), ...])`` before the store is checked
    (:func:`check_engine_settings`), ``check_plans([plan, ...])`` where every plan is known
    up front (:func:`check_engine_plans`), ``check_device()`` where the runs execute in the
    caller's process (:func:`check_engine_device`), ``prepare([(model, reward), ...])`` once per race or
    execute, before any run (:func:`prepare_engine`), ``warm_up()`` once per worker
    process, before a run's clock and time limit start (heavy imports), and
    ``tied_settings([(model, reward), ...], budget, target)`` where the engine knows its
    truth (the sim: :func:`tied_settings`).
    """

    name: str

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord: ...


class StoreScan(Protocol):
    """One read of a store: its records and the files it could not read (each with a
    ``path`` and a ``reason``)."""

    records: list[RunRecord]
    corrupt: list[Any]


@runtime_checkable
class RecordStore(Protocol):
    """The pilot dataset: a directory of records, appended atomically, read as one table."""

    root: Path

    def write(self, record: RunRecord) -> Path: ...

    def records(self, *, status: str | None = "ok") -> list[RunRecord]: ...

    def scan(self, *, status: str | None = "ok") -> StoreScan: ...


def _group(name: str) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=name)}


def available_engines() -> list[str]:
    """Names of the installed engines (entry-point group ``race_planner.engines``), sorted."""
    return sorted(_group("race_planner.engines"))


def load_engine(name: str, **options: Any) -> Engine:
    """Build the installed engine ``name`` with ``options`` (its constructor's keywords); an
    unknown name is a one-line :class:`~planner.errors.ConfigError` listing the installed ones."""
    eps = _group("race_planner.engines")
    if name not in eps:
        raise ConfigError(
            f"engine: unknown engine {name!r}; use one of: {', '.join(sorted(eps)) or '(none installed)'}"
        )
    return eps[name].load()(**options)


def open_store(root: str | Path, kind: str = "parquet") -> RecordStore:
    """Open the pilot store of kind ``kind`` (entry-point group ``race_planner.stores``) at
    ``root``."""
    eps = _group("race_planner.stores")
    if kind not in eps:
        raise ConfigError(f"store: no pilot store {kind!r} installed; reinstall race-planner")
    return eps[kind].load()(Path(root))


def open_batches(**options: Any) -> Any:
    """The parallel runner of race rounds (``runners.batches.ParallelBatches``): a callable
    ``(pairs) -> records`` to pass to ``run_race(run_batch=...)``, and a context manager
    that stops its workers."""
    eps = _group("race_planner.batches")
    if "parallel" not in eps:
        raise ConfigError("workers: no parallel runner installed; reinstall race-planner")
    return eps["parallel"].load()(**options)


def check_engine_settings(engine: Engine, settings: Iterable[tuple[str, str]]) -> None:
    """Call the engine's optional ``check_settings([(model, reward), ...])``: bad input that
    depends on the settings (the trl engine: an option none of them reads). Before the
    store's source check, whose "use a separate --data directory" would be the wrong fix for
    an option to drop."""
    check = getattr(engine, "check_settings", None)
    if callable(check):
        check(sorted(set(settings)))


def check_engine_plans(engine: Engine, plans: Iterable[RunPlan]) -> None:
    """Call the engine's optional ``check_plans([plan, ...])``: bad input that depends on
    the plans (none of the shipped engines has any since 12-05), for a caller
    that knows them all before any run (``runners execute``), so the refusal comes before
    the engine's preparation (minutes of pretraining) and before the store is touched."""
    check = getattr(engine, "check_plans", None)
    if callable(check):
        check(list(plans))


def check_engine_device(engine: Engine) -> None:
    """Call the engine's optional ``check_device()``, for a caller whose runs execute in its
    own process (an in-process race): a device it cannot reach is refused before the
    engine's preparation (minutes of pretraining), not as the first run begins."""
    check = getattr(engine, "check_device", None)
    if callable(check):
        check()


def prepare_engine(engine: Engine, settings: Iterable[tuple[str, str]]) -> None:
    """Call the engine's optional ``prepare([(model, reward), ...])`` before any run: the
    trl engine pretrains missing tiny-world models there (outside every run's clock), the
    sim checks its world has each setting."""
    prepare = getattr(engine, "prepare", None)
    if callable(prepare):
        prepare(sorted(set(settings)))


def tied_settings(engine: Engine, settings: Iterable[tuple[str, str]], budget: float,
                  target: str) -> list[tuple[str, str]]:
    """The engine's optional ``tied_settings(settings, budget, target)``: the settings
    whose true frontier has no best regime at ``budget`` (a simulator knows its truth; a
    real engine has no such hook, and none are returned)."""
    tied = getattr(engine, "tied_settings", None)
    return list(tied(sorted(set(settings)), budget, target)) if callable(tied) else []


FailureKind = Literal["error", "oom", "nan", "timeout", "crash"]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)


def failure_kind(exc: BaseException) -> FailureKind:
    """The kind a failed record gives a run that raised ``exc``: the engine's own (a
    ``runners.task.RunFailed`` carries one: ``nan``, ``timeout``, ...), ``oom`` for out of
    memory (recognised without importing torch), else ``error``."""
    own = getattr(exc, "kind", None)
    # Only one of FAILURE_KINDS: another library's exception may have a ``kind`` of its own.
    if isinstance(own, str) and own in FAILURE_KINDS:
        return own
    oom = isinstance(exc, MemoryError) or "OutOfMemory" in type(exc).__name__ or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())
    return "oom" if oom else "error"


def nonfinite_fields(record: Any) -> str | None:
    """The metrics (and metered total, ``flops_total``) of a record that are not finite,
    comma-joined, or None. A run with any is a diverged run: failed, of kind ``nan``, in
    the in-process race and in ``runners execute`` alike; stored as ok it would poison the
    surrogate."""
    vals = dict(record.metrics.model_dump()) | {"flops_total": record.card.flops.total}
    bad = [k for k, v in vals.items() if isinstance(v, float) and not math.isfinite(v)]
    return ", ".join(bad) or None


def diverged(record: Any) -> tuple[str, Any] | None:
    """``(error, card)`` of the failure an ok ``record`` with non-finite values becomes (see
    :func:`nonfinite_fields`), or None. The card is dropped where its own total is not
    finite: a NaN total would poison every FLOP sum over the store and make every
    ``--max-flops`` test false."""
    bad = nonfinite_fields(record) if record.status == "ok" else None
    if bad is None:
        return None
    return f"non-finite values in {bad}", record.card if math.isfinite(record.card.flops.total) else None


def one_line(text: str, limit: int = 500) -> str:
    """``text`` as one line of at most ``limit`` characters: a failed record's error."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def engine_source(engine: Engine) -> dict[str, Any]:
    """What a record's outcome depends on besides its proposal and seed: the engine's name
    plus what the engine declares in an optional ``source`` mapping (the sim: its world
    and whether it is noise-free), each key also in the records' ``provenance``."""
    return {"engine": engine.name, **dict(getattr(engine, "source", None) or {})}


def _describe(source: dict[str, Any], other: dict[str, Any]) -> str:
    # The hash is for the comparison; a person reads the name, and the hash only where the
    # names agree (a world file edited since its runs: same name, other contents).
    same_names = all(source.get(k) == other.get(k) for k in source if k != "world_sha256")

    def text(k: str, v: Any) -> str:
        if k == "world_sha256":
            return f"world file sha256 {str(v)[:12]}"
        if isinstance(v, dict):  # engine options: every one, as the user typed them
            return f"{k} " + " ".join(f"{a}={b}" for a, b in v.items())[:120]
        return f"{k} {str(v)[:12]!r}"

    # The engine and world name the source; another key only where the two differ ("truth
    # 'False'" on both sides of a refusal was noise the reader had to compare away).
    shown = [text(k, v) for k, v in source.items() if v is not None and (k != "world_sha256" or same_names)
             and (k in ("engine", "world") or v != other.get(k))]
    if "options" in source and source["options"] is None and other.get("options") is not None:
        shown.append("default options")
    return ", ".join(shown)


def check_same_source(records: Iterable[RunRecord], engine: Engine, data: str | Path) -> None:
    """Refuse to add this engine's runs to a store holding another engine's (or world's).

    A run id is the proposal id and seed only, so a store of sim runs would pass every
    trl run as "already done", and a surrogate fitted on two worlds answers for neither.
    """
    want = engine_source(engine)
    for r in records:
        got = {k: r.engine if k == "engine" else r.provenance.get(k) for k in want}
        # (Not the options: runs made before they were kept have none, meaning the defaults.)
        lost = [k for k in want if k != "options" and want[k] is not None and got[k] is None]
        if lost and got["engine"] == want["engine"]:  # another engine's runs lack other keys
            # Every engine's runs record these keys: one that lacks them was damaged or
            # edited by hand, and "holds runs of engine 'sim', not engine 'sim', world ..."
            # named neither the run nor the fix.
            folder = "runs" if r.status == "ok" else "failed"
            raise ConfigError(
                f"data: run {r.run_id} in {str(data)!r} records no {lost[0]} in its provenance (damaged, "
                f"edited by hand or written by an older version), so its source cannot be checked; move its file out of "
                f"{str(Path(data) / folder)!r} (the run is redone) or use a separate --data directory"
            )
        prov_engine = r.provenance.get("engine")
        if r.engine != want["engine"] and prov_engine == want["engine"] and r.engine in available_engines():
            # The record contradicts itself (a hand edit): one file to move, not a store to give up.
            # (An engine of its own, module:Class, may subclass the sim and keep its provenance.)
            folder = "runs" if r.status == "ok" else "failed"
            raise ConfigError(
                f"data: run {r.run_id} in {str(data)!r} says engine {r.engine!r} but its provenance says "
                f"{prov_engine!r} (edited by hand?); move its file out of {str(Path(data) / folder)!r} "
                "(the run is redone) or use a separate --data directory"
            )
        if got != want:
            edited = " (the world file changed since those runs)" if got.get("world") == want.get("world") \
                and got.get("world_sha256") != want.get("world_sha256") and "world_sha256" in want else ""
            raise ConfigError(
                f"data: {str(data)!r} holds runs of {_describe(got, want)} (e.g. {r.run_id}), not "
                f"{_describe(want, got)}{edited}; use a separate --data directory per engine, world and engine options"
            )


# Provenance keys the installed engines declare as their source (engine_source): the
# sim's world and truth, the trl engine's quick flag and outcome options.
_SOURCE_KEYS = ("world", "world_sha256", "truth", "quick", "options")


def mixed_sources(records: Iterable[RunRecord]) -> str | None:
    """One line naming two sources (engine, world, outcome options) among ``records``, or
    None where they share one. ``race`` and ``execute`` refuse to add such runs
    (:func:`check_same_source`); a store assembled by hand can still hold them, and
    ``suggest`` and ``report`` fitted both without a word."""
    # Each key's first value and the record that set it: a key a record lacks (older than
    # the key) is not compared, and the next record that has it still is.
    seen: dict[str, tuple[Any, RunRecord]] = {}
    for r in records:
        src = {"engine": r.engine, **{k: v for k in _SOURCE_KEYS if (v := r.provenance.get(k)) is not None}}
        for k, v in src.items():
            value, first = seen.setdefault(k, (v, r))
            if value != v:
                a = {"engine": first.engine, **{k2: first.provenance.get(k2) for k2 in _SOURCE_KEYS}}
                return (f"the store mixes runs of {_describe(a, src)} (e.g. {first.run_id}) and of "
                        f"{_describe(src, a)} (e.g. {r.run_id}): a fit of both answers for neither; keep one "
                        "--data directory per source")
    return None


# The provenance key of what a run starts from -> the key naming its folder or Hub id.
_WEIGHTS = {"policy_weights": "policy", "scorer_weights": "scorer"}


def check_same_weights(records: Iterable[RunRecord], engine: Engine, data: str | Path) -> None:
    """Refuse to add this engine's runs to a store whose runs of the same model (or scorer)
    started from other weights: the tiny world's policy and PRM are pretrained on each
    machine, and another machine, or a rebuilt cache, draws other weights under the same
    cache name (tiny-s's base accuracy has been 0.17 on one machine and 0.46 on another),
    so a surrogate fitted on both answers for neither. Uses the engine's optional ``start_weights(model, reward)`` (the
    trl engine's; a key whose value is None on either side is not compared: Hub weights,
    records written before the key was kept)."""
    weights = getattr(engine, "start_weights", None)
    if not callable(weights):
        return
    here: dict[tuple[str, str], dict[str, str | None]] = {}
    for r in records:
        key = (r.model, r.reward)
        if key not in here:
            here[key] = weights(*key)
        for field, want in here[key].items():
            got = r.provenance.get(field)
            if want is None or got is None or got == want:
                continue
            role = _WEIGHTS.get(field, field)
            raise ConfigError(
                f"data: {str(data)!r} holds runs of {r.model} x {r.reward} (e.g. {r.run_id}) whose {role} "
                f"started from other weights ({str(got)[:19]}) than a run here would ({str(want)[:19]}): "
                f"{r.provenance.get(role) or 'that folder'} was pretrained on another machine or again, and "
                "runs from two starting points do not mix; use a separate --data directory, or copy that "
                "folder from the machine that made those runs over this machine's copy"
            )
