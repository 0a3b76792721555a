"""GP surrogate of RACE frontiers (BoTorch): fit on pilot records, predict frontiers with
uncertainty, joint posterior sample paths over rho, leave-one-out cross-validation.

Imports neither ``planner`` nor ``runners``. Importing this package loads torch; the CLI
imports it lazily inside commands.
"""

from surrogate.cv import LOOResult, loo_cv
from surrogate.data import FEATURES, Observation, TrainingData, extract, group_replicates
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
