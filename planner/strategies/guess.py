"""What a proposal's prediction is worth: the surrogate's mean and std for its run, and the
rules that mark it a guess (``Prediction.extrapolated`` and ``extrapolated_why``).

A prediction is a guess where its level is not tied to fitted runs (a setting without runs
of its own that the fitted ones cannot speak for, or a budget no fitted run came near) or
where its std rests on the fit's guess of the run noise (one fitted setting, no seed
replicates). Measured on the sim (benchmarks/prediction_coverage.py, docs/schema.md):
unmarked predictions' runs fell inside mean +- 1.645 std 0.96 of 320 times (settings
without runs) and 0.90 of 195 (the benchmark's races); marked ones' 0.42 of 720 and 0.375
of 80 (one-setting races). Pure: reads records and a fitted surrogate, nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from planner.registry import get_model
from planner.schema import Prediction, RunRecord

__all__ = ["BUDGET_REACH", "extrapolated", "guess", "noise_guessed", "predict", "unanchored"]

# A prediction at a budget more than this many times every fitted run's, or less than every
# one's over it, is marked a guess (extrapolated): a factor of 2 still sits between a
# ladder's rungs (pilot, ~3.2x, target), so the first run of each rung up (or down) is marked.
BUDGET_REACH = 2.0


def predict(sur: Any, records: Sequence[RunRecord], target: str, plan: Any) -> Prediction | None:
    """The surrogate ``sur``'s prediction for ``plan``'s run (None without a fitted
    surrogate): the mean and the std of what the run will measure (the latent posterior's
    and one run's noise; the latent alone made a measurement fall outside mean +- 1.64 std
    in 30% of an audit's runs), marked where it is a guess (:func:`guess`)."""
    if sur is None:
        return None
    mean, std = sur.predict(sur.encode(plan.model, plan.reward, [plan.rho], plan.flops.total,
                                       reuse=[plan.num_iterations]), observation_noise=True)
    # Beyond the fitted settings the kernel carries their level over, and outcome
    # standardisation scales the std to their spread, not to how far apart settings can
    # be: such a prediction is marked.
    # Prediction validates ``target`` against its Literal (a race's problem holds a str).
    return Prediction(target=target, mean=float(mean[0]), std=float(std[0]),  # type: ignore[arg-type]
                      **guess(sur, records, plan.model, plan.reward, plan.budget))


def guess(sur: Any, records: Sequence[RunRecord], model: str, reward: str, budget: float) -> dict[str, Any]:
    """``Prediction`` fields marking a guess: ``extrapolated`` and why (:func:`extrapolated`,
    :func:`noise_guessed`; two causes joined by "and")."""
    causes = [extrapolated(records, model, reward, budget), noise_guessed(sur, records, reward)]
    why = " and ".join(c for c in causes if c) or None
    return {"extrapolated": why is not None, "extrapolated_why": why}


def noise_guessed(sur: Any, records: Sequence[RunRecord], reward: str) -> str | None:
    """Why a prediction's std is a guess though its level is tied to runs (None: it is
    not): one fitted setting, and no seed replicates measured its noise. The fit's noise
    then sits near its prior's mode, too small where the runs' spread is mostly noise: in
    one-setting races the later, otherwise unmarked predictions' runs fell inside mean +-
    1.645 std 0.60 of 25 times (acquisition) and 0.73 of 15 (validation)
    (benchmarks/prediction_coverage.py --settings, docs/schema.md); with more fitted
    settings their spread informs the noise (the benchmark's six-setting races: 0.90 of 195
    inside). The std is not widened: the fit's own leave-one-out z-scores agree with its
    too-small noise (their RMS 0.79-1.13, median 1.02, in those races; widened by it the
    same runs fall inside as often: prediction_coverage.py --loo), so nothing in one
    setting's runs says by how much."""
    if len({(r.model, r.reward) for r in records}) != 1:
        return None
    source = getattr(sur, "noise_source", None)
    if not callable(source) or source(reward) not in ("inferred", "identical replicates"):
        return None
    return ("one fitted setting without seed replicates (its run noise is the fit's guess; --seeds 2 measures it, "
            "--noise-sd states a known one)")


def extrapolated(records: Sequence[RunRecord], model: str, reward: str, budget: float) -> str | None:
    """What makes a prediction for the setting at ``budget`` a guess (None: nothing; two
    causes joined by "and").

    * A budget more than :data:`BUDGET_REACH` times every fitted run's, or less than every
      one's over it: the level there is the prior's, which outcome standardisation scales
      to the runs' spread (one-setting races' anchors at 10x their pilots' budget: median
      |z| 10.9, benchmarks/prediction_coverage.py --settings, docs/schema.md).
    * A setting without runs of its own (:func:`unanchored`) whose reward system has no
      fitted run, or whose policy's size lies outside the fitted policies' sizes, or that
      borrows its reward's level from other sizes (no fitted runs of its reward at sizes on
      both sides of its own) while the fitted settings cannot tell a policy's effect from a
      reward's: no fitted policy ran two reward systems, or no reward system ran at two
      policies (fitted 1.5b/sparse and 3b/prm say nothing of 1.5b/prm but their sum).

    Measured on the sim (benchmarks/prediction_coverage.py --transfer, 5 worlds x 8
    repetitions, docs/schema.md): inside mean +- 1.645 std were 0.96 of the unmarked
    predictions' runs and 0.42 of the marked ones'; with the last clause missing, 0.16 of
    the runs of crossed settings fitted on two confounded settings, unmarked."""
    causes = [unanchored(records, model, reward)]
    if budget > BUDGET_REACH * max(r.budget for r in records):
        causes.append("no fitted run reached its budget")
    elif budget * BUDGET_REACH < min(r.budget for r in records):
        # The mirror: 100x below 16 pilots at 1e16 the predictions were unmarked, and the runs
        # came in 1.2-2.6 sd below them (a helper's review, 12-05).
        causes.append("no fitted run came down to its budget")
    return " and ".join(c for c in causes if c) or None


def unanchored(records: Sequence[RunRecord], model: str, reward: str) -> str | None:
    """What leaves a setting's level untied to the fitted runs ``records`` (None: nothing);
    :func:`extrapolated` says when."""
    fitted = {(r.model, r.reward) for r in records}
    if (model, reward) in fitted:
        return None
    if reward not in {r for _, r in fitted}:
        return "its reward system has no fitted run"
    size = get_model(model).num_parameters
    sizes = [get_model(m).num_parameters for m, _ in fitted]
    if not min(sizes) <= size <= max(sizes):
        return "its policy lies outside the fitted policies' sizes"
    own = [get_model(m).num_parameters for m, r in fitted if r == reward]
    if min(own) <= size <= max(own):
        return None
    per_model, per_reward = Counter(m for m, _ in fitted), Counter(r for _, r in fitted)
    if max(per_model.values()) < 2 or max(per_reward.values()) < 2:
        return "the fitted settings cannot tell a policy's effect from a reward's"
    return None
