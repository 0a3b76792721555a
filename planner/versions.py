"""Which versions made a result: race-planner itself and the libraries a real run's outcome
depends on (TRL's GRPO defaults have moved between releases under the same config; 1.16's
are loss_type "dapo" and beta 0.0), read from the installed distributions' metadata, so
nothing heavy is imported."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["FITTING_LIBRARIES", "PLANNING_LIBRARIES", "TRAINING_LIBRARIES", "changed_since", "fitting_versions",
           "mixed_software", "package_version", "software_of", "tool_version", "version_line"]

# What a GRPO/LoRA run's numbers depend on besides its plan, seed and weights.
TRAINING_LIBRARIES: tuple[str, ...] = ("torch", "transformers", "trl", "peft")
# What fits, acquires and compares (the same records can give other calls under another).
PLANNING_LIBRARIES: tuple[str, ...] = ("botorch", "gpytorch", "optuna", "polars")
# What a regime call's numbers depend on besides its records and seed: the GP's fit and
# samples (torch, gpytorch, botorch) and the acquisition's optimiser (scipy, numpy). The
# last bit of a fit can move a race (docs/benchmark.md, "Portable math").
FITTING_LIBRARIES: tuple[str, ...] = ("torch", "gpytorch", "botorch", "scipy", "numpy", "optuna")


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None where it is not installed."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


@functools.cache
def tool_version() -> str:
    """race-planner's version (``"unknown"`` when run from a source tree never installed)."""
    return package_version("race-planner") or "unknown"


def fitting_versions() -> dict[str, str | None]:
    """``{library: version}`` of race-planner and :data:`FITTING_LIBRARIES`: what a
    ``regimes.json`` records as ``fitted_with``."""
    return {"race-planner": tool_version(), **{n: package_version(n) for n in FITTING_LIBRARIES}}


def version_line() -> str:
    """``race-planner 0.1.0 (torch 2.13.0, ...)``: what ``--version`` prints: the libraries
    a run depends on, the planning ones, and every one a fit records in ``fitted_with``
    (scipy and numpy move a race's calls too)."""
    names = dict.fromkeys((*TRAINING_LIBRARIES, *PLANNING_LIBRARIES, *FITTING_LIBRARIES))
    libs = ", ".join(f"{n} {package_version(n) or 'not installed'}" for n in names)
    return f"race-planner {tool_version()} ({libs})"


def software_of(records: Iterable[Any]) -> dict[str, dict[str, int]]:
    """``{library: {version: runs}}`` over the records' compute cards (``card.software``),
    for race-planner and :data:`TRAINING_LIBRARIES`; a library no card names is left out
    (the sim's runs name race-planner only, records older than a key name none)."""
    seen: dict[str, Counter[str]] = {}
    for r in records:
        software = r.card.software
        for name in ("race-planner", *TRAINING_LIBRARIES):
            if name in software:
                seen.setdefault(name, Counter())[software[name]] += 1
    return {name: dict(sorted(c.items())) for name, c in seen.items()}


def mixed_software(records: Iterable[Any]) -> str | None:
    """One line naming each library whose runs were made under more than one version (a
    store that spans an upgrade; one release's builds for two machines, ``+cpu`` and
    ``+cu126``, are one version), or None: a change of TRL's defaults moves every metric,
    and the surrogate would read it as noise."""
    mixed = {name: v for name, v in software_of(records).items() if len({_release(x) for x in v}) > 1}
    if not mixed:
        return None
    parts = "; ".join(f"{name} " + ", ".join(f"{ver} ({n} runs)" for ver, n in v.items()) for name, v in mixed.items())
    return (f"The runs were made under different library versions ({parts}): where a version changed "
            "training, the fits read the change as noise; compare the settings' runs by version "
            "(`runners card RUN_ID` lists each run's) or keep one --data directory per version")


def _release(v: str | None) -> str | None:
    # "2.13.0+cpu" and "2.13.0+cu126" are one release built for two machines: the hardware
    # is on every card already, and a campaign may move from a laptop to a GPU box.
    return None if v is None else v.split("+", 1)[0]


def changed_since(records: Iterable[Any]) -> str | None:
    """One line naming each library the records' cards name whose installed release here is
    none of theirs (``trl 1.15.0 -> 1.16.0``), or None: said before a race or an execute
    adds runs to a store, since runs across an upgrade fit as one campaign only where the
    upgrade changed nothing a run does."""
    moved = []
    for name, versions in software_of(records).items():
        here = tool_version() if name == "race-planner" else package_version(name)
        if here is not None and _release(here) not in {_release(v) for v in versions}:
            moved.append(f"{name} {' / '.join(versions)} -> {here}")
    if not moved:
        return None
    return (f"this store's runs were made with other library versions than this machine has ({'; '.join(moved)}): "
            "where a version changed training, the fits read the change as noise; finish a campaign on one "
            "version, or give the new one its own --data directory")
