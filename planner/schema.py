"""Versioned, validated schemas: run plans, proposals (``proposals.json``) and run records.

A record is one pilot run. On disk each record is one parquet row with the flat columns
of :data:`FLAT_COLUMNS` (what people query with polars) plus JSON columns holding the
nested plan, compute card, metrics and provenance (what round-trips the record).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.errors import ConfigError

__all__ = [
    "FLAT_COLUMNS",
    "MAX_SEED",
    "MAX_SEEDS",
    "SCHEMA_VERSION",
    "TARGETS",
    "ComputeCard",
    "FlopsSplit",
    "Metrics",
    "Prediction",
    "Proposal",
    "ProposalSet",
    "RunPlan",
    "RunRecord",
    "check_seed_count",
    "first_error",
    "run_id_for",
]

SCHEMA_VERSION: Final = 1
TARGETS: tuple[str, ...] = ("native", "pass1", "judge")
# Seed replicates of one proposal a command accepts: a few measure a run's noise, and
# every seed is one run; a typo of a few more digits would build a grid of 10^8 runs
# (memory first, runs never) before any cap could refuse it.
MAX_SEEDS = 1000
# The store keeps a seed in an Int64 column: a larger one would overflow there, after the run.
MAX_SEED = 2**63 - 1
Target = Literal["native", "pass1", "judge"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def check_seed_count(seeds: int) -> int:
    """``seeds`` if it is a seed count a command takes (1 to :data:`MAX_SEEDS`), else a
    one-line :class:`ConfigError`."""
    if not 1 <= seeds <= MAX_SEEDS:
        raise ConfigError(f"seeds: must be 1-{MAX_SEEDS} (each seed is a run of every proposal), got {seeds}")
    return seeds


def _finite(v: float, name: str) -> float:
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number")
    return v


def _or_null(v: float | None) -> float | None:
    return v if v is None or math.isfinite(v) else None


class FlopsSplit(BaseModel):
    """FLOPs by component (search = rollouts, learning = updates, reward = feedback)."""

    model_config = _FROZEN
    # allow_inf_nan=False: an infinite FLOP count in a proposal or card is always corrupt.
    search: float = Field(ge=0, allow_inf_nan=False)
    learning: float = Field(ge=0, allow_inf_nan=False)
    reward: float = Field(ge=0, allow_inf_nan=False)
    total: float = Field(ge=0, allow_inf_nan=False)

    @property
    def rho(self) -> float:
        return self.learning / self.total if self.total > 0 else 0.0


class RunPlan(BaseModel):
    """A compiled GRPO/LoRA run: the TRL knobs and the planned FLOP split."""

    model_config = _FROZEN
    model: str
    reward: str
    budget: float = Field(gt=0, description="FLOP budget of the run")
    rho_target: float = Field(gt=0, lt=1)
    rho: float = Field(ge=0, le=1, description="planned rho the levers achieve")
    prompt_len: int = Field(gt=0, description="expected prompt tokens")
    completion_len: int = Field(gt=0, description="expected completion tokens")
    max_completion_length: int = Field(gt=0)
    prompts_per_round: int = Field(gt=0, description="prompts per generation round")
    total_prompts: int = Field(gt=0)
    rounds: int = Field(gt=0, description="generation rounds; the last may be partial")
    completions_per_prompt: int = Field(ge=2, description="completions generated per prompt")
    completions_kept: int = Field(ge=2, description="completions trained on per prompt")
    num_iterations: int = Field(ge=1, description="update passes per rollout batch (TRL mu)")
    old_logprobs: bool = Field(description="an extra forward for old-policy log-probs")
    beta: float = Field(ge=0, allow_inf_nan=False, description="KL coefficient; > 0 adds a reference forward")
    gradient_checkpointing: bool
    lm_head_positions: Literal["completion", "all"] = Field(
        description="positions TRL's fused LM head scores: completion tokens (GPU) or all (CPU)"
    )
    lora_rank: int = Field(gt=0)
    lora_alpha: int = Field(gt=0)
    lora_targets: tuple[str, ...]
    flops: FlopsSplit
    flops_per_prompt: FlopsSplit

    @field_validator("budget")
    @classmethod
    def _budget_finite(cls, v: float) -> float:
        return _finite(v, "budget")

    @field_validator("lora_targets")
    @classmethod
    def _known_lora_targets(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        # Checked where a plan is read: an unknown name was a KeyError deep in the FLOP check.
        from planner.architecture import lora_targets_problem

        if (problem := lora_targets_problem(v)) is not None:
            raise ValueError(problem)
        return v


class Prediction(BaseModel):
    """What a proposal's run is expected to measure under ``target``: the posterior mean and
    the std of one run's measurement."""

    model_config = _FROZEN
    target: Target = "native"
    mean: float
    std: float = Field(ge=0)
    extrapolated: bool = Field(
        default=False,
        description="no fitted run reached this budget (none within half of it), or the setting has no run of "
        "its own and its reward system has no fitted run, its policy lies outside the fitted policies' sizes, "
        "or the fitted settings cannot tell a policy's effect from a reward's (no fitted policy ran two reward "
        "systems, or no reward system ran at two policies): the mean carries other runs' level over and the "
        "std assumes the setting is like them; or one setting is fitted and no seed replicates measured its "
        "noise, so the std rests on the fit's guess of it. Read it as a guess",
    )
    extrapolated_why: str | None = Field(
        default=None, description="which of those makes it a guess (null where it is not one)"
    )

    @model_validator(mode="after")
    def _why_with_flag(self) -> Prediction:
        if self.extrapolated_why is not None and not self.extrapolated:
            raise ValueError("extrapolated_why: given for a prediction not marked extrapolated; drop it, or set "
                             "extrapolated to true")
        return self


class Proposal(BaseModel):
    """One run the planner wants executed."""

    model_config = _FROZEN
    # Not a leading dot: the store's readers skip hidden files, so its record went unseen.
    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_:+=-][A-Za-z0-9._:+=-]*$")
    model: str
    reward: str
    rho: float = Field(gt=0, lt=1, description="requested update fraction")
    budget: float = Field(gt=0, description="FLOP budget")
    target: Target = "native"
    plan: RunPlan
    prediction: Prediction | None = None
    reason: str = ""

    @field_validator("budget", "rho", mode="before")
    @classmethod
    def _finite_fields(cls, v: Any, info: Any) -> Any:
        # Before the range checks: NaN fails `lt=1` too, with a message that hides why.
        return _finite(v, info.field_name) if isinstance(v, float) else v

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        from planner.registry import get_model

        if get_model(v).role != "policy":
            raise ValueError(f"{v!r} is a reward model, not a policy")
        return v

    @field_validator("reward")
    @classmethod
    def _known_reward(cls, v: str) -> str:
        from planner.registry import get_reward

        get_reward(v)
        return v

    @model_validator(mode="after")
    def _plan_matches(self) -> Proposal:
        if (self.plan.model, self.plan.reward) != (self.model, self.reward):
            raise ValueError("plan.model/plan.reward must match the proposal's model/reward")
        # The proposal's request and its compiled plan travel together; one edited alone
        # would run the plan while the record claimed the request.
        if not math.isclose(self.plan.budget, self.budget, rel_tol=1e-9):
            raise ValueError(f"budget {self.budget:.6g} disagrees with plan.budget {self.plan.budget:.6g}; "
                             "recompile the proposal")
        if not math.isclose(self.plan.rho_target, self.rho, abs_tol=1e-9):
            raise ValueError(f"rho {self.rho:.6g} disagrees with plan.rho_target {self.plan.rho_target:.6g}; "
                             "recompile the proposal")
        return self


class ProposalSet(BaseModel):
    """The ``proposals.json`` file."""

    model_config = _FROZEN
    schema_version: Literal[1] = SCHEMA_VERSION
    created_by: str = "planner"
    target_budget: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    proposals: tuple[Proposal, ...]

    @model_validator(mode="after")
    def _unique_ids(self) -> ProposalSet:
        seen: set[str] = set()
        for i, p in enumerate(self.proposals):
            if p.id in seen:
                # The error has no field location of its own here: name it in the message.
                raise ValueError(f"proposals.{i}.id: duplicate proposal id {p.id!r}; ids must be unique")
            seen.add(p.id)
        return self

    @classmethod
    def load_json(cls, text: str | bytes, field: str = "proposals") -> ProposalSet:
        """Parse and validate; raise :class:`ConfigError` with a one-line message naming the
        option that gave the file (``field``) and the field inside it."""
        # A byte-order mark (Windows editors save one) is no content.
        text = text.removeprefix(b"\xef\xbb\xbf") if isinstance(text, bytes) else text.removeprefix("\ufeff")
        try:
            # strict: a number written as a string or "yes" for a bool is a hand edit gone
            # wrong, not something to coerce.
            return cls.model_validate_json(text, strict=True)
        except Exception as exc:  # pydantic.ValidationError, or not JSON at all
            if other := _not_proposals(text):
                # A race's regimes.json given for its proposals: "fix field 'strategy'" was no fix.
                raise ConfigError(f"{field}: the file is {other} with no 'proposals' list, not a proposals file; "
                                  "give the proposals.json that `planner suggest` (or `planner plan --out`) "
                                  "wrote") from None
            msg = first_error(exc)
            fix = "" if msg.startswith("not valid JSON") else "; fix that field"
            raise ConfigError(f"{field}: {msg}{fix}, or write the file anew with "
                              "`planner suggest` (or `planner plan`)") from None


def _not_proposals(text: str | bytes) -> str | None:
    """What a JSON object without a ``proposals`` key is (a race's or a report's summary,
    or some other object), or None for anything else: that is a proposals file's to name."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # a file nested 2,000 deep: json recurses
        return None
    if isinstance(doc, list) and doc and all(isinstance(d, dict) and "plan" in d for d in doc):
        # `planner suggest --json > list.json`: "Input should be an object, write the file
        # anew with `planner suggest`" sent the user back to the command they had used.
        return "a bare list of proposals (what `planner suggest --json` prints, beside the file it writes to --out)"
    if not isinstance(doc, dict) or not doc or "proposals" in doc:
        return None
    if doc.get("generated_by") == "planner report":
        return "a report's regime calls"
    if "stop_reason" in doc and "settings" in doc:
        return "a race's summary (regimes.json)"
    return f"a JSON object of other keys ({', '.join(map(repr, list(doc)[:3]))}{', ...' if len(doc) > 3 else ''})"


class ComputeCard(BaseModel):
    """Metered compute of one run: the allocation-aware record the paper asks for."""

    model_config = ConfigDict(frozen=True, extra="allow")
    flops: FlopsSplit
    rho: float = Field(ge=0, le=1)
    tokens: dict[str, int] = Field(
        default_factory=dict,
        description="prompt_generated, completion_generated, trained, reward_scored, ...",
    )
    wall_s: dict[str, float] = Field(
        default_factory=dict, description="search, learning, reward, eval, total"
    )
    hardware: str = ""
    software: dict[str, str] = Field(default_factory=dict)

    @property
    def metered_rho(self) -> float | None:
        """rho, or None where no split was metered: a failed run's partial card may keep
        only a total, and its rho of 0 then means unknown, not all search."""
        return self.rho if self.flops.search + self.flops.learning + self.flops.reward else None


class Metrics(BaseModel):
    """Target metrics after training (and of the base policy, where measured)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    native: float | None = None
    pass1: float | None = None
    judge: float | None = None
    native_base: float | None = None
    pass1_base: float | None = None
    judge_base: float | None = None


class RunRecord(BaseModel):
    """One pilot run, as the store keeps it."""

    model_config = _FROZEN
    schema_version: Literal[1] = SCHEMA_VERSION
    run_id: str
    proposal_id: str
    status: Literal["ok", "failed"]
    engine: str
    simulated: bool
    model: str
    model_params: float = Field(gt=0, description="policy parameters")
    reward: str
    budget: float = Field(gt=0)
    rho_planned: float
    seed: int
    plan: RunPlan
    card: ComputeCard
    metrics: Metrics = Metrics()
    error: str | None = None
    attempt: int = 1
    wall_s: float = 0.0
    created_at: str = ""
    provenance: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def ok(
        cls,
        proposal: Proposal,
        seed: int,
        *,
        engine: str,
        simulated: bool,
        card: ComputeCard,
        metrics: Metrics,
        wall_s: float,
        provenance: dict[str, Any],
    ) -> RunRecord:
        """The record of a finished run of ``proposal``: the setting comes from its plan, the
        run id from (proposal id, seed), the time stamp from now (UTC)."""
        return cls._of(proposal, seed, status="ok", engine=engine, simulated=simulated, card=card,
                       metrics=metrics, wall_s=wall_s, provenance=provenance)

    @classmethod
    def failed(
        cls,
        proposal: Proposal,
        seed: int,
        *,
        engine: str,
        simulated: bool,
        error: str,
        card: ComputeCard | None = None,
        metrics: Metrics | None = None,
        attempt: int = 1,
        wall_s: float = 0.0,
        provenance: dict[str, Any] | None = None,
    ) -> RunRecord:
        """The record of a failed attempt of ``proposal``: ``error`` is its one-line
        message, ``card`` the compute metered before it died (none metered: an empty,
        ``partial`` card)."""
        if card is None:
            card = ComputeCard(flops=FlopsSplit(search=0.0, learning=0.0, reward=0.0, total=0.0), rho=0.0,
                               partial=True)
        if metrics is not None and (bad := _not_rates(metrics)):
            # What a dying run measured is a bonus; one that is not a rate would make the store
            # read the record back as corrupt, and the failure, with its card, would be lost.
            error += " (its metrics were dropped: " + ", ".join(f"{n} {v}" for n, v in bad) + " not rates in [0, 1])"
            metrics = None
        return cls._of(proposal, seed, status="failed", engine=engine, simulated=simulated, card=card,
                       metrics=metrics or Metrics(), wall_s=wall_s, provenance=provenance or {},
                       error=error, attempt=attempt)

    @classmethod
    def _of(cls, proposal: Proposal, seed: int, **fields: Any) -> RunRecord:
        from datetime import UTC, datetime

        from planner.registry import get_model

        plan = proposal.plan
        return cls(
            run_id=run_id_for(proposal.id, seed),
            proposal_id=proposal.id,
            model=plan.model,
            model_params=float(get_model(plan.model).num_parameters),
            reward=plan.reward,
            budget=plan.budget,
            rho_planned=plan.rho,
            seed=seed,
            plan=plan,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            **fields,
        )

    def inconsistency(self) -> str | None:
        """What makes this record self-contradictory, as ``"field: what is wrong"``, or None.

        A record's JSON can parse and still be wrong (a hand edit, a copy from another
        store): its flat setting disagreeing with its plan would file the run under
        another setting, a non-finite or out-of-range metric would poison the surrogate,
        a card whose rho disagrees with its FLOPs would misstate the allocation. Metrics
        are rates in [0, 1] (every reward system scores in [0, 1]: rules by their
        definition, a PRM as a probability); an ok record's card is whole (its split sums
        to its total and gives its rho), a failed attempt's may be partial.
        """
        plan = self.plan
        if (self.model, self.reward) != (plan.model, plan.reward):
            return (f"model/reward: {self.model}/{self.reward} but its plan is for {plan.model}/{plan.reward} "
                    "(edited by hand?)")
        if not (math.isfinite(self.budget) and math.isclose(self.budget, plan.budget, rel_tol=1e-9)):
            return f"budget: {self.budget:.6g} but its plan's budget is {plan.budget:.6g} (edited by hand?)"
        if not math.isclose(self.rho_planned, plan.rho, abs_tol=1e-9):
            return f"rho_planned: {self.rho_planned} but its plan's rho is {plan.rho} (edited by hand?)"
        if self.run_id != run_id_for(self.proposal_id, self.seed):
            return (f"run_id: {self.run_id!r} is not proposal_id-s<seed> "
                    f"({run_id_for(self.proposal_id, self.seed)!r}; edited by hand?)")
        for name, v in _not_rates(self.metrics):
            return f"metrics.{name}: {v} is not a rate in [0, 1]"
        f = self.card.flops
        if self.status == "ok" and f.total > 0:
            if not math.isclose(f.search + f.learning + f.reward, f.total, rel_tol=1e-6):
                return (f"card.flops: search + learning + reward = {f.search + f.learning + f.reward:.6g} "
                        f"but total = {f.total:.6g}")
            if not math.isclose(self.card.rho, f.rho, abs_tol=1e-6):
                return f"card.rho: {self.card.rho} but its FLOPs give learning / total = {f.rho:.6g}"
        return None

    def to_row(self) -> dict[str, Any]:
        """The flat parquet row (see :data:`FLAT_COLUMNS`)."""
        f = self.card.flops
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "proposal_id": self.proposal_id,
            "status": self.status,
            "engine": self.engine,
            "simulated": self.simulated,
            "model": self.model,
            "model_params": float(self.model_params),
            "reward": self.reward,
            "budget": float(self.budget),
            "rho_planned": float(self.rho_planned),
            "rho": float(self.card.rho),
            "flops_search": float(f.search),
            "flops_learning": float(f.learning),
            "flops_reward": float(f.reward),
            "flops_total": float(f.total),
            # NaN as null, as metrics_json has it: a column that disagreed with the JSON
            # would make the store read its own file back as corrupt.
            "native": _or_null(self.metrics.native),
            "pass1": _or_null(self.metrics.pass1),
            "judge": _or_null(self.metrics.judge),
            "seed": int(self.seed),
            "wall_s": float(self.wall_s),
            "attempt": int(self.attempt),
            "error": self.error,
            "created_at": self.created_at,
            "plan_json": self.plan.model_dump_json(),
            "card_json": self.card.model_dump_json(),
            "metrics_json": self.metrics.model_dump_json(),
            "provenance_json": json.dumps(self.provenance, default=str),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        """Rebuild a record from its parquet row; :class:`ConfigError` if it is corrupt."""
        try:
            return cls(
                schema_version=row["schema_version"],
                run_id=row["run_id"],
                proposal_id=row["proposal_id"],
                status=row["status"],
                engine=row["engine"],
                simulated=row["simulated"],
                model=row["model"],
                model_params=row["model_params"],
                reward=row["reward"],
                budget=row["budget"],
                rho_planned=row["rho_planned"],
                seed=row["seed"],
                plan=RunPlan.model_validate_json(row["plan_json"]),
                card=ComputeCard.model_validate_json(row["card_json"]),
                metrics=Metrics.model_validate_json(row["metrics_json"]),
                error=row.get("error"),
                attempt=row.get("attempt", 1),
                wall_s=row.get("wall_s", 0.0),
                created_at=row.get("created_at", ""),
                provenance=_provenance(row.get("provenance_json")),
            )
        except KeyError as exc:  # a bare "'schema_version'" said nothing of what was wrong
            raise ConfigError(f"record: no column {exc.args[0]!r} (not a run record, or one written by another "
                              "tool)") from None
        except Exception as exc:
            raise ConfigError(f"record: {first_error(exc)}") from None


def _provenance(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"provenance_json is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"provenance_json must be a JSON object, got {type(value).__name__}")
    return value


_NESTED = {"plan", "card", "metrics", "provenance"}
FLAT_COLUMNS: tuple[str, ...] = (
    *(k for k in RunRecord.model_fields if k not in _NESTED),
    "rho",
    "flops_search",
    "flops_learning",
    "flops_reward",
    "flops_total",
    "native",
    "pass1",
    "judge",
)


def _not_rates(metrics: Metrics) -> list[tuple[str, float]]:
    """The metrics that are not rates in [0, 1] (non-finite, or out of range), by name."""
    return [(name, v) for name, v in metrics.model_dump().items()
            if v is not None and not (math.isfinite(v) and -1e-9 <= v <= 1 + 1e-9)]


def run_id_for(proposal_id: str, seed: int) -> str:
    """Deterministic run id: executing the same proposal with the same seed is the same run."""
    return f"{proposal_id}-s{seed}"


def first_error(exc: BaseException) -> str:
    """One line naming the offending field, from a pydantic error or anything else."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            errs = errors()
        except Exception:
            errs = []
        if errs:
            e = errs[0]
            loc = ".".join(str(x) for x in e.get("loc", ()))
            msg = str(e.get("msg", str(exc))).removeprefix("Value error, ")  # our own validators' text
            if not loc and (named := re.match(r"([A-Za-z_][\w]*(?:\.\w+)+): (.+)", msg)):
                # A whole-file check names its field in its text ("proposals.1.id: duplicate ..."):
                # "field '(file)': proposals.1.id: ..." named two.
                loc, msg = named.group(1), named.group(2)
            loc = loc or "(file)"
            if e.get("type") == "json_invalid":
                return f"not valid JSON ({msg}); fix the file's syntax"
            more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
            return f"field {loc!r}: {msg}{more}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
