"""Extensions of TRL's GRPOTrainer (max-variance down-sampling, budget-sized rounds).

All coupling to TRL internals is here; ``runners.grpo.trainer`` imports TRL, this package
root does not.
"""

from runners.grpo.compat import TESTED_TRL, check_trl_version
from runners.grpo.downsample import max_variance_indices, max_variance_subset

__all__ = ["TESTED_TRL", "check_trl_version", "max_variance_indices", "max_variance_subset"]
