"""Shared checks of a package's public surface (used by tests/<package>/test_<package>_api.py):
each module's ``__all__`` names exist and carry a docstring, and importing the package (and
its ``--help``) loads no deep-learning library."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

HEAVY = ("torch", "trl", "botorch", "gpytorch", "transformers", "peft")


def package_modules(package: ModuleType) -> list[str]:
    """Dotted names of every module of ``package`` (its ``__init__`` as the package itself)."""
    root = Path(package.__file__ or "").parent
    return sorted(
        ".".join((package.__name__, *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for p in root.rglob("*.py")
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


def check_public_surface(name: str, without_all: str | None = None) -> None:
    """Assert module ``name`` has a docstring and an ``__all__`` of distinct, present,
    documented names. ``without_all``: a module prefix (a CLI's, whose modules register
    commands) allowed no ``__all__``, as is a bare package (only its docstring)."""
    module = importlib.import_module(name)
    assert module.__doc__, f"{name} has no module docstring"
    public = getattr(module, "__all__", None)
    if public is None and without_all is not None:
        body = ast.parse(Path(module.__file__ or "").read_text()).body
        bare = len(body) == 1 and isinstance(body[0], ast.Expr)
        assert bare or name.startswith(without_all), f"{name} has no __all__"
        return
    assert public is not None, f"{name} has no __all__"
    assert len(set(public)) == len(public), f"{name}.__all__ repeats a name"
    assert [n for n in public if not hasattr(module, n)] == [], f"{name}.__all__ names what it lacks"
    assert undocumented(module) == [], f"{name}: public names without a docstring"


def run_python(code: str) -> str:
    """Stdout of ``code`` run in a fresh interpreter (what a new process imports)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def import_and_help(package: str) -> str:
    """Stdout of a fresh process that imports ``package``, then runs ``<package> --help``
    through its console script, printing the heavy libraries loaded after each step."""
    return run_python(
        "import sys\n"
        f"heavy = {HEAVY!r}\n"
        f"import {package}\n"
        "print('loaded after import:', [m for m in heavy if m in sys.modules])\n"
        f"from {package}.cli import main\n"
        f"sys.argv = [{package!r}, '--help']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('loaded after help:', [m for m in heavy if m in sys.modules])\n"
    )
