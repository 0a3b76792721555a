"""The active RACE loop: ask -> execute -> tell -> decide, until confident or capped.

Engines and the store come in through :mod:`planner.engine` (the planner never imports
``runners``). The loop is resumable: a proposal whose run id (proposal id + seed) is
already in the store is not run again; its record is told to the strategy instead. Caps
count every relevant record in the store, so a resumed race continues its budget rather
than starting a new one.

Stop reasons: ``confident`` (every setting's call is decided: its top regime probability
reached the problem's confidence, or, with an indifference tolerance, the expected loss of
its call fell below it, and the strategy holds none open, as ours does until its
validation runs check it: :func:`~planner.strategies.base.decision_state`; only for
strategies that have a posterior), ``max-runs``,
``max-flops``, ``exhausted`` (the strategy has nothing more to propose).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from planner.engine import (
    Engine,
    RecordStore,
    check_same_source,
    check_same_weights,
    diverged,
    failure_kind,
    one_line,
)
from planner.errors import ConfigError, RaceError
from planner.frontier import Setting
from planner.proposals import make_proposal
from planner.regime import RegimeCall
from planner.schema import ComputeCard, Metrics, Proposal, RunRecord, run_id_for
from planner.strategies.base import (
    MAX_ATTEMPTS,
    RaceProblem,
    Strategy,
    check_batch,
    decision_state,
    relevant_records,
)

__all__ = ["RaceProgress", "RaceResult", "regimes_document", "run_race", "tally", "write_regimes"]

# MAX_ATTEMPTS (strategies.base): a run that has failed this many times in the store is
# not tried again by a race (the strategy is told, and proposes it no more);
# `runners execute --retries` is the tool for more.


@dataclass(frozen=True)
class RaceProgress:
    """State after a round (what the live display shows)."""

    round: int
    runs: int
    flops: float
    calls: dict[Setting, RegimeCall]
    last_batch: int
    ask_seconds: float
    # ok runs of each setting so far (a setting without any has only the others' runs
    # behind its call).
    setting_runs: dict[Setting, int] = field(default_factory=dict)


@dataclass
class RaceResult:
    """How a race ended: each setting's final call, why it stopped (``stop_reason``), and per
    setting the runs (failed attempts included), their FLOPs and the ok runs that measured the
    target (``measured``), with the rounds and the seconds each ``ask`` took."""
    problem: RaceProblem
    strategy: str
    calls: dict[Setting, RegimeCall]
    stop_reason: str
    runs: dict[Setting, int]
    flops: dict[Setting, float]
    rounds: int = 0
    ask_seconds: list[float] = field(default_factory=list)
    # ok runs per setting: what its call rests on (``runs`` counts failed attempts too,
    # which cost FLOPs and count against --max-runs).
    measured: dict[Setting, int] = field(default_factory=dict)

    @property
    def total_runs(self) -> int:
        return sum(self.runs.values())

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values())


def tally(
    problem: RaceProblem, records: Sequence[RunRecord],
) -> tuple[dict[Setting, int], dict[Setting, float], dict[Setting, int]]:
    """Attempts, FLOPs (failed runs cost FLOPs too) and runs that measured the target, of
    each setting."""
    runs = {s: 0 for s in problem.settings}
    flops = {s: 0.0 for s in problem.settings}
    measured = {s: 0 for s in problem.settings}
    for r in records:
        _count(r, problem, runs, flops, measured)
    return runs, flops, measured


def _count(r: RunRecord, problem: RaceProblem, runs: dict[Setting, int], flops: dict[Setting, float],
           measured: dict[Setting, int]) -> None:
    s = Setting(r.model, r.reward)
    if s in runs:
        runs[s] += 1
        flops[s] += r.card.flops.total
        # What the call rests on: an ok run without a value of the target is not in the fit.
        measured[s] += bool(relevant_records(problem, [r]))


def run_race(
    problem: RaceProblem,
    strategy: Strategy,
    engine: Engine,
    store: RecordStore,
    *,
    max_runs: int | None = None,
    max_flops: float | None = None,
    seeds: int = 1,
    batch_size: int | None = None,
    progress: Callable[[RaceProgress], None] | None = None,
    run_batch: Callable[[list[tuple[Proposal, int]]], list[RunRecord]] | None = None,
) -> RaceResult:
    """Run the active loop; returns the final calls, spend and why it stopped.

    ``seeds`` replicates every proposal (run ids differ by seed). ``max_runs`` and
    ``max_flops`` cap the runs of the problem's settings in the store, failed attempts
    included (they spent compute; resumed runs count too); a batch that would cross a cap
    is trimmed to fit. A run that failed :data:`MAX_ATTEMPTS` times is not tried again.
    ``run_batch(pairs) -> records`` runs a round's (proposal, seed) pairs and returns their
    records, already stored, in order (``runners.batches.ParallelBatches``: workers in
    parallel); without it each run goes through ``engine.run`` here, one after another.
    """
    _check_race_args(seeds, batch_size, max_runs, max_flops)
    all_records = store.records(status=None)
    check_same_source(all_records, engine, store.root)
    check_same_weights(all_records, engine, store.root)
    done = {r.run_id: r for r in all_records if r.status == "ok"}
    failed: dict[str, list[RunRecord]] = {}
    for r in all_records:
        if r.status != "ok":
            failed.setdefault(r.run_id, []).append(r)

    def runnable(rid: str) -> bool:
        return rid not in done and len(failed.get(rid, ())) < MAX_ATTEMPTS

    asked: set[str] = set()  # run ids proposed so far in this race
    # Proposals of this race with a run that measured the target: a strategy counts them
    # recorded and never proposes them again, so a seed cut off by an interrupt, or failed
    # once, would never run. The loop runs what is left of them (_unfinished).
    known = _proposals(problem, all_records)
    measured_ids = {r.proposal_id for r in relevant_records(problem, all_records)}
    # Failed records too: a strategy must know what the loop will not run again.
    strategy.tell(all_records)
    runs, flops, measured = tally(problem, all_records)
    overrun = _overrun(all_records)
    asks: list[float] = []
    rnd = 0
    while True:
        calls = strategy.decide()
        n_runs, n_flops = sum(runs.values()), sum(flops.values())
        if strategy.stops_on_confidence and all(
            decision_state(c, problem) != "open" for c in calls.values()
        ):
            reason = "confident"
            break
        if max_runs is not None and n_runs >= max_runs:
            reason = "max-runs"
            break
        if max_flops is not None and n_flops >= max_flops:
            reason = "max-flops"
            break
        t0 = time.perf_counter()
        own = strategy.ask(batch_size)
        known.update((p.id, p) for p in own)
        props = _unfinished(known, measured_ids, own, seeds, runnable) + own
        if not props:
            asks.append(time.perf_counter() - t0)
            reason = "exhausted"
            break
        kept, blocked = _trim(props, seeds, n_runs, n_flops, max_runs, max_flops, runnable, overrun)
        fit = len(kept) - (len(props) - len(own))  # the strategy's own proposals under the caps
        if blocked and 0 < fit < len(own) and getattr(strategy, "asks_again", False):
            # A cap cut the batch: the leading proposals are a phase's first points (one
            # setting's lowest rho values, say), so the strategy chooses the ones that fit.
            own = strategy.ask(fit)
            known.update((p.id, p) for p in own)
            props = _unfinished(known, measured_ids, own, seeds, runnable) + own
            kept, blocked = _trim(props, seeds, n_runs, n_flops, max_runs, max_flops, runnable, overrun)
        asks.append(time.perf_counter() - t0)
        if not kept:  # not even the first proposal fits under a cap
            reason = blocked
            break
        props = kept
        pairs = [(run_id_for(p.id, seed), (p, seed)) for p in props for seed in range(seeds)]
        rids = [rid for rid, _ in pairs]
        pending = {rid: pair for rid, pair in pairs if runnable(rid)}  # a repeated pair runs once
        fresh = dict(zip(pending, (run_batch or _one_by_one(engine, store, failed))(list(pending.values())),
                         strict=True))
        for rid, rec in fresh.items():
            if rec.status == "ok":
                done[rid] = rec
            else:
                failed.setdefault(rid, []).append(rec)
            _count(rec, problem, runs, flops, measured)
        overrun = max(overrun, _overrun(fresh.values()))
        measured_ids.update(r.proposal_id for r in relevant_records(problem, list(fresh.values())))
        new = len(fresh)
        batch = [fresh.get(rid) or done.get(rid) or failed[rid][-1] for rid in rids]
        strategy.tell(batch)
        if new == 0 and asked.issuperset(rids):
            # The strategy repeats runs that are recorded or failed too often: it would
            # ask the same forever, and no cap would ever be reached.
            reason = "exhausted"
            break
        asked.update(rids)
        rnd += 1
        if progress is not None:
            progress(RaceProgress(rnd, sum(runs.values()), sum(flops.values()), strategy.decide(),
                                  len(batch), asks[-1], dict(measured)))
    return RaceResult(problem, strategy.name, calls, reason, runs, flops, rnd, asks, measured)


def _proposals(problem: RaceProblem, records: Sequence[RunRecord]) -> dict[str, Proposal]:
    """The proposals of ``records`` of the problem's settings and target, by id, rebuilt from
    their plans (a record from a race for another target has another id and is left out)."""
    keys, out = set(problem.settings), {}
    for r in records:
        if Setting(r.model, r.reward) in keys and r.proposal_id not in out:
            p = make_proposal(r.plan, target=problem.target, reason="the seeds of a proposal not yet run")
            if p.id == r.proposal_id:
                out[p.id] = p
    return out


def _unfinished(
    known: dict[str, Proposal], measured: set[str], props: Sequence[Proposal], seeds: int,
    runnable: Callable[[str], bool],
) -> list[Proposal]:
    """Proposals not in ``props`` with a run that measured the target (ids in ``measured``)
    and a seed below ``seeds`` still to run: cut off by an interrupt between its seeds, or
    failed fewer than :data:`MAX_ATTEMPTS` times. They go first in the round, under the caps."""
    asked = {p.id for p in props}
    return [p for pid, p in known.items()
            if pid in measured and pid not in asked and any(runnable(run_id_for(pid, s)) for s in range(seeds))]


def _one_by_one(
    engine: Engine, store: RecordStore, failed: dict[str, list[RunRecord]],
) -> Callable[[list[tuple[Proposal, int]]], list[RunRecord]]:
    """The in-process runner: each run in turn, stored as soon as it ends (an interrupted
    round keeps the runs it finished). A failed run is numbered after the run's earlier
    failures, as ``runners execute`` numbers them, so the strategy counts each attempt.
    An engine that raises (a NaN loss, out of memory, a crash) gives a failed record, as
    a worker's run does; a :class:`RaceError` (bad input, the same for every run) stops
    the race."""

    def run(pairs: list[tuple[Proposal, int]]) -> list[RunRecord]:
        out = []
        for p, seed in pairs:
            t0 = time.perf_counter()
            try:
                rec = engine.run(p, seed)
                if (bad := diverged(rec)) is not None:
                    error, card = bad
                    rec = _failed(engine, p, seed, "nan", error, time.perf_counter() - t0, card=card)
                elif (wrong := rec.inconsistency()) is not None:
                    # The store reads such a record back as corrupt: stored as ok, the run would
                    # count now and be moved aside and run again on a resume (as a worker's does).
                    rec = _failed(engine, p, seed, "error", f"the engine's record is invalid: {wrong}",
                                  time.perf_counter() - t0, card=rec.card)
            except RaceError:
                raise
            except Exception as exc:
                # RunFailed's message already names what raised.
                message = str(exc) if getattr(exc, "kind", None) else f"{type(exc).__name__}: {exc}"
                card, metrics = getattr(exc, "card", None), getattr(exc, "metrics", None)
                rec = _failed(engine, p, seed, failure_kind(exc), message, time.perf_counter() - t0,
                              card=card if isinstance(card, ComputeCard) else None,
                              metrics=metrics if isinstance(metrics, Metrics) else None)
            # After the highest failure stored (a gap must not repeat a number), an ok run
            # too: a worker stamps each attempt the same way.
            rec = rec.model_copy(update={"attempt": max((r.attempt for r in failed.get(rec.run_id, ())),
                                                        default=0) + 1})
            store.write(rec)
            out.append(rec)
        return out

    return run


def _failed(
    engine: Engine, proposal: Proposal, seed: int, kind: str, message: str, wall_s: float, *,
    card: ComputeCard | None = None, metrics: Metrics | None = None,
) -> RunRecord:
    """The failed record of a run that raised or diverged, as ``runners execute`` writes it
    (``runners.task.failed_record``): ``KIND: message``, the card metered before it died,
    and its kind in the provenance. A diverged run's metrics are dropped, as there: the
    store writes NaN to the flat columns but null to the metrics JSON, and reads such a
    file back as corrupt, so the failure would be lost and the run retried on every resume."""
    return RunRecord.failed(
        proposal, seed, engine=engine.name, simulated=bool(getattr(engine, "simulated", False)),
        error=f"{kind}: {one_line(message)}", card=card, metrics=metrics, wall_s=wall_s,
        provenance={**dict(getattr(engine, "source", None) or {}), "engine": engine.name, "failure_kind": kind},
    )


def _overrun(records: Iterable[RunRecord]) -> float:
    """The largest metered / planned FLOPs of ``records``, at least 1: a real run meters its
    actual completion lengths, up to a few percent over its plan. Failed runs too: one that
    diverged keeps the card of its whole run (one cut short meters less than its plan)."""
    ratios = [r.card.flops.total / r.plan.flops.total for r in records
              if r.plan.flops.total > 0 and math.isfinite(r.card.flops.total)]
    return max([1.0, *ratios])


def _trim(
    props: list[Proposal], seeds: int, n_runs: int, n_flops: float,
    max_runs: int | None, max_flops: float | None, runnable: Callable[[str], bool],
    overrun: float = 1.0,
) -> tuple[list[Proposal], str]:
    """The leading proposals whose new runs fit under both caps (runs that will not run,
    being recorded or failed too often, are free), and the cap that stopped the trimming
    ("" if none did). A run is costed at its planned FLOPs times ``overrun`` (the worst
    metered / planned ratio seen so far), so metered spend stays under ``max_flops``
    unless a run overshoots its plan by more than any before it."""
    out: list[Proposal] = []
    for p in props:
        new = sum(runnable(run_id_for(p.id, s)) for s in range(seeds))
        cost = new * p.plan.flops.total * overrun
        if max_runs is not None and n_runs + new > max_runs:
            return out, "max-runs"
        if max_flops is not None and n_flops + cost > max_flops:
            return out, "max-flops"
        out.append(p)
        n_runs += new
        n_flops += cost
    return out, ""


def _check_race_args(seeds: int, batch_size: int | None, max_runs: int | None, max_flops: float | None) -> None:
    """The loop's own arguments, for callers from Python (the CLI checks its flags): zero
    seeds or a zero batch ended a race as "exhausted" after no run, with the prior's call."""
    def whole(v: Any) -> bool:
        return isinstance(v, int | np.integer) and not isinstance(v, bool)

    if not (whole(seeds) and seeds >= 1):
        raise ConfigError(f"seeds: replicates per proposal, a whole number >= 1, got {seeds!r}")
    check_batch(batch_size, "batch_size")
    if max_runs is not None and not (whole(max_runs) and max_runs >= 0):
        raise ConfigError(f"max_runs: a run cap >= 0 (or None: no cap), got {max_runs!r}")
    if max_flops is not None and not (isinstance(max_flops, int | float | np.integer | np.floating) and max_flops >= 0):
        raise ConfigError(f"max_flops: a FLOP cap >= 0 (or None: no cap), got {max_flops!r}")


def regimes_document(
    result: RaceResult, *, engine: str, simulated: bool, world: str | None = None, seed: int = 0,
    pilot_budgets: dict[Setting, float] | None = None, seeds: int = 1,
    noise_sd: float | Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The ``regimes.json`` body: race metadata plus one entry per setting. ``seed`` (the
    posterior samplers') is kept so ``planner report`` makes its calls with the same draws;
    ``pilot_budgets`` are the settings' own where their pilots ran elsewhere (a raised
    design, a resume) than the requested one; ``seeds`` the replicates per proposal;
    ``noise_sd`` the run noise the race was told (``--noise-sd``), kept as ``{reward: sd}``
    for the same reason as ``seed``."""
    p = result.problem
    entries = []
    for s in p.settings:
        c = result.calls[s]
        entries.append({
            "model": s.model,
            "reward": s.reward,
            "target": p.target,
            "budget": p.budget,
            "rho_star": c.rho_star,
            "rho_star_ci": list(c.rho_star_ci),
            "optimum_ci": None if c.optimum_ci is None else list(c.optimum_ci),
            "regime": c.regime,
            "probabilities": dict(c.probabilities),
            "confident": c.confidence >= p.confidence,
            "decided": decision_state(c, p),
            "expected_loss": c.expected_loss if math.isfinite(c.expected_loss) else None,
            "stake": c.stake if math.isfinite(c.stake) else None,
            "stake_sd": c.stake_sd if math.isfinite(c.stake_sd) else None,
            "noise_sd": c.extra.get("noise_sd"),
            "noise_source": c.extra.get("noise_source"),
            "pilot_budget": (pilot_budgets or {}).get(s, p.pilot_budget),
            "runs": result.measured.get(s, 0),  # runs that measured the target: what the call rests on
            "failed_runs": result.runs[s] - result.measured.get(s, 0),
            "flops_spent": result.flops[s],
            "engine": engine,
            "simulated": simulated,
        })
    return {
        "schema_version": 1,
        "strategy": result.strategy,
        "engine": engine,
        "simulated": simulated,
        "world": world,
        "target": p.target,
        "budget": p.budget,
        "pilot_budget": p.pilot_budget,
        "confidence": p.confidence,
        "indifference": p.indifference,
        "seed": seed,
        "seeds": seeds,
        "noise_sd": _stated(noise_sd, p),
        "stop_reason": result.stop_reason,
        "rounds": result.rounds,
        "runs": result.total_runs,  # attempts, failed ones included: what --max-runs counts
        "flops_spent": result.total_flops,
        "settings": entries,
    }


def _stated(noise_sd: float | Mapping[str, float] | None, problem: RaceProblem) -> dict[str, float] | None:
    """A stated run noise as ``{reward: sd}`` over the problem's reward systems (None: none)."""
    if noise_sd is None:
        return None
    if isinstance(noise_sd, Mapping):
        return {r: float(v) for r, v in noise_sd.items()}
    return {r: float(noise_sd) for r in sorted({s.reward for s in problem.settings})}


def write_regimes(path: str | Path, document: dict[str, Any]) -> Path:
    """Write ``regimes.json`` atomically (a reader never sees half a file)."""
    from planner.files import atomic_write_text, dumps_json

    return atomic_write_text(path, dumps_json(document, indent=2))
