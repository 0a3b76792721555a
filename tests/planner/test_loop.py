"""The active loop stops on confidence and on each cap, and resumes without re-running."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from planner.compiler import compile_plan
from planner.frontier import Setting
from planner.loop import regimes_document, run_race, write_regimes
from planner.proposals import make_proposal
from planner.regime import RegimeCall
from planner.registry import get_model
from planner.schema import ComputeCard, Metrics, Proposal, RunRecord, run_id_for
from planner.strategies import RaceProblem

S = Setting("qwen2.5-1.5b", "sparse")
PROBLEM = RaceProblem((S,), budget=1e16, pilot_budget=1e15, confidence=0.9)


class FakeEngine:
    name = "fake"

    def __init__(self) -> None:
        self.calls = 0

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        self.calls += 1
        plan = proposal.plan
        return RunRecord(
            run_id=run_id_for(proposal.id, seed), proposal_id=proposal.id, status="ok", engine="fake",
            simulated=True, model=plan.model, model_params=float(get_model(plan.model).num_parameters),
            reward=plan.reward, budget=plan.budget, rho_planned=plan.rho, seed=seed, plan=plan,
            card=ComputeCard(flops=plan.flops, rho=plan.flops.rho), metrics=Metrics(native=plan.rho),
        )


class MemStore:
    root = Path(".")

    def __init__(self) -> None:
        self.recs: dict[str, RunRecord] = {}

    def write(self, record: RunRecord) -> Path:
        self.recs[record.run_id] = record
        return self.root

    def records(self, *, status: str | None = "ok") -> list[RunRecord]:
        return [r for r in self.recs.values() if status is None or r.status == status]

    def run_ids(self, *, status: str | None = "ok") -> set[str]:
        return {r.run_id for r in self.records(status=status)}


class Scripted:
    """Proposes two new rho values per ask; confident after ``confident_after`` records."""

    name = "scripted"
    problem = PROBLEM

    def __init__(self, confident_after: int = 10**9, stops: bool = True, rounds: int = 10**9) -> None:
        self.stops_on_confidence = stops
        self.confident_after = confident_after
        self.rounds = rounds
        self.seen: list[RunRecord] = []
        self.asked = 0

    def ask(self, n: int | None = None) -> list[Proposal]:
        if self.asked >= self.rounds:
            return []
        out = []
        for k in range(2):
            rho = 0.2 + 0.05 * ((2 * self.asked + k) % 14)
            out.append(make_proposal(compile_plan(S.model, S.reward, rho, 1e15)))
        self.asked += 1
        return out

    def tell(self, records: Sequence[RunRecord]) -> None:
        ids = {r.run_id for r in self.seen}
        self.seen += [r for r in records if r.run_id not in ids]

    def decide(self) -> dict[Setting, RegimeCall]:
        p = 0.95 if len(self.seen) >= self.confident_after else 0.6
        return {S: RegimeCall(0.7, (0.6, 0.8), "update-heavy",
                              {"search-heavy": 1 - p, "update-heavy": p, "reward-heavy": 0.0})}


def test_stops_on_confidence() -> None:
    res = run_race(PROBLEM, Scripted(confident_after=4), FakeEngine(), MemStore(), max_runs=100)
    assert res.stop_reason == "confident"
    assert res.total_runs == 4 and res.rounds == 2


def test_stops_when_every_open_call_is_indifferent() -> None:
    class Flat(Scripted):
        def decide(self) -> dict[Setting, RegimeCall]:
            loss = 0.001 if len(self.seen) >= 6 else 0.01
            return {S: RegimeCall(0.5, (0.1, 0.9), "update-heavy",
                                  {"search-heavy": 0.45, "update-heavy": 0.55, "reward-heavy": 0.0},
                                  expected_loss=loss)}

    strict = run_race(PROBLEM, Flat(), FakeEngine(), MemStore(), max_runs=10)
    assert strict.stop_reason == "max-runs"  # indifference off by default
    lenient = RaceProblem((S,), budget=1e16, pilot_budget=1e15, indifference=0.002)
    res = run_race(lenient, Flat(), FakeEngine(), MemStore(), max_runs=10)
    assert res.stop_reason == "confident" and res.total_runs == 6
    entry = regimes_document(res, engine="fake", simulated=True)["settings"][0]
    assert entry["decided"] == "indifferent" and entry["confident"] is False


def test_stops_on_max_runs_and_trims_the_batch() -> None:
    res = run_race(PROBLEM, Scripted(), FakeEngine(), MemStore(), max_runs=5)
    assert res.stop_reason == "max-runs"
    assert res.total_runs == 5


def test_stops_on_max_flops() -> None:
    one = compile_plan(S.model, S.reward, 0.5, 1e15).flops.total
    res = run_race(PROBLEM, Scripted(), FakeEngine(), MemStore(), max_runs=100, max_flops=3.5 * one)
    assert res.stop_reason == "max-flops"
    assert res.total_flops <= 3.5 * one and res.total_runs == 3


def test_stops_when_exhausted_and_baselines_ignore_confidence() -> None:
    res = run_race(PROBLEM, Scripted(confident_after=0, stops=False, rounds=2), FakeEngine(), MemStore())
    assert res.stop_reason == "exhausted" and res.total_runs == 4


def test_resume_skips_recorded_runs_and_counts_them_against_caps() -> None:
    store, eng = MemStore(), FakeEngine()
    run_race(PROBLEM, Scripted(), eng, store, max_runs=4)
    assert eng.calls == 4
    eng2 = FakeEngine()
    res = run_race(PROBLEM, Scripted(), eng2, store, max_runs=6)
    assert eng2.calls == 2  # the first two batches were already in the store
    assert res.total_runs == 6 and res.stop_reason == "max-runs"


def test_seeds_replicate_each_proposal() -> None:
    store = MemStore()
    res = run_race(PROBLEM, Scripted(confident_after=4), FakeEngine(), store, seeds=2)
    assert res.total_runs == 4
    assert {r.seed for r in store.records()} == {0, 1}


def test_regimes_document(tmp_path: Path) -> None:
    res = run_race(PROBLEM, Scripted(confident_after=2), FakeEngine(), MemStore())
    doc = regimes_document(res, engine="fake", simulated=True)
    path = write_regimes(tmp_path / "regimes.json", doc)
    (entry,) = doc["settings"]
    assert path.is_file()
    assert entry["model"] == S.model and entry["regime"] == "update-heavy"
    assert entry["rho_star_ci"] == [0.6, 0.8] and entry["runs"] == 2
    assert set(entry) >= {"model", "reward", "target", "budget", "rho_star", "rho_star_ci", "regime",
                          "probabilities", "runs", "flops_spent", "engine", "simulated"}
    assert doc["stop_reason"] == "confident"


@pytest.mark.parametrize("conf", [0.0, 1.0])
def test_problem_rejects_bad_confidence(conf: float) -> None:
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match="confidence"):
        RaceProblem((S,), budget=1e16, pilot_budget=1e15, confidence=conf)


class Failing(FakeEngine):
    """Every run fails (an OOM, say), or returns a NaN metric (a diverged policy)."""

    def __init__(self, nan: bool = False) -> None:
        super().__init__()
        self.nan = nan

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        if self.nan:
            return rec.model_copy(update={"metrics": Metrics(native=float("nan"))})
        return rec.model_copy(update={"status": "failed", "error": "error: CUDA out of memory"})


@pytest.mark.parametrize("nan", [False, True])
def test_a_run_that_keeps_failing_ends_the_race_instead_of_looping(nan: bool) -> None:
    from planner.loop import MAX_ATTEMPTS
    from planner.strategies.ours import RaceStrategy

    eng, store = Failing(nan), MemStore()
    res = run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store)  # no cap: it must end by itself
    assert res.stop_reason == "exhausted" and eng.calls == 4 * MAX_ATTEMPTS  # the 4 pilots, tried twice
    assert {r.status for r in store.records(status=None)} == {"failed"}
    if nan:  # a NaN metric is a diverged run, never an ok record the surrogate would read
        assert all("non-finite metrics: native" in (r.error or "") for r in store.records(status=None))


def test_seed_replicates_do_not_count_as_design_points() -> None:
    from planner.strategies.ours import RaceStrategy

    store = MemStore()
    run_race(PROBLEM, RaceStrategy(PROBLEM, 0), FakeEngine(), store, seeds=2, batch_size=1, max_runs=8)
    recs = store.records()
    assert len(recs) == 8 and len({r.proposal_id for r in recs}) == 4  # 4 design points x 2 seeds
    assert len({r.budget for r in recs}) == 1 and recs[0].budget < PROBLEM.budget  # all pilots


def test_a_prior_call_never_ends_a_race() -> None:
    from planner.strategies.ours import RaceStrategy

    low = RaceProblem((Setting("qwen2.5-7b", "prm"),), budget=1e16, pilot_budget=1e15, confidence=0.5)
    eng = FakeEngine()
    res = run_race(low, RaceStrategy(low, 0), eng, MemStore(), max_runs=4)
    assert eng.calls == 4 and res.stop_reason == "max-runs"  # not "confident" on the prior at 0 runs
