"""Registries of models and reward systems, read from ``configs/`` (data, not code).

``configs/models/*.toml`` hold architectures (the fields of a Hugging Face config.json);
``configs/rewards.toml`` holds the reward systems. Set ``RACE_CONFIGS`` to use another
folder. Loaded once and cached; the objects returned are frozen.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from planner.architecture import Architecture, FamilyDefaults, architecture_from_hf_config
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
    env = os.environ.get("RACE_CONFIGS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "configs"


@cache
def _models() -> dict[str, Architecture]:
    folder = configs_dir() / "models"
    out: dict[str, Architecture] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            raw = tomllib.loads(path.read_text())
            defaults = FamilyDefaults(**raw.pop("defaults", {}))
            raw["score_head"] = tuple(raw.get("score_head", ()))
            arch = Architecture(**raw, defaults=defaults)
        except (tomllib.TOMLDecodeError, TypeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        out[arch.name] = arch
    return out


@cache
def _rewards() -> dict[str, RewardSystem]:
    path = configs_dir() / "rewards.toml"
    raw = tomllib.loads(path.read_text())
    return {
        name: RewardSystem(
            name=name,
            kind=body["kind"],
            description=body.get("description", ""),
            scorers=tuple(sorted(body.get("scorer", {}).items())),
        )
        for name, body in raw.items()
    }


def list_models(role: str | None = "policy") -> list[str]:
    return [n for n, a in _models().items() if role is None or a.role == role]


def list_rewards() -> list[str]:
    return list(_rewards())


def get_model(name: str) -> Architecture:
    try:
        return _models()[name]
    except KeyError:
        policies = list_models("policy")
        others = ", ".join(n for n in list_models(None) if n not in policies)
        raise ConfigError(f"model: unknown model {name!r}; use a policy: {', '.join(policies)}"
                          + (f" (reward models: {others})" if others else "")) from None


def get_reward(name: str) -> RewardSystem:
    try:
        return _rewards()[name]
    except KeyError:
        known = ", ".join(_rewards())
        raise ConfigError(f"reward: unknown reward system {name!r}; use one of: {known}") from None


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


def resolve_model(spec: str, role: str = "policy", field: str = "model") -> Architecture:
    """A registry name, a Hub id of a registered model, or a path to a config.json (or its
    folder); errors name ``field`` (the option or recipe key that gave ``spec``)."""
    import json

    models = _models()
    if spec in models:
        return models[spec]
    for arch in models.values():
        if arch.hub_id and arch.hub_id.lower() == spec.lower():
            return arch
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        try:
            return architecture_from_hf_config(json.loads(path.read_text()), str(spec), role)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{field}: {path} is not valid JSON ({exc.msg})") from None
        except ConfigError as exc:
            raise ConfigError(f"{field}: {exc}") from None
    names = [n for n, a in models.items() if a.role == role] or list(models)
    raise ConfigError(
        f"{field}: {spec!r} is neither a registered {'reward model' if role == 'prm' else 'model'} "
        f"({', '.join(names)}), the Hub id of one, nor a path to a config.json; pass one of those"
    )
