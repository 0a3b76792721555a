"""The surrogate's public surface: each module's ``__all__`` names exist and carry a
docstring, and ``import surrogate`` loads no deep-learning library: the names that need
torch (the GP, its kernel, LOO-CV) load it when first used, so reading records and
features (``extract``, ``group_replicates``, ``FEATURES``) stays light."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import surrogate

HEAVY = ("torch", "trl", "botorch", "gpytorch", "transformers", "peft")
ROOT = Path(surrogate.__file__).parent
MODULES = sorted(
    ".".join(("surrogate", *p.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
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
    assert public is not None, f"{name} has no __all__"
    assert len(set(public)) == len(public), f"{name}.__all__ repeats a name"
    assert [n for n in public if not hasattr(module, n)] == [], f"{name}.__all__ names what it lacks"
    assert undocumented(module) == [], f"{name}: public names without a docstring"


def test_import_surrogate_loads_no_deep_learning_library_until_the_gp_is_used() -> None:
    code = (
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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "loaded after import: []" in out.splitlines(), out
    assert "torch after use: True" in out.splitlines(), out


def test_every_exported_name_resolves_and_star_import_gives_them() -> None:
    namespace: dict[str, object] = {}
    exec("from surrogate import *", namespace)
    assert set(surrogate.__all__) <= set(namespace)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        surrogate.nope  # noqa: B018
