"""Simulator worlds: every constant of the ``sim`` engine, read from a TOML file.

A world file (``configs/worlds/*.toml``) has four parts:

* ``[world]``    name, description, ``sources`` (citations), ``stages`` (integration steps);
* ``[noise]``    the standard deviation of the seeded noise added to each target;
* ``[dynamics]`` per-target constants of the learning mechanism (see ``runners.sim.dynamics``):
  ``reuse_decay`` (value of the j-th pass over a stale batch is ``decay**j``) and
  ``prompt_cap`` (effective samples one prompt can teach that target; 0 = no cap);
* ``[rewards.NAME]`` per reward system: ``graded`` (share of tied groups that still carry
  reward variance), ``selection`` (exponent of the max-variance down-sampling gain),
  ``native_lift`` (partial credit the native reward gives at zero accuracy) and ``signal``
  (per-target weight of one informative rollout);
* ``[models.NAME]`` per policy and target: ``base`` and ``ceiling`` (metric before RL and
  its asymptote after RL) and ``scale`` (effective samples for 63% of the gain).

Validation is strict: a missing, unknown or out-of-range key raises
:class:`~planner.errors.ConfigError` with a one-line message naming the dotted key.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from planner.errors import ConfigError
from planner.registry import configs_dir
from planner.schema import TARGETS

__all__ = [
    "DEFAULT_WORLD",
    "Capacity",
    "RewardDynamics",
    "World",
    "list_worlds",
    "load_world",
    "resolve_world_path",
]

DEFAULT_WORLD = "paper"

_V = TypeVar("_V")


class _Frozen(Mapping[str, _V]):
    """A read-only mapping. ``load_world`` hands every caller the same cached World, so a
    caller writing into ``world.noise`` would change every later run's world under its
    unchanged hash. Unlike ``MappingProxyType`` it pickles (worlds travel to workers)."""

    __slots__ = ("_d",)

    def __init__(self, items: Mapping[str, _V]) -> None:
        self._d = dict(items)

    def __getitem__(self, key: str) -> _V:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return repr(self._d)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Frozen, (self._d,))


def _freeze(obj: object, name: str, value: Mapping[str, Any]) -> None:
    object.__setattr__(obj, name, value if isinstance(value, _Frozen) else _Frozen(value))


@dataclass(frozen=True)
class Capacity:
    """One target of one policy: ``metric = ceiling - (ceiling - base) * exp(-E / scale)``
    under a constant-rate learner with ``E`` effective samples."""

    base: float
    ceiling: float
    scale: float


@dataclass(frozen=True)
class RewardDynamics:
    """How one reward system's signal drives learning (constants of ``runners.sim.dynamics``)."""

    graded: float
    selection: float
    native_lift: float
    signal: Mapping[str, float]

    def __post_init__(self) -> None:
        _freeze(self, "signal", self.signal)


@dataclass(frozen=True)
class World:
    """A parsed, validated world file. ``sha256`` is the hash of the file's bytes."""

    name: str
    description: str
    sources: tuple[str, ...]
    stages: int
    noise: Mapping[str, float]
    reuse_decay: Mapping[str, float]
    prompt_cap: Mapping[str, float]
    rewards: Mapping[str, RewardDynamics]
    models: Mapping[str, Mapping[str, Capacity]]
    path: str = ""
    sha256: str = ""

    def __post_init__(self) -> None:
        for name in ("noise", "reuse_decay", "prompt_cap", "rewards"):
            _freeze(self, name, getattr(self, name))
        _freeze(self, "models", {m: c if isinstance(c, _Frozen) else _Frozen(c) for m, c in self.models.items()})

    def capacity(self, model: str, target: str) -> Capacity:
        if model not in self.models:
            raise ConfigError(
                f"world {self.name}: key 'models.{model}' is missing; add the policy to "
                f"{self.path or 'the world file'} (known: {', '.join(sorted(self.models))})"
            )
        return self.models[model][target]

    def reward(self, reward: str) -> RewardDynamics:
        if reward not in self.rewards:
            raise ConfigError(
                f"world {self.name}: key 'rewards.{reward}' is missing; add the reward system to "
                f"{self.path or 'the world file'} (known: {', '.join(sorted(self.rewards))})"
            )
        return self.rewards[reward]

    def provenance(self) -> dict[str, str]:
        return {"world": self.name, "world_path": self.path, "world_sha256": self.sha256}


# --------------------------------------------------------------------------- loading


def list_worlds() -> list[Path]:
    """The shipped world files (``configs/worlds/*.toml``)."""
    return sorted((configs_dir() / "worlds").glob("*.toml"))


def resolve_world_path(world: str | Path | None) -> Path:
    """A path, or a bare name looked up in ``configs/worlds/`` (``None`` -> ``paper``)."""
    if world is None:
        world = DEFAULT_WORLD
    path = Path(world)
    if path.is_file():
        return path.resolve()
    named = configs_dir() / "worlds" / f"{world}.toml"
    if path.suffix == "" and named.is_file():
        return named.resolve()
    what = f"{str(world)!r} is a directory, not a world file" if path.is_dir() else f"no world file {str(world)!r}"
    raise ConfigError(f"world: {what}; give a path or one of: " + ", ".join(p.stem for p in list_worlds()))


def load_world(world: str | Path | World | None = None) -> World:
    """Load and validate a world (a :class:`World` passes through)."""
    if isinstance(world, World):
        return world
    path = resolve_world_path(world)
    data = path.read_bytes()
    return _load_cached(str(path), hashlib.sha256(data).hexdigest(), data)


@lru_cache(maxsize=64)
def _load_cached(path: str, sha: str, data: bytes) -> World:
    # Keyed by content hash, so an edited file is re-read and re-validated.
    try:
        raw = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"world {path}: not valid TOML ({exc}); fix the file's syntax") from None
    except RecursionError:  # tomllib recurses: an array nested thousands deep was a traceback
        raise ConfigError(f"world {path}: not a world file (values nested too deeply to read)") from None
    return _parse(raw, path, sha)


class _Reader:
    """Pulls typed values out of nested dicts, naming the dotted key in every error."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"world {self.path}: key {key!r}: {why}")

    def table(self, raw: dict[str, Any], key: str, name: str, allowed: set[str] | None) -> dict[str, Any]:
        val = raw.get(name)
        if not isinstance(val, dict):
            raise self.fail(key, "missing table" if val is None else "must be a table")
        if allowed is not None:
            extra = sorted(set(val) - allowed)
            if extra:
                raise self.fail(f"{key}.{extra[0]}", f"unknown key; expected one of {sorted(allowed)}")
        return val

    def number(self, raw: dict[str, Any], key: str, name: str, lo: float, hi: float, *,
               lo_open: bool = False, hi_open: bool = False) -> float:
        full = f"{key}.{name}" if key else name
        if name not in raw:
            raise self.fail(full, "missing")
        v = raw[name]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.fail(full, f"must be a number, got {v!r}")
        try:
            v = float(v)
        except OverflowError:  # an integer past float range (TOML integers are unbounded here)
            raise self.fail(full, f"must be in the float range, got an integer of {len(str(abs(v)))} digits") from None
        ok_lo = v > lo if lo_open else v >= lo
        ok_hi = v < hi if hi_open else v <= hi
        if not (ok_lo and ok_hi):
            lb, hb = "(" if lo_open else "[", ")" if hi_open else "]"
            raise self.fail(full, f"must be in {lb}{lo:g}, {hi:g}{hb}, got {v:g}")
        return v

    def text(self, raw: dict[str, Any], key: str, name: str) -> str:
        """An optional free-text key (a description, notes, a source): a string if given."""
        v = raw.get(name, "")
        if not isinstance(v, str):
            raise self.fail(f"{key}.{name}", f"must be a string (quoted text), got {v!r}")
        return v

    def per_target(self, raw: dict[str, Any], key: str, lo: float, hi: float, **kw: bool) -> dict[str, float]:
        return {t: self.number(raw, key, t, lo, hi, **kw) for t in TARGETS}


_TOP = {"world", "noise", "dynamics", "rewards", "models"}
_REWARD_KEYS = {"graded", "selection", "native_lift", "signal", "notes"}
_CAP_KEYS = {"base", "ceiling", "scale", "source"}
_INF = float("inf")


def _parse(raw: dict[str, Any], path: str, sha: str) -> World:
    r = _Reader(path)
    extra = sorted(set(raw) - _TOP)
    if extra:
        raise r.fail(extra[0], f"unknown top-level key; expected one of {sorted(_TOP)}")
    head = r.table(raw, "world", "world", {"name", "description", "sources", "stages"})
    name = head.get("name")
    if not isinstance(name, str) or not name:
        raise r.fail("world.name", "must be a non-empty string")
    sources = head.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise r.fail("world.sources", "must be a list of strings (citations)")
    stages = head.get("stages", 8)
    if not isinstance(stages, int) or isinstance(stages, bool) or not 1 <= stages <= 64:
        raise r.fail("world.stages", f"must be an integer in [1, 64], got {stages!r}")

    noise = r.per_target(r.table(raw, "noise", "noise", set(TARGETS)), "noise", 0.0, 0.5)
    dyn = r.table(raw, "dynamics", "dynamics", {"reuse_decay", "prompt_cap"})
    decay = r.per_target(r.table(dyn, "dynamics.reuse_decay", "reuse_decay", set(TARGETS)),
                         "dynamics.reuse_decay", 0.0, 1.0, hi_open=True)
    # 0 means no cap; an infinite cap or scale would turn every metric into NaN (inf * 0).
    cap = r.per_target(r.table(dyn, "dynamics.prompt_cap", "prompt_cap", set(TARGETS)),
                       "dynamics.prompt_cap", 0.0, _INF, hi_open=True)

    from planner.registry import list_models, list_rewards

    rewards: dict[str, RewardDynamics] = {}
    for rname in r.table(raw, "rewards", "rewards", None):
        key = f"rewards.{rname}"
        if rname not in list_rewards():  # a typo would only show when a run needs it
            raise r.fail(key, f"unknown reward system; known: {', '.join(list_rewards())}")
        body = r.table(raw["rewards"], key, rname, _REWARD_KEYS)
        r.text(body, key, "notes")
        rewards[rname] = RewardDynamics(
            graded=r.number(body, key, "graded", 0.0, 1.0),
            selection=r.number(body, key, "selection", 0.0, 1.0),
            native_lift=r.number(body, key, "native_lift", 0.0, 1.0, hi_open=True),
            signal=r.per_target(r.table(body, f"{key}.signal", "signal", set(TARGETS)),
                                f"{key}.signal", 0.0, 100.0),
        )

    models: dict[str, dict[str, Capacity]] = {}
    for mname in r.table(raw, "models", "models", None):
        key = f"models.{mname}"
        if mname not in list_models(role="policy"):
            raise r.fail(key, f"unknown policy; known: {', '.join(list_models(role='policy'))}")
        body = r.table(raw["models"], key, mname, set(TARGETS) | {"notes"})
        r.text(body, key, "notes")
        caps: dict[str, Capacity] = {}
        for t in TARGETS:
            tk = f"{key}.{t}"
            c = r.table(body, tk, t, _CAP_KEYS)
            r.text(c, tk, "source")
            base = r.number(c, tk, "base", 0.0, 1.0, hi_open=True)
            ceiling = r.number(c, tk, "ceiling", base, 1.0)
            scale = r.number(c, tk, "scale", 0.0, _INF, lo_open=True, hi_open=True)
            caps[t] = Capacity(base, ceiling, scale)
        models[mname] = caps

    return World(
        name=name,
        description=r.text(head, "world", "description"),
        sources=tuple(sources),
        stages=stages,
        noise=noise,
        reuse_decay=decay,
        prompt_cap=cap,
        rewards=rewards,
        models=models,
        path=path,
        sha256=sha,
    )
