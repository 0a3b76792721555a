"""One GRPO/LoRA run from a compiled plan: load, evaluate, train under the budget guard, evaluate.

The engine (:mod:`runners.engines.trl`) owns the record; this module owns the steps and
keeps a :class:`RunState` current, so a crash at any point still leaves a partial card.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from transformers.trainer_callback import TrainerCallback

from planner.accountant import LoRA
from planner.architecture import Architecture
from planner.engine import ProgressFn
from planner.errors import ConfigError
from planner.schema import Metrics, Proposal, RunPlan
from planner.threads import torch_threads
from runners.meter import BudgetGuard, FlopMeter, FlopMeterCallback

__all__ = ["EVAL_SEED", "RunState", "execute_plan", "grpo_config", "run_threads", "split_held"]

# Every run is evaluated on the same problems and sampling stream (base and after), so
# differences between runs are differences between policies, not between test sets.
EVAL_SEED = 20260
# The guard normally stops the run; this cap only bounds a run whose rounds turn out far
# cheaper than planned (e.g. every completion ends early).
MAX_STEPS_FACTOR = 4
# Prompt rows built before a run: a large budget's rows (4 x 2.2M prompts for tiny-s at
# 1e15) took gigabytes before the first step. Past this many the trainer cycles through the
# rows in epochs, as it does through a prompt set smaller than the run; a tiny-s run first
# meets it at ~5e13 FLOPs (and then only in the 4x head-room the guard normally leaves unused).
MAX_TRAIN_ROWS = 200_000


@dataclass
class RunState:
    """What a run has done so far (read by the engine for the card, also after a crash)."""

    policy: Architecture
    lora: LoRA
    scorer: Architecture | None
    meter: FlopMeter = field(init=False)
    eval_wall: float = 0.0
    rounds: list[int] = field(default_factory=list)
    stop_reason: str | None = None
    planned: dict[str, float] | None = None

    def __post_init__(self) -> None:
        self.meter = FlopMeter(self.policy, lora=self.lora, scorer=self.scorer)


def split_held(rows: list[dict[str, Any]], n_held: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(held-out, training) rows: the held-out ones come *first*, so every run measures
    ``native`` on the same problems whatever its plan (taking them from the end made the
    test set move with the plan's prompt count)."""
    return rows[:n_held], rows[n_held:]


def micro_batch_steps(plan: RunPlan, micro_batches: int) -> int:
    """The micro-batches a round of ``plan`` is stepped through (TRL steps through a round's
    generated and kept completions in equal micro-batches): the fewest, at least
    ``micro_batches``, that split both evenly; where none does, the most that do (their
    greatest common divisor). The run records the count it used (provenance
    ``micro_batches``).

    A memory bound, not an exact count (gradient accumulation: one optimizer step per
    round either way), because a race compiles its plans round by round: an exact count
    that did not split one of them stopped the race mid-way (4 asked of a round of 59 x 6 =
    354 generated and 4 x 6 = 24 kept takes 6; a 7b round of one prompt, 63 generated and
    4 kept, splits into 1 only, whatever was asked)."""
    if micro_batches < 1:
        raise ConfigError(f"micro_batches: must be a positive integer, got {micro_batches}")
    rows, kept = plan.prompts_per_round * plan.completions_per_prompt, plan.prompts_per_round * plan.completions_kept
    most = math.gcd(rows, kept)
    return next((d for d in range(int(micro_batches), most + 1) if most % d == 0), most)


def grpo_config(plan: RunPlan, *, device: str, seed: int, learning_rate: float, micro_batches: int = 1,
                use_vllm: bool = False, output_dir: str | None = None) -> Any:
    """TRL ``GRPOConfig`` for ``plan``: one optimizer step per pass over a generation batch of
    ``prompts_per_round * G`` completions, so old log-probs run exactly when mu > 1."""
    from trl import GRPOConfig

    g = plan.completions_per_prompt
    rows = plan.prompts_per_round * g
    steps = micro_batch_steps(plan, micro_batches)
    cuda = device.startswith("cuda")
    return GRPOConfig(
        output_dir=output_dir or tempfile.mkdtemp(prefix="race-trl-"),
        per_device_train_batch_size=rows // steps,
        steps_per_generation=steps,
        gradient_accumulation_steps=steps,
        num_generations=g,
        num_iterations=plan.num_iterations,
        beta=plan.beta,
        max_completion_length=plan.max_completion_length,
        temperature=1.0,
        learning_rate=learning_rate,
        # The guard decides when the run ends, so a schedule tied to max_steps would decay
        # against a fictitious horizon: constant rate, no warmup.
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_steps=MAX_STEPS_FACTOR * plan.rounds * plan.num_iterations + 8,
        logging_steps=1,
        # transformers' default swaps a NaN/inf step loss for the running mean before it is
        # logged; _Watch fails the run on a non-finite logged loss, so it must see the NaN.
        logging_nan_inf_filter=False,
        save_strategy="no",
        report_to=[],
        seed=seed,
        data_seed=seed,
        bf16=cuda,
        use_cpu=not cuda,
        activation_checkpointing=plan.gradient_checkpointing,
        disable_tqdm=True,
        dataloader_num_workers=0,
        log_completions=False,
        use_vllm=use_vllm,
        vllm_mode="colocate",
        # TRL's default corrects for vLLM's sampling policy with old log-probs computed every
        # round, an extra forward per kept completion at mu = 1 that no plan costs (the
        # compiler costs old log-probs only where mu > 1, as TRL runs them without vLLM).
        vllm_importance_sampling_correction=False,
    )


def _evaluate(model: Any, tokenizer: Any, rewards: Any, n: int, arch: Architecture, device: str,
              plan: RunPlan, held: list[dict[str, Any]], eval_data: Any) -> dict[str, float | None]:
    if arch.family != "tiny":
        from runners.grpo.gpu_eval import evaluate_math

        return evaluate_math(model, tokenizer, rewards, n=n, seed=EVAL_SEED, device=device, native_rows=held,
                             eval_data=eval_data, max_new_tokens=plan.max_completion_length)
    from runners.tinyworld.evaluate import evaluate_targets

    out = evaluate_targets(model, tokenizer, rewards, n=n, seed=EVAL_SEED, device=device)
    return {k: float(v) for k, v in out.items()}


def _lora_weights(model: Any) -> dict[str, Any]:
    return {n: p.detach().float().clone() for n, p in model.named_parameters() if "lora_" in n}


class _Watch(TrainerCallback):
    """Progress reports and NaN detection (a plain TrainerCallback)."""

    def __init__(self, state: RunState, trainer_ref: list[Any], budget: float, progress: ProgressFn | None) -> None:
        self.state, self.trainer_ref, self.budget, self.progress = state, trainer_ref, budget, progress
        self.loss: float | None = None

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        from runners.task import RunFailed

        for key in ("loss", "grad_norm"):
            v = (logs or {}).get(key)
            if v is not None and not math.isfinite(float(v)):
                raise RunFailed(f"{key} became {float(v)} at step {state.global_step}", kind="nan")
        if logs and "loss" in logs:
            self.loss = float(logs["loss"])

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        # The first round's generation runs before any step ends: a run that dies there died
        # in training, not in the base evaluation the last report named.
        if self.progress is not None:
            self.progress("train", self.state.meter.total, self.budget, {"step": 0})

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.progress is None:
            return
        trainer = self.trainer_ref[0]
        means = trainer.generated_reward_means
        split = self.state.meter.breakdown()
        info = {"step": state.global_step, "rounds": len(self.state.rounds), "rho": split.rho,
                "reward": means[-1] if means else None, "loss": self.loss,
                # A run killed later (OOM, timeout) gets its card from this report: the split too.
                "flops_search": split.search, "flops_learning": split.learning, "flops_reward": split.reward}
        self.progress("train", self.state.meter.total, self.budget, info)


def _quiet_transformers() -> None:
    """A run loads its policy (and evaluation copies) several times; each load drew a
    "Loading weights" bar that tore the race's live table, and TRL/peft read the
    ``is_gradient_checkpointing`` alias and ``gradient_checkpointing_enable``/``_disable``
    methods that transformers 5 deprecates (a FutureWarning per
    run that is theirs to fix, not the user's). Progress is shown by the race's
    live table."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=r"`(is_gradient_checkpointing|gradient_checkpointing_(enable|disable))` "
                            r"is deprecated", category=FutureWarning)


def run_threads(opts: dict[str, Any], arch: Architecture, device: str) -> int | None:
    """Torch intra-op threads for a run: the ``threads`` option, else 1 for a tiny policy
    on CPU (tiny matmuls gain nothing from intra-op threads, and on a shared CPU idle
    OpenMP threads spin-wait: measured 16x slower generation with 2 threads), else
    torch's own count (None)."""
    threads = opts.get("threads")
    if threads is None and arch.family == "tiny" and device == "cpu":
        return 1
    return int(threads) if threads else None


def execute_plan(engine: Any, proposal: Proposal, seed: int, state: RunState,
                 progress: ProgressFn | None) -> tuple[Metrics, dict[str, Any]]:
    """Run ``proposal`` with ``seed``; returns (metrics, provenance). Updates ``state`` as
    it goes. The thread count is the run's own: restored after it, so the process (an
    inline race's, which refits the surrogate next, or a warm worker's) keeps its own."""
    with torch_threads(run_threads(engine.opts, state.policy, engine.device)):
        return _execute(engine, proposal, seed, state, progress)


def _execute(engine: Any, proposal: Proposal, seed: int, state: RunState,
             progress: ProgressFn | None) -> tuple[Metrics, dict[str, Any]]:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import set_seed

    from runners.grpo.loading import (
        load_policy,
        load_tokenizer,
        resolve_policy_path,
        train_rows,
        weights_fingerprint,
    )
    from runners.grpo.trainer import RaceGRPOTrainer
    from runners.rewards import build_reward_system

    _quiet_transformers()
    plan, opts, device = proposal.plan, {**engine.defaults, **engine.opts}, engine.device
    arch = state.policy
    state.planned = plan.flops.model_dump()
    set_seed(seed)
    path = resolve_policy_path(arch, opts.get("policy_path"), quick=engine.quick, cache_dir=engine.cache_dir)
    tok = load_tokenizer(arch, path)
    model = load_policy(path, arch, tok, device=device)
    scorer_path = opts.get("scorer_path")
    if scorer_path is None and state.scorer is not None and arch.family == "tiny":
        from runners.tinyworld.pretrain import ensure_prm

        # Same recipe (quick or full) and cache as the policy.
        scorer_path = ensure_prm(state.scorer.name, quick=engine.quick, cache_dir=engine.cache_dir)  # type: ignore[arg-type]
    rewards = build_reward_system(plan.reward, arch.family, device=device, scorer_path=scorer_path)
    n_eval = int(opts["eval_samples"])

    n_rows = min(MAX_STEPS_FACTOR * plan.total_prompts + plan.prompts_per_round, MAX_TRAIN_ROWS)
    # Qwen runs measure `native` on training-distribution prompts they never train on.
    n_held = 0 if arch.family == "tiny" else n_eval
    rows = train_rows(arch, n_rows + n_held, seed, dataset=opts["dataset"],
                      data_path=opts.get("data_path"))
    held, rows = split_held(rows, n_held)

    def evaluate(m: Any, phase: str) -> dict[str, float | None]:
        t0 = time.perf_counter()
        if progress is not None:
            # The final evaluation follows all the training: a run killed in it keeps the
            # split (and rho) it trained, not a bare total.
            split = state.meter.breakdown()
            info = {"rho": split.rho, "flops_search": split.search, "flops_learning": split.learning,
                    "flops_reward": split.reward} if split.total > 0 else {}
            progress(phase, state.meter.total, plan.budget, info)
        out = _evaluate(m, tok, rewards, n_eval, arch, device, plan, held, opts.get("eval_data"))
        rewards.reset()  # evaluation scoring is not billed to the run
        state.eval_wall += time.perf_counter() - t0
        return out

    base = evaluate(model, "eval_base")
    meter = state.meter
    guard = BudgetGuard(
        meter, plan.budget, steps_per_round=plan.num_iterations, groups_per_round=plan.prompts_per_round,
        group_cost=plan.flops_per_prompt.total, partial_rounds=True,
    )
    state.rounds = guard.rounds
    lr = float(opts.get("learning_rate", 5e-4 if arch.family == "tiny" else 2e-5))
    # TRL wants an output folder even with nothing saved: one per run, removed with it
    # (mkdtemp left one behind per run).
    out_dir = tempfile.TemporaryDirectory(prefix="race-trl-")
    config = grpo_config(plan, device=device, seed=seed, learning_rate=lr,
                         micro_batches=int(opts["micro_batches"]), use_vllm=bool(opts.get("use_vllm")),
                         output_dir=out_dir.name)
    data = Dataset.from_list(rows)
    trainer_ref: list[Any] = []
    watch = _Watch(state, trainer_ref, plan.budget, progress)
    trainer = RaceGRPOTrainer(
        model=model, reward_funcs=rewards.funcs, args=config, train_dataset=data, processing_class=tok,
        peft_config=LoraConfig(r=plan.lora_rank, lora_alpha=plan.lora_alpha, target_modules=list(plan.lora_targets),
                               lora_dropout=0.0, task_type="CAUSAL_LM"),
        completions_kept=plan.completions_kept, round_sizer=guard.groups_for_round, meter=meter,
        callbacks=[guard, watch],
    )
    trainer_ref.append(trainer)
    # Our runs report through `progress` and the record; TRL's per-step log dicts on stdout
    # would only tear through the live display.
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    FlopMeterCallback.attach(trainer, meter=meter)
    if rewards.scorer is not None:
        meter.watch_scorer(rewards.scorer)
    before = _lora_weights(trainer.model)
    try:
        trainer.train()
    finally:
        meter.detach()
        out_dir.cleanup()
    state.stop_reason = guard.stop_reason or "max_steps"
    after_w = _lora_weights(trainer.model)
    delta = math.sqrt(sum(float((after_w[n] - w).pow(2).sum()) for n, w in before.items()))
    after = evaluate(trainer.model, "eval")
    metrics = Metrics(**after, **{f"{k}_base": v for k, v in base.items()})
    provenance = {
        "policy": path,
        "policy_weights": weights_fingerprint(path),
        "scorer": rewards.scorer_name,
        "scorer_weights": (weights_fingerprint(str(scorer_path))
                           if scorer_path is not None and state.scorer is not None else None),
        "adapter_delta_norm": delta,
        "optimizer_steps": int(trainer.state.global_step),
        "micro_batches": int(config.steps_per_generation),  # the count used: micro_batch_steps
        "learning_rate": lr,
        "eval_samples": n_eval,
        "eval_seed": EVAL_SEED,
        "reward_means": [round(x, 4) for x in trainer.generated_reward_means],
        "train_prompts": "tiny-world train split" if arch.family == "tiny" else opts["dataset"],
    }
    return metrics, provenance
