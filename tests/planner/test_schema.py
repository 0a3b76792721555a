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
        ({"target_budget": 0.0}, "target_budget"),
        # Read strictly: a number written as a string, "yes" for a bool (docs/schema.md).
        ({"proposals__0__plan__num_iterations": "1"}, "num_iterations"),
        ({"proposals__0__plan__old_logprobs": "yes"}, "old_logprobs"),
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
    n = len(body["proposals"]) - 1
    # The field once came twice: "field '(file)': proposals.1.id: duplicate ...".
    with pytest.raises(ConfigError, match=rf"^proposals: field 'proposals\.{n}\.id': duplicate proposal id "):
        ProposalSet.load_json(json.dumps(body))
    with pytest.raises(ConfigError, match="JSON"):
        ProposalSet.load_json(b"\x00\x01 not json")


def test_a_file_nested_too_deep_for_json_is_the_one_line_error() -> None:
    # json.loads recursing past the limit was a RecursionError traceback, exit 1.
    for text in ("[" * 3000 + "]" * 3000, '{"a": ' + "[" * 3000 + "]" * 3000 + "}"):
        with pytest.raises(ConfigError, match=r"^proposals: not valid JSON"):
            ProposalSet.load_json(text)


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


@pytest.mark.parametrize(("overrides", "message"), [
    # A reward model named as the policy, its plan agreeing: refused for what it is (the
    # "model" case above also trips the plan/proposal mismatch, so it did not show this).
    ({"proposals__0__model": "tiny-prm", "proposals__0__plan__model": "tiny-prm"}, "is a reward model, not a policy"),
    # Request and plan edited apart: each half of the pair is checked.
    ({"proposals__0__model": "tiny-m"}, "plan.model/plan.reward must match"),
    ({"proposals__0__reward": "sparse"}, "plan.model/plan.reward must match"),
    ({"proposals__0__budget": 3e12}, "disagrees with plan.budget"),
    ({"proposals__0__rho": 0.6}, "disagrees with plan.rho_target"),
])
def test_a_proposal_must_agree_with_its_plan(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^proposals: ") as info:
        ProposalSet.load_json(_set_json(**overrides))
    assert message in str(info.value)


# RunPlan's ranges, at their edges: counts are positive, a GRPO group has at least two
# completions, mu at least one pass, FLOPs and beta non-negative and finite.
_PLAN_OK = [("budget", 0.5), ("prompt_len", 1), ("completion_len", 1), ("max_completion_length", 1),
            ("prompts_per_round", 1), ("total_prompts", 1), ("rounds", 1), ("completions_per_prompt", 2),
            ("completions_kept", 2), ("num_iterations", 1), ("beta", 0.0), ("lora_rank", 1), ("lora_alpha", 1),
            ("rho", 0.0), ("rho", 1.0), ("flops__search", 0.0), ("flops__learning", 0.5)]
_PLAN_BAD = [("budget", 0.0), ("prompt_len", 0), ("completions_per_prompt", 1), ("completions_kept", 1),
             ("num_iterations", 0), ("beta", -0.1), ("beta", float("inf")), ("lora_rank", 0), ("rho", 1.01),
             ("rho_target", 1.0), ("rho_target", 0.0), ("budget", float("inf")),
             ("flops__search", -1.0), ("flops__learning", float("inf")), ("flops__reward", float("nan")),
             ("flops__total", float("inf")), ("flops__search", float("inf")), ("flops__reward", float("inf"))]


def _plan_with(field: str, value: object) -> dict:
    body = _proposal().plan.model_dump()
    node, keys = body, field.split("__")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return body


@pytest.mark.parametrize(("field", "value"), _PLAN_OK)
def test_run_plan_ranges_take_their_edges(field: str, value: object) -> None:
    from planner.schema import RunPlan

    RunPlan.model_validate(_plan_with(field, value))


@pytest.mark.parametrize(("field", "value"), _PLAN_BAD)
def test_run_plan_ranges_refuse_past_their_edges(field: str, value: object) -> None:
    from pydantic import ValidationError

    from planner.schema import RunPlan

    with pytest.raises(ValidationError):
        RunPlan.model_validate(_plan_with(field, value))


def test_seed_counts_run_from_one_to_max_seeds() -> None:
    from planner.schema import MAX_SEEDS, check_seed_count

    assert check_seed_count(1) == 1 and check_seed_count(MAX_SEEDS) == MAX_SEEDS
    for bad in (0, -1, MAX_SEEDS + 1):
        with pytest.raises(ConfigError, match=f"^seeds: must be 1-{MAX_SEEDS} "):
            check_seed_count(bad)


def test_flops_split_rho_and_a_cards_metered_rho() -> None:
    from planner.schema import FlopsSplit

    assert FlopsSplit(search=3.0, learning=1.0, reward=0.0, total=4.0).rho == 0.25
    assert FlopsSplit(search=0.25, learning=0.75, reward=0.0, total=1.0).rho == 0.75  # any positive total
    assert FlopsSplit(search=0.0, learning=0.0, reward=0.0, total=0.0).rho == 0.0  # no FLOPs: no division
    for search, learning, reward in ((3.0, 1.0, 0.0), (2.0, 2.0, 0.0), (0.0, 1.0, 1.0)):
        card = ComputeCard(flops=FlopsSplit(search=search, learning=learning, reward=reward, total=4.0),
                           rho=learning / 4.0)
        assert card.metered_rho == learning / 4.0
    # A failed run's partial card with only a total: its rho of 0 means unknown.
    partial = ComputeCard(flops=FlopsSplit(search=0.0, learning=0.0, reward=0.0, total=5e9), rho=0.0)
    assert partial.metered_rho is None


def test_prediction_and_record_defaults() -> None:
    from planner.schema import Prediction

    pred = Prediction(mean=0.5, std=0.5)
    assert pred.target == "native" and pred.extrapolated is False and pred.extrapolated_why is None
    # A reason for a prediction not marked a guess contradicts itself.
    with pytest.raises(ValueError, match="extrapolated_why: given for a prediction not marked"):
        Prediction(mean=0.5, std=0.5, extrapolated_why="its reward system has no fitted run")
    assert Prediction(mean=0.5, std=0.5, extrapolated=True, extrapolated_why="x").extrapolated_why == "x"
    rec = _record()
    assert rec.attempt == 1 and rec.wall_s == 0.0 and rec.error is None and rec.metrics == Metrics(
        native=0.5, judge=0.7)
    # Records, cards and metrics are values: never edited in place.
    for obj, field, value in ((rec, "seed", 4), (rec.card, "rho", 0.1), (rec.metrics, "native", 0.1)):
        with pytest.raises(Exception, match="frozen"):
            setattr(obj, field, value)


def test_ok_and_failed_records_of_a_proposal() -> None:
    from planner.schema import FlopsSplit

    p = _proposal()
    card = ComputeCard(flops=p.plan.flops, rho=p.plan.rho)
    ok = RunRecord.ok(p, 2, engine="sim", simulated=True, card=card, metrics=Metrics(native=0.4), wall_s=1.5,
                      provenance={"k": "v"})
    assert (ok.run_id, ok.proposal_id, ok.status, ok.seed, ok.attempt) == (run_id_for(p.id, 2), p.id, "ok", 2, 1)
    assert (ok.model, ok.reward, ok.budget, ok.rho_planned, ok.plan) == (p.model, p.reward, p.budget, p.plan.rho, p.plan)
    assert ok.model_params > 0 and ok.created_at.endswith("+00:00") and ok.inconsistency() is None
    bad = RunRecord.failed(p, 2, engine="sim", simulated=True, error="boom")
    assert (bad.status, bad.error, bad.attempt, bad.wall_s, bad.provenance) == ("failed", "boom", 1, 0.0, {})
    # None metered: an empty card, marked partial.
    assert bad.card.flops == FlopsSplit(search=0.0, learning=0.0, reward=0.0, total=0.0)
    assert bad.card.rho == 0.0 and bad.card.model_extra == {"partial": True}
    assert bad.metrics == Metrics() and bad.inconsistency() is None
    third = RunRecord.failed(p, 2, engine="sim", simulated=True, error="boom", card=card, attempt=3)
    assert third.card == card and third.attempt == 3


def test_a_failed_record_drops_metrics_that_are_not_rates_and_says_so() -> None:
    """A dying run's metrics are a bonus: one that is not a rate made the store read the
    failure back as corrupt, so the attempt and its card were lost (and the run retried)."""
    p = _proposal()
    card = ComputeCard(flops=p.plan.flops, rho=p.plan.rho)
    rec = RunRecord.failed(p, 0, engine="sim", simulated=True, error="error: oom", card=card,
                           metrics=Metrics(native=55.0, pass1=0.25, judge=float("nan")))
    assert rec.metrics == Metrics() and rec.card == card and rec.inconsistency() is None
    assert rec.error == "error: oom (its metrics were dropped: native 55.0, judge nan not rates in [0, 1])"
    good = RunRecord.failed(p, 0, engine="sim", simulated=True, error="error: oom", metrics=Metrics(native=0.5))
    assert good.metrics == Metrics(native=0.5) and good.error == "error: oom"
    assert RunRecord.from_row(rec.to_row()) == rec  # the store reads it back


def test_a_consistent_record_is_not_called_inconsistent() -> None:
    """Metrics at the ends of [0, 1] are rates, and an ok card's split with reward FLOPs
    (a PRM's) sums to its total."""
    from planner.schema import FlopsSplit

    rec = _record()
    ends = rec.model_copy(update={"metrics": Metrics(native=1.0, pass1=0.0, judge=1.0, native_base=0.0)})
    assert ends.inconsistency() is None
    card = ComputeCard(flops=FlopsSplit(search=1.0, learning=1.0, reward=2.0, total=4.0), rho=0.25)
    assert rec.model_copy(update={"card": card}).inconsistency() is None


def test_a_row_without_the_bookkeeping_columns_reads_with_their_defaults() -> None:
    rec = _record()
    row = rec.to_row()
    for col in ("error", "attempt", "wall_s", "created_at", "provenance_json"):
        del row[col]
    back = RunRecord.from_row(row)
    assert (back.error, back.attempt, back.wall_s, back.created_at, back.provenance) == (None, 1, 0.0, "", {})


def test_a_proposal_set_target_budget_is_positive_and_finite() -> None:
    p = _proposal()
    assert ProposalSet(proposals=(p,), target_budget=0.5).target_budget == 0.5
    for bad in (0.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="target_budget"):
            ProposalSet(proposals=(p,), target_budget=bad)


def test_one_bad_field_is_one_error_and_more_are_counted() -> None:
    with pytest.raises(ConfigError) as one:
        ProposalSet.load_json(_set_json(proposals__0__rho=1.5))
    assert "more)" not in str(one.value)
    with pytest.raises(ConfigError) as two:
        ProposalSet.load_json(_set_json(proposals__0__rho=1.5, proposals__0__reason=3))
    assert "(+1 more)" in str(two.value)
