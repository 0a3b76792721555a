"""The active loop stops on confidence and on each cap, and resumes without re-running.

Every race writes to the real pilot store: resuming and the retry cap depend on what it
keeps (every failed attempt, the first ok record of a run), which a stand-in would fake.
"""

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
from planner.schema import ComputeCard, FlopsSplit, Metrics, Proposal, RunRecord, run_id_for
from planner.strategies import RaceProblem
from runners.store import PilotStore

S = Setting("qwen2.5-1.5b", "sparse")
PROBLEM = RaceProblem((S,), budget=1e16, pilot_budget=1e15, confidence=0.9)


class FakeEngine:
    name = "fake"

    def __init__(self) -> None:
        self.calls = 0
        self.run_ids: list[str] = []

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        self.calls += 1
        self.run_ids.append(run_id_for(proposal.id, seed))
        plan = proposal.plan
        return RunRecord(
            run_id=run_id_for(proposal.id, seed), proposal_id=proposal.id, status="ok", engine="fake",
            simulated=True, model=plan.model, model_params=float(get_model(plan.model).num_parameters),
            reward=plan.reward, budget=plan.budget, rho_planned=plan.rho, seed=seed, plan=plan,
            card=ComputeCard(flops=plan.flops, rho=plan.flops.rho), metrics=Metrics(native=plan.rho),
        )


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


def test_stops_on_confidence(tmp_path: Path) -> None:
    res = run_race(PROBLEM, Scripted(confident_after=4), FakeEngine(), PilotStore(tmp_path / "data"), max_runs=100)
    assert res.stop_reason == "confident"
    assert res.total_runs == 4 and res.rounds == 2


def test_stops_when_every_open_call_is_indifferent(tmp_path: Path) -> None:
    class Flat(Scripted):
        def decide(self) -> dict[Setting, RegimeCall]:
            loss = 0.001 if len(self.seen) >= 6 else 0.01
            return {S: RegimeCall(0.5, (0.1, 0.9), "update-heavy",
                                  {"search-heavy": 0.45, "update-heavy": 0.55, "reward-heavy": 0.0},
                                  expected_loss=loss)}

    # Two separate stores: the second race must start from nothing, not resume the first.
    strict = run_race(PROBLEM, Flat(), FakeEngine(), PilotStore(tmp_path / "strict"), max_runs=10)
    assert strict.stop_reason == "max-runs"  # indifference off by default
    lenient = RaceProblem((S,), budget=1e16, pilot_budget=1e15, indifference=0.002)
    res = run_race(lenient, Flat(), FakeEngine(), PilotStore(tmp_path / "lenient"), max_runs=10)
    assert res.stop_reason == "confident" and res.total_runs == 6
    entry = regimes_document(res, engine="fake", simulated=True)["settings"][0]
    assert entry["decided"] == "indifferent" and entry["confident"] is False


def test_stops_on_max_runs_and_trims_the_batch(tmp_path: Path) -> None:
    res = run_race(PROBLEM, Scripted(), FakeEngine(), PilotStore(tmp_path / "data"), max_runs=5)
    assert res.stop_reason == "max-runs"
    assert res.total_runs == 5


def test_stops_on_max_flops(tmp_path: Path) -> None:
    one = compile_plan(S.model, S.reward, 0.5, 1e15).flops.total
    res = run_race(PROBLEM, Scripted(), FakeEngine(), PilotStore(tmp_path / "data"), max_runs=100,
                   max_flops=3.5 * one)
    assert res.stop_reason == "max-flops"
    assert res.total_flops <= 3.5 * one and res.total_runs == 3


def _metered_over(rec: RunRecord, factor: float) -> RunRecord:
    """``rec`` with every phase metered ``factor`` times its plan (a real run's overshoot)."""
    f = rec.card.flops
    split = FlopsSplit(search=f.search * factor, learning=f.learning * factor, reward=f.reward * factor,
                       total=f.total * factor)
    return rec.model_copy(update={"card": ComputeCard(flops=split, rho=split.rho)})


def test_max_flops_holds_for_metered_spend_when_runs_overshoot_their_plans(tmp_path: Path) -> None:
    """Real runs meter their actual completion lengths, here 2% over plan. Costed at plan,
    the third run fitted under the cap (2.049 + 1.021 <= 3.08 units; the plans land their
    budget within 2%) and the race ended at 3.090."""
    class Over(FakeEngine):
        def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
            return _metered_over(super().run(proposal, seed, progress), 1.02)

    one = compile_plan(S.model, S.reward, 0.5, 1e15).flops.total
    cap = 3.08 * one
    res = run_race(PROBLEM, Scripted(), Over(), PilotStore(tmp_path / "data"), max_runs=100, max_flops=cap)
    assert res.stop_reason == "max-flops" and res.total_flops <= cap and res.total_runs == 2


def test_max_flops_learns_the_overshoot_from_a_diverged_run_too(tmp_path: Path) -> None:
    """A run whose metrics came back NaN is recorded failed with its card: it ran to the end
    and metered its spend, 5% over plan here. The overshoot it showed was not used to cost
    the next round (ok runs only), so the next run, costed at plan, crossed --max-flops."""
    class OverThenOk(FakeEngine):
        def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
            rec = _metered_over(super().run(proposal, seed, progress), 1.05)
            return rec.model_copy(update={"metrics": Metrics(native=float("nan"))}) if self.calls <= 2 else rec

    f = [compile_plan(S.model, S.reward, rho, 1e15).flops.total for rho in (0.2, 0.25, 0.3)]  # Scripted's first 3
    cap = 1.05 * (f[0] + f[1]) + 1.03 * f[2]  # the third run fits at plan, not at its metered 1.05
    store = PilotStore(tmp_path / "data")
    res = run_race(PROBLEM, Scripted(), OverThenOk(), store, max_runs=100, max_flops=cap)
    assert res.stop_reason == "max-flops" and res.total_flops <= cap
    assert [r.status for r in store.records(status=None)] == ["failed", "failed"]  # the diverged pair


def test_stops_when_exhausted_and_baselines_ignore_confidence(tmp_path: Path) -> None:
    res = run_race(PROBLEM, Scripted(confident_after=0, stops=False, rounds=2), FakeEngine(),
                   PilotStore(tmp_path / "data"))
    assert res.stop_reason == "exhausted" and res.total_runs == 4


def test_resume_skips_recorded_runs_and_counts_them_against_caps(tmp_path: Path) -> None:
    store, eng = PilotStore(tmp_path / "data"), FakeEngine()
    run_race(PROBLEM, Scripted(), eng, store, max_runs=4)
    assert eng.calls == 4
    eng2 = FakeEngine()
    res = run_race(PROBLEM, Scripted(), eng2, store, max_runs=6)
    assert eng2.calls == 2  # the first two batches were already in the store
    assert res.total_runs == 6 and res.stop_reason == "max-runs"


class WeightedEngine(FakeEngine):
    """A FakeEngine whose runs start from weights it names, as the trl engine's do."""

    def __init__(self, policy: str | None, scorer: str | None = None) -> None:
        super().__init__()
        self.weights = {"policy_weights": policy, "scorer_weights": scorer}

    def start_weights(self, model: str, reward: str) -> dict[str, str | None]:
        return dict(self.weights)

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        return rec.model_copy(update={"provenance": {"policy": "/cache/tiny-s", **self.weights}})


@pytest.mark.parametrize("field", ["policy", "scorer"])
def test_a_store_of_runs_from_other_weights_is_refused_before_any_run(tmp_path: Path, field: str) -> None:
    from planner.errors import ConfigError

    store = PilotStore(tmp_path / "data")
    run_race(PROBLEM, Scripted(), WeightedEngine("sha256:aa", "sha256:cc"), store, max_runs=2)
    before = [r.run_id for r in store.records(status=None)]
    # Same weights, or weights unknown on either side (a Hub id; older records): resumes.
    for policy, scorer in (("sha256:aa", "sha256:cc"), (None, None), ("sha256:aa", None)):
        res = run_race(PROBLEM, Scripted(), WeightedEngine(policy, scorer), store, max_runs=2)
        assert res.total_runs == 2
    other = WeightedEngine("sha256:bb" if field == "policy" else "sha256:aa",
                           "sha256:dd" if field == "scorer" else "sha256:cc")
    with pytest.raises(ConfigError) as info:
        run_race(PROBLEM, Scripted(), other, store, max_runs=4)
    msg = str(info.value)
    assert f"whose {field} started from other weights" in msg and before[0] in msg and "\n" not in msg
    assert other.calls == 0 and [r.run_id for r in store.records(status=None)] == before


def test_seeds_replicate_each_proposal(tmp_path: Path) -> None:
    store = PilotStore(tmp_path / "data")
    res = run_race(PROBLEM, Scripted(confident_after=4), FakeEngine(), store, seeds=2)
    assert res.total_runs == 4
    assert {r.seed for r in store.records()} == {0, 1}


def test_regimes_document(tmp_path: Path) -> None:
    res = run_race(PROBLEM, Scripted(confident_after=2), FakeEngine(), PilotStore(tmp_path / "data"))
    doc = regimes_document(res, engine="fake", simulated=True)
    path = write_regimes(tmp_path / "regimes.json", doc)
    (entry,) = doc["settings"]
    assert path.is_file()
    assert entry["model"] == S.model and entry["regime"] == "update-heavy"
    assert entry["rho_star_ci"] == [0.6, 0.8] and entry["runs"] == 2
    assert set(entry) >= {"model", "reward", "target", "budget", "rho_star", "rho_star_ci", "regime",
                          "probabilities", "runs", "flops_spent", "engine", "simulated"}
    assert doc["stop_reason"] == "confident"


@pytest.mark.parametrize("conf", [0.0, 1.0, 0.09, 1 / 3])
def test_problem_rejects_bad_confidence(conf: float) -> None:
    """Outside (0, 1), or at most 1/3, which every call meets (a typo of 0.09 for 0.9)."""
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^confidence: "):
        RaceProblem((S,), budget=1e16, pilot_budget=1e15, confidence=conf)
    RaceProblem((S,), budget=1e16, pilot_budget=1e15, confidence=0.34)


@pytest.mark.parametrize(("kw", "field"), [
    ({"budget": float("inf")}, "budget"), ({"budget": -1.0}, "budget"),
    ({"pilot_budget": 0.0}, "pilot-budget"), ({"pilot_budget": float("nan")}, "pilot-budget"),
    ({"indifference": -0.01}, "indifference"), ({"indifference": float("nan")}, "indifference"),
])
def test_problem_rejects_budgets_and_indifference_that_are_no_numbers_of_their_kind(kw: dict, field: str) -> None:
    from planner.errors import ConfigError

    args = {"budget": 1e16, "pilot_budget": 1e15} | kw
    with pytest.raises(ConfigError, match=f"^{field}:"):
        RaceProblem((S,), **args)


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
def test_a_run_that_keeps_failing_ends_the_race_instead_of_looping(tmp_path: Path, nan: bool) -> None:
    from planner.loop import MAX_ATTEMPTS
    from planner.strategies.ours import RaceStrategy

    eng, store = Failing(nan), PilotStore(tmp_path / "data")
    res = run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store)  # no cap: it must end by itself
    assert res.stop_reason == "exhausted" and eng.calls == 4 * MAX_ATTEMPTS  # the 4 pilots, tried twice
    # Every attempt is on disk, so a resumed race can count them.
    assert len(store.records(status=None)) == 4 * MAX_ATTEMPTS
    assert {r.status for r in store.records(status=None)} == {"failed"}
    # Its call rests on no run: regimes.json says so (runs 0), not 8 attempts.
    (entry,) = regimes_document(res, engine="fake", simulated=True)["settings"]
    assert (res.measured[S], res.runs[S]) == (0, 4 * MAX_ATTEMPTS)
    assert (entry["runs"], entry["failed_runs"]) == (0, 4 * MAX_ATTEMPTS)
    if nan:  # a NaN metric is a diverged run, never an ok record the surrogate would read
        # ... and recorded as `runners execute` records it (tests/runners/test_execute_cli.py).
        for r in store.records(status=None):
            assert r.error == "nan: non-finite values in native" and r.provenance["failure_kind"] == "nan"


class Raising(FakeEngine):
    """An engine whose runs raise in this process: the trl engine's NaN loss
    (``RunFailed``, with the card metered so far) or a plain crash."""

    def __init__(self, exc: Exception, every: int = 1) -> None:
        super().__init__()
        self.exc, self.every = exc, every

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        if self.calls % self.every == 0:
            raise self.exc
        return rec


def _run_failed(card: ComputeCard | None) -> Exception:
    from runners.task import RunFailed

    return RunFailed("loss became nan at step 3", card=card, kind="nan")


@pytest.mark.parametrize("which", ["run-failed", "crash"])
def test_an_engine_that_raises_in_process_gives_failed_records_and_the_race_goes_on(
    tmp_path: Path, which: str,
) -> None:
    """Without --workers the race runs the engine here; a run that raises is recorded
    failed (kind, error and metered compute), as a worker records it, and the race goes on
    to its other runs instead of stopping with the run lost."""
    from planner.strategies.ours import RaceStrategy

    card = ComputeCard(flops=FlopsSplit(search=2e13, learning=1e13, reward=0.0, total=3e13), rho=1 / 3)
    exc = _run_failed(card) if which == "run-failed" else RuntimeError("CUDA error: an illegal memory access")
    eng, store = Raising(exc, every=2), PilotStore(tmp_path / "data")
    res = run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store, max_runs=8)
    assert res.stop_reason == "max-runs" and res.total_runs == 8
    recs = store.records(status=None)
    failed = [r for r in recs if r.status == "failed"]
    assert len(recs) == 8 and len(failed) == 4
    for r in failed:
        kind = "nan" if which == "run-failed" else "error"
        assert r.provenance["failure_kind"] == kind and r.error is not None and r.error.startswith(f"{kind}: ")
        if which == "run-failed":
            assert r.error == "nan: loss became nan at step 3" and r.card.flops.total == 3e13
        else:
            assert "RuntimeError: CUDA error" in r.error and r.card.flops.total == 0.0
    assert res.total_flops == sum(r.card.flops.total for r in recs)  # failed runs spent FLOPs too


def test_bad_input_raised_by_an_engine_still_stops_the_race(tmp_path: Path) -> None:
    from planner.errors import ConfigError
    from planner.strategies.ours import RaceStrategy

    eng, store = Raising(ConfigError("world: qwen2.5-1.5b is not in the world; add it")), PilotStore(tmp_path / "d")
    with pytest.raises(ConfigError, match="not in the world"):
        run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store)
    assert store.records(status=None) == []


def test_seed_replicates_do_not_count_as_design_points(tmp_path: Path) -> None:
    from planner.strategies.ours import RaceStrategy

    store = PilotStore(tmp_path / "data")
    run_race(PROBLEM, RaceStrategy(PROBLEM, 0), FakeEngine(), store, seeds=2, batch_size=1, max_runs=8)
    recs = store.records()
    assert len(recs) == 8 and len({r.proposal_id for r in recs}) == 4  # 4 design points x 2 seeds
    assert len({r.budget for r in recs}) == 1 and recs[0].budget < PROBLEM.budget  # all pilots


def test_a_prior_call_never_ends_a_race(tmp_path: Path) -> None:
    from planner.strategies.ours import RaceStrategy

    low = RaceProblem((Setting("qwen2.5-7b", "prm"),), budget=1e16, pilot_budget=1e15, confidence=0.5)
    eng = FakeEngine()
    res = run_race(low, RaceStrategy(low, 0), eng, PilotStore(tmp_path / "data"), max_runs=4)
    assert eng.calls == 4 and res.stop_reason == "max-runs"  # not "confident" on the prior at 0 runs


@pytest.mark.parametrize("nan", [False, True])
def test_a_resumed_race_after_two_failed_attempts_of_a_run_runs_nothing_for_it(tmp_path: Path, nan: bool) -> None:
    from planner.loop import MAX_ATTEMPTS
    from planner.strategies.ours import RaceStrategy

    store = PilotStore(tmp_path / "data")
    run_race(PROBLEM, RaceStrategy(PROBLEM, 0), Failing(nan), store)
    assert store.corrupt() == []  # a diverged run's record must read back, or resumes retry it
    failed = store.records(status="failed")
    ids = {r.run_id for r in failed}
    # The store keeps each attempt in its own file; the cap on resume reads them all.
    assert len(ids) == 4
    assert {(r.run_id, r.attempt) for r in failed} == {(i, a) for i in ids for a in range(1, MAX_ATTEMPTS + 1)}
    before = store.fingerprint()
    # An engine that would succeed: only the retry cap keeps the race from running them. The
    # run cap leaves room for one more try of each (8 + 4) and bounds a broken loop's race.
    eng = FakeEngine()
    res = run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store, max_runs=8 + 4)
    assert eng.calls == 0 and not ids & set(eng.run_ids)
    assert res.stop_reason == "exhausted" and res.total_runs == 4 * MAX_ATTEMPTS
    assert store.fingerprint() == before


def test_a_resumed_race_gives_a_run_that_failed_once_its_last_attempt(tmp_path: Path) -> None:
    from planner.loop import MAX_ATTEMPTS
    from planner.strategies.ours import RaceStrategy

    store = PilotStore(tmp_path / "data")
    run_race(PROBLEM, RaceStrategy(PROBLEM, 0), Failing(), store, max_runs=4)  # one attempt of each pilot
    assert len(store.records(status="failed")) == 4
    eng = Failing()
    res = run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store)
    assert res.stop_reason == "exhausted" and eng.calls == 4 * (MAX_ATTEMPTS - 1)
    failed = store.records(status="failed")
    assert len(failed) == 4 * MAX_ATTEMPTS and {r.attempt for r in failed} == set(range(1, MAX_ATTEMPTS + 1))


class FailsOne(FakeEngine):
    """Every run of the first proposal it sees fails; the rest succeed."""

    def __init__(self) -> None:
        super().__init__()
        self.bad: str | None = None

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        self.bad = self.bad or proposal.id
        if proposal.id == self.bad:
            return rec.model_copy(update={"status": "failed", "error": "error: CUDA out of memory"})
        return rec


class BlankOne(FailsOne):
    """The first proposal's runs succeed without measuring the target (no native value)."""

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        rec = FakeEngine.run(self, proposal, seed, progress)
        self.bad = self.bad or proposal.id
        return rec.model_copy(update={"metrics": Metrics()}) if proposal.id == self.bad else rec


def test_an_ok_run_without_the_target_is_not_proposed_again(tmp_path: Path) -> None:
    from planner.strategies.ours import RaceStrategy

    eng, store = BlankOne(), PilotStore(tmp_path / "data")
    res = run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store, max_runs=12)
    assert sum(rid.startswith(eng.bad or "?") for rid in eng.run_ids) == 1  # done for the loop: once
    assert res.stop_reason in ("confident", "max-runs")  # not "exhausted" after the pilots
    # The call rests on the runs that measured the target: regimes.json does not count the blank one.
    (entry,) = regimes_document(res, engine="fake", simulated=True)["settings"]
    assert entry["runs"] == res.total_runs - 1 and entry["failed_runs"] == 1


def test_one_design_point_that_keeps_failing_does_not_end_the_race(tmp_path: Path) -> None:
    from planner.loop import MAX_ATTEMPTS
    from planner.strategies.ours import RaceStrategy

    eng, store = FailsOne(), PilotStore(tmp_path / "data")
    res = run_race(PROBLEM, RaceStrategy(PROBLEM, 0), eng, store, max_runs=12)
    bad = [rid for rid in eng.run_ids if rid.startswith(eng.bad or "?")]
    assert len(bad) == MAX_ATTEMPTS  # retried once, then abandoned, never proposed again
    # The race went on past the abandoned pilot: anchors and acquisition ran, not "exhausted"
    # with three pilots done (as it did when the strategy kept proposing the missing point).
    assert res.stop_reason in ("confident", "max-runs")
    assert len(store.records()) >= 3 + 2 and max(r.budget for r in store.records()) >= PROBLEM.budget / 1.5


def test_a_run_that_succeeds_after_a_failure_is_recorded_as_its_second_attempt(tmp_path: Path) -> None:
    """As a worker stamps it (runners execute): attempt numbers count every try of a run."""
    from planner.strategies.ours import RaceStrategy

    store = PilotStore(tmp_path / "data")
    run_race(PROBLEM, RaceStrategy(PROBLEM, 0), Failing(), store, max_runs=4)  # each pilot fails once
    run_race(PROBLEM, RaceStrategy(PROBLEM, 0), FakeEngine(), store, max_runs=8)  # then succeeds
    ok = store.records(status="ok")
    assert len(ok) == 4 and {r.attempt for r in ok} == {2}


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"seeds": 0}, "seeds"), ({"batch_size": 0}, "batch_size"), ({"max_runs": -1}, "max_runs"),
    ({"max_flops": float("nan")}, "max_flops"),
])
def test_loop_arguments_are_checked_before_anything_runs(tmp_path: Path, kwargs: dict, field: str) -> None:
    # seeds=0 or batch_size=0 used to end the race "exhausted" after no run, with the prior's call.
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^{field}: "):
        run_race(PROBLEM, Scripted(), FakeEngine(), PilotStore(tmp_path / "data"), **kwargs)
    assert not (tmp_path / "data" / "runs").exists() or not any((tmp_path / "data" / "runs").iterdir())


@pytest.mark.parametrize("cap", ["max-runs", "max-flops"])
@pytest.mark.parametrize("name", ["random", "optuna-tpe", "optuna-gp"])
def test_baselines_run_each_plan_once_up_to_their_cap(tmp_path: Path, name: str, cap: str) -> None:
    """The compiler meets a band of rho with one plan, so a baseline's new rho was often a
    run already made, under a new id; optuna-gp, asking for its upper bound again and
    again, ended "exhausted" long before the cap."""
    from planner.strategies import make_strategy

    problem = RaceProblem((Setting("qwen2.5-7b", "sparse"), Setting("qwen2.5-7b", "prm")), budget=1e16,
                          pilot_budget=1e14)
    one = compile_plan("qwen2.5-7b", "prm", 0.5, 7.5e14).flops.total  # about one pilot
    store = PilotStore(tmp_path / "data")
    res = run_race(problem, make_strategy(name, problem, 0), FakeEngine(), store,
                   max_runs=24 if cap == "max-runs" else None, max_flops=20 * one if cap == "max-flops" else None)
    recs = store.records()
    ran = {(r.model, r.reward, r.budget, r.plan.total_prompts, r.plan.completions_per_prompt,
            r.plan.completions_kept, r.plan.num_iterations) for r in recs}
    assert res.stop_reason == cap and len(ran) == len(recs)
    assert res.total_runs == 24 if cap == "max-runs" else res.total_flops <= 20 * one


class StopsAt(FakeEngine):
    """Interrupted (Ctrl-C) at its ``at``-th run, or failing only that run."""

    def __init__(self, at: int, fail: bool = False) -> None:
        super().__init__()
        self.at, self.fail = at, fail

    def run(self, proposal: Proposal, seed: int, progress: object = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        if self.calls == self.at and not self.fail:
            raise KeyboardInterrupt
        if self.calls == self.at:
            return rec.model_copy(update={"status": "failed", "error": "error: CUDA out of memory"})
        return rec


@pytest.mark.parametrize("fail", [False, True])
def test_a_replicate_left_unrun_is_run_by_the_resumed_or_next_round(tmp_path: Path, fail: bool) -> None:
    """With --seeds 2 a proposal's second seed can be cut off by an interrupt between its
    seeds, or fail once while the first succeeded. The strategy counts the proposal as
    recorded and never proposes it again, so the replicate was never run (nor retried):
    the resumed race ended with a proposal of one seed that the uninterrupted race has two of."""
    from planner.strategies.ours import RaceStrategy

    store = PilotStore(tmp_path / "data")
    first = StopsAt(2, fail)  # the first proposal's seed 1
    cap = 9 if fail else 8  # the 4 pilots' 8 runs, and room for the retry of the failed one
    try:
        run_race(PROBLEM, RaceStrategy(PROBLEM, 0), first, store, seeds=2, max_runs=cap)
    except KeyboardInterrupt:
        run_race(PROBLEM, RaceStrategy(PROBLEM, 0), FakeEngine(), store, seeds=2, max_runs=cap)
    cut = first.run_ids[1]
    assert cut in {r.run_id for r in store.records()}  # run (again) by the race
    seeds: dict[str, set[int]] = {}
    for r in store.records():
        seeds.setdefault(r.proposal_id, set()).add(r.seed)
    assert all(s == {0, 1} for s in seeds.values()), seeds
    assert len(store.records(status=None)) <= cap


def test_a_run_cap_below_the_initial_design_spreads_the_runs_over_settings_and_rho(tmp_path: Path) -> None:
    """--max-runs 4 with two settings' initial designs (4 points each) kept the batch's
    leading four: all of the first setting, at its lowest rho values, and none of the
    second. The loop asks ours again for the four that fit."""
    from planner.strategies.ours import RaceStrategy

    two = RaceProblem((S, Setting("qwen2.5-3b", "prm")), budget=1e16, pilot_budget=1e15)
    design = RaceStrategy(two, 0).ask()
    assert len(design) == 8  # the cap cuts the design
    eng = FakeEngine()
    res = run_race(two, RaceStrategy(two, 0), eng, PilotStore(tmp_path / "data"), max_runs=4)
    assert res.stop_reason == "max-runs" and eng.calls == 4
    recs = PilotStore(tmp_path / "data").records()
    for s in two.settings:
        mine = sorted(r.rho_planned for r in recs if Setting(r.model, r.reward) == s)
        full = sorted(x.plan.rho for x in design if Setting(x.model, x.reward) == s)
        assert mine == [full[0], full[-1]]  # both ends of each setting's design


def test_a_capped_design_resumed_after_an_interrupt_is_the_uninterrupted_races(tmp_path: Path) -> None:
    """--max-runs 6 over two settings' 4-point designs runs 3 of each. Interrupted after the
    first setting's 3 (a round runs in the design's order), the resume dealt the rest round-
    robin from the first setting again: its 4th point and 2 of the second's, other calls."""
    from planner.strategies.ours import RaceStrategy

    two = RaceProblem((S, Setting("qwen2.5-3b", "prm")), budget=1e16, pilot_budget=1e15)

    def design(store: PilotStore) -> dict[Setting, list[float]]:
        return {s: sorted(r.plan.rho_target for r in store.records() if Setting(r.model, r.reward) == s)
                for s in two.settings}

    whole = PilotStore(tmp_path / "whole")
    run_race(two, RaceStrategy(two, 0), FakeEngine(), whole, max_runs=6)
    cut = PilotStore(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt):
        run_race(two, RaceStrategy(two, 0), StopsAt(4, False), cut, max_runs=6)
    assert [len(v) for v in design(cut).values()] == [3, 0]
    run_race(two, RaceStrategy(two, 0), FakeEngine(), cut, max_runs=6)
    assert [len(v) for v in design(whole).values()] == [3, 3]
    assert design(cut) == design(whole)


def test_a_strategy_that_cannot_ask_again_keeps_the_leading_proposals(tmp_path: Path) -> None:
    eng = FakeEngine()
    res = run_race(PROBLEM, Scripted(), eng, PilotStore(tmp_path / "data"), max_runs=3)
    first = Scripted().ask()  # Scripted's ask has side effects (a counter): it is asked once a round
    assert res.total_runs == 3 and eng.run_ids[0] == run_id_for(first[0].id, 0)


def test_ours_proposes_no_recorded_plan_under_another_target(tmp_path: Path) -> None:
    """A design or anchor point was skipped by proposal id, and an id holds the target: a
    second target's race on the same store proposed, and ran, every recorded pilot again
    (same numbers; the fit then read the copies as replicates that agreed)."""
    import dataclasses

    from planner.strategies.base import plan_key
    from planner.strategies.ours import RaceStrategy

    one = RaceProblem((S,), budget=1e16, pilot_budget=1e15)
    store = PilotStore(tmp_path / "data")
    run_race(one, RaceStrategy(one, 0), FakeEngine(), store, max_runs=3)
    recorded = {plan_key(r.plan) for r in store.records()}
    assert len(recorded) == 3
    other = RaceStrategy(dataclasses.replace(one, target="pass1"), 0)
    other.tell(store.records())
    design = other.ask()
    assert len(design) == 1 and plan_key(design[0].plan) not in recorded  # the design's fourth point
