"""The runners' public surface: each module's ``__all__`` names exist and carry a
docstring, and ``import runners`` and ``runners --help`` load no deep-learning library
(the package docstring: torch and TRL load only when a run needs them)."""

from __future__ import annotations

import pytest

import runners
from tests.public_surface import check_public_surface, import_and_help, package_modules

MODULES = package_modules(runners)


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_exists_and_has_a_docstring(name: str) -> None:
    # A CLI module registers commands: it may have no __all__, as may a bare package.
    check_public_surface(name, without_all="runners.cli.")


def test_import_runners_and_help_load_no_deep_learning_library() -> None:
    out = import_and_help("runners")
    assert "loaded after import: []" in out.splitlines(), out
    assert "loaded after help: []" in out.splitlines(), out
    assert "Usage" in out  # the help really printed
