"""Calibrating a policy's capacities in a world from real runs.

A world's ``[models.NAME]`` entry gives each target a ``base`` (metric before RL), a
``ceiling`` and a ``scale`` (``runners.sim.dynamics``). For a policy that real runs have
measured (the tiny world's ``trl`` records carry the base policy's metrics beside the
trained one's), ``base`` is a measurement and (ceiling, scale) is a fit: the pair whose
simulated gains, run by run with the levers each run really had (prompts, G, K, mu from
its plan), come closest to the measured gains.

The fit is on gains (``metric - metric_base``), so a reward whose native metric gives
partial credit is compared on what training added, and a Huber loss keeps a collapsed
run (a real GRPO failure the mechanism has no term for) from dragging the curve. The
native capacity is fitted first: the native skill drives the tied-group share of every
target. Ceiling and scale trade off where the runs sit low on the curve (only the slope
``(ceiling - base) / scale`` is then identified), so the result carries the loss at the
optimum and the range of ceilings within ``tolerance`` of it.

Pure: arrays in, capacities out; no files (``benchmarks/calibrate_tiny.py`` reads a
store and prints the table).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from planner.schema import TARGETS
from runners.sim.dynamics import base_metrics, learn
from runners.sim.world import Capacity, World

if TYPE_CHECKING:
    from planner.schema import RunRecord

__all__ = [
    "Calibration",
    "MeasuredRuns",
    "TargetFit",
    "calibrate",
    "huber",
    "measured_base",
    "measured_runs",
    "prompts_trained",
    "simulated_gains",
    "with_capacities",
    "world_text_with",
]


@dataclass(frozen=True)
class MeasuredRuns:
    """Real runs of one policy: levers and metrics, one entry per run (shape ``(n,)``).

    ``metrics[t]`` / ``base[t]``: target ``t`` after training and of the base policy on
    the same evaluation prompts (a run's own paired base).
    """

    reward: np.ndarray  # (n,) str
    budget: np.ndarray  # (n,) FLOPs the run was planned for
    prompts: np.ndarray  # (n,) N, prompts trained on
    generated: np.ndarray  # (n,) G, completions generated per prompt
    kept: np.ndarray  # (n,) K, completions kept per prompt
    iterations: np.ndarray  # (n,) mu, update passes per batch
    metrics: Mapping[str, np.ndarray]
    base: Mapping[str, np.ndarray]

    def __len__(self) -> int:
        return int(np.shape(self.reward)[0])

    def subset(self, mask: np.ndarray) -> MeasuredRuns:
        return MeasuredRuns(
            reward=self.reward[mask], budget=self.budget[mask], prompts=self.prompts[mask], generated=self.generated[mask],
            kept=self.kept[mask], iterations=self.iterations[mask],
            metrics={t: v[mask] for t, v in self.metrics.items()},
            base={t: v[mask] for t, v in self.base.items()},
        )


@dataclass(frozen=True)
class TargetFit:
    """One target's calibration: the capacity, its Huber loss per run, the residual
    standard deviation of the gains, and the ceilings whose best scale is within the
    tolerance of the optimum (``ceiling_range``: how well the data pin the ceiling)."""

    capacity: Capacity
    loss: float
    residual_sd: float
    ceiling_range: tuple[float, float]
    observed_gain: float  # median measured gain
    predicted_gain: float  # median simulated gain at the fitted capacity


@dataclass(frozen=True)
class Calibration:
    """One model's calibration from ``runs`` real runs: a fit per target; :meth:`capacities`
    gives each target's fitted capacity."""
    model: str
    runs: int
    targets: dict[str, TargetFit]

    def capacities(self) -> dict[str, Capacity]:
        return {t: f.capacity for t, f in self.targets.items()}


def measured_runs(records: Iterable[RunRecord]) -> dict[str, MeasuredRuns]:
    """Real (not simulated) records with every target and its base measured, per model,
    with the levers each run had: its plan's G, K and mu, and the prompts it trained on."""
    by_model: dict[str, list[RunRecord]] = {}
    for r in records:
        values = [getattr(r.metrics, k) for t in TARGETS for k in (t, f"{t}_base")]
        if not r.simulated and r.status == "ok" and None not in values:
            by_model.setdefault(r.model, []).append(r)
    return {
        model: MeasuredRuns(
            reward=np.array([r.reward for r in recs]),
            budget=np.array([r.budget for r in recs], dtype=float),
            prompts=np.array([prompts_trained(r) for r in recs], dtype=float),
            generated=np.array([r.plan.completions_per_prompt for r in recs], dtype=float),
            kept=np.array([r.plan.completions_kept for r in recs], dtype=float),
            iterations=np.array([r.plan.num_iterations for r in recs], dtype=float),
            metrics={t: np.array([getattr(r.metrics, t) for r in recs]) for t in TARGETS},
            base={t: np.array([getattr(r.metrics, f"{t}_base") for r in recs]) for t in TARGETS},
        )
        for model, recs in sorted(by_model.items())
    }


def prompts_trained(record: RunRecord) -> int:
    """Prompts a run trained on: the sum of its card's round sizes where the engine
    recorded them (the ``trl`` engine's budget guard sizes rounds from the metered cost,
    so a run lands a few prompts off its plan, up to 7% on the tiny campaign), else the
    plan's ``total_prompts``."""
    rounds = (record.card.model_extra or {}).get("rounds")
    if isinstance(rounds, list) and rounds and all(isinstance(n, int) and n > 0 for n in rounds):
        return sum(rounds)
    return record.plan.total_prompts


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    """Huber loss: ``r**2 / 2`` inside ``|r| <= delta``, ``delta (|r| - delta / 2)`` outside."""
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def measured_base(world: World, runs: MeasuredRuns) -> dict[str, float]:
    """Base-policy capacity per target: the median of the runs' paired base metrics.

    ``native`` of a reward with partial credit (``native_lift`` > 0) is the training
    reward, not the answer rate the world's ``base`` means, so it is read from the runs
    of lift-0 rewards; with none, each run's base is mapped back through its reward's
    lift, ``m = (native - lift) / (1 - lift)``.
    """
    out = {t: float(np.median(runs.base[t])) for t in TARGETS if t != "native"}
    lift = np.array([world.reward(str(r)).native_lift for r in runs.reward])
    plain = lift == 0.0
    if plain.any():
        out["native"] = float(np.median(runs.base["native"][plain]))
    else:
        out["native"] = float(np.median((runs.base["native"] - lift) / (1.0 - lift)))
    return out


def with_capacities(world: World, model: str, caps: Mapping[str, Capacity]) -> World:
    """``world`` with ``model``'s capacities for the targets in ``caps`` replaced."""
    models = dict(world.models)
    models[model] = {**world.models.get(model, {}), **caps}
    return dataclasses.replace(world, models=models)


def simulated_gains(world: World, model: str, runs: MeasuredRuns, target: str) -> np.ndarray:
    """Simulated gain of ``target`` for every run, shape ``(..., n)``: each reward's runs
    in one call. A capacity whose ``scale`` is an array of shape ``(s, 1)`` (how
    :func:`calibrate` scores a whole scale grid at once) gives ``(s, n)``."""
    parts = {}
    for reward in np.unique(runs.reward):
        m = runs.reward == reward
        after = learn(world, model, str(reward), runs.prompts[m], runs.generated[m], runs.kept[m],
                      runs.iterations[m])[target]
        parts[str(reward)] = (m, after - base_metrics(world, model, str(reward))[target])
    lead = np.broadcast_shapes(*(np.shape(g)[:-1] for _, g in parts.values()))
    out = np.empty((*lead, len(runs)))
    for m, g in parts.values():
        out[..., m] = g
    return out


def calibrate(
    world: World,
    model: str,
    runs: MeasuredRuns,
    *,
    delta: float = 0.02,
    ceilings: int = 40,
    scales: np.ndarray | None = None,
    tolerance: float = 0.05,
    on_target: Callable[[str], None] | None = None,
) -> Calibration:
    """Fit ``model``'s capacities in ``world`` to measured runs (see the module docstring).

    Grid search: ``ceilings`` values from just above the base to 1, times ``scales``
    (default ``10**[0, 7]`` in 141 steps), per target, native first. ``delta`` is the
    Huber threshold in metric units (about two evaluation-noise sd of a tiny run);
    ``tolerance`` the relative loss excess that still counts as "as good" for
    ``ceiling_range``. ``on_target(t)`` is called as each target's fit ends (progress).
    Raises ``ValueError`` on fewer than 3 runs.
    """
    if len(runs) < 3:
        raise ValueError(f"calibrate: {model} has {len(runs)} runs; at least 3 are needed")
    scales = np.logspace(0, 7, 141) if scales is None else np.asarray(scales, dtype=float)
    base = measured_base(world, runs)
    for t, b in base.items():
        if b < 0.0:  # only a native base read back through a lift can fall below 0
            raise ValueError(f"calibrate: {model}'s native base, read through the world's native_lift from "
                             f"runs of partial-credit rewards only, is {b:.3f}: their base reward sits below "
                             "the lift; add runs with a rule reward (sparse) to measure it")
        if not 0.0 <= b < 1.0:
            raise ValueError(f"calibrate: {model}'s measured base {t} is {b:.3f}: a world needs a base in "
                             "[0, 1) (nothing left to learn at 1); evaluate that target on harder prompts")
    fitted: dict[str, Capacity] = {}
    fits: dict[str, TargetFit] = {}
    # A policy the world lacks starts from a placeholder; only native's matters (it sets
    # the tied-group share while the others are fitted) and it is fitted first.
    start = world.models.get(model, {})
    current = with_capacities(world, model, {
        t: Capacity(base=base[t], ceiling=max(start[t].ceiling, base[t]) if t in start else min(1.0, base[t] + 0.1),
                    scale=start[t].scale if t in start else 1000.0)
        for t in TARGETS})
    for t in ("native", *[x for x in TARGETS if x != "native"]):
        observed = runs.metrics[t] - runs.base[t]
        # Just above the base, and never above 1 (a base past 0.99 left a grid of ceilings
        # > 1, which the fit could pick and no world file accepts).
        grid = np.linspace(min(base[t] + 0.01, (base[t] + 1.0) / 2), 1.0, ceilings)
        loss = np.full((grid.size, scales.size), np.inf)
        for i, c in enumerate(grid):  # every scale at once: learn() broadcasts over the capacity
            w = with_capacities(current, model, {t: Capacity(base=base[t], ceiling=float(c), scale=scales[:, None])})  # type: ignore[arg-type]
            loss[i] = np.mean(huber(simulated_gains(w, model, runs, t) - observed, delta), axis=-1)
        i, j = (int(k) for k in np.unravel_index(int(np.argmin(loss)), loss.shape))
        best = Capacity(base=base[t], ceiling=float(grid[i]), scale=float(scales[j]))
        current = with_capacities(current, model, {t: best})
        pred = simulated_gains(current, model, runs, t)
        near = grid[loss.min(axis=1) <= loss[i, j] * (1.0 + tolerance) + 1e-12]
        fitted[t] = best
        fits[t] = TargetFit(
            capacity=best, loss=float(loss[i, j]),
            residual_sd=float(np.std(observed - pred, ddof=1)) if len(runs) > 1 else float("nan"),
            ceiling_range=(float(near.min()), float(near.max())),
            observed_gain=float(np.median(observed)), predicted_gain=float(np.median(pred)),
        )
        if on_target is not None:
            on_target(t)
    return Calibration(model=model, runs=len(runs), targets={t: fits[t] for t in TARGETS})


def _header(model: str) -> str:
    bare = all(ch.isalnum() or ch in "-_" for ch in model)
    return f"[models.{model}]" if bare else f'[models."{model}"]'


def _table_key(line: str) -> tuple[str, ...] | None:
    """The key path of a ``[table]`` header line (any spelling: quoted parts, spaces, a
    trailing comment), or None for any other line."""
    m = re.match(r"""^\s*(\[\[?)((?:[^\]"']|"[^"]*"|'[^']*')+)\]\]?\s*(?:#.*)?$""", line)
    if m is None:
        return None
    parts = re.findall(r"""\s*("[^"]*"|'[^']*'|[^."'\s]+)\s*(?:\.|$)""", m.group(2))
    key = tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)
    return key if m.group(1) == "[" else ("[[array]]", *key)  # an array of tables ends a table too


def world_text_with(text: str, calibrations: Mapping[str, Calibration], note: str, name: str) -> str:
    """A world file's text renamed ``name`` (records name their world) with each
    calibrated policy's ``[models.NAME]`` table replaced (or added at the end); every other
    line kept as it was. ``note`` becomes each new table's ``notes``. The caller validates
    the result by loading it (and checks the name took)."""
    drop = {("models", m) for m in calibrations}
    kept: list[str] = []
    skipping = False
    table: tuple[str, ...] | None = ()
    for line in text.splitlines():
        key = _table_key(line)
        if key is not None:
            # Its sub-tables too ([models.NAME.native]): left behind they redefine the new table.
            table, skipping = key, key[:2] in drop
        if table == ("world",) and re.match(r"""^\s*(name|"name"|'name')\s*=""", line):
            line = f"name = {_toml_string(name)}"
        if not skipping:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    for model, cal in calibrations.items():
        kept += ["", _header(model), f"notes = {_toml_string(note)}"]
        for t, f in cal.targets.items():
            c = f.capacity
            kept.append(f"{t} = {{ base = {c.base:.4f}, ceiling = {c.ceiling:.4f}, scale = {c.scale:.6g} }}"
                        f"  # ceilings within 5%: {f.ceiling_range[0]:.2f}-{f.ceiling_range[1]:.2f}")
    return "\n".join(kept) + "\n"


def _toml_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
