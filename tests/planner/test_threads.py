"""torch_threads: a block's thread count is restored after it, on error too."""

from __future__ import annotations

import pytest
import torch

from planner.threads import torch_threads


def test_the_count_is_set_inside_and_restored_after_even_on_error() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch_threads(1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), torch_threads(1):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 2
        with torch_threads(None):  # leaves the count alone
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_an_empty_store_suggestion_does_not_import_torch(tmp_path) -> None:
    # Importing torch only to set its thread count cost a cold `planner suggest` on empty
    # data 2-4 s of its 10 s (the bound); the initial design touches no tensor.
    import subprocess
    import sys

    code = ("import sys; from planner.cli import main; sys.argv = ['planner', 'suggest', '--budget', '1e18', "
            f"'--data', {str(tmp_path / 'd')!r}, '--out', {str(tmp_path / 'p.json')!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert (tmp_path / "p.json").exists()
