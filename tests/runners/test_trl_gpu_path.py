"""The GPU path (qwen2.5 family) exercised on CPU: a tiny random-initialised Qwen2 saved to a
folder and registered as a qwen2.5-family model, GSM8K-train prompts (chat) from
../shared/data through ``runners.tasks``, the math-verify ``sparse`` reward, and pass@1 on
GSM8K-test / MATH-500. Skipped when ../shared/data is absent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "gsm8k" / "train.jsonl").is_file(), reason="../shared/data is absent")

MICRO = """
name = "qwen2.5-micro"
role = "policy"
family = "qwen2.5"
hidden_size = 32
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
intermediate_size = 64
vocab_size = 160
tie_word_embeddings = true
max_position_embeddings = 2048

[defaults]
prompt_len = 300
completion_len = 16
prompts_per_round = 2
lora_rank = 4
gradient_checkpointing = true
lm_head_positions = "all"
"""


@pytest.fixture()
def micro_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """configs/ plus a tiny qwen2.5-family policy, active through RACE_CONFIGS."""
    from planner import registry

    root = tmp_path / "configs"
    shutil.copytree(registry.configs_dir(), root)
    (root / "models" / "qwen2.5-micro.toml").write_text(MICRO)
    monkeypatch.setenv("RACE_CONFIGS", str(root))
    registry._models.cache_clear()
    registry._rewards.cache_clear()
    yield registry.get_model("qwen2.5-micro")
    monkeypatch.delenv("RACE_CONFIGS")
    registry._models.cache_clear()
    registry._rewards.cache_clear()


def test_qwen_family_run_on_gsm8k_prompts(micro_registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal
    from runners.engines.trl import TrlEngine
    from runners.grpo.loading import offline_chat_tokenizer, random_policy

    arch = micro_registry
    folder = random_policy(arch, tmp_path / "policy", tokenizer=offline_chat_tokenizer(arch.vocab_size))
    plan = compile_plan("qwen2.5-micro", "sparse", 0.7, 3e9)
    engine = TrlEngine(policy_path=str(folder), dataset="gsm8k", data_path=str(DATA / "gsm8k"),
                       eval_data=str(DATA), eval_samples=3, threads=1)
    rec = engine.run(make_proposal(plan), 0)
    assert rec.status == "ok"
    f = rec.card.flops
    assert f.search > 0 and f.learning > 0 and f.reward == 0.0
    # Chat-templated GSM8K prompts are hundreds of characters: the meter saw real lengths.
    assert rec.card.tokens["prompt_generated"] >= 300 * plan.completions_per_prompt * plan.prompts_per_round
    assert rec.card.passes["train"] >= 1  # type: ignore[attr-defined]
    assert rec.provenance["train_prompts"] == "gsm8k" and rec.card.software["engine"] == "trl"
    m = rec.metrics
    assert m.judge is None and m.native is not None and m.pass1 is not None
    assert 0.0 <= m.native <= 1.0 and 0.0 <= m.pass1 <= 1.0 and 0.0 <= (m.pass1_base or 0.0) <= 1.0


def test_offline_tokenizer_round_trips_through_its_folder(tmp_path: Path) -> None:
    from planner.registry import get_model
    from runners.grpo.loading import load_tokenizer, offline_chat_tokenizer

    offline_chat_tokenizer(200).save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')  # must not swap the class
    tok = load_tokenizer(get_model("qwen2.5-1.5b"), tmp_path)
    assert type(tok).__name__ != "Qwen2Tokenizer" and tok.padding_side == "left"
    text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok("x = 12\n").input_ids) == "x = 12\n"
