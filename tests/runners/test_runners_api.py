"""The runners' public surface: each module's ``__all__`` names exist and carry a
docstring, and ``import runners`` and ``runners --help`` load no deep-learning library
(the package docstring: torch and TRL load only when a run needs them)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import runners

HEAVY = ("torch", "trl", "botorch", "gpytorch", "transformers", "peft")
ROOT = Path(runners.__file__).parent
MODULES = sorted(
    ".".join(("runners", *p.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
    for p in ROOT.rglob("*.py")
)


def undocumented(module: object) -> list[str]:
    """Names in ``module.__all__`` defined in this code base (a class or a function) whose
    own docstring is missing; a dataclass's generated ``Name(field, ...)`` does not count."""
    out = []
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
        if dataclasses.is_dataclass(obj) and doc and doc.startswith(f"{obj.__name__}("):
            doc = None
        if not (doc and doc.strip()):
            out.append(name)
    return out


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_exists_and_has_a_docstring(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__, f"{name} has no module docstring"
    public = getattr(module, "__all__", None)
    if public is None:  # a bare package (only its docstring); a CLI module registers commands
        body = ast.parse(Path(module.__file__).read_text()).body
        bare = len(body) == 1 and isinstance(body[0], ast.Expr)
        assert bare or name.startswith("runners.cli."), f"{name} has no __all__"
        return
    assert len(set(public)) == len(public), f"{name}.__all__ repeats a name"
    assert [n for n in public if not hasattr(module, n)] == [], f"{name}.__all__ names what it lacks"
    assert undocumented(module) == [], f"{name}: public names without a docstring"


def test_import_runners_and_help_load_no_deep_learning_library() -> None:
    code = (
        "import sys\n"
        f"heavy = {HEAVY!r}\n"
        "import runners\n"
        "print('loaded after import:', [m for m in heavy if m in sys.modules])\n"
        "from runners.cli import main\n"
        "sys.argv = ['runners', '--help']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('loaded after help:', [m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "loaded after import: []" in out.splitlines(), out
    assert "loaded after help: []" in out.splitlines(), out
    assert "Usage" in out  # the help really printed
