"""Report data: records from the pilot store, one surrogate fit per target, frontiers and
regime calls per setting, leave-one-out diagnostics and cross-target disagreement.

Everything the figures and renderers show is computed here once, so the markdown, the
HTML and ``regimes.json`` agree. The surrogate (``surrogate.FrontierSurrogate``) and the
regime logic (``planner.regime``) are used through their public APIs; this module only
decides *which* settings to evaluate and on which rho grid. Heavy imports (torch via
``surrogate``) stay inside functions.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import ConfigError
from planner.regime import RegimeCall, shares_for_rho
from planner.registry import get_model, get_reward
from planner.report.race_summary import read_race, stated_noise
from planner.schema import TARGETS, RunRecord
from planner.threads import torch_threads

__all__ = [
    "Disagreement",
    "Frontier",
    "ReportData",
    "RunNoise",
    "SettingAt",
    "TargetFit",
    "assemble",
    "base_score",
    "check_campaign_dir",
    "disagreements",
    "load_records",
    "mixed_weights",
    "runs_at",
    "unique_slugs",
]

GRID_POINTS = 61
N_SAMPLES = 256
LEVEL = 0.9

StepFn = Callable[[str], None]


@dataclass(frozen=True, order=True)
class SettingAt:
    """A :class:`planner.frontier.Setting` (policy model, reward system) at one budget: the
    report's unit, since a campaign may hold runs at several budgets. The target is carried
    next to it."""

    model: str
    reward: str
    budget: float

    @property
    def label(self) -> str:
        # Enough digits to tell budgets apart that a campaign may hold (1e16 and 1.04e16).
        return f"{self.model} / {self.reward} / {self.budget:.4g}"

    @property
    def digest(self) -> str:
        """8 hex digits of the exact setting (names and budget): a stable tag that tells
        apart settings whose slugs read alike."""
        return hashlib.sha256(f"{self.model}\0{self.reward}\0{self.budget!r}".encode()).hexdigest()[:8]

    @property
    def slug(self) -> str:
        """File-name-safe id (figure names); budgets a few % apart get names of their own.
        Names with characters outside [A-Za-z0-9._-] carry :attr:`digest` too: their "_"
        stands for anything (模型 and 样本 both read "_", org/m and org:m "org_m"), so two
        settings wrote one figure file. :func:`unique_slugs` handles names that clash only
        side by side."""
        names = f"{self.model}-{self.reward}"
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", names)
        slug = f"{safe}-b{self.budget:.3e}".replace("+", "")
        return slug if safe == names else f"{slug}-{self.digest}"


def unique_slugs(settings: Iterable[SettingAt]) -> dict[SettingAt, str]:
    """Each setting's :attr:`SettingAt.slug`, with its :attr:`SettingAt.digest` added where
    two of ``settings`` read alike, case folded as a macOS file system does: "a-b"/"c" and
    "a"/"b-c" do, and so do budgets closer than the slug's 4 digits. Names alone in a
    report keep their plain slugs."""
    slugs = {s: s.slug for s in set(settings)}
    count = Counter(v.casefold() for v in slugs.values())
    return {s: v if count[v.casefold()] == 1 else f"{v}-{s.digest}" for s, v in slugs.items()}


@dataclass(frozen=True)
class Frontier:
    """One setting's frontier under one target: posterior mean/std on a rho grid and the
    regime call from joint posterior samples."""

    setting: SettingAt
    target: str
    grid: NDArray[np.float64]
    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    call: RegimeCall
    reward_fraction: float  # reward / (search + reward) of the non-learning FLOPs
    # (G, 3) shares the call labelled the grid by (the compiled plans' at the budget); None:
    # the allocation at each grid rho itself
    shares: NDArray[np.float64] | None = None
    # (G,) update passes per batch (mu) of the plan each grid rho compiles to, one of the
    # surrogate's inputs; None: not known (one pass assumed)
    reuse: NDArray[np.float64] | None = None

    @property
    def grid_shares(self) -> NDArray[np.float64]:
        """(search, learning, reward) shares ``(G, 3)`` that label the grid's regimes."""
        return shares_for_rho(self.grid, self.reward_fraction) if self.shares is None else self.shares

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.setting.model,
            "reward": self.setting.reward,
            "budget": self.setting.budget,
            "target": self.target,
            **self.call.to_dict(),
            "predicted_at_rho_star": self.predicted_at_rho_star,
        }

    @property
    def predicted_at_rho_star(self) -> float:
        """Posterior mean at the call's rho* (not the frontier's maximum, which may lie in
        another regime or off the measured allocations)."""
        return float(np.interp(self.call.rho_star, self.grid, self.mean))


@dataclass(frozen=True)
class RunNoise:
    """One run's noise in a target under one reward system, as the fit used it: ``sd``,
    where it came from (``source``: the surrogate's ``noise_source``) and the seed-replicate
    degrees of freedom behind it (``dof``, 0 unless ``source`` is ``replicates``)."""

    sd: float
    source: str
    dof: int

    def to_dict(self) -> dict[str, Any]:
        return {"sd": self.sd, "source": self.source, "replicate_dof": self.dof}


@dataclass
class TargetFit:
    """The surrogate of one target, or why there is none (``error``)."""

    target: str
    n_obs: int = 0
    frontiers: dict[SettingAt, Frontier] = field(default_factory=dict)
    loo: Any = None  # surrogate.LOOResult
    fit_seconds: float = 0.0
    error: str | None = None
    loo_error: str | None = None
    noise: dict[str, RunNoise] = field(default_factory=dict)  # by reward system with runs of this target

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Disagreement:
    """rho* of one setting under every fitted target, and the target pairs whose credible
    intervals do not overlap (they disagree by more than the uncertainty)."""

    setting: SettingAt
    calls: dict[str, RegimeCall]
    flagged: tuple[tuple[str, str], ...]

    @property
    def regimes_differ(self) -> bool:
        return len({c.regime for c in self.calls.values()}) > 1


@dataclass
class ReportData:
    """Everything a report shows, read from one pilot store: its ok, failed and corrupt
    records, each setting at its budgets, the surrogate's fit per target, the race's
    regimes.json when there is one, and notes and warnings."""
    data_dir: Path
    target: str
    ok: list[RunRecord]
    failed: list[RunRecord]
    corrupt: list[tuple[str, str]]
    settings: list[SettingAt] = field(default_factory=list)
    fits: dict[str, TargetFit] = field(default_factory=dict)
    race: dict[str, Any] | None = None  # DIR/regimes.json of `planner race`, when there is one
    notes: list[str] = field(default_factory=list)
    mixed: list[str] = field(default_factory=list)  # mixed_weights: the fits are wrong, not only noisy

    @property
    def records(self) -> list[RunRecord]:
        return [*self.ok, *self.failed]

    @property
    def primary(self) -> TargetFit | None:
        return self.fits.get(self.target)

    @property
    def engines(self) -> list[str]:
        return sorted({r.engine for r in self.records})

    @property
    def engine_text(self) -> str:
        """'simulated', 'real' or 'mixed', with engine names: stated on every figure."""
        sims = {r.simulated for r in self.records}
        kind = "none" if not sims else "mixed real + SIMULATED" if len(sims) > 1 else (
            "SIMULATED" if sims == {True} else "real"
        )
        return f"{kind} ({', '.join(self.engines) or 'no engine'})"

    @property
    def software(self) -> dict[str, dict[str, int]]:
        """``{library: {version: runs}}`` of the ok runs (:func:`planner.versions.software_of`)."""
        from planner.versions import software_of

        return software_of(self.ok)

    @property
    def software_text(self) -> str:
        """``race-planner 0.1.0, trl 1.16.0, ...``: what the runs were made with (every
        version of a library that changed between them); empty where no card says."""
        return ", ".join(f"{name} {' / '.join(v)}" for name, v in self.software.items())

    @property
    def data_text(self) -> str:
        """The data directory as the report shows it (its bytes that are not UTF-8 escaped)."""
        from planner.files import shown_path

        return shown_path(self.data_dir)

    @property
    def source_text(self) -> str:
        # Attempts, said so: the summary above counts failed *runs* (a run tried twice is one).
        return f"{self.data_text} ({len(self.ok)} ok runs, {len(self.failed)} failed attempts)"

    @property
    def empty(self) -> bool:
        return not self.records

    @property
    def all_failed(self) -> bool:
        return bool(self.failed) and not self.ok


def check_campaign_dir(data_dir: str | Path) -> None:
    """A one-line :class:`ConfigError` unless ``data_dir`` is a directory (a pilot store)."""
    if not Path(data_dir).is_dir():
        what = f"{str(data_dir)!r} is a file" if Path(data_dir).is_file() else f"no such directory {str(data_dir)!r}"
        raise ConfigError(f"data: {what}; pass the --data directory of a campaign")


def load_records(data_dir: Path) -> tuple[list[RunRecord], list[RunRecord], list[tuple[str, str]]]:
    """ok records, failed attempts and corrupt files (name, reason) of a pilot store."""
    from planner.engine import open_store
    from planner.files import shown_path

    check_campaign_dir(data_dir)
    scan = open_store(data_dir).scan(status=None)
    ok = [r for r in scan.records if r.status == "ok"]
    failed = [r for r in scan.records if r.status == "failed"]
    # Shown, not opened: as text a page takes (a reason may quote a link's target path).
    corrupt = [(shown_path(c.path), shown_path(c.reason)) for c in scan.corrupt]
    key = lambda r: (r.model, r.reward, r.budget, r.rho_planned, r.seed, r.run_id, r.attempt)  # noqa: E731
    return sorted(ok, key=key), sorted(failed, key=key), corrupt


def settings_of(records: Iterable[RunRecord]) -> list[SettingAt]:
    return sorted({SettingAt(r.model, r.reward, float(r.budget)) for r in records})


def runs_at(records: Iterable[RunRecord], setting: SettingAt,
            target: str | None = None) -> tuple[list[RunRecord], list[RunRecord]]:
    """The setting's runs at its budget exactly, and at other budgets within
    :func:`planner.frontier.at_budget`'s band, which count as measured there (rho* is held
    to their allocations too). With ``target``, only runs with a value of it: the others
    are not in that target's fit, nor drawn on its frontier."""
    from planner.frontier import at_budget

    mine = [r for r in records if (r.model, r.reward) == (setting.model, setting.reward)
            and (target is None or getattr(r.metrics, target) is not None)]
    exact = [r for r in mine if float(r.budget) == setting.budget]
    near = [r for r in mine if float(r.budget) != setting.budget and at_budget(float(r.budget), setting.budget)]
    return exact, near


def mixed_weights(records: Iterable[RunRecord]) -> list[str]:
    """One line per model (or scorer) whose runs started from more than one set of weights
    (the provenance's ``policy_weights`` / ``scorer_weights``; a store older than the refusal
    of such runs, ``planner.engine.check_same_weights``, can hold both)."""
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for r in records:
        for field_, role in (("policy_weights", "policy"), ("scorer_weights", "scorer")):
            digest = r.provenance.get(field_)
            if isinstance(digest, str):
                name = r.model if role == "policy" else str(r.provenance.get("scorer") or "scorer")
                seen.setdefault((role, name), {}).setdefault(digest, r.run_id)
    return [
        f"The runs of {role} {name} started from {len(d)} different weights ({', '.join(x[:19] for x in sorted(d))}; "
        f"e.g. runs {', '.join(d[x] for x in sorted(d))}): pretrained on different machines or again. The fits "
        "below mix them and answer for neither; keep one store per set of weights."
        for (role, name), d in sorted(seen.items()) if len(d) > 1
    ]


def _fallback_grid(runs: Sequence[RunRecord]) -> NDArray[np.float64]:
    """Observed rho range, padded: for a model that is not in the registry (a real run
    from a config path) the compiler cannot say which rhos the levers reach."""
    rhos = [r.card.rho for r in runs] or [0.5]
    return np.linspace(max(min(rhos) - 0.05, 0.01), min(max(rhos) + 0.05, 0.99), GRID_POINTS)


def _metered_fraction(runs: Sequence[RunRecord]) -> float:
    s = sum(r.card.flops.search for r in runs)
    w = sum(r.card.flops.reward for r in runs)
    return w / (s + w) if s + w > 0 else 0.0


def _frontier(model: Any, setting: SettingAt, target: str, runs: Sequence[RunRecord], seed: int = 0) -> Frontier:
    """The frontier and regime call, computed exactly as ``planner race`` does
    (:mod:`planner.frontier`: same rho grid, shares, sample count, and the race's seed from
    its regimes.json), so the report and the race's own regimes.json agree on the same fit."""
    from planner import frontier as pf

    m, r, b = setting.model, setting.reward, setting.budget
    try:
        grid = pf.rho_grid(m, r)
        frac = pf.reward_fraction(m, r)
        shares = pf.allocation_shares(m, r, grid, budget=b)
    except ConfigError:  # not a registry model: grid and shares from what was metered,
        # the call made as for any other setting (rho* held to measured allocations).
        grid, frac = _fallback_grid(runs), _metered_fraction(runs)
        shares = shares_for_rho(grid, frac)
    call = pf.classify_setting(model, m, r, b, grid=grid, n_samples=N_SAMPLES, seed=seed, level=LEVEL,
                               shares=shares)
    mean, std = model.frontier(m, r, b, grid)
    return Frontier(setting, target, grid, np.asarray(mean), np.asarray(std), call, frac, shares,
                    np.asarray(_reuse_or_one(m, r, grid, b), dtype=float))


def _reuse_or_one(model: str, reward: str, rho: Any, budget: float) -> Any:
    """The surrogate's ``reuse`` plug: the compiler's mu for registry settings, 1 for a
    policy or reward system outside the registry (its runs carry their own mu; a query
    there assumes one pass, as the surrogate does without a plug)."""
    from planner.frontier import reuse_at

    try:
        get_model(model), get_reward(reward)
    except ConfigError:
        return np.ones(np.shape(np.atleast_1d(rho)))
    return reuse_at(model, reward, rho, budget)


def _fit(target: str, ok: Sequence[RunRecord], race: dict[str, Any] | None) -> tuple[Any, TargetFit]:
    import time

    from planner.strategies.base import budget_axis
    from surrogate import FrontierSurrogate

    fit = TargetFit(target)
    fit.n_obs = sum(1 for r in ok if getattr(r.metrics, target) is not None)
    t0 = time.perf_counter()
    try:
        # The race's budget axis (budget_axis over its settings' runs); the same range
        # here keeps the report's calls those of the race.
        span = None
        if race and race.get("pilot_budget"):
            keys = {(e.get("model"), e.get("reward")) for e in race.get("settings", []) if isinstance(e, dict)}
            span = budget_axis(float(race["pilot_budget"]), float(race["budget"]),
                               [r for r in ok if (r.model, r.reward) in keys and getattr(r.metrics, target) is not None])
        # The noise the race was told is in its target's units: the other targets' fits guess theirs.
        stated = stated_noise(race) if race and race.get("target", "native") == target else None
        rewards = sorted({r.reward for r in ok})
        if stated:  # a race's reward system whose runs all failed has nothing here to state it for
            stated = {k: v for k, v in stated.items() if k in rewards} or None
        model = FrontierSurrogate(
            target,
            rewards=rewards,
            models={r.model: r.model_params for r in ok},
            budget_range=span,
            reuse=_reuse_or_one,
            noise_sd=stated,
        ).fit(ok)
    except Exception as exc:  # NotFittedError, numerical failures: report, don't crash
        fit.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, fit
    fit.fit_seconds = time.perf_counter() - t0
    for reward in sorted({r.reward for r in ok if getattr(r.metrics, target) is not None}):
        source = model.noise_source(reward)
        dof = model.replicate_dof(reward) if source == "replicates" else 0
        fit.noise[reward] = RunNoise(math.sqrt(max(model.run_noise_variance(reward), 0.0)), source, dof)
    try:
        fit.loo = model.loo_cv()
    except Exception as exc:  # a diagnostic: its failure leaves one panel out, not the report
        fit.loo_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return model, fit


def assemble(
    data_dir: str | Path,
    target: str = "native",
    *,
    targets: Sequence[str] = TARGETS,
    step: StepFn | None = None,
) -> ReportData:
    """Load a campaign and compute everything the report shows.

    Fits one surrogate per target in ``targets`` (the primary ``target`` first); a target
    with fewer than two measurements gets a ``TargetFit`` with ``error`` set instead.
    ``step(description)`` is called before each long step (progress display).
    """
    if target not in TARGETS:
        raise ConfigError(f"target: unknown target {target!r}; use one of: {', '.join(TARGETS)}")
    say = step or (lambda _msg: None)
    root = Path(data_dir)
    say("loading records")
    ok, failed, corrupt = load_records(root)
    race, note = read_race(root)
    data = ReportData(root, target, ok, failed, corrupt, settings=settings_of(ok), race=race)
    if note:
        data.notes.append(note)
    data.mixed = mixed_weights(ok)
    from planner.engine import mixed_sources

    if mixed := mixed_sources(ok):
        data.notes.append(mixed[0].upper() + mixed[1:])
    from planner.versions import mixed_software

    if mixed := mixed_software(ok):
        data.notes.append(mixed)
    if race is not None:
        # The decision the race made is at its target budget, where there may be no runs
        # at all (pilots are cheaper): evaluate those settings too.
        extra = {SettingAt(e["model"], e["reward"], float(race["budget"])) for e in race["settings"]}
        data.settings = sorted(set(data.settings) | extra)
    if not ok:
        return data
    by_setting = {s: [r for r in ok if SettingAt(r.model, r.reward, float(r.budget)) == s] for s in data.settings}
    known = {(r.model, r.reward) for r in ok}
    order = [target, *(t for t in targets if t != target)]
    import warnings

    # One thread: the GP's matrices are tens of rows, and on a shared 2-core machine spare
    # threads' spinning made each fit ~10x slower (measured: 12 s vs 1.2 s, 16 points).
    with warnings.catch_warnings(), torch_threads(1):
        # Cholesky jitter notices are routine for GPs on few points; they are not for the
        # reader of a report (a fit that truly fails is reported in its TargetFit).
        warnings.simplefilter("ignore")
        _fit_all(data, order, {s: v for s, v in by_setting.items() if (s.model, s.reward) in known}, say)
    return data


def _fit_all(data: ReportData, order: Sequence[str], by_setting: dict[SettingAt, list[RunRecord]],
             say: StepFn) -> None:
    seed = (data.race or {}).get("seed", 0)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else 0
    for t in order:
        say(f"fitting the {t} surrogate")
        model, fit = _fit(t, data.ok, data.race)
        data.fits[t] = fit
        if model is None:
            continue
        say(f"{t} frontiers")
        measured = {(r.model, r.reward) for r in data.ok if getattr(r.metrics, t) is not None}
        for s, runs in by_setting.items():
            if (s.model, s.reward) in measured:
                fit.frontiers[s] = _frontier(model, s, t, runs, seed)


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _optimum(call: RegimeCall) -> tuple[float, float]:
    # Regime-free: the rho_star_ci of two different calls are in different regimes by
    # construction, so only the interval over all regimes measures disagreement.
    return call.optimum_ci or call.rho_star_ci


def disagreements(data: ReportData) -> list[Disagreement]:
    """Per setting, rho* under each fitted target and the pairs whose intervals are disjoint."""
    out = []
    for s in data.settings:
        calls = {t: f.frontiers[s].call for t, f in data.fits.items() if s in f.frontiers}
        if len(calls) < 2:
            continue
        ordered = [t for t in TARGETS if t in calls]
        flagged = tuple(
            (a, b) for a, b in combinations(ordered, 2) if not _overlap(_optimum(calls[a]), _optimum(calls[b]))
        )
        out.append(Disagreement(s, {t: calls[t] for t in ordered}, flagged))
    return out


def base_score(records: Iterable[RunRecord], model: str, reward: str, target: str) -> float | None:
    """The untrained policy's ``target`` for a (model, reward): the median of what its runs
    measured before training (each run evaluates the base policy; one setting's runs agree
    up to evaluation noise), or None where none did. A frontier below it is an allocation
    at which training lost ground."""
    vals = [float(v) for r in records if (r.model, r.reward) == (model, reward)
            and (v := getattr(r.metrics, f"{target}_base", None)) is not None]
    return float(np.median(vals)) if vals else None


def observed(runs: Iterable[RunRecord], target: str) -> list[tuple[float, float, float, list[float]]]:
    """Seed replicates grouped by planned rho: (mean metered rho, mean y, spread, ys)."""
    groups: dict[float, list[RunRecord]] = {}
    for r in runs:
        if getattr(r.metrics, target) is not None:
            groups.setdefault(round(r.rho_planned, 4), []).append(r)
    out = []
    for _, g in sorted(groups.items()):
        ys = [float(getattr(r.metrics, target)) for r in g]
        spread = (max(ys) - min(ys)) / 2 if len(ys) > 1 else 0.0
        rho = float(np.mean([r.card.rho for r in g]))
        out.append((rho, float(np.mean(ys)), spread, ys))
    return out
