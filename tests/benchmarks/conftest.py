"""The benchmark scripts are files, not a package: tests load them by path."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, alias: str | None = None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(alias or name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def load_script() -> Callable[..., ModuleType]:
    """``load_script(name, alias=None)``: benchmarks/NAME.py as a module (registered as ALIAS)."""
    return _load
