"""The accountant's view of a live model: its Hugging Face config and its peft adapter."""

from __future__ import annotations

from typing import Any

from planner.accountant import LoRA
from planner.architecture import LINEAR_MODULES, Architecture, architecture_from_hf_config

__all__ = ["architecture_from_config", "lora_from_model", "unwrap"]


def architecture_from_config(config: Any, name: str = "model", *, score_head: tuple[int, ...] = ()) -> Architecture:
    """The accountant's view of a live Hugging Face decoder config (a ``PretrainedConfig``).

    Read by :func:`planner.architecture.architecture_from_hf_config`, as ``planner audit``
    reads a config.json, so a layout the accountant cannot cost (an explicit ``head_dim``
    off ``hidden_size / heads``, as in Qwen3) stops the meter with a one-line error instead
    of being metered wrong."""
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    fields = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(vars(cfg))
    return architecture_from_hf_config(fields, name, "prm" if score_head else "policy", family="hf",
                                       score_head=score_head)


def lora_from_model(model: Any) -> LoRA | None:
    """Rank and target modules of the active peft LoRA adapter, or None without one.

    The wrapped layers are read off the model itself (modules with ``lora_A``), because
    after injection peft's ``target_modules`` may hold full paths
    (``model.layers.0.self_attn.q_proj``), ``"all-linear"`` or a regex, none of which
    names a module type; before injection the config is read, by last name component."""
    configs = getattr(model, "peft_config", None)
    if not configs:
        return None
    cfg = configs.get(getattr(model, "active_adapter", "default")) or next(iter(configs.values()))
    _check_costable(cfg)
    wrapped: set[str] = set()
    named = getattr(model, "named_modules", None)
    if callable(named):
        wrapped = {name.rsplit(".", 1)[-1] for name, mod in named() if hasattr(mod, "lora_A")}
    if not wrapped:
        targets = cfg.target_modules
        if targets == "all-linear":
            wrapped = set(LINEAR_MODULES)
        else:
            names = (targets,) if isinstance(targets, str) else tuple(targets or ())
            wrapped = {str(n).rsplit(".", 1)[-1] for n in names}
    chosen = tuple(m for m in LINEAR_MODULES if m in wrapped)
    if not chosen:
        import warnings

        warnings.warn("FlopMeter: a peft model with no LoRA on the policy's linear layers "
                      f"(target_modules={cfg.target_modules!r}); metering it as full fine-tuning", stacklevel=2)
        return None
    return LoRA(int(cfg.r), chosen)


def _check_costable(cfg: Any) -> None:
    """The accountant costs one rank on every layer of each target: an adapter that differs
    per layer, or per module, is refused with one line rather than metered as if it did not."""
    from planner.errors import ConfigError

    layers = getattr(cfg, "layers_to_transform", None)
    if layers is not None:
        raise ConfigError(f"FlopMeter: peft layers_to_transform={layers!r} adapts some layers only, which the "
                          "meter does not cost; adapt every layer (drop layers_to_transform) to meter the run")
    if getattr(cfg, "rank_pattern", None):
        raise ConfigError(f"FlopMeter: peft rank_pattern={cfg.rank_pattern!r} gives modules other ranks than "
                          f"r={cfg.r}, which the meter does not cost; use one rank (drop rank_pattern)")
    if getattr(cfg, "use_dora", False):
        raise ConfigError("FlopMeter: peft use_dora=True adds a weight-norm step per adapted layer, which the meter "
                          "does not cost; meter a plain LoRA adapter")


def unwrap(model: Any) -> Any:
    """The causal LM under DDP/accelerate (``.module``) and peft (``get_base_model``)."""
    while hasattr(model, "module") and not hasattr(model, "get_base_model"):
        model = model.module
    return model.get_base_model() if hasattr(model, "get_base_model") else model
