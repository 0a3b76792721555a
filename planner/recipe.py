"""A TRL GRPO recipe read as the audit costs it: TRL's ``GRPOConfig`` keys (plus the model,
reward and expected-length keys of :data:`EXTRA_KEYS`) merged with TRL's own defaults and
validated into a :class:`~planner.audit.Recipe`, one-line errors naming the key.

Pure apart from :func:`trl_defaults`, which imports TRL to read its defaults; reading the
YAML/JSON file is the CLI's (``planner.cli.audit``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

from planner.accountant import LoRA
from planner.architecture import LINEAR_MODULES, Architecture, is_count
from planner.audit import Recipe
from planner.engine import is_device
from planner.errors import ConfigError
from planner.registry import resolve_model

__all__ = ["EXTRA_KEYS", "PEFT_QWEN2_DEFAULT_TARGETS", "lora_targets", "recipe_from_trl", "recipe_models", "trl_defaults"]

# Keys the audit reads beyond TRL's own GRPOConfig fields.
EXTRA_KEYS = {
    "model_name_or_path",
    "model",
    "reward_funcs",
    "reward_model",
    "reward_model_name_or_path",
    "expected_prompt_length",
    "expected_completion_length",
    "dataset_size",
    "world_size",
    "num_processes",
    "device",
    "use_peft",
    "lora_r",
    "lora_alpha",
    "lora_target_modules",
}


# Keys of TRL's ModelConfig and GRPOScriptArguments (`trl grpo` recipes carry them) that
# change nothing the audit counts: precision, quantised storage, dropout, data selection.
NEUTRAL_KEYS = {
    "model_revision", "dtype", "torch_dtype", "attn_implementation", "lora_dropout", "lora_task_type",
    "use_rslora", "load_in_8bit", "load_in_4bit", "bnb_4bit_quant_type", "use_bnb_nested_quant",
    "bnb_4bit_quant_storage", "dataset_name", "dataset_config", "dataset_train_split", "dataset_test_split",
    "dataset_streaming", "ignore_bias_buffers", "trust_remote_code",
    # DatasetMixtureConfig (the fourth dataclass `trl grpo` parses) and TrlParser's `env`
    # mapping, which it sets as environment variables before parsing.
    "datasets", "streaming", "test_split_size", "env",
}

# ModelConfig keys that change the learning FLOPs in ways the audit does not cost, when set.
UNCOSTED_KEYS = {
    "use_dora": "DoRA adds a weight-norm step per adapted layer",
    "lora_modules_to_save": "it trains full copies of those modules (embeddings, LM head)",
    "lora_target_parameters": "it adapts parameters directly (MoE experts)",
}

# generation_kwargs that only change which tokens are sampled, not what a token costs or
# how many are generated.
NEUTRAL_GENERATION = {
    "temperature", "top_p", "top_k", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "repetition_penalty",
    "no_repeat_ngram_size", "do_sample", "stop_strings", "eos_token_id", "pad_token_id", "bos_token_id", "seed",
}

# Numeric fields of `trl grpo`'s parser that the audit reads, with the type it gives them.
# TrlParser sets each recipe value as an argparse default, and argparse converts a string
# default with the field's type: `beta: 4e-2` (a string to PyYAML, which reads YAML 1.1,
# where a float needs a dot) or `num_generations: "8"` run as 0.04 and 8. (Booleans stay
# strict: a Python script building GRPOConfig(**recipe) would read "false" as true.)
PARSED_NUMBERS: dict[str, type] = {
    "beta": float, "num_train_epochs": float, "per_device_train_batch_size": int,
    "gradient_accumulation_steps": int, "num_generations": int, "steps_per_generation": int,
    "generation_batch_size": int, "num_iterations": int, "max_completion_length": int, "lora_r": int,
}


def _as_trl_parses(key: str, value: Any) -> Any:
    """``value`` as `trl grpo`'s parser reads it: a string of a numeric field converted with
    the field's type; anything else (and a string that is no number) as it is, for the
    checks to refuse naming the key."""
    kind = PARSED_NUMBERS.get(key)
    if kind is None or not isinstance(value, str):
        return value
    try:
        return kind(value)
    except ValueError:
        return value


# A count beyond this is no run: refused, not carried into float overflow (inf, NaN rho).
MAX_COUNT = 10**12


def trl_defaults() -> dict[str, Any]:
    """TRL's own ``GRPOConfig`` field defaults (so an audit costs a recipe as TRL runs it)."""
    from trl import GRPOConfig

    out = {}
    for f in dataclasses.fields(GRPOConfig):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
    return out


# peft's default for Qwen2 when no target modules are given.
PEFT_QWEN2_DEFAULT_TARGETS = ("q_proj", "v_proj")


def recipe_models(raw: dict[str, Any]) -> tuple[Architecture, Architecture | None]:
    """The recipe's policy and reward model (None without one), each a registry name, Hub
    id or config.json path; errors name the recipe key that gave it."""
    model_spec = raw.get("model_name_or_path") or raw.get("model")
    if not model_spec:
        raise ConfigError("config: model_name_or_path is required; a registry name, Hub id or config.json")
    model_key = "model_name_or_path" if raw.get("model_name_or_path") else "model"
    policy = resolve_model(str(model_spec), field=f"config: {model_key}")
    if policy.role != "policy":
        raise ConfigError(f"config: {model_key} {model_spec!r} is a reward model, not a policy; give the policy "
                          "there and the reward model as reward_model_name_or_path")
    rm_key = "reward_model_name_or_path" if raw.get("reward_model_name_or_path") else "reward_model"
    rm = raw.get(rm_key)
    scorer = resolve_model(str(rm), role="prm", field=f"config: {rm_key}") if rm else None
    if scorer is not None and not scorer.score_head:
        # A causal LM given as the reward model: TRL loads it for sequence classification
        # (num_labels=1), a Linear(d, 1) score head in place of the LM head.
        scorer = dataclasses.replace(scorer, role="prm", score_head=(1,))
    return policy, scorer


# Layer indices a regex target is tried on where the policy's depth is not given (first,
# second, a two-digit one, a late one).
_PROBE_LAYERS = (0, 1, 10, 27)


def lora_targets(spec: Any, layers: int | None = None) -> tuple[str, ...]:
    """The adapted module types, as peft reads ``target_modules``: None -> its Qwen2
    default (q, v); ``"all-linear"``; another string is a regex that must match a whole
    module name, in every one of the policy's ``layers`` (the audit costs adapters on every
    layer); a list names modules by their last component, except a one-entry list, which
    TRL's ``ModelConfig`` turns into its entry (a string)."""
    if spec is None:
        return PEFT_QWEN2_DEFAULT_TARGETS
    one_entry = isinstance(spec, list) and len(spec) == 1 and isinstance(spec[0], str)
    if one_entry:  # [q_proj] is the regex "q_proj" to peft: it matches no full module name
        spec = spec[0]
    if spec == "all-linear":
        return tuple(LINEAR_MODULES)
    if isinstance(spec, str):
        try:
            pattern = re.compile(spec)
        except re.error as exc:
            raise ConfigError(f"config: lora_target_modules: {spec!r} is not a valid regex ({exc})") from None
        # peft adapts whatever full name the pattern matches, the LM head and the embedding
        # too; the audit costs adapters inside the decoder layers only.
        outside = [n for n in ("lm_head", "model.embed_tokens") if pattern.fullmatch(n)]
        if outside:
            raise ConfigError(f"config: lora_target_modules: the pattern {spec!r} also adapts {outside[0]}, which "
                              "the audit does not cost; narrow it to the layers' modules, e.g. '.*_proj'")
        attn = {"q_proj", "k_proj", "v_proj", "o_proj"}
        # Every layer (or, without the policy's depth, a sample of them): a pattern naming
        # some layers adapts fewer modules than the audit, which costs every layer, would
        # count (as a dotted list entry does).
        hits = {m: [bool(pattern.fullmatch(f"model.layers.{i}.{'self_attn' if m in attn else 'mlp'}.{m}"))
                    for i in (range(layers) if layers else _PROBE_LAYERS)] for m in LINEAR_MODULES}
        partial = [m for m, h in hits.items() if any(h) and not all(h)]
        if partial:
            raise ConfigError(f"config: lora_target_modules: the pattern {spec!r} adapts {partial[0]} in some layers "
                              "only; the audit costs adapters on every layer: match every layer, e.g. "
                              f"'.*{partial[0]}', or give a list like [{partial[0]}]")
        found = tuple(m for m, h in hits.items() if all(h))
        if not found:
            trl = "TRL reads a one-entry list as that string, and " if one_entry else ""
            raise ConfigError(f"config: lora_target_modules: the pattern {spec!r} matches no module ({trl}peft reads "
                              "a string as a regex on full names, e.g. '.*q_proj'); give a list like [q_proj, v_proj]")
        return found
    if not isinstance(spec, list) or not all(isinstance(t, str) for t in spec):
        raise ConfigError(f"config: lora_target_modules must be a list of module names, got {spec!r}")
    if not spec:
        raise ConfigError("config: lora_target_modules is empty (peft refuses that); give modules like "
                          "[q_proj, v_proj], or leave it out for peft's default")
    attn = {"q_proj", "k_proj", "v_proj", "o_proj"}
    for t in spec:
        # peft matches a name or a dotted suffix of one: a deeper path adapts fewer modules
        # (one layer's, or none) than the audit, which costs every layer, would count.
        head, _, last = t.rpartition(".")
        if last not in LINEAR_MODULES:
            raise ConfigError(f"config: lora_target_modules has unknown module {t!r}; give names among "
                              f"{', '.join(LINEAR_MODULES)}")
        if head and head != ("self_attn" if last in attn else "mlp"):
            raise ConfigError(f"config: lora_target_modules entry {t!r} names part of the model, not a module "
                              f"type; the audit costs adapters on every layer: give {last!r}")
    names = {t.rpartition(".")[2] for t in spec}
    return tuple(m for m in LINEAR_MODULES if m in names)


def recipe_from_trl(raw: dict[str, Any], defaults: dict[str, Any], layers: int | None = None,
                    context: int | None = None) -> Recipe:
    """Merge a recipe's keys with TRL's defaults (:func:`trl_defaults`) into a :class:`Recipe`,
    validating the keys the FLOP count needs (one-line errors naming the key); ``layers``,
    the policy's depth, is what a regex ``lora_target_modules`` must match in full;
    ``context``, its ``max_position_embeddings``, bounds a prompt plus its longest completion."""

    # Sorted as text: YAML reads `1:` as an int and `on:` as True, and mixed keys made the
    # sort a TypeError traceback.
    unknown = sorted(set(raw) - set(defaults) - EXTRA_KEYS - NEUTRAL_KEYS - set(UNCOSTED_KEYS), key=str)
    if unknown:
        raise ConfigError(f"config: unknown key {unknown[0]!r}; use GRPOConfig field names (or TRL's "
                          "ModelConfig / GRPOScriptArguments ones)")
    for key, why in UNCOSTED_KEYS.items():
        if raw.get(key):
            raise ConfigError(f"config: {key}: {why}, which the audit does not cost; audit the recipe without it")
    raw = {k: _as_trl_parses(k, v) for k, v in raw.items()}
    cfg = {**defaults, **raw}
    _check_generation_kwargs(cfg.get("generation_kwargs"))

    def pos_int(key: str, default: Any = None) -> int:
        v = cfg.get(key, default)
        if not is_count(v):
            raise ConfigError(f"config: {key} must be a positive integer, got {v!r}")
        if v > MAX_COUNT:
            raise ConfigError(f"config: {key} is {v:.3g}; at most {MAX_COUNT:.0e} (a larger one is no run)")
        return v

    for key in ("expected_prompt_length", "expected_completion_length"):
        if key not in cfg:
            raise ConfigError(f"config: {key} is required (tokens); add it to the recipe")
    def flag(key: str, default: bool) -> bool:
        # YAML's `"false"` is a string, and bool("false") is True: the audit would cost
        # the opposite of the recipe.
        v = cfg.get(key, default)
        if not isinstance(v, bool):
            raise ConfigError(f"config: {key} must be true or false (unquoted), got {v!r}")
        return v

    beta = cfg.get("beta", 0.0)
    if not isinstance(beta, int | float) or isinstance(beta, bool) or not math.isfinite(beta) or beta < 0:
        raise ConfigError(f"config: beta must be a finite number >= 0, got {beta!r}")
    epochs = cfg.get("num_train_epochs")
    if epochs is not None and (not isinstance(epochs, int | float) or isinstance(epochs, bool)
                               or not math.isfinite(epochs) or epochs <= 0):
        raise ConfigError(f"config: num_train_epochs must be a positive number, got {epochs!r}")
    lora = None
    if "use_peft" not in raw:
        raise ConfigError("config: use_peft is missing; TRL's ModelConfig defaults to full fine-tuning, "
                          "which this audit does not cost: add use_peft: true (and lora_r, lora_target_modules)")
    if flag("use_peft", False):
        lora = LoRA(pos_int("lora_r", 16), lora_targets(cfg.get("lora_target_modules"), layers))
    grad_accum = pos_int("gradient_accumulation_steps")
    world = pos_int("world_size", cfg.get("num_processes", 1))
    batch = pos_int("per_device_train_batch_size")
    gen_batch = raw.get("generation_batch_size")
    if gen_batch is not None and raw.get("steps_per_generation") is not None:
        raise ConfigError("config: generation_batch_size and steps_per_generation are exclusive, as in TRL; "
                          "keep one")
    if gen_batch is not None:  # TRL: generation_batch_size = batch * processes * steps_per_generation
        g = pos_int("generation_batch_size")
        if g % (batch * world):
            raise ConfigError(f"config: generation_batch_size ({g}) must be divisible by "
                              f"per_device_train_batch_size * world_size ({batch * world}), as TRL requires")
        steps_per_gen = g // (batch * world)
    else:
        steps_per_gen = pos_int("steps_per_generation") if cfg.get("steps_per_generation") is not None else grad_accum
    if pos_int("num_generations") < 2:
        raise ConfigError("config: num_generations must be >= 2 (GRPO's advantages compare completions "
                          "within a group), as TRL requires")
    if cfg.get("dataset_size") is not None:
        pos_int("dataset_size")
    if pos_int("expected_completion_length") > pos_int("max_completion_length"):
        raise ConfigError(f"config: expected_completion_length ({cfg['expected_completion_length']}) exceeds "
                          f"max_completion_length ({cfg['max_completion_length']}); completions stop there")
    prompt = pos_int("expected_prompt_length")
    # (The expected lengths past the context are the audit's own error, said there.)
    if context is not None and prompt + pos_int("expected_completion_length") <= context \
            < prompt + pos_int("max_completion_length"):
        # Priced as written, the padded bound would cost tokens the policy cannot attend over.
        raise ConfigError(f"config: max_completion_length ({cfg['max_completion_length']}) plus "
                          f"expected_prompt_length ({cfg['expected_prompt_length']}) exceeds the policy's context "
                          f"({context} tokens); lower max_completion_length")
    funcs = raw.get("reward_funcs")
    if funcs is not None and not (isinstance(funcs, str) or (
            isinstance(funcs, list) and all(isinstance(x, str) for x in funcs))):
        raise ConfigError(f"config: reward_funcs must be a name or a list of names, got {funcs!r}")
    _check_reward_funcs([funcs] if isinstance(funcs, str) else funcs or [])
    checkpointing, early_stop = _checkpointing(cfg, flag)
    device = cfg.get("device", "cuda")
    if not is_device(device):
        # Anything but "cpu" was costed as a GPU run: "CPU" or "cpu:0" without a word.
        raise ConfigError(f"config: device must be cpu, cuda or cuda:N, got {device!r}")
    recipe = Recipe(
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=grad_accum,
        num_generations=pos_int("num_generations"),
        steps_per_generation=int(steps_per_gen),
        num_iterations=pos_int("num_iterations"),
        beta=float(beta),
        gradient_checkpointing=checkpointing,
        checkpoint_early_stop=early_stop,
        max_completion_length=pos_int("max_completion_length"),
        prompt_len=pos_int("expected_prompt_length"),
        completion_len=pos_int("expected_completion_length"),
        lora=lora,
        world_size=world,
        # TRL's fused LM head skips prompt positions only with its Triton kernel (GPUs).
        lm_head_positions="all" if device == "cpu" or flag("use_cpu", False) else "completion",
        dataset_size=cfg.get("dataset_size"),
        use_vllm=flag("use_vllm", False),
        vllm_importance_sampling_correction=flag("vllm_importance_sampling_correction", True),
    )
    if recipe.completions_per_round % recipe.num_generations:
        raise ConfigError(
            "config: per_device_train_batch_size * steps_per_generation * world_size must be "
            f"divisible by num_generations ({recipe.num_generations}), as TRL requires"
        )
    return recipe


def _checkpointing(cfg: dict[str, Any], flag: Any) -> tuple[bool, bool]:
    """(checkpointing on, its early stop) as transformers 5 resolves them: the
    ``activation_checkpointing*`` keys win, ``gradient_checkpointing*`` are their deprecated
    aliases (GRPOConfig's default: on; both null: off). ``use_reentrant`` recomputes each
    layer whole (no early stop): transformers passes no kwargs as ``use_reentrant=False``,
    but kwargs without the key go to torch as they are, and torch 2.13 then defaults to the
    reentrant variant. ``every_n_layers`` other than 1 checkpoints a subset: not costed."""
    if cfg.get("activation_checkpointing") is not None:
        on = flag("activation_checkpointing", False)
    else:
        on = cfg.get("gradient_checkpointing") is not None and flag("gradient_checkpointing", True)
    key = "activation_checkpointing_kwargs" if cfg.get("activation_checkpointing_kwargs") is not None \
        else "gradient_checkpointing_kwargs"
    kwargs = cfg.get(key)
    if kwargs is None:
        return on, True  # transformers' own default: non-reentrant, with the early stop
    if isinstance(kwargs, str):  # transformers also takes the dict as a JSON string
        try:
            kwargs = json.loads(kwargs)
        except json.JSONDecodeError:
            kwargs = None
        if isinstance(kwargs, dict):  # and converts its "true"/"false" strings
            kwargs = {k: {"true": True, "false": False}.get(v, v) if isinstance(v, str) else v
                      for k, v in kwargs.items()}
    if not isinstance(kwargs, dict):
        raise ConfigError(f"config: {key} must be a mapping (e.g. {{use_reentrant: false}}), got {cfg.get(key)!r}")
    if on and kwargs.get("every_n_layers", 1) != 1:
        raise ConfigError(f"config: {key}.every_n_layers {kwargs['every_n_layers']!r} checkpoints a subset of "
                          "layers, which the audit does not cost; audit with 1 (every layer) and with "
                          "activation_checkpointing: false to bracket it")
    reentrant = kwargs.get("use_reentrant", True)
    if not isinstance(reentrant, bool):
        raise ConfigError(f"config: {key}.use_reentrant must be true or false, got {reentrant!r}")
    return on, not reentrant


def _check_generation_kwargs(spec: Any) -> None:
    """TRL applies ``generation_kwargs`` last, over its own: beams, no KV cache or another
    length change what generation costs, and the audit would cost the recipe without them."""
    if spec is None:
        return
    if isinstance(spec, str):  # GRPOConfig also takes the dict as a JSON string
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError:
            spec = None
    if not isinstance(spec, dict):
        raise ConfigError("config: generation_kwargs must be a mapping (e.g. {top_k: 50})")
    for key, value in spec.items():
        if key in NEUTRAL_GENERATION or (key == "num_beams" and value == 1) or (key == "use_cache" and value is True):
            continue
        raise ConfigError(f"config: generation_kwargs.{key} ({value!r}) changes what generation computes (beams, "
                          "KV cache, lengths), which the audit does not cost; drop it, or set lengths with "
                          "max_completion_length")


def _check_reward_funcs(names: list[str]) -> None:
    """The audit costs reward_funcs as rule functions (0 FLOPs). TRL also takes a model id
    there and runs that model on every completion: costed as free, the split would be
    wrong without a word, so such an entry must move to reward_model_name_or_path."""
    for name in names:
        try:
            resolve_model(name, role="prm")
            known = True
        except ConfigError:
            known = False
        if known or "/" in name:  # a registered model, its Hub id, a config path, or any Hub id
            raise ConfigError(f"config: reward_funcs entry {name!r} is a model, which the audit would cost as a "
                              "free rule function; give it as reward_model_name_or_path")
        if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
            raise ConfigError(f"config: reward_funcs entry {name!r} is neither a function name nor a dotted "
                              "path (pkg.module.fn); fix the name")
