"""The planner's public surface: each module's ``__all__`` names exist and carry a
docstring, and ``import planner`` and ``planner --help`` load no deep-learning library
(the package docstring promises nothing is imported there, so ``--help`` stays instant)."""

from __future__ import annotations

import pytest

import planner
from tests.public_surface import check_public_surface, import_and_help, package_modules

MODULES = package_modules(planner)


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_exists_and_has_a_docstring(name: str) -> None:
    # A CLI module registers commands: it may have no __all__, as may a bare package.
    check_public_surface(name, without_all="planner.cli.")


def test_import_planner_and_help_load_no_deep_learning_library() -> None:
    out = import_and_help("planner")
    assert "loaded after import: []" in out.splitlines(), out
    assert "loaded after help: []" in out.splitlines(), out
    assert "Usage" in out  # the help really printed
