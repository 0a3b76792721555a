"""The FLOP meter against the ground truth: ``FlopCounterMode`` wrapped around the same real
GRPO training runs (tiny random Qwen2 policies, eager attention), the public callback's
log keys, and the budget guard.

FlopCounterMode has no formula for in-place ``addmm_``, which TRL's chunked LM head uses
for the hidden-state gradient on CPU; it would count that real GEMM as 0, so the tests
register the formula (``2 m k n``, like ``addmm``).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from planner.accountant import LoRA  # noqa: E402
from planner.registry import get_model  # noqa: E402
from runners.meter import LOG_KEYS, BudgetGuard, FlopMeter, FlopMeterCallback  # noqa: E402

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _addmm_(self_shape: Any, a_shape: Any, b_shape: Any, out_shape: Any = None, **_: Any) -> int:
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def counted(fn: Any) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False, custom_mapping={torch.ops.aten.addmm_: _addmm_}) as fc:
        fn()
    return int(fc.get_total_flops())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A random-initialised tiny-s policy and tiny-prm-s scorer saved to folders."""
    torch.set_num_threads(1)
    from runners.grpo.loading import random_policy
    from runners.rewards.prm import ProcessRewardModel, prm_config
    from runners.tinyworld.tokenizer import build_tokenizer

    root = tmp_path_factory.mktemp("meter")
    policy = random_policy(get_model("tiny-s"), root / "policy", tokenizer=build_tokenizer())
    torch.manual_seed(1)
    prm = ProcessRewardModel(prm_config(get_model("tiny-prm-s")))
    prm.save_pretrained(root / "prm")
    return {"policy": policy, "prm": root / "prm", "root": root}


def _setup(world: dict[str, Any], tmp: Path, **config: Any) -> tuple[Any, Any, Any]:
    from datasets import Dataset
    from trl import GRPOConfig

    from runners.grpo.loading import load_policy, load_tokenizer
    from runners.tinyworld.task import make_problems

    arch = get_model("tiny-s")
    tok = load_tokenizer(arch, world["policy"])
    model = load_policy(str(world["policy"]), arch, tok, device="cpu")
    base = {"output_dir": str(tmp), "max_completion_length": 12, "bf16": False, "use_cpu": True,
            "report_to": [], "save_strategy": "no", "disable_tqdm": True, "logging_steps": 1,
            "activation_checkpointing": False, "learning_rate": 1e-3, "seed": 0}
    args = GRPOConfig(**{**base, **config})
    data = Dataset.from_list([{"prompt": p.prompt} for p in make_problems("train", 32, 0)])
    return model, tok, (args, data)


def test_meter_matches_flopcounter_on_a_downsampled_prm_run(world: dict[str, Any], tmp_path: Path) -> None:
    """G=8 generated, K=4 kept, mu=2 (old log-probs), PRM rewards: all three phases."""
    import torch
    from peft import LoraConfig

    from runners.grpo.trainer import RaceGRPOTrainer
    from runners.rewards import build_reward_system

    model, tok, (args, data) = _setup(world, tmp_path, per_device_train_batch_size=16, num_generations=8,
                                      num_iterations=2, max_steps=4)
    rewards = build_reward_system("proxy-prm", "tiny", scorer_path=world["prm"])
    meter = FlopMeter(get_model("tiny-s"), lora=LoRA(4, tuple(TARGETS)), scorer=get_model("tiny-prm-s"))
    trainer = RaceGRPOTrainer(
        model=model, reward_funcs=rewards.funcs, args=args, train_dataset=data, processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS), completions_kept=4, meter=meter,
    )
    FlopMeterCallback.attach(trainer, meter=meter)
    meter.watch_scorer(rewards.scorer)
    # What the policy really ran, seen at its embedding (independent of the meter's own
    # hooks): (rows, tokens) of every forward with and without gradients.
    seen: dict[bool, list[tuple[int, int]]] = {True: [], False: []}

    def record(module: Any, args: tuple[Any, ...]) -> None:
        seen[torch.is_grad_enabled()].append(tuple(args[0].shape))

    hook = model.get_input_embeddings().register_forward_pre_hook(record)
    truth = counted(trainer.train)
    hook.remove()
    b = meter.breakdown()
    assert min(b.search, b.learning, b.reward) > 0
    # Every no-grad policy forward is a generation step or one of the 2 old log-prob passes.
    assert meter.passes == {"generate": len(seen[False]) - 2, "score": 2, "old_logprobs": 2, "train": 4}
    assert meter.tokens["reward_scored"] == rewards.scored_tokens()  # hooks see what the PRM ran
    assert [rows for rows, _ in seen[True]] == [8] * 4  # 2 prompts x K=4 kept rows per step
    assert meter.tokens["trained"] == sum(rows * tokens for rows, tokens in seen[True])
    print(f"downsampled PRM run: meter {meter.total:.6g} vs FlopCounterMode {truth:.6g}")
    assert abs(meter.total / truth - 1) < 0.03, (meter.total, truth)
    assert abs(meter.total / truth - 1) < 1e-3  # in fact exact up to rotary tables


def test_callback_on_a_stock_trainer_logs_the_allocation(world: dict[str, Any], tmp_path: Path) -> None:
    """Drop-in on TRL's own GRPOTrainer: beta > 0 (reference forward), activation checkpointing."""
    from peft import LoraConfig
    from trl import GRPOTrainer

    from runners.rewards import build_reward_system

    model, tok, (args, data) = _setup(world, tmp_path, per_device_train_batch_size=8, num_generations=4,
                                      beta=0.04, activation_checkpointing=True, max_steps=2)
    trainer = GRPOTrainer(model=model, reward_funcs=build_reward_system("dense", "tiny").funcs, args=args,
                          train_dataset=data, processing_class=tok,
                          peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS))
    cb = FlopMeterCallback.attach(trainer)
    assert trainer.callback_handler.callbacks[0] is cb  # ahead of W&B / TensorBoard
    truth = counted(trainer.train)
    meter = cb.meter
    assert meter is not None and meter.lora == LoRA(4, tuple(TARGETS))
    assert meter.passes["ref_logprobs"] == 2 and meter.flops["reward"] == 0.0
    print(f"stock trainer, beta, checkpointing: meter {meter.total:.6g} vs FlopCounterMode {truth:.6g}")
    assert abs(meter.total / truth - 1) < 0.03, (meter.total, truth)
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2
    for h in steps:
        assert set(LOG_KEYS) <= set(h)
        assert h["flops/total"] == pytest.approx(h["flops/search"] + h["flops/learning"] + h["flops/reward"])
        assert h["rho"] == pytest.approx(h["flops/learning"] / h["flops/total"])
    assert steps[0]["flops/total"] < steps[1]["flops/total"] == pytest.approx(meter.total)
    assert meter.wall["search"] > 0 and meter.wall["learning"] > 0


def test_a_trainers_evaluation_is_not_billed_to_the_run(world: dict[str, Any], tmp_path: Path) -> None:
    """eval_strategy="steps": the evaluation's generation and loss forwards run through the
    hooked model but spend nothing on the allocation; billed, they moved rho and the guard."""
    from peft import LoraConfig
    from trl import GRPOTrainer

    from runners.rewards import build_reward_system

    def run(**extra: Any) -> FlopMeter:
        model, tok, (args, data) = _setup(world, tmp_path, per_device_train_batch_size=8, num_generations=4,
                                          per_device_eval_batch_size=8, max_steps=2, **extra)
        trainer = GRPOTrainer(model=model, reward_funcs=build_reward_system("dense", "tiny").funcs, args=args,
                              train_dataset=data, eval_dataset=data.select(range(4)), processing_class=tok,
                              peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS))
        cb = FlopMeterCallback.attach(trainer)
        trainer.train()
        assert cb.meter is not None
        if extra:
            assert any("eval_loss" in h for h in trainer.state.log_history)  # it did evaluate
        return cb.meter

    plain, evaluated = run(), run(eval_strategy="steps", eval_steps=1)
    assert evaluated.passes == plain.passes
    assert evaluated.flops == pytest.approx(plain.flops, rel=0.02)  # sampling differs: lengths, not passes


@pytest.mark.parametrize("own_meter", [False, True])
def test_reward_models_are_billed_with_any_meter_and_at_every_train(world: dict[str, Any], tmp_path: Path,
                                                                    own_meter: bool) -> None:
    """``reward_models`` with a meter of one's own (as docs/meter.md shows both) were never
    watched, and a second ``train()`` lost the watch that the first one's end removed."""
    from peft import LoraConfig
    from trl import GRPOTrainer

    from runners.rewards import build_reward_system

    model, tok, (args, data) = _setup(world, tmp_path, per_device_train_batch_size=8, num_generations=4, max_steps=1)
    rewards = build_reward_system("proxy-prm", "tiny", scorer_path=world["prm"])
    trainer = GRPOTrainer(model=model, reward_funcs=rewards.funcs, args=args, train_dataset=data,
                          processing_class=tok, peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS))
    meter = FlopMeter(get_model("tiny-s"), lora=LoRA(4, tuple(TARGETS))) if own_meter else None
    cb = FlopMeterCallback.attach(trainer, meter=meter, reward_models=[rewards.scorer])
    for _ in range(2):
        trainer.train()
        assert cb.meter is not None and cb.meter.flops["reward"] > 0
        assert cb.meter.tokens["reward_scored"] == rewards.scored_tokens()  # every PRM forward billed
    assert cb.meter.passes["score"] == 2


def test_a_second_train_bills_the_reference_model_again(world: dict[str, Any], tmp_path: Path) -> None:
    """The first train()'s end detaches every hook, the reference model's too."""
    from trl import GRPOTrainer

    from runners.rewards import build_reward_system

    model, tok, (args, data) = _setup(world, tmp_path, per_device_train_batch_size=4, num_generations=4, max_steps=1,
                                      beta=0.04)
    trainer = GRPOTrainer(model=model, reward_funcs=build_reward_system("sparse", "tiny").funcs, args=args,
                          train_dataset=data, processing_class=tok)
    cb = FlopMeterCallback.attach(trainer)
    trainer.train()
    trainer.train()
    assert cb.meter is not None and cb.meter.passes["ref_logprobs"] == cb.meter.passes["train"] == 2


@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_full_finetuning_is_metered_too(world: dict[str, Any], tmp_path: Path, beta: float) -> None:
    """With beta > 0 TRL runs a separate frozen reference model, which the meter must see."""
    from trl import GRPOTrainer

    from runners.rewards import build_reward_system

    model, tok, (args, data) = _setup(world, tmp_path, per_device_train_batch_size=4, num_generations=4, max_steps=1,
                                      beta=beta)
    trainer = GRPOTrainer(model=model, reward_funcs=build_reward_system("sparse", "tiny").funcs, args=args,
                          train_dataset=data, processing_class=tok)
    cb = FlopMeterCallback.attach(trainer)
    truth = counted(trainer.train)
    assert cb.meter is not None and cb.meter.lora is None
    assert cb.meter.passes.get("ref_logprobs", 0) == (1 if beta else 0)
    print(f"full fine-tuning: meter {cb.meter.total:.6g} vs FlopCounterMode {truth:.6g}")
    assert abs(cb.meter.total / truth - 1) < 0.03, (cb.meter.total, truth)


def test_budget_guard_stops_a_stock_trainer_at_the_nearest_step(world: dict[str, Any], tmp_path: Path) -> None:
    from peft import LoraConfig
    from trl import GRPOTrainer

    from runners.rewards import build_reward_system

    model, tok, (args, data) = _setup(world, tmp_path, per_device_train_batch_size=8, num_generations=4, max_steps=30)
    budget = 1.2e9
    trainer = GRPOTrainer(model=model, reward_funcs=build_reward_system("sparse", "tiny").funcs, args=args,
                          train_dataset=data, processing_class=tok,
                          peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    steps: list[float] = []
    cb = FlopMeterCallback.attach(trainer, budget=budget, progress=lambda m, s: steps.append(m.total))
    trainer.train()
    meter, guard = cb.meter, cb.guard
    assert meter is not None and guard is not None
    assert guard.stop_reason == "budget" and 1 < trainer.state.global_step < 30
    costs = [b - a for a, b in zip([0.0, *steps], steps, strict=False)]
    # Stopped at the step boundary closest to the budget (step costs vary with lengths).
    assert abs(meter.total - budget) <= 0.5 * max(costs) + 1e-6 * budget
    with pytest.raises(ValueError, match="budget"):
        BudgetGuard(meter, float("nan"))


def test_fused_attention_backward_recomputes_the_scores() -> None:
    """SDPA/flash backward recomputes QK^T: +half an attention forward per training pass
    (measured on an H200 against FlopCounterMode: docs/meter.md)."""
    from planner.accountant import attention_flops

    arch = get_model("tiny-s")
    eager, fused = FlopMeter(arch, lora=LoRA(4)), FlopMeter(arch, lora=LoRA(4), fused_attention=True)
    for m in (eager, fused):
        m.add_train_pass(3, 50, 3 * 49, checkpointing=True, input_requires_grad=True)
    assert fused.total - eager.total == 3 * attention_flops(arch, 50, 50) // 2


@pytest.mark.parametrize("reentrant", [False, True, None])
def test_checkpointed_passes_match_flopcounter_reentrant_or_not(reentrant: bool | None) -> None:
    """Reentrant checkpointing recomputes each layer whole, non-reentrant stops before its
    last matmul; kwargs without ``use_reentrant`` (TRL passes the config's dict as it is)
    are torch's default, reentrant. The meter billed every pass as early-stopping: short of
    what ran with reentrant."""
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from runners.meter import lora_from_model
    from runners.meter.architecture import architecture_from_config

    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=256, vocab_size=50, tie_word_embeddings=True, attn_implementation="eager",
                      use_cache=False)
    model = Qwen2ForCausalLM(cfg)
    kwargs = {} if reentrant is None else {"use_reentrant": reentrant}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' deprecated alias, torch's "pass use_reentrant"
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
        model.enable_input_require_grads()
        model.train()
        meter = FlopMeter(architecture_from_config(model.get_base_model().config), lora=lora_from_model(model))
        meter.attach(model)
        with FlopCounterMode(display=False) as fc:
            model(input_ids=torch.randint(0, 50, (2, 40))).logits.float().sum().backward()
    assert meter.flops["learning"] == pytest.approx(fc.get_total_flops(), rel=1e-4)


@pytest.mark.parametrize(("extra", "said"), [
    ({"layers_to_transform": [3]}, "layers_to_transform=[3] adapts some layers only"),
    ({"rank_pattern": {"q_proj": 32}}, "rank_pattern={'q_proj': 32} gives modules other ranks than r=4"),
    ({"use_dora": True}, "use_dora=True adds a weight-norm step"),
])
def test_an_adapter_the_accountant_cannot_cost_is_refused(extra: dict[str, Any], said: str) -> None:
    """One rank on every layer of each target is what the accountant costs: these were
    metered as that."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from planner.errors import ConfigError
    from runners.meter import lora_from_model

    cfg = Qwen2Config(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=128, vocab_size=50)
    model = get_peft_model(Qwen2ForCausalLM(cfg), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], **extra))
    with pytest.raises(ConfigError, match=re.escape(said)):
        lora_from_model(model)


@pytest.mark.parametrize(("targets", "want"), [
    ("all-linear", tuple(TARGETS)),
    (["self_attn.q_proj", "mlp.down_proj"], ("q_proj", "down_proj")),
    (r".*\.(q_proj|v_proj)", ("q_proj", "v_proj")),
])
def test_lora_is_read_off_the_wrapped_model_whatever_the_target_spelling(
        world: dict[str, Any], targets: Any, want: tuple[str, ...]) -> None:
    # After injection peft keeps full paths or the pattern: matching names would bill full fine-tuning.
    from peft import LoraConfig, get_peft_model

    from runners.grpo.loading import load_policy, load_tokenizer
    from runners.meter import lora_from_model

    arch = get_model("tiny-s")
    model = load_policy(str(world["policy"]), arch, load_tokenizer(arch, world["policy"]), device="cpu")
    lora = lora_from_model(get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets)))
    assert lora is not None and lora.rank == 4 and lora.targets == want


def test_a_live_config_is_read_as_a_config_json_is() -> None:
    """The meter and `planner audit` share one reader: a Qwen3-style head_dim is refused,
    not metered with the derived head size, and a null num_key_value_heads means MHA."""
    from transformers import Qwen2Config

    from planner.architecture import architecture_from_hf_config
    from planner.errors import ConfigError
    from runners.meter import architecture_from_config

    shape = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
             "vocab_size": 100}
    cfg = Qwen2Config(**shape, num_key_value_heads=2)
    arch = architecture_from_config(cfg)
    assert (arch.num_key_value_heads, arch.family, arch.role) == (2, "hf", "policy")
    assert architecture_from_hf_config(shape | {"num_key_value_heads": None}, "m").num_key_value_heads == 4
    cfg.head_dim = 32  # 64 / 4 = 16
    with pytest.raises(ConfigError, match="head_dim 32 differs"):
        architecture_from_config(cfg)


def test_vllm_generation_is_billed_without_adapter_flops() -> None:
    """TRL merges the adapter into vLLM's weights: a sampled token costs the base model."""
    from planner.accountant import generation_flops

    arch = get_model("qwen2.5-1.5b")
    meter = FlopMeter(arch, lora=LoRA(16, tuple(TARGETS)))
    f = meter.add_generated_sequences([256, 200], [512, 300])
    assert f == generation_flops(arch, 256, 512) + generation_flops(arch, 200, 300)
    assert f < generation_flops(arch, 256, 512, lora=LoRA(16, tuple(TARGETS))) + \
        generation_flops(arch, 200, 300, lora=LoRA(16, tuple(TARGETS)))


# The toy decoder of tests/planner/test_accountant.py, counted by hand there: per token
# linears 2304, LM head 160, rotary 4, LoRA r 2 on every module 1024; attention(q, kv) =
# 64 q kv.
def _toy_meter(lora: LoRA | None = LoRA(2, tuple(TARGETS))) -> FlopMeter:
    from planner.architecture import Architecture

    return FlopMeter(Architecture("toy", "policy", "tiny", 8, 2, 2, 1, 16, 10, True), lora=lora)


def test_explicit_counts_by_hand() -> None:
    m = _toy_meter()
    # Two decode steps at context 7, logits at both: 2 * (2304 + 1024 + 64 * 7 + 4) + 2 * 160.
    assert m.add_generation_forward(2, 1, 7, 2) == 2 * (3328 + 448 + 4) + 320
    assert m.add_generation_forward(2, 1, 7, 2, lora_active=False) == 2 * (2304 + 448 + 4) + 320  # adapters off
    # A checkpointed LoRA pass, B 3, T 5, 15 head positions: body forward 3 * (5 * 3328 + 1600
    # + 20), backward 3 * (5 * (2304 + 2048) + 3200), recompute 3 * (5 * (3328 - 64) + 1600);
    # the head 15 * 160 three times (forward, grad_x, the chunked head's recompute).
    body = 3 * (5 * 3328 + 1620) + 3 * (5 * 4352 + 3200) + 3 * (5 * 3264 + 1600)
    assert m.add_train_pass(3, 5, 15, checkpointing=True, input_requires_grad=True) == body + 15 * 160 * 3
    assert m.add_train_pass(3, 5, 15, checkpointing=True, input_requires_grad=True, lm_head_recompute=False,
                            head_trainable=True, early_stop=False) == body + 3 * 5 * 64 + 15 * 160 * 3
    # A log-prob forward: the body plus its head positions once.
    assert m.add_logprob_forward(3, 5, 15, lora_active=True) == 3 * (5 * 3328 + 1620) + 15 * 160
    assert m.add_logprob_forward(3, 5, 15, lora_active=False) == 3 * (5 * 2304 + 1620) + 15 * 160
    assert m.total == sum(m.flops.values()) == m.flops["search"] + m.flops["learning"]
    assert m.passes == {"generate": 2, "train": 2, "old_logprobs": 1, "ref_logprobs": 1}
    assert m.tokens["trained"] == m.tokens["logprob_forward"] == 2 * 3 * 5
    with pytest.raises(ValueError):  # a prompt without its completion length
        m.add_generated_sequences([4, 5], [3])


def test_full_finetuning_adds_every_weight_gradient() -> None:
    # No adapter: every input needs a gradient (3 * (5 * 2304 + 3200) backward) and every
    # linear its weight gradient, one more 2304 a token.
    m = _toy_meter(lora=None)
    fwd, bwd, weights = 3 * (5 * 2304 + 1620), 3 * (5 * 2304 + 3200), 3 * 5 * 2304
    assert m.add_train_pass(3, 5, 15, checkpointing=False, input_requires_grad=False) == fwd + bwd + weights + 15 * 160 * 3


def test_a_scorer_forward_needs_a_scorer() -> None:
    import dataclasses

    m = _toy_meter()
    with pytest.raises(ValueError, match="no scorer"):
        m.add_scorer_forward(2, 5)
    m.scorer = dataclasses.replace(m.policy, role="prm", score_head=(4, 2))  # 80 a position
    assert m.add_scorer_forward(2, 5) == 2 * (5 * 2304 + 1620 + 5 * 80) == m.flops["reward"]
    assert m.tokens["reward_scored"] == 10


def test_wall_time_goes_to_the_outermost_phase() -> None:
    import time

    m = _toy_meter()
    with m.phase("reward"):
        with m.phase("search"):
            time.sleep(0.01)
    assert 0.01 <= m.wall["reward"] < 10 and m.wall["search"] == 0.0
    m.enabled = False
    with m.phase("learning"):
        time.sleep(0.001)
    assert m.wall["learning"] == 0.0
