"""GP surrogate of RACE frontiers (BoTorch): fit on pilot records, predict frontiers with
uncertainty, joint posterior sample paths over rho, leave-one-out cross-validation.

Imports neither ``planner`` nor ``runners``. Importing this package loads no torch: the
names that need it (:class:`FrontierSurrogate`, :class:`Domain`, :class:`NotFittedError`
from :mod:`surrogate.model`) load it when first used; reading records into features
(:mod:`surrogate.data`) and :mod:`surrogate.cv`'s types do not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from surrogate.cv import LOOResult, loo_cv
from surrogate.data import FEATURES, Observation, TrainingData, extract, group_replicates

if TYPE_CHECKING:
    from surrogate.model import Domain, FrontierSurrogate, NotFittedError

__all__ = [
    "FEATURES",
    "Domain",
    "FrontierSurrogate",
    "LOOResult",
    "NotFittedError",
    "Observation",
    "TrainingData",
    "extract",
    "group_replicates",
    "loo_cv",
]

# Names resolved on first access (PEP 562): surrogate.model imports torch.
_LAZY = {"Domain": "surrogate.model", "FrontierSurrogate": "surrogate.model", "NotFittedError": "surrogate.model"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once: later lookups are plain attributes
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
