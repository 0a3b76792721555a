"""Output-path checks: the folders they guard are the store's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli.paths import (
    STORE_FOLDERS,
    check_not_store_folder,
    check_output_file,
    is_store_folder,
)
from planner.errors import ConfigError
from runners.store import PilotStore


def test_store_folders_are_the_stores_layout(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    assert {store.runs_dir.name, store.failed_dir.name, store.corrupt_dir.name} == set(STORE_FOLDERS)


def test_a_store_folder_is_recognised_and_a_lone_namesake_is_not(tmp_path: Path) -> None:
    (tmp_path / "store" / "runs").mkdir(parents=True)
    (tmp_path / "store" / "failed").mkdir()
    assert is_store_folder(tmp_path / "store" / "runs")
    assert is_store_folder(tmp_path / "store" / "corrupt")  # not there yet, beside the others
    (tmp_path / "plain" / "runs").mkdir(parents=True)
    assert not is_store_folder(tmp_path / "plain" / "runs")
    assert not is_store_folder(tmp_path / "store")
    with pytest.raises(ConfigError, match="pass the store itself"):
        check_not_store_folder(tmp_path / "store" / "runs")
    with pytest.raises(ConfigError, match="inside a pilot store's runs/"):
        check_output_file(tmp_path / "store" / "runs" / "proposals.json", "out")
    assert check_output_file(tmp_path / "store" / "proposals.json", "out") == tmp_path / "store" / "proposals.json"
