"""The engine contract: every installed engine returns the same kind of record.

Parametrised over ``planner.engine.available_engines()``. Each engine needs one entry in
:data:`CASES`: a factory that builds the engine and a few *fast* proposals for it (the
whole suite must stay cheap). An installed engine without an entry is skipped with a
reason that says so, so a new engine shows up in ``-ra`` until it gets a case.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from planner.compiler import compile_plan
from planner.engine import Engine, available_engines, load_engine
from planner.proposals import make_proposal
from planner.schema import FLAT_COLUMNS, TARGETS, Proposal, RunRecord, run_id_for
from runners.store import PilotStore


@dataclass(frozen=True)
class EngineCase:
    """How to test one engine quickly: build it, and the proposals to run."""

    make: Callable[[Path], Engine]
    proposals: Callable[[], list[Proposal]]


def _sim_case() -> EngineCase:
    return EngineCase(
        make=lambda tmp: load_engine("sim", world="paper"),
        proposals=lambda: [
            make_proposal(compile_plan("qwen2.5-1.5b", "prm", 0.45, 1e16), target="pass1"),
            make_proposal(compile_plan("qwen2.5-7b", "sparse", 0.7, 3e16)),
            make_proposal(compile_plan("tiny-s", "dense", 0.6, 2e11)),
        ],
    )


def _trl_case() -> EngineCase:
    def make(tmp: Path) -> Engine:
        # A random-initialised tiny-s: the contract is about the record, not about learning,
        # so no pretraining is needed (tests/runners/test_trl_engine.py covers learning).
        # The budget buys ~66 prompt groups: the guard lands within half a group (< 1%).
        from planner.registry import get_model
        from runners.grpo.loading import random_policy
        from runners.tinyworld.tokenizer import build_tokenizer

        path = random_policy(get_model("tiny-s"), tmp / "policy", tokenizer=build_tokenizer())
        return load_engine("trl", policy_path=str(path), eval_samples=4, threads=1)

    return EngineCase(make=make, proposals=lambda: [make_proposal(compile_plan("tiny-s", "sparse", 0.5, 3e10))])


# One entry per engine.
CASES: dict[str, Callable[[], EngineCase]] = {"sim": _sim_case, "trl": _trl_case}

ENGINES = available_engines()


def _case(name: str) -> EngineCase:
    if name not in CASES:
        pytest.skip(f"engine {name!r} has no fast case in tests/runners/test_engine_contract.py")
    return CASES[name]()


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Proposal, RunRecord, list]]]:
    """Run each engine's proposals once (seed 11) and keep progress calls; shared by tests."""
    out: dict[str, list[tuple[Proposal, RunRecord, list]]] = {}
    for name in ENGINES:
        if name not in CASES:
            continue
        case = CASES[name]()
        engine = case.make(tmp_path_factory.mktemp(name))
        runs = []
        for p in case.proposals():
            calls: list[tuple[Any, ...]] = []
            rec = engine.run(p, 11, progress=lambda *a, _c=calls: _c.append(a))
            runs.append((p, rec, calls))
        out[name] = runs
    return out


def test_sim_is_installed() -> None:
    assert "sim" in ENGINES


@pytest.mark.parametrize("name", ENGINES)
def test_engine_loads_and_is_an_engine(name: str, tmp_path: Path) -> None:
    engine = _case(name).make(tmp_path)
    assert isinstance(engine, Engine)
    assert engine.name == name


@pytest.mark.parametrize("name", ENGINES)
def test_record_fields(name: str, records: dict) -> None:
    _case(name)
    for p, rec, _ in records[name]:
        assert isinstance(rec, RunRecord)
        assert rec.status == "ok" and rec.error is None
        assert rec.engine == name
        assert rec.run_id == run_id_for(p.id, 11) and rec.proposal_id == p.id
        assert (rec.model, rec.reward, rec.budget, rec.seed) == (p.model, p.reward, p.budget, 11)
        assert rec.rho_planned == pytest.approx(p.plan.rho)
        assert rec.model_params > 0
        assert rec.provenance.get("simulated") is rec.simulated
        if not rec.simulated:  # which weights the run started from, not only their folder
            import hashlib

            files = sorted(Path(rec.provenance["policy"]).glob("*.safetensors"))
            digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
            assert rec.provenance["policy_weights"] == f"sha256:{digest}"
        m = rec.metrics
        for t in TARGETS:
            for v in (getattr(m, t), getattr(m, f"{t}_base")):
                assert v is not None and math.isfinite(v) and 0.0 <= v <= 1.0, (t, v)


@pytest.mark.parametrize("name", ENGINES)
def test_compute_card_meets_the_budget(name: str, records: dict) -> None:
    _case(name)
    for p, rec, _ in records[name]:
        f = rec.card.flops
        assert min(f.search, f.learning, f.reward) >= 0
        assert f.total == pytest.approx(f.search + f.learning + f.reward, rel=1e-9)
        assert abs(f.total - p.budget) <= 0.02 * p.budget
        assert rec.card.rho == pytest.approx(f.learning / f.total, abs=1e-9)
        assert abs(rec.card.rho - p.plan.rho) <= 0.05
        assert (f.reward > 0) == (p.plan.flops.reward > 0)  # rule rewards cost no FLOPs
        assert rec.card.tokens.get("completion_generated", 0) > 0
        assert rec.card.tokens.get("trained", 0) > 0


@pytest.mark.parametrize("name", ENGINES)
def test_progress_reports_are_monotone(name: str, records: dict) -> None:
    _case(name)
    for p, _, calls in records[name]:
        assert calls, "the engine never reported progress"
        done = [c[1] for c in calls]
        assert all(isinstance(c[0], str) and isinstance(c[3], dict) for c in calls)
        assert done == sorted(done) and done[-1] <= 1.02 * p.budget


@pytest.mark.parametrize("name", ENGINES)
def test_flat_row_and_store_round_trip(name: str, records: dict, tmp_path: Path) -> None:
    _case(name)
    store = PilotStore(tmp_path)
    for _, rec, _ in records[name]:
        row = rec.to_row()
        assert set(FLAT_COLUMNS) <= set(row)
        assert RunRecord.from_row(row) == rec
        store.write(rec)
    back = {r.run_id: r for r in store.records()}
    assert back == {rec.run_id: rec for _, rec, _ in records[name]}


@pytest.mark.parametrize("name", ENGINES)
def test_stored_rows_have_the_store_schema(name: str, records: dict, tmp_path: Path) -> None:
    """Every engine's records land in parquet with exactly the store's column types (a
    float metric written as an int, or a column the schema does not list, would make
    one engine's files clash with another's in one table) and with values that fit them."""
    import polars as pl

    from runners.store import ROW_SCHEMA

    _case(name)
    store = PilotStore(tmp_path)
    kinds = {pl.Float64: (float,), pl.Int64: (int,), pl.Utf8: (str,), pl.Boolean: (bool,)}
    for _, rec, _ in records[name]:
        row = rec.to_row()
        assert set(row) == set(ROW_SCHEMA), set(row) ^ set(ROW_SCHEMA)
        for k, v in row.items():
            ok = kinds[ROW_SCHEMA[k]]
            assert v is None or (isinstance(v, ok) and not (ok == (int,) and isinstance(v, bool))), (k, v)
        path = store.write(rec)
        assert dict(pl.read_parquet_schema(path)) == ROW_SCHEMA
    assert store.table().schema == pl.Schema(ROW_SCHEMA)
