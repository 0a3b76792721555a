"""`planner audit`: a TRL recipe costed with the accountant, TRL defaults as TRL runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.accountant import (
    LoRA,
    forward_flops,
    generation_flops,
    reward_model_flops,
    train_pass_flops,
)
from planner.architecture import LINEAR_MODULES
from planner.cli import app
from planner.registry import get_model

EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "examples"
runner = CliRunner()


def audit_json(path: Path) -> dict:
    res = runner.invoke(app, ["audit", str(path), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_example_recipe_matches_accountant() -> None:
    out = audit_json(EXAMPLES / "grpo_qwen2.5-1.5b_gsm8k.yaml")
    arch = get_model("qwen2.5-1.5b")
    lora = LoRA(16, LINEAR_MODULES)
    p, c = 180, 320
    n = 16 * 4 * 8  # per-device batch x steps_per_generation (= grad accum) x world size
    # TRL defaults: num_iterations 1 (no old log-prob pass), beta 0 (no reference pass),
    # gradient checkpointing on.
    search = n * generation_flops(arch, p, c, lora=lora)
    learning = n * train_pass_flops(
        arch, 1, p + c, lora, logit_positions=c, gradient_checkpointing=True, lm_head_recompute=True
    )
    assert out["per_round"]["search"] == pytest.approx(search)
    assert out["per_round"]["learning"] == pytest.approx(learning)
    assert out["per_round"]["reward"] == 0
    assert out["old_logprobs"] is False
    assert out["knobs"]["gradient_checkpointing"] is True
    assert out["knobs"]["num_iterations"] == 1 and out["knobs"]["beta"] == 0.0
    assert out["rho"] == pytest.approx(learning / (search + learning))
    # One optimizer step per round: 4 micro-batches accumulate into one step.
    assert out["per_step"]["total"] == pytest.approx(search + learning)
    assert out["per_epoch"]["total"] == pytest.approx((search + learning) * 7473 / 64)


@pytest.mark.parametrize("hub_id, name", [("Qwen/Qwen2.5-1.5B", "qwen2.5-1.5b"), ("qwen/qwen2.5-7b", "qwen2.5-7b"),
                                           ("Qwen/Qwen2.5-3B-Instruct", "qwen2.5-3b")])
def test_a_recipe_from_the_base_model_is_costed_as_its_instruct_twin(tmp_path: Path, hub_id: str, name: str) -> None:
    # RL from the base model is common; only the -Instruct ids were known, and the base's
    # recipe was refused as "neither a registered model nor a config.json".
    from planner.registry import resolve_model

    assert resolve_model(hub_id).name == name
    recipe = (EXAMPLES / "grpo_qwen2.5-1.5b_gsm8k.yaml").read_text().replace("Qwen/Qwen2.5-1.5B-Instruct", hub_id)
    (tmp_path / "r.yaml").write_text(recipe)
    assert audit_json(tmp_path / "r.yaml")["model"] == name
    with pytest.raises(Exception, match="neither a registered"):
        resolve_model("Qwen/Qwen2.5-1.5B-Math")  # only the base of an -Instruct id, nothing looser


def test_prm_recipe_costs_reward_old_and_ref_passes() -> None:
    out = audit_json(EXAMPLES / "grpo_qwen2.5-7b_prm.json")
    pol, prm = get_model("qwen2.5-7b"), get_model("qwen2.5-math-prm-7b")
    lora = LoRA(32, LINEAR_MODULES)
    p, c, n = 200, 600, 8 * 4 * 8
    train = train_pass_flops(
        pol, 1, p + c, lora, logit_positions=c, gradient_checkpointing=True, lm_head_recompute=True
    )
    old = forward_flops(pol, 1, p + c, logit_positions=c, lora=lora)
    ref = forward_flops(pol, 1, p + c, logit_positions=c)
    assert out["per_round"]["learning"] == pytest.approx(n * (2 * train + old + ref))
    assert out["per_round"]["reward"] == pytest.approx(n * reward_model_flops(prm, 1, p + c))
    assert out["optimizer_steps_per_round"] == 4.0  # 4 steps/gen x 2 iterations / 2 accum


def test_trl_defaults_are_read_from_trl() -> None:
    from planner.recipe import trl_defaults

    d = trl_defaults()
    assert d["beta"] == 0.0 and d["num_iterations"] == 1 and d["gradient_checkpointing"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expected_prompt_length": 10, "expected_completion_length": 10}, "model_name_or_path"),
        ({"use_peft": True, "model_name_or_path": "nope/nope", "expected_prompt_length": 1, "expected_completion_length": 1}, "model"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8}, "expected_completion_length"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "num_iterations": 0}, "num_iterations"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "bogus_key": 1}, "bogus_key"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "num_generations": 3}, "num_generations"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "num_generations": 1, "per_device_train_batch_size": 4}, "num_generations must be >= 2"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "dataset_size": -3}, "dataset_size"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 4096, "max_completion_length": 256}, "exceeds max_completion_length"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "reward_funcs": 5}, "reward_funcs"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "generation_batch_size": 64, "steps_per_generation": 2}, "exclusive"),
        ({"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8, "generation_batch_size": 12, "per_device_train_batch_size": 8}, "generation_batch_size (12)"),
    ],
)
def test_bad_recipes_name_the_field(tmp_path: Path, body: dict, field: str) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(body))
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2
    assert field in res.stderr and len(res.stderr.strip().splitlines()) == 1


BASE_YAML = ("model_name_or_path: qwen2.5-3b\nexpected_prompt_length: 8\nexpected_completion_length: 8\n")


@pytest.mark.parametrize(("extra", "says"), [
    ('use_peft: true\ngradient_checkpointing: "false"\n',
     "config: gradient_checkpointing must be true or false (unquoted), got 'false'"),
    ('use_peft: "false"\n', "config: use_peft must be true or false (unquoted), got 'false'"),
    ("use_peft: true\nbeta: .nan\n", "config: beta must be a finite number >= 0, got nan"),
    ("use_peft: true\nbeta: .inf\n", "config: beta must be a finite number >= 0, got inf"),
    ("use_peft: true\nnum_train_epochs: -1\n", "config: num_train_epochs must be a positive number, got -1"),
    ("use_peft: true\nnum_train_epochs: .nan\n", "config: num_train_epochs must be a positive number, got nan"),
    ("use_peft: true\nnum_train_epochs: 0\n", "config: num_train_epochs must be a positive number, got 0"),
    # TRL runs a model id given in reward_funcs on every completion; costed as a free rule
    # function it would drop the reward share without a word.
    ("use_peft: true\nreward_funcs: [accuracy_reward, Skywork/Skywork-o1-Open-PRM-Qwen-2.5-7B]\n",
     "config: reward_funcs entry 'Skywork/Skywork-o1-Open-PRM-Qwen-2.5-7B' is a model, which the audit would "
     "cost as a free rule function; give it as reward_model_name_or_path"),
    ("use_peft: true\nreward_funcs: qwen2.5-math-prm-7b\n",
     "config: reward_funcs entry 'qwen2.5-math-prm-7b' is a model, which the audit would cost as a free rule "
     "function; give it as reward_model_name_or_path"),
    ("use_peft: true\nreward_funcs: ['accuracy reward']\n",
     "config: reward_funcs entry 'accuracy reward' is neither a function name nor a dotted path (pkg.module.fn); "
     "fix the name"),
])
def test_values_that_would_be_costed_as_something_else_are_refused(tmp_path: Path, extra: str, says: str) -> None:
    """A quoted "false" is truthy and a NaN beta compares false with 0: either would
    cost another recipe than the one written (a NaN beta also printed invalid JSON)."""
    f = tmp_path / "r.yaml"
    f.write_text(BASE_YAML + extra)
    res = runner.invoke(app, ["audit", str(f), "--json"])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {says}", res.output


def test_rule_function_names_and_dotted_paths_pass(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(BASE_YAML + "use_peft: true\nreward_funcs: [accuracy_reward, my_pkg.rewards.length_penalty]\n")
    res = runner.invoke(app, ["audit", str(f), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["per_round"]["reward"] == 0.0


def test_a_recipe_longer_than_the_policys_context_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("model_name_or_path: qwen2.5-3b\nuse_peft: true\nexpected_prompt_length: 1000000\n"
                 "expected_completion_length: 256\n")
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: config: expected_prompt_length + expected_completion_length = 1000256 "
                                 "tokens exceed qwen2.5-3b's context of 32768")


def test_config_json_path_as_model(tmp_path: Path) -> None:
    cfg = {
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"model_name_or_path: {tmp_path}\nuse_peft: true\nexpected_prompt_length: 8\n"
                      "expected_completion_length: 8\n")
    out = audit_json(recipe)
    assert out["per_round"]["total"] > 0


def test_full_finetuning_is_a_one_line_error(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("model_name_or_path: qwen2.5-3b\nuse_peft: false\nexpected_prompt_length: 8\nexpected_completion_length: 8\n")
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2 and res.stderr.startswith("error: config: use_peft")


def test_generation_batch_size_sets_the_round_as_in_trl(tmp_path: Path) -> None:
    base = {"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 64, "expected_completion_length": 64,
            "per_device_train_batch_size": 8, "gradient_accumulation_steps": 2}
    rounds = {}
    for name, extra in (("gbs", {"generation_batch_size": 64}), ("spg", {"steps_per_generation": 8})):
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps(base | extra))
        res = runner.invoke(app, ["audit", str(f), "--json"])
        assert res.exit_code == 0, res.output
        rounds[name] = json.loads(res.stdout)["completions_per_round"]
    assert rounds == {"gbs": 64, "spg": 64}  # 64 = 8 per device x 8 steps per generation


def test_a_directory_or_binary_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")
    for arg, says in ((tmp_path, "is a directory"), (tmp_path / "bin.yaml", "is not UTF-8 text")):
        res = runner.invoke(app, ["audit", str(arg)])
        assert res.exit_code == 2 and says in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("extra", "key"), [("1: x\nfoo: y\n", "1"), ("on: push\njobs: {}\n", "True")])
def test_keys_yaml_reads_as_numbers_or_booleans_are_unknown_keys_not_a_traceback(
    tmp_path: Path, extra: str, key: str,
) -> None:
    """`1:` reads as an int and `on:` as True: sorting them beside text keys was a TypeError."""
    f = tmp_path / "r.yaml"
    f.write_text("model_name_or_path: qwen2.5-3b\nuse_peft: true\nexpected_prompt_length: 8\n"
                 "expected_completion_length: 8\n" + extra)
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"error: config: unknown key {key};") and len(res.stderr.strip().splitlines()) == 1


def test_a_model_config_json_that_is_not_utf_8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_bytes(b"\x80\x81")
    f = tmp_path / "r.yaml"
    f.write_text(f"model_name_or_path: {tmp_path / 'm'}\nuse_peft: true\nexpected_prompt_length: 8\n"
                 "expected_completion_length: 8\n")
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2, res.output
    assert "config.json is not UTF-8 text" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("spec", "want"), [
    (None, ("q_proj", "v_proj")),  # peft's Qwen2 default, not every linear
    ("all-linear", tuple(LINEAR_MODULES)),
    (".*\\.(q_proj|o_proj)", ("q_proj", "o_proj")),  # a string is a regex on full names
    (["self_attn.k_proj", "down_proj"], ("k_proj", "down_proj")),
    # TRL's ModelConfig turns a one-entry list into that entry, which peft reads as a string:
    # these were refused as unknown modules, though TRL adapts every linear and q, o.
    (["all-linear"], tuple(LINEAR_MODULES)),
    ([".*\\.(q_proj|o_proj)"], ("q_proj", "o_proj")),
])
def test_lora_targets_as_peft_reads_them(tmp_path: Path, spec: object, want: tuple[str, ...]) -> None:
    body = {"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8,
            "expected_completion_length": 8, **({} if spec is None else {"lora_target_modules": spec})}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(body))
    lora = LoRA(16, want)
    out = audit_json(f)
    arch = get_model("qwen2.5-3b")
    assert out["per_completion"]["train_pass"] == pytest.approx(
        train_pass_flops(arch, 1, 16, lora, logit_positions=8, gradient_checkpointing=True, lm_head_recompute=True))


def test_a_regex_target_must_match_every_layer_of_the_policy() -> None:
    from planner.errors import ConfigError
    from planner.recipe import lora_targets

    first_28 = r"model\.layers\.([0-9]|1[0-9]|2[0-7])\.self_attn\.q_proj"
    assert lora_targets(first_28, layers=28) == ("q_proj",)
    with pytest.raises(ConfigError, match="some layers only"):  # 28 of qwen2.5-3b's 36
        lora_targets(first_28, layers=36)
    assert lora_targets(r".*layers\.[01]\.self_attn\.q_proj", layers=2) == ("q_proj",)  # all of tiny-s


@pytest.mark.parametrize(("body", "says"), [
    ({"lora_target_modules": "q_proj"}, "matches no module"),
    # peft adapts the LM head or the embedding a pattern matches too: learning the audit
    # did not cost, without a word.
    ({"lora_target_modules": ".*_proj|lm_head"}, "also adapts lm_head, which the audit does not cost"),
    ({"lora_target_modules": ".*(_proj|embed_tokens)"}, "also adapts model.embed_tokens"),
    # Costed as q_proj adapters, but TRL reads a one-entry list as its entry, a regex on full
    # names to peft: get_peft_model finds no module and the run never starts.
    ({"lora_target_modules": ["q_proj"]}, "matches no module (TRL reads a one-entry list as that string"),
    ({"use_peft": None}, "use_peft is missing"),
    # These were costed as no LoRA, as q_proj on every layer, and as q_proj: peft adapts
    # nothing (refusing the empty list), one layer's, and nothing. (Two entries: TRL reads a
    # one-entry list as a string, below.)
    ({"lora_target_modules": []}, "lora_target_modules is empty"),
    ({"lora_target_modules": ["model.layers.0.self_attn.q_proj", "v_proj"]}, "names part of the model"),
    ({"lora_target_modules": ["foo.q_proj", "v_proj"]}, "names part of the model"),
    ({"lora_target_modules": ["mlp.q_proj", "v_proj"]}, "names part of the model"),
    ({"lora_target_modules": ["qproj", "v_proj"]}, "unknown module 'qproj'"),
    # A regex naming one layer was costed on every layer; one naming layer 1 "matched no module".
    ({"lora_target_modules": r".*layers\.0\.self_attn\.q_proj"}, "adapts q_proj in some layers only"),
    ({"lora_target_modules": r".*layers\.1\..*q_proj"}, "adapts q_proj in some layers only"),
    # A reward model where the policy goes was costed as a policy.
    ({"model_name_or_path": "Qwen/Qwen2.5-Math-PRM-7B"}, "is a reward model, not a policy"),
    # A bad path names its recipe key, and a policy list for the policy.
    ({"reward_model_name_or_path": "/no/such/rm"}, "config: reward_model_name_or_path: '/no/such/rm' is neither "
                                                    "a registered reward model"),
])
def test_lora_settings_that_peft_or_trl_would_read_otherwise(tmp_path: Path, body: dict, says: str) -> None:
    base = {"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8,
            "expected_completion_length": 8}
    f = tmp_path / "r.json"
    f.write_text(json.dumps({k: v for k, v in (base | body).items() if v is not None}))
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2 and says in res.stderr


@pytest.mark.parametrize(("edit", "says"), [
    ({"hidden_size": "x"}, "hidden_size is 'x'; it must be a positive whole number"),
    ({"num_attention_heads": 0}, "num_attention_heads is 0"),
    ({"vocab_size": "big"}, "vocab_size is 'big'"),
    ({"num_key_value_heads": -2}, "num_key_value_heads is -2"),
    ({"hidden_size": None}, "config.json lacks 'hidden_size'"),
    ({"hidden_size": 896.7}, "hidden_size is 896.7"),
    ({"hidden_size": 0}, "hidden_size is 0"),
    # A string is truthy: "false" costed an untied model with no LM head, exit 0.
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings is 'false'; it must be true or false"),
    ({"tie_word_embeddings": 0}, "tie_word_embeddings is 0"),
    # GQA needs the query heads in whole groups per k/v head: no such model runs.
    ({"num_key_value_heads": 3}, "num_key_value_heads 3 does not divide num_attention_heads 4"),
    ({"num_key_value_heads": 8}, "num_key_value_heads 8 does not divide num_attention_heads 4"),
])
def test_a_malformed_config_json_is_one_line_naming_the_key(tmp_path: Path, edit: dict, says: str) -> None:
    # Each was a traceback (ValueError, ZeroDivisionError, TypeError) or, for 896.7 and 0,
    # silently truncated or costed.
    cfg = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128, "vocab_size": 100} | edit
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"model_name_or_path: {tmp_path}\nuse_peft: true\nexpected_prompt_length: 8\n"
                      "expected_completion_length: 8\n")
    res = runner.invoke(app, ["audit", str(recipe)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith("error: config: model_name_or_path: ") and says in res.stderr
    (tmp_path / "config.json").write_text("[]")
    res = runner.invoke(app, ["audit", str(recipe)])
    assert res.exit_code == 2 and "config.json is not a JSON object" in res.stderr


def test_a_config_with_its_own_head_dim_is_refused(tmp_path: Path) -> None:
    cfg = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128, "vocab_size": 100, "head_dim": 32}  # 64 / 4 = 16
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"model_name_or_path: {tmp_path}\nuse_peft: true\nexpected_prompt_length: 8\n"
                      "expected_completion_length: 8\n")
    res = runner.invoke(app, ["audit", str(recipe)])
    assert res.exit_code == 2 and "head_dim 32 differs" in res.stderr


def _audit_with(tmp_path: Path, **keys: object) -> dict:
    """The 1.5B GSM8K example with ``keys`` added (JSON, so YAML parsing is not in the way)."""
    import yaml

    raw = yaml.safe_load((EXAMPLES / "grpo_qwen2.5-1.5b_gsm8k.yaml").read_text()) | keys
    f = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    f.write_text(json.dumps(raw))
    return audit_json(f)


def test_activation_checkpointing_is_the_name_transformers_reads_first(tmp_path: Path) -> None:
    base = _audit_with(tmp_path)
    off = _audit_with(tmp_path, activation_checkpointing=False)  # gradient_checkpointing stays TRL's True
    assert off["knobs"]["gradient_checkpointing"] is False
    assert off["per_round"]["learning"] < 0.8 * base["per_round"]["learning"]  # no recompute
    assert _audit_with(tmp_path, gradient_checkpointing=False)["per_round"] == off["per_round"]
    # Reentrant checkpointing recomputes each layer whole: no early stop, more learning.
    for key in ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs"):
        whole = _audit_with(tmp_path, **{key: {"use_reentrant": True}}, lora_target_modules=["q_proj", "v_proj"])
        early = _audit_with(tmp_path, lora_target_modules=["q_proj", "v_proj"])
        assert whole["per_round"]["learning"] > early["per_round"]["learning"]
        assert whole["per_round"]["search"] == early["per_round"]["search"]
    # Kwargs without use_reentrant reach torch as they are, and torch 2.13 then recomputes
    # reentrantly; a JSON string's "false" is read as transformers reads it; null is off.
    qv = {"lora_target_modules": ["q_proj", "v_proj"]}
    whole = _audit_with(tmp_path, **qv, activation_checkpointing_kwargs={"use_reentrant": True})
    assert _audit_with(tmp_path, **qv, activation_checkpointing_kwargs={"preserve_rng_state": False}
                       )["per_round"] == whole["per_round"]
    assert _audit_with(tmp_path, **qv, gradient_checkpointing_kwargs='{"use_reentrant": "false"}'
                       )["per_round"] == _audit_with(tmp_path, **qv)["per_round"]
    assert _audit_with(tmp_path, **qv, gradient_checkpointing_kwargs='{"use_reentrant": "true"}'
                       )["per_round"] == whole["per_round"]
    assert _audit_with(tmp_path, gradient_checkpointing=None)["per_round"] == off["per_round"]
    res = runner.invoke(app, ["audit", str(tmp_path / "r0.json")])
    assert res.exit_code == 0
    (tmp_path / "every.json").write_text(json.dumps(
        json.loads((tmp_path / "r0.json").read_text()) | {"activation_checkpointing_kwargs": {"every_n_layers": 2}}))
    res = runner.invoke(app, ["audit", str(tmp_path / "every.json")])
    assert res.exit_code == 2 and "every_n_layers 2 checkpoints a subset" in res.stderr


def test_vllm_generation_needs_old_logprobs_and_runs_no_adapter(tmp_path: Path) -> None:
    """TRL 1.16 corrects vLLM's sampling distribution with the old log-probs by default,
    and syncs merged weights to vLLM, so the adapters cost nothing while sampling."""
    base = _audit_with(tmp_path)
    vllm = _audit_with(tmp_path, use_vllm=True)
    arch, p, c = get_model("qwen2.5-1.5b"), 180, 320
    assert base["old_logprobs"] is False and vllm["old_logprobs"] is True
    old = forward_flops(arch, 1, p + c, logit_positions=c, lora=LoRA(16, LINEAR_MODULES))
    assert vllm["per_round"]["learning"] == pytest.approx(base["per_round"]["learning"] + 512 * old)
    assert vllm["per_round"]["search"] == pytest.approx(512 * generation_flops(arch, p, c))
    assert vllm["rho"] > base["rho"]
    uncorrected = _audit_with(tmp_path, use_vllm=True, vllm_importance_sampling_correction=False)
    assert uncorrected["old_logprobs"] is False


def test_a_cpu_run_scores_every_position_and_padding_bounds_the_cost(tmp_path: Path) -> None:
    base = _audit_with(tmp_path)
    cpu = _audit_with(tmp_path, use_cpu=True)
    assert cpu["per_round"]["learning"] > base["per_round"]["learning"]
    assert cpu["per_round"]["search"] == base["per_round"]["search"]
    # Costed at the expected 320 tokens; padded to max_completion_length 512, every phase costs more.
    for k in ("search", "learning"):
        assert base["padded_round"][k] > 1.3 * base["per_round"][k]
    at_max = _audit_with(tmp_path, expected_completion_length=512)
    assert at_max["per_round"] == pytest.approx(base["padded_round"])
    assert at_max["padded_round"] == at_max["per_round"]


@pytest.mark.parametrize("device", ["CPU", "cpu:0", "gpu", "tpu", 0, True])
def test_a_device_the_audit_cannot_read_is_refused(tmp_path: Path, device: object) -> None:
    """``device: cpu`` costs the LM head at every position and anything else as on a GPU:
    ``CPU`` or ``cpu:0`` was costed as a GPU run without a word."""
    import yaml

    raw = yaml.safe_load((EXAMPLES / "grpo_qwen2.5-1.5b_gsm8k.yaml").read_text()) | {"device": device}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(raw))
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == f"error: config: device must be cpu, cuda or cuda:N, got {device!r}"


def test_device_cpu_is_use_cpu_and_cuda_is_the_default(tmp_path: Path) -> None:
    base = _audit_with(tmp_path)
    assert _audit_with(tmp_path, device="cpu")["per_round"] == _audit_with(tmp_path, use_cpu=True)["per_round"]
    assert _audit_with(tmp_path, device="cuda:1")["per_round"] == base["per_round"]
    assert _audit_with(tmp_path, device="cuda")["knobs"]["lm_head_positions"] == "completion"


@pytest.mark.parametrize(("keys", "says"), [
    ({"use_dora": True}, "config: use_dora: DoRA adds a weight-norm step per adapted layer, which the audit does "
                         "not cost; audit the recipe without it"),
    ({"lora_modules_to_save": ["lm_head"]}, "config: lora_modules_to_save: it trains full copies of those modules"),
    ({"generation_kwargs": {"num_beams": 4}}, "config: generation_kwargs.num_beams (4) changes what generation "
                                              "computes"),
    ({"generation_kwargs": '{"use_cache": false}'}, "config: generation_kwargs.use_cache (False) changes"),
    ({"generation_kwargs": {"max_new_tokens": 4000}}, "config: generation_kwargs.max_new_tokens (4000) changes"),
    ({"per_device_train_batch_size": 10**23}, "config: per_device_train_batch_size is 1e+23; at most 1e+12"),
    ({"num_iterations": 10**300}, "config: num_iterations is 1e+300; at most 1e+12"),
    # Priced as written the padded bound was 44x the expected round, over tokens the policy
    # cannot attend over.
    ({"max_completion_length": 40000}, "config: max_completion_length (40000) plus expected_prompt_length"),
])
def test_recipe_keys_the_audit_would_cost_as_something_else_are_refused(
        tmp_path: Path, keys: dict, says: str) -> None:
    import yaml

    raw = yaml.safe_load((EXAMPLES / "grpo_qwen2.5-1.5b_gsm8k.yaml").read_text()) | keys
    f = tmp_path / "r.json"
    f.write_text(json.dumps(raw))
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {says}"), res.output
    assert res.stderr.count("\n") == 1


def test_trl_grpo_script_keys_that_cost_nothing_are_accepted(tmp_path: Path) -> None:
    """`trl grpo` recipes carry ModelConfig and script keys; they were refused as unknown."""
    plain = _audit_with(tmp_path)
    more = _audit_with(tmp_path, lora_dropout=0.05, dataset_name="openai/gsm8k", dtype="bfloat16",
                       attn_implementation="sdpa", load_in_4bit=False, use_dora=False,
                       generation_kwargs={"top_k": 50, "temperature": 0.9, "num_beams": 1, "use_cache": True})
    assert more["per_round"] == plain["per_round"]


def test_dataset_mixture_and_env_keys_of_trl_grpo_are_accepted(tmp_path: Path) -> None:
    """`trl grpo`'s parser also reads DatasetMixtureConfig (`datasets`, `streaming`,
    `test_split_size`) and an `env` mapping (set as environment variables) from the recipe:
    none changes a FLOP, and they were refused as unknown keys."""
    plain = _audit_with(tmp_path)
    more = _audit_with(tmp_path, datasets=[{"path": "openai/gsm8k", "name": "main"}], streaming=False,
                       test_split_size=0.1, env={"HF_HUB_OFFLINE": "1"})
    assert more["per_round"] == plain["per_round"]


@pytest.mark.parametrize(("text", "same_as"), [
    # PyYAML reads YAML 1.1, where a float needs a dot: 4e-2 is the string "4e-2".
    ("beta: 4e-2\n", {"beta": 0.04}),
    ('num_generations: "4"\nper_device_train_batch_size: "8"\nnum_iterations: "2"\n',
     {"num_generations": 4, "per_device_train_batch_size": 8, "num_iterations": 2}),
    ('lora_r: "32"\nmax_completion_length: "256"\nnum_train_epochs: "2"\n',
     {"lora_r": 32, "max_completion_length": 256, "num_train_epochs": 2.0}),
])
def test_numbers_given_as_strings_are_read_as_trl_grpo_reads_them(tmp_path: Path, text: str,
                                                                    same_as: dict) -> None:
    """`trl grpo --config` sets each value as an argparse default, and argparse converts a
    string default with the field's type: it runs `beta: 4e-2` with beta 0.04 (checked with
    TRL 1.16's parser). The audit refused these recipes ("beta must be a finite number >= 0,
    got '4e-2'")."""
    f = tmp_path / "r.yaml"
    f.write_text(BASE_YAML + "use_peft: true\n" + text)
    res = runner.invoke(app, ["audit", str(f), "--json"])
    assert res.exit_code == 0, res.output
    import yaml

    g = tmp_path / "same.json"
    g.write_text(json.dumps(yaml.safe_load(BASE_YAML) | {"use_peft": True} | same_as))
    assert json.loads(res.stdout)["per_round"] == audit_json(g)["per_round"]


def test_a_string_that_is_no_number_is_still_refused_naming_the_key(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(BASE_YAML + "use_peft: true\nnum_generations: eight\n")
    res = runner.invoke(app, ["audit", str(f)])
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: config: num_generations must be a positive integer, got 'eight'"


def test_a_reward_model_is_costed_over_the_whole_text_past_its_context(tmp_path: Path) -> None:
    """TRL tokenises prompt + completion for a reward model without truncation and runs it
    over every token, past the model's context too (Qwen2's rotary positions go on). The
    audit priced the scorer at its context (4096 tokens for the Qwen PRMs), so the reward
    FLOPs stopped growing at 4096 tokens: 17% short for 1000 + 4000."""
    prm = get_model("qwen2.5-math-prm-7b")
    assert prm.max_position_embeddings == 4096
    body = RAW | {"reward_model_name_or_path": "qwen2.5-math-prm-7b", "expected_prompt_length": 1000,
                  "expected_completion_length": 4000, "max_completion_length": 8000}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(body))
    res = runner.invoke(app, ["audit", str(f), "--json"])
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith("note: qwen2.5-math-prm-7b's context is 4096 tokens; TRL scores the whole")
    out = json.loads(res.stdout)
    assert out["per_completion"]["score"] == pytest.approx(reward_model_flops(prm, 1, 5000))
    n = out["completions_per_round"]
    assert out["padded_round"]["reward"] == pytest.approx(n * reward_model_flops(prm, 1, 9000))


@pytest.mark.parametrize("keys", [{"eval_strategy": "steps", "eval_steps": 50}, {"eval_strategy": "epoch"},
                                  {"eval_on_start": True}])
def test_evaluation_the_audit_leaves_out_is_said(tmp_path: Path, keys: dict) -> None:
    """With evaluation on, GRPOTrainer generates (num_generations_eval per prompt) and scores
    completions for the eval split as well: FLOPs the audit cannot price (it has no eval set
    size). It printed its per-step and per-epoch totals as the recipe's spend, without a word."""
    plain = _audit_with(tmp_path)
    raw = json.loads(next(tmp_path.glob("r*.json")).read_text()) | keys
    f = tmp_path / "eval.json"
    f.write_text(json.dumps(raw))
    res = runner.invoke(app, ["audit", str(f), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["per_round"] == plain["per_round"]
    assert res.stderr.startswith("note: evaluation is on (eval_strategy / eval_on_start): TRL also generates and "
                                 "scores completions for the eval split, which this audit does not cost")
    assert res.stderr.count("\n") == 1


def test_a_causal_lm_as_reward_model_is_costed_with_a_score_head(tmp_path: Path) -> None:
    """TRL loads it for sequence classification: a Linear(d, 1) head, not the 152k-word LM head."""
    from planner.accountant import forward_flops

    scorer = get_model("qwen2.5-7b")
    with_rm = _audit_with(tmp_path, reward_model_name_or_path="qwen2.5-7b")
    plain = _audit_with(tmp_path)
    extra = with_rm["per_round"]["reward"] - plain["per_round"]["reward"]
    completions, seq = with_rm["completions_per_round"], with_rm["knobs"]["prompt_len"] + with_rm["knobs"]["completion_len"]
    body = forward_flops(scorer, completions, seq, logit_positions=0)
    # The head is ~1e-6 of the body: only a tight tolerance tells Linear(d, 1) from no head.
    assert extra == pytest.approx(body + completions * seq * 2 * scorer.hidden_size, rel=1e-12)


RAW = {"use_peft": True, "model_name_or_path": "qwen2.5-3b", "expected_prompt_length": 8, "expected_completion_length": 8}


def test_generation_batch_size_is_split_over_devices_and_processes() -> None:
    # TRL: generation_batch_size = per-device batch x processes x steps_per_generation.
    from planner.recipe import recipe_from_trl, trl_defaults

    raw = RAW | {"generation_batch_size": 16, "per_device_train_batch_size": 2, "world_size": 2}
    recipe = recipe_from_trl(raw, trl_defaults())
    assert recipe.steps_per_generation == 4 and recipe.completions_per_round == 16


def test_a_count_of_exactly_the_cap_is_accepted() -> None:
    from planner.errors import ConfigError
    from planner.recipe import MAX_COUNT, recipe_from_trl, trl_defaults

    assert MAX_COUNT == 10**12
    assert recipe_from_trl(RAW | {"dataset_size": 10**12}, trl_defaults()).dataset_size == 10**12
    with pytest.raises(ConfigError, match="dataset_size is 1e"):
        recipe_from_trl(RAW | {"dataset_size": 10**12 + 1}, trl_defaults())


@pytest.mark.parametrize("spec", [[1], ["q_proj", None], {"q_proj": 1}, 5])
def test_lora_targets_that_are_no_list_of_names_are_refused(spec: object) -> None:
    from planner.errors import ConfigError
    from planner.recipe import lora_targets

    with pytest.raises(ConfigError, match="must be a list of module names"):
        lora_targets(spec)
