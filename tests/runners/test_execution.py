"""runners.execution.execute, the library call: what it refuses before any run."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.compiler import compile_plan
from planner.errors import ConfigError
from planner.proposals import make_proposal
from runners.execution import execute

P = make_proposal(compile_plan("tiny-s", "sparse", 0.7, 1e12))


def test_two_proposals_under_one_id_are_refused_before_any_run(tmp_path: Path) -> None:
    """A list of proposals is not a ProposalSet (which refuses a repeated id): two plans
    under one id made one run id, the second plan was never run and came back "already
    done", its run lost behind the first one's record."""
    other = make_proposal(compile_plan("tiny-s", "sparse", 0.6, 1e12)).model_copy(update={"id": P.id})
    with pytest.raises(ConfigError, match=rf"^proposals: {P.id} is the id of two different proposals"):
        execute([P, other], data=tmp_path / "d", engine="sim", show_progress=False)
    assert not (tmp_path / "d").exists()


def test_the_same_proposal_listed_twice_runs_once(tmp_path: Path) -> None:
    """Two lists joined (the same proposal twice) are one run, not an error."""
    res = execute([P, P], data=tmp_path / "d", engine="sim", show_progress=False)
    assert res.ok == [f"{P.id}-s0"] and res.skipped == [] and res.attempts == 1


def test_a_seed_given_twice_is_refused_before_any_run(tmp_path: Path) -> None:
    """seeds=[0, 0] made two tasks of one run: one ran, the other waited on its lease and
    was counted "already done", so the summary said 1 ok and 1 skipped of one run."""
    with pytest.raises(ConfigError, match=r"^seeds: 0 is given twice"):
        execute([P], data=tmp_path / "d", engine="sim", seeds=[0, 1, 0], show_progress=False)
    assert not (tmp_path / "d").exists()
