"""A stated run noise: one run's standard deviation in the target metric, from elsewhere.

Without seed replicates, ours' surrogate has to guess the noise from the runs themselves,
and over a few runs it guesses far too small (docs/planner.md, "Run noise"), so the calls
come out too sure. A user who knows the noise (an earlier campaign's replicates, the eval
set's binomial error sqrt(p (1 - p) / n)) states it with ``--noise-sd``: one value for
every reward system, or one per reward system (``sparse=0.01,prm=0.02``). This module reads
that text and checks it against a race's settings; the surrogate takes the result
(:class:`surrogate.FrontierSurrogate`, ``noise_sd``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.errors import ConfigError

__all__ = ["NoiseSd", "check_noise_sd", "parse_noise_sd", "unlikely_noise_sd"]

NoiseSd = float | dict[str, float]

_FIX = "give one sd for every reward system (--noise-sd 0.01) or one per reward system (--noise-sd sparse=0.01,prm=0.02)"


def _sd(text: str, name: str) -> float:
    try:
        if "_" in text:  # float() reads "1_0" as 10: a typo, not a number
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not a number; {_FIX}") from None
    if not (0 < value < math.inf):
        raise ConfigError(f"{name}: a run noise sd must be a positive finite number, got {text!r}; {_FIX}")
    return value


def parse_noise_sd(text: str) -> NoiseSd:
    """``"0.01"`` -> 0.01; ``"sparse=0.01,prm=0.02"`` -> {"sparse": 0.01, "prm": 0.02}.
    Anything else is a one-line ConfigError naming ``noise-sd`` and the two forms."""
    text = text.strip()
    if "=" not in text:
        return _sd(text, "noise-sd")
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = (x.strip() for x in part.partition("="))
        if not sep or not key:
            raise ConfigError(f"noise-sd: {part.strip()!r} is not REWARD=SD; {_FIX}")
        if key in out:
            raise ConfigError(f"noise-sd: {key} is given twice; {_FIX}")
        out[key] = _sd(value, f"noise-sd {key}")
    return out


def check_noise_sd(value: Any, problem: Any) -> NoiseSd | None:
    """``value`` (None, a positive sd, or {reward: sd}) checked against ``problem``'s
    reward systems: a mapping names each of them and nothing else. Returns a new value
    (a mapping is copied), or raises a one-line ConfigError."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ConfigError(f"noise-sd: a run noise sd must be a positive finite number, got {value!r}; {_FIX}")
        return float(value)
    rewards = sorted({s.reward for s in problem.settings})
    stray = sorted(set(value) - set(rewards))
    if stray:
        raise ConfigError(f"noise-sd: {', '.join(map(str, stray))} is not a reward system of this race "
                          f"({', '.join(rewards)}); {_FIX}")
    missing = [r for r in rewards if r not in value]
    if missing:
        raise ConfigError(f"noise-sd: no value for {', '.join(missing)}; {_FIX}")
    out = {}
    for r in rewards:
        v = value[r]
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < math.inf:
            raise ConfigError(f"noise-sd {r}: a run noise sd must be a positive finite number, got {v!r}; {_FIX}")
        out[r] = float(v)
    return out


# The sd of a metric that lies in [0, 1] (a pass rate, a 0/1 reward's mean) is at most 0.5.
RATE_SD_MAX = 0.5


def unlikely_noise_sd(value: NoiseSd | None) -> str | None:
    """What looks wrong with a stated noise (None: nothing): an sd above :data:`RATE_SD_MAX`,
    more than any metric in [0, 1] can have, as when a percent is given (1 for 0.01). Not
    refused: a reward system may score on another scale."""
    if value is None:
        return None
    sds = value.values() if isinstance(value, Mapping) else [value]
    big = max(sds)
    if big <= RATE_SD_MAX:
        return None
    return (f"noise-sd: {big:g} is more than the sd of any metric in [0, 1] can be ({RATE_SD_MAX:g}); the sd is "
            "in the target's units (0.01, not 1 for one percent); used as given")
