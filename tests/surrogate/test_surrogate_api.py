"""The surrogate's public surface: each module's ``__all__`` names exist and carry a
docstring, and ``import surrogate`` loads no deep-learning library: the names that need
torch (the GP, its kernel, LOO-CV) load it when first used, so reading records and
features (``extract``, ``group_replicates``, ``FEATURES``) stays light."""

from __future__ import annotations

import pytest

import surrogate
from tests.public_surface import HEAVY, check_public_surface, package_modules, run_python

MODULES = package_modules(surrogate)


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_exists_and_has_a_docstring(name: str) -> None:
    check_public_surface(name)


def test_import_surrogate_loads_no_deep_learning_library_until_the_gp_is_used() -> None:
    out = run_python(
        "import sys\n"
        f"heavy = {HEAVY!r}\n"
        "import surrogate\n"
        "from surrogate import FEATURES, Observation, TrainingData, extract, group_replicates\n"
        "print('loaded after import:', [m for m in heavy if m in sys.modules])\n"
        "from surrogate import FrontierSurrogate\n"
        "import surrogate.model\n"
        "assert FrontierSurrogate is surrogate.model.FrontierSurrogate\n"
        "print('torch after use:', 'torch' in sys.modules)\n"
    )
    assert "loaded after import: []" in out.splitlines(), out
    assert "torch after use: True" in out.splitlines(), out


def test_every_exported_name_resolves_and_star_import_gives_them() -> None:
    namespace: dict[str, object] = {}
    exec("from surrogate import *", namespace)
    assert set(surrogate.__all__) <= set(namespace)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        surrogate.nope  # noqa: B018
