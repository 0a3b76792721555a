"""Shared fixtures for tests/runners (add fixtures additively)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_world_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-session cache dir holding the quick-pretrained tiny world.

    After this fixture, ``ensure_policy("tiny-s", quick=True, cache_dir=root)``,
    ``ensure_prm("tiny-prm", quick=True, cache_dir=root)`` and
    ``ensure_prm("tiny-prm-s", quick=True, cache_dir=root)`` return at once; pass the PRM
    folders to ``build_reward_system(..., scorer_path=...)``.
    """
    from runners.tinyworld.pretrain import ensure_policy, ensure_prm

    root = tmp_path_factory.mktemp("tiny-world")
    ensure_policy("tiny-s", quick=True, cache_dir=root, progress=False)
    ensure_prm("tiny-prm", quick=True, cache_dir=root, progress=False)
    ensure_prm("tiny-prm-s", quick=True, cache_dir=root, progress=False)
    return root
