"""Schemas: proposals validate at the boundary, records round-trip through their flat row."""

from __future__ import annotations

import json

import pytest

from planner.compiler import compile_plan
from planner.errors import ConfigError
from planner.proposals import make_proposal
from planner.schema import (
    FLAT_COLUMNS,
    ComputeCard,
    Metrics,
    ProposalSet,
    RunRecord,
    run_id_for,
)


def _proposal(rho: float = 0.5):  # type: ignore[no-untyped-def]
    return make_proposal(compile_plan("tiny-s", "dense", rho, 2e12), reason="test")


def _record() -> RunRecord:
    p = _proposal()
    return RunRecord(
        run_id=run_id_for(p.id, 3),
        proposal_id=p.id,
        status="ok",
        engine="sim",
        simulated=True,
        model=p.model,
        model_params=1e5,
        reward=p.reward,
        budget=p.budget,
        rho_planned=p.plan.rho,
        seed=3,
        plan=p.plan,
        card=ComputeCard(flops=p.plan.flops, rho=p.plan.rho, tokens={"trained": 10}),
        metrics=Metrics(native=0.5, pass1=None, judge=0.7),
    )


def test_record_row_round_trip() -> None:
    rec = _record()
    row = rec.to_row()
    assert set(FLAT_COLUMNS) <= set(row)
    assert RunRecord.from_row(row) == rec
    assert row["flops_total"] == pytest.approx(rec.plan.flops.total)
    assert row["pass1"] is None and row["native"] == 0.5


def test_corrupt_row_is_a_one_line_error() -> None:
    row = _record().to_row()
    row["plan_json"] = "{not json"
    with pytest.raises(ConfigError, match="record") as info:
        RunRecord.from_row(row)
    assert "\n" not in str(info.value)


def test_proposal_ids_are_content_derived() -> None:
    assert _proposal(0.5).id == _proposal(0.5).id != _proposal(0.6).id


def test_plans_of_one_request_with_other_levers_get_other_ids() -> None:
    from planner.compiler import compile_plan
    from planner.design import compile_pilot
    from planner.proposals import make_proposal

    # The same (model, reward, rho, budget) request, compiled by the grid's IsoFLOP compiler
    # and by ours' pilot compiler (which keeps the target's levers): other plans, other ids.
    a = compile_plan("qwen2.5-7b", "sparse", 0.33, 3e15)
    b = compile_pilot("qwen2.5-7b", "sparse", 0.33, 3e15, 1e18)
    assert (a.completions_per_prompt, a.num_iterations) != (b.completions_per_prompt, b.num_iterations)
    assert make_proposal(a).id != make_proposal(b).id
    assert make_proposal(a).id == make_proposal(compile_plan("qwen2.5-7b", "sparse", 0.33, 3e15)).id


def _set_json(**overrides: object) -> str:
    body = json.loads(ProposalSet(proposals=(_proposal(),)).model_dump_json())
    for path, value in overrides.items():
        node = body
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        node[keys[-1]] = value
    return json.dumps(body)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"proposals__0__rho": 1.5}, "rho"),
        ({"proposals__0__rho": -0.1}, "rho"),
        ({"proposals__0__budget": -5}, "budget"),
        ({"proposals__0__model": "gpt-9"}, "model"),
        ({"proposals__0__reward": "vibes"}, "reward"),
        ({"proposals__0__model": "tiny-prm"}, "model"),
        ({"schema_version": 7}, "schema_version"),
        ({"proposals__0__plan__num_iterations": "many"}, "num_iterations"),
        # Unpriced by the accountant: a KeyError traceback before the schema checked names.
        ({"proposals__0__plan__lora_targets": ["nope"]}, "lora_targets': unknown module 'nope'"),
        ({"proposals__0__plan__lora_targets": []}, "lora_targets': empty"),
        ({"proposals__0__plan__lora_targets": ["q_proj", "q_proj"]}, "names a module twice"),
        # A hidden file name: the store's readers never saw its record.
        ({"proposals__0__id": ".hidden"}, "proposals.0.id"),
    ],
)
def test_bad_proposals_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProposalSet.load_json(_set_json(**overrides))
    msg = str(info.value)
    assert field in msg and "\n" not in msg


def test_nan_budget_and_duplicates_and_garbage() -> None:
    text = _set_json().replace('"budget": 2000000000000.0', '"budget": NaN', 1)
    with pytest.raises(ConfigError, match="budget must be a finite number"):  # not "greater than 0"
        ProposalSet.load_json(text)
    with pytest.raises(ConfigError, match="rho must be a finite number"):  # not "less than 1"
        ProposalSet.load_json(_set_json(proposals__0__rho=float("nan")))
    body = json.loads(_set_json())
    body["proposals"].append(body["proposals"][0])
    with pytest.raises(ConfigError, match="duplicate"):
        ProposalSet.load_json(json.dumps(body))
    with pytest.raises(ConfigError, match="JSON"):
        ProposalSet.load_json(b"\x00\x01 not json")


def test_a_byte_order_mark_is_no_content_and_a_syntax_error_says_one_fix() -> None:
    # Windows editors save a BOM: it once read as invalid JSON at line 1 column 1.
    text = _set_json()
    assert ProposalSet.load_json("\ufeff" + text) == ProposalSet.load_json(text)
    assert ProposalSet.load_json(b"\xef\xbb\xbf" + text.encode()) == ProposalSet.load_json(text)
    with pytest.raises(ConfigError) as info:
        ProposalSet.load_json(text[:-3])
    msg = str(info.value)
    assert msg.startswith("proposals: not valid JSON (") and "fix that field" not in msg
    assert msg.endswith("; fix the file's syntax, or write the file anew with `planner suggest` (or `planner plan`)")
