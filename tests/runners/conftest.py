"""Shared fixtures for tests/runners (add fixtures additively)."""

from __future__ import annotations

import subprocess
import sys
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
    # The PRMs (~1 min) train in a second process while the policy (~2 min) trains here:
    # each on one thread, so the weights are those of a serial build, and the suite's
    # longest setup waits for the policy alone on a 2-core machine.
    code = ("import sys; from pathlib import Path; from runners.tinyworld.pretrain import ensure_prm\n"
            "for name in ('tiny-prm', 'tiny-prm-s'):\n"
            "    ensure_prm(name, quick=True, cache_dir=Path(sys.argv[1]), progress=False)")
    prms = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        ensure_policy("tiny-s", quick=True, cache_dir=root, progress=False)
    finally:
        out, _ = prms.communicate()
    assert prms.returncode == 0, out
    # Cached by the second process: these return at once.
    ensure_prm("tiny-prm", quick=True, cache_dir=root, progress=False)
    ensure_prm("tiny-prm-s", quick=True, cache_dir=root, progress=False)
    return root


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``pytest -n 2 --dist loadgroup`` (scripts/test.sh) every test that needs the
    pretrained tiny world runs on one worker, so the world is pretrained once, not once
    per worker; the other worker takes the rest of the suite meanwhile."""
    for item in items:
        if "tiny_world_cache" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("tiny-world"))
