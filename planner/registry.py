"""Registries of models and reward systems, read from ``configs/`` (data, not code).

``configs/models/*.toml`` hold architectures (the fields of a Hugging Face config.json);
``configs/rewards.toml`` holds the reward systems. Set ``RACE_CONFIGS`` to use another
folder. Loaded once and cached; the objects returned are frozen.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from planner.architecture import Architecture, FamilyDefaults, architecture_from_hf_config, is_count
from planner.errors import ConfigError

__all__ = [
    "POLICIES_QWEN",
    "REWARD_SYSTEMS",
    "RewardSystem",
    "architecture_from_hf_config",
    "configs_dir",
    "get_model",
    "get_reward",
    "list_models",
    "list_rewards",
    "resolve_model",
    "scorer_for",
]

REWARD_SYSTEMS: tuple[str, ...] = ("sparse", "structured", "dense", "proxy-prm", "prm")
POLICIES_QWEN: tuple[str, ...] = ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b")


@dataclass(frozen=True)
class RewardSystem:
    """A reward system: ``kind`` "rule" (CPU verifier, ~0 FLOPs) or "prm" (a scorer model)."""

    name: str
    kind: str
    description: str
    scorers: tuple[tuple[str, str], ...] = ()  # (policy family, scorer model name)

    @property
    def is_rule(self) -> bool:
        return self.kind == "rule"


def configs_dir() -> Path:
    """The folder the registries read: ``$RACE_CONFIGS`` when set, else the configs that ship
    inside the package."""
    env = os.environ.get("RACE_CONFIGS")
    if env:
        # A typo'd or stale one read as a folder without models: "unknown model ...; use a
        # policy: " with an empty list, and no word of the variable.
        if not (Path(env) / "models").is_dir():
            what = "is not a folder" if not Path(env).is_dir() else "has no models/ folder (or cannot be read)"
            raise ConfigError(f"RACE_CONFIGS: {env!r} {what}; point it at a copy of configs/ (models/, "
                              "rewards.toml, worlds/), or unset it for the shipped ones")
        return Path(env)
    # planner/configs: a link to the repository's configs/ in a checkout, the files
    # themselves in an installed wheel (pyproject.toml's package-data).
    return (Path(__file__).resolve().parent / "configs").resolve()


@cache
def _models() -> dict[str, Architecture]:
    folder = configs_dir() / "models"
    out: dict[str, Architecture] = {}
    for path in sorted(folder.glob("*.toml")):
        arch = _model_from_file(path, _read_toml(path))
        out[arch.name] = arch
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses: an array nested thousands deep was a traceback
        raise ConfigError(f"{path}: values nested too deeply to read; not a registry file") from None


_ARCH_KEYS = {f.name for f in fields(Architecture)} - {"defaults"}
_DEFAULT_COUNTS = ("prompt_len", "completion_len", "prompts_per_round", "lora_rank")


def _model_from_file(path: Path, raw: dict[str, Any]) -> Architecture:
    """A model file checked as the hub config.json of a model path is: every size a positive
    whole number, GQA groups whole, no MoE (one line naming the file and key; a bad size was
    a ZeroDivisionError or TypeError traceback in the accountant, or a model costed so)."""
    raw = dict(raw)
    defaults = raw.pop("defaults", {})
    unknown = sorted(set(raw) - _ARCH_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}; use {', '.join(sorted(_ARCH_KEYS))} and [defaults]")
    for key in ("name", "family"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ConfigError(f"{path}: {key} must be a non-empty string, got {raw.get(key)!r}")
    if raw.get("role") not in ("policy", "prm"):
        raise ConfigError(f"{path}: role must be 'policy' or 'prm', got {raw.get('role')!r}")
    if raw.get("hub_id") is not None and not isinstance(raw["hub_id"], str):
        raise ConfigError(f"{path}: hub_id must be a string, got {raw['hub_id']!r}")
    head = raw.get("score_head", [])
    if not isinstance(head, list) or len(head) > 2 or not all(is_count(x) for x in head):
        raise ConfigError(f"{path}: score_head must be [d_out] or [d_hidden, d_out] of positive integers, "
                          f"got {head!r}")
    raw["score_head"] = tuple(head)
    for key in ("num_key_value_heads", "tie_word_embeddings"):  # required here, defaulted in a config.json
        if key not in raw:
            raise ConfigError(f"{path}: {key} is missing; add it")
    architecture_from_hf_config(raw, raw["name"], raw["role"], where=f"{path}:")
    if not isinstance(defaults, dict):
        raise ConfigError(f"{path}: defaults must be a table ([defaults])")
    known = {f.name for f in fields(FamilyDefaults)}
    for key, value in defaults.items():
        if key not in known:
            raise ConfigError(f"{path}: unknown key defaults.{key}; use {', '.join(sorted(known))}")
        if key in _DEFAULT_COUNTS and not is_count(value):
            raise ConfigError(f"{path}: defaults.{key} must be a positive integer, got {value!r}")
    if not isinstance(defaults.get("gradient_checkpointing", True), bool):
        raise ConfigError(f"{path}: defaults.gradient_checkpointing must be true or false, "
                          f"got {defaults['gradient_checkpointing']!r}")
    if defaults.get("lm_head_positions", "completion") not in ("completion", "all"):
        raise ConfigError(f"{path}: defaults.lm_head_positions must be 'completion' or 'all', "
                          f"got {defaults['lm_head_positions']!r}")
    return Architecture(**raw, defaults=FamilyDefaults(**defaults))


@cache
def _rewards() -> dict[str, RewardSystem]:
    path = configs_dir() / "rewards.toml"
    out = {}
    for name, body in _read_toml(path).items():
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: {name} must be a table ([{name}])")
        kind = body.get("kind")
        if kind not in ("rule", "prm"):
            raise ConfigError(f"{path}: [{name}] kind must be 'rule' or 'prm', got {kind!r}")
        scorers = body.get("scorer", {})
        if not isinstance(scorers, dict) or not all(isinstance(v, str) for v in scorers.values()) \
                or (kind == "prm" and not scorers):
            raise ConfigError(f"{path}: [{name}] runs a scorer: give it as scorer = {{ tiny = ..., \"qwen2.5\" = ... }}"
                              if kind == "prm" else f"{path}: [{name}] scorer must map families to model names")
        for scorer in scorers.values():
            if scorer not in _models():
                raise ConfigError(f"{path}: [{name}] scorer {scorer!r} is not a model in {configs_dir() / 'models'}")
        out[name] = RewardSystem(name=name, kind=kind, description=str(body.get("description", "")),
                                 scorers=tuple(sorted(scorers.items())))
    return out


def list_models(role: str | None = "policy") -> list[str]:
    """Names of the registered models of ``role`` (``policy`` or ``prm``; None: every model)."""
    return [n for n, a in _models().items() if role is None or a.role == role]


def list_rewards() -> list[str]:
    """Names of the registered reward systems."""
    return list(_rewards())


def get_model(name: str) -> Architecture:
    """The architecture registered as ``name`` (a policy or a reward model); an unknown name is
    a one-line :class:`~planner.errors.ConfigError` listing the policies."""
    try:
        return _models()[name]
    except KeyError:
        policies = list_models("policy")
        others = ", ".join(n for n in list_models(None) if n not in policies)
        raise ConfigError(f"model: unknown model {name!r}; {_did_you_mean(name, list_models(None))}use a policy: "
                          f"{', '.join(policies)}" + (f" (reward models: {others})" if others else "")) from None


def get_reward(name: str) -> RewardSystem:
    """The reward system registered as ``name``; an unknown name is a one-line
    :class:`~planner.errors.ConfigError` listing them."""
    try:
        return _rewards()[name]
    except KeyError:
        known = ", ".join(_rewards())
        raise ConfigError(f"reward: unknown reward system {name!r}; {_did_you_mean(name, list(_rewards()))}use one "
                          f"of: {known}") from None


def _did_you_mean(name: str, known: list[str]) -> str:
    """``"did you mean 'x'? "`` for a near miss (a case slip such as qwen2.5-1.5B, a typo), else ``""``."""
    import difflib

    folded = {k.casefold(): k for k in known}
    close = ([folded[name.casefold()]] if name.casefold() in folded
             else [folded[c] for c in difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.8)])
    return f"did you mean {close[0]!r}? " if close else ""


def scorer_for(reward: RewardSystem, policy: Architecture) -> Architecture | None:
    """The scorer model ``reward`` runs for ``policy`` (None for rule-based rewards)."""
    if reward.is_rule:
        return None
    table = dict(reward.scorers)
    if policy.family not in table:
        raise ConfigError(
            f"reward: {reward.name!r} has no scorer for the {policy.family!r} family; "
            f"add one under [{reward.name}].scorer in configs/rewards.toml"
        )
    return get_model(table[policy.family])


def _hub_names(hub_id: str) -> set[str]:
    """Hub ids that name a registered model, lower-cased: its own, and for an ``-Instruct``
    id the base model it was tuned from, whose config.json has the same sizes (RL from the
    base is a common recipe; Qwen2.5's base configs differ only in a longer context)."""
    names = {hub_id.lower()}
    if hub_id.lower().endswith("-instruct"):
        names.add(hub_id[: -len("-instruct")].lower())
    return names


def resolve_model(spec: str, role: str = "policy", field: str = "model") -> Architecture:
    """A registry name, a Hub id of a registered model, or a path to a config.json (or its
    folder); errors name ``field`` (the option or recipe key that gave ``spec``)."""
    import json

    models = _models()
    if spec in models:
        return models[spec]
    for arch in models.values():
        if arch.hub_id and spec.lower() in _hub_names(arch.hub_id):
            return arch
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        try:
            return architecture_from_hf_config(json.loads(path.read_text()), str(spec), role)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{field}: {path} is not valid JSON ({exc.msg})") from None
        except UnicodeDecodeError:  # was a traceback from read_text
            raise ConfigError(f"{field}: {path} is not UTF-8 text; give the folder of a model's config.json") from None
        except (RecursionError, OSError) as exc:
            raise ConfigError(f"{field}: cannot read {path} ({type(exc).__name__}); give the folder of a model's "
                              "config.json") from None
        except ConfigError as exc:
            raise ConfigError(f"{field}: {exc}") from None
    names = [n for n, a in models.items() if a.role == role] or list(models)
    raise ConfigError(
        f"{field}: {spec!r} is neither a registered {'reward model' if role == 'prm' else 'model'} "
        f"({', '.join(names)}), the Hub id of one, nor a path to a config.json; pass one of those"
    )
