"""From pilot records to training arrays: features, targets and replicate noise.

Records are read by duck typing (``surrogate`` imports neither ``planner`` nor
``runners``): either objects with the attributes of ``planner.schema.RunRecord``
(``model``, ``model_params``, ``reward``, ``budget``, ``rho_planned``, ``seed``, ``status``,
``card.rho``, ``card.flops.total``, ``metrics.<target>``, ``plan.num_iterations``) or flat
mappings with the columns of ``RunRecord.to_row()`` (``rho``, ``flops_total``, ``native``,
``plan_json``, ...).

The feature vector of a run is ``x = (log10 policy params, reward index, rho, log10 FLOPs,
log2 reuse)`` (:data:`FEATURES`); rho and FLOPs are the *metered* values where the record
has them, and *reuse* is the plan's update passes per rollout batch (TRL's
``num_iterations``, mu). The compiler switches mu between neighbouring rho values, and a
run's outcome depends on it beyond what rho says (off-policy reuse of a batch), so a
frontier over rho is several smooth branches, one per mu, interleaved (docs/planner.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "FEATURES",
    "MU",
    "RHO",
    "TARGETS",
    "B",
    "C",
    "Observation",
    "TrainingData",
    "Z",
    "extract",
    "group_replicates",
    "replicate_key",
]

# The metrics a record may carry: planner.schema.TARGETS, restated because this package
# imports nothing of the planner's (a test holds the two equal).
TARGETS: tuple[str, ...] = ("native", "pass1", "judge")

FEATURES: tuple[str, ...] = ("log10_params", "reward", "rho", "log10_budget", "log2_reuse")
Z, C, RHO, B, MU = 0, 1, 2, 3, 4  # column indices of FEATURES

# Pseudo-observations with which a reward system's replicate variance shrinks to the pooled
# one: a reward with a single replicated pair should not fix its own noise level.
_SHRINK_DOF = 4.0
# Below this many replicate degrees of freedom the pooled variance is too noisy to fix the
# likelihood's noise; the GP then infers a homoskedastic noise level instead.
_MIN_DOF = 3


@dataclass(frozen=True)
class Observation:
    """One successful run's target value and where it was measured."""

    model: str
    model_params: float
    reward: str
    rho: float  # metered update fraction
    rho_planned: float
    budget: float  # nominal FLOP budget (identifies replicates)
    flops: float  # metered total FLOPs (the budget feature)
    seed: int
    y: float
    reuse: int = 1  # update passes per rollout batch (TRL num_iterations)


def _get(rec: Any, name: str, default: Any = None) -> Any:
    if isinstance(rec, Mapping):
        return rec.get(name, default)
    return getattr(rec, name, default)


def _num(v: Any) -> float:
    """``v`` as a float; NaN where it is none (None, a string that is no number), so that
    :func:`_check_observation` names the record instead of a bare TypeError naming none."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _observation(rec: Any, target: str) -> Observation | None:
    if _get(rec, "status", "ok") != "ok":
        return None
    if isinstance(rec, Mapping):
        y, rho, flops = rec.get(target), rec.get("rho"), rec.get("flops_total")
    else:
        y = getattr(rec.metrics, target, None)
        rho, flops = rec.card.rho, rec.card.flops.total
    if not math.isfinite(y := _num(y)):  # no value of the target: not an observation
        return None
    budget = _num(_get(rec, "budget"))
    rho_planned = _num(_get(rec, "rho_planned", rho))
    obs = Observation(
        model=str(_get(rec, "model")),
        model_params=_num(_get(rec, "model_params")),
        reward=str(_get(rec, "reward")),
        rho=_num(rho if rho is not None else rho_planned),
        rho_planned=rho_planned,
        budget=budget,
        flops=_num(flops) if flops else budget,
        seed=int(seed) if math.isfinite(seed := _num(_get(rec, "seed", 0))) else -1,  # -1: refused by name
        y=float(y),
        reuse=_reuse(rec),
    )
    _check_observation(obs, _get(rec, "run_id"))
    return obs


def _check_observation(o: Observation, run_id: Any) -> None:
    """A record whose features cannot be encoded is refused by name: the GP would fail on
    it with a bare ``math domain error`` or botorch's NaN complaint, naming no run."""
    for field, value, ok in (
        ("model_params", o.model_params, 0 < o.model_params < math.inf),
        ("budget", o.budget, 0 < o.budget < math.inf),
        ("flops_total", o.flops, 0 < o.flops < math.inf),
        ("rho", o.rho, 0 <= o.rho <= 1),
        ("rho_planned", o.rho_planned, 0 <= o.rho_planned <= 1),
        ("num_iterations", o.reuse, o.reuse >= 1),
        ("seed", o.seed, o.seed >= 0),
    ):
        if not ok:
            raise ValueError(
                f"record {run_id or '(no run_id)'}: {field} = {value!r} cannot be a feature "
                "(a corrupt record: check it with `runners card`, or leave it out)"
            )


def _reuse(rec: Any) -> int:
    """The run's update passes per batch: ``plan.num_iterations``, a ``num_iterations``
    column, or the ``plan_json`` column of a flat row; 1 where the record has none."""
    if isinstance(rec, Mapping):
        if rec.get("num_iterations") is not None:
            n = _num(rec["num_iterations"])
        elif raw := rec.get("plan_json"):
            import json

            try:
                n = _num(json.loads(raw).get("num_iterations", 1))
            except (ValueError, AttributeError):  # not JSON, or not an object
                n = math.nan
        else:
            return 1
        return int(n) if math.isfinite(n) else 0  # 0: refused by name in _check_observation
    return int(getattr(getattr(rec, "plan", None), "num_iterations", 1) or 1)


def extract(records: Iterable[Any], target: str) -> list[Observation]:
    """Successful runs that measured ``target``; everything else is skipped. A run seen
    twice counts once: two copies of one run are not two replicates, and would make the
    replicate noise estimate collapse to zero. One run is one id, and also one plan
    without its request (``rho_target``) and one seed under two ids (stores before 12-05
    hold such twins, run again under another target's or request's id with the same
    numbers). Rows without a plan or a seed are keyed by run id only; two plans whose rho
    agrees to 4 digits (qwen2.5-7b sparse at 1e16, mu 2 and 3) are two runs."""
    out = []
    seen: set[Any] = set()
    for rec in records:
        rid = _get(rec, "run_id")
        if rid is not None and rid in seen:
            continue
        obs = _observation(rec, target)
        if obs is None:
            continue
        plan, seed = _get(rec, "plan"), _get(rec, "seed")
        twin = None
        if hasattr(plan, "model_dump_json") and seed is not None:
            twin = (plan.model_dump_json(exclude={"rho_target"}), seed)
            if twin in seen:
                continue
        out.append(obs)
        seen.update(k for k in (twin, rid) if k is not None)
    return out


@dataclass(frozen=True)
class TrainingData:
    """Arrays the GP trains on.

    Attributes:
        X: ``(n, 5)`` features (:data:`FEATURES`), the reward column an index into ``rewards``.
        y: ``(n,)`` targets (replicate means where runs were averaged).
        yvar: ``(n,)`` observation-noise variance of each ``y``, or None to infer it.
        counts: ``(n,)`` runs behind each row.
        rewards: the category order of the reward column.
        noise_dof: replicate degrees of freedom behind ``yvar`` (0 when inferred).
        identical_rewards: reward systems whose seed replicates all agreed (within the
            conditioning floor): they measured no noise and are not in ``noise_dof``.
        stated_rewards: reward systems whose ``yvar`` is mostly the stated noise: fewer
            than ``_MIN_DOF`` replicate degrees of freedom of their own (which shrink toward it).
        borrowed_rewards: reward systems stated nowhere with as few: their ``yvar`` is mostly
            the others' (pooled replicates where there are any, else the mean of the stated
            variances).
    """

    X: NDArray[np.float64]
    y: NDArray[np.float64]
    yvar: NDArray[np.float64] | None
    counts: NDArray[np.int64]
    rewards: tuple[str, ...]
    noise_dof: int = 0
    identical_rewards: tuple[str, ...] = ()
    stated_rewards: tuple[str, ...] = ()
    borrowed_rewards: tuple[str, ...] = ()


def _feature(o: Observation, rewards: Sequence[str], rho: float, flops: float) -> list[float]:
    return [math.log10(o.model_params), float(rewards.index(o.reward)), rho, math.log10(flops), math.log2(o.reuse)]


def replicate_key(o: Observation) -> tuple[str, str, float, float]:
    """What seed replicates share: (model, reward, planned rho, nominal budget)."""
    return (o.model, o.reward, round(o.rho_planned, 4), o.budget)


def group_replicates(
    obs: Sequence[Observation], rewards: Sequence[str], stated: Mapping[str, float] | None = None
) -> TrainingData:
    """Average seed replicates and estimate their noise.

    Replicates share (model, reward, planned rho, nominal budget). A reward system whose
    replicates all agree (within the conditioning floor) measured no noise and is left out
    of the estimate (``identical_rewards``). When the others carry at least ``_MIN_DOF``
    degrees of freedom in total, each group becomes one row whose ``yvar`` is the pooled
    within-group variance (per reward system, shrunk toward the overall pool) divided by
    the group size; otherwise every run is its own row and ``yvar`` is None (the fit infers
    the noise).

    ``stated``: reward system -> one run's noise *variance*, known from elsewhere (earlier
    campaigns, the eval set's binomial error). With it every group is one row at any
    replicate count: a reward system's own replicates shrink toward its stated variance
    (``_SHRINK_DOF`` pseudo-observations of it, as toward the pool without one), one with
    none takes the stated value (``stated_rewards``), and one stated nowhere the pooled
    replicates' or, failing those, the stated values' mean (``borrowed_rewards``).
    """
    missing = sorted({o.reward for o in obs} - set(rewards))
    if missing:
        raise ValueError(f"rewards: the category order lacks {missing} that the observations carry; list every reward system")
    groups: dict[tuple[str, str, float, float], list[Observation]] = {}
    for o in obs:
        groups.setdefault(replicate_key(o), []).append(o)
    all_y = np.array([o.y for o in obs], dtype=float)
    floor = max(1e-8, 1e-6 * float(all_y.var())) if len(obs) else 1e-8  # keeps the noise matrix well conditioned
    # Within-group sums of squares and degrees of freedom, per reward system.
    ss: dict[str, float] = {}
    df: dict[str, int] = {}
    group_ss: dict[tuple[str, str, float, float], float] = {}  # each group's own, too
    for key, g in groups.items():
        if len(g) > 1:
            ys = np.array([o.y for o in g])
            group_ss[key] = float(((ys - ys.mean()) ** 2).sum())
            ss[key[1]] = ss.get(key[1], 0.0) + group_ss[key]
            df[key[1]] = df.get(key[1], 0) + len(g) - 1
    # Replicates that all agree, to the last digit or within the floor (a metric that rounds
    # every run alike: pass@1 on a few problems, a policy that never scores) say the noise is
    # below the metric's resolution, not that it is zero: fixed at the floor, it made the GP
    # interpolate every run. Such a reward system takes the others' pooled noise, or the
    # fit's where none is left.
    identical = tuple(r for r in rewards if r in df and ss[r] <= floor * df[r])
    for r in identical:
        del ss[r], df[r]
    dof = sum(df.values())
    if not stated and dof < _MIN_DOF:
        # Each run its own row, so that replicates which differ inform the inferred noise;
        # but a group of identical replicates is one row: as separate rows, copies of one
        # value read as evidence of no noise, and the fit's level fell with every copy (a
        # race's runs, each duplicated: noise sd 0.0094 -> 0.0012, P 0.80 -> 0.99).
        # A group agrees as a reward system does (within the floor), whether or not the
        # other groups of its reward system do.
        agree = {k for k, g in groups.items()
                 if g[0].reward in identical or (k in group_ss and group_ss[k] <= floor * (len(g) - 1))}
        runs = [([o], o.rho, o.flops) for o in obs if replicate_key(o) not in agree]
        runs += [(g, float(np.mean([o.rho for o in g])), float(np.mean([o.flops for o in g])))
                 for k, g in groups.items() if k in agree]
        X = np.array([_feature(g[0], rewards, rho, flops) for g, rho, flops in runs], dtype=float)
        y = np.array([float(np.mean([o.y for o in g])) for g, _, _ in runs], dtype=float)
        return TrainingData(X.reshape(-1, len(FEATURES)), y, None, np.array([len(g) for g, _, _ in runs], dtype=np.int64),
                            tuple(rewards), identical_rewards=identical)

    # Each reward system's replicate variance shrinks toward its stated one, else toward
    # the pool of all replicates (without any, the stated values' mean).
    toward = dict(stated or {})
    pooled = sum(ss.values()) / dof if dof else float(np.mean(list(toward.values())))
    rows, ys_out, var_out, counts = [], [], [], []
    for (_, reward, _, _), g in groups.items():
        var_r = (ss.get(reward, 0.0) + _SHRINK_DOF * toward.get(reward, pooled)) / (df.get(reward, 0) + _SHRINK_DOF)
        rows.append(_feature(g[0], rewards, float(np.mean([o.rho for o in g])), float(np.mean([o.flops for o in g]))))
        ys_out.append(float(np.mean([o.y for o in g])))
        var_out.append(max(var_r, floor) / len(g))
        counts.append(len(g))
    # With a statement, below _MIN_DOF of its own a reward system's value is mostly the
    # statement (stated_rewards) or the others' (borrowed_rewards).
    few = {k[1] for k in groups if df.get(k[1], 0) < _MIN_DOF} if stated else set()
    return TrainingData(
        np.array(rows, dtype=float).reshape(-1, len(FEATURES)),
        np.array(ys_out, dtype=float),
        np.array(var_out, dtype=float),
        np.array(counts, dtype=np.int64),
        tuple(rewards),
        noise_dof=dof,
        identical_rewards=identical,
        stated_rewards=tuple(r for r in rewards if r in few and r in toward),
        borrowed_rewards=tuple(r for r in rewards if r in few and r not in toward),
    )
