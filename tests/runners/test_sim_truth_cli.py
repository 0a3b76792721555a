"""``runners truth`` on every shipped world, and ``runners execute --engine sim --world``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runners.cli import app
from runners.sim.world import list_worlds

runner = CliRunner()
WORLDS = list_worlds()
ARGS = ["--model", "qwen2.5-1.5b", "--budget", "1e16"]


@pytest.mark.parametrize("world", WORLDS, ids=lambda p: p.stem)
def test_truth_json_on_every_world(world: Path) -> None:
    res = runner.invoke(app, ["truth", "--world", str(world), *ARGS, "--reward", "prm",
                              "--target", "pass1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {"rho_star", "regime", "shares", "frontier"} <= set(out)
    assert out["regime"] in ("search-heavy", "update-heavy", "reward-heavy")
    assert set(out["shares"]) == {"search", "learning", "reward"}
    assert sum(out["shares"].values()) == pytest.approx(1.0)
    rho = [r for r, _ in out["frontier"]]
    assert len(rho) >= 50 and rho == sorted(rho)
    best = max(out["frontier"], key=lambda rv: rv[1])
    assert out["rho_star"] == pytest.approx(best[0])
    # the regime is the largest share at rho*
    label = {"search": "search-heavy", "learning": "update-heavy", "reward": "reward-heavy"}
    assert out["regime"] == label[max(out["shares"], key=out["shares"].get)]
    assert out["shares"]["learning"] == pytest.approx(out["rho_star"])


def test_truth_table_by_world_name() -> None:
    res = runner.invoke(app, ["truth", "--world", "paper", *ARGS, "--reward", "sparse"])
    assert res.exit_code == 0, res.output
    assert "rho* = " in res.output and "update-heavy" in res.output


def test_truth_help_says_what_the_frontier_points_are() -> None:
    """The frontier is every plan a request can compile to (since 12-03), not a rho grid:
    the help said "on a dense rho grid" after the truth had stopped using one."""
    res = runner.invoke(app, ["truth", "--help"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.replace("│", " ").split())
    assert "every plan a request can compile to" in text
    assert "rho grid" not in text


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--reward", "sparse", "--target", "bleu"], "target"),
        (["--reward", "vibes"], "reward"),
        (["--reward", "sparse", "--world", "/no/such/world.toml"], "world"),
        (["--reward", "sparse", "--model", "tiny-prm"], "model: 'tiny-prm' is a reward model, not a policy"),
    ],
)
def test_truth_bad_input_is_one_line(extra: list[str], field: str) -> None:
    res = runner.invoke(app, ["truth", *ARGS, *extra])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}"), res.output


def test_truth_budget_too_small() -> None:
    res = runner.invoke(app, ["truth", "--model", "qwen2.5-7b", "--reward", "prm",
                              "--budget", "1e9"])
    assert res.exit_code == 2 and "budget" in res.output
    # The budget it names buys a run: the table's cheapest levers (7.68e13 here) are not
    # the cheapest the compiler takes at small budgets.
    base = ["truth", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--json"]
    res = runner.invoke(app, [*base, "--budget", "3e13"])
    assert res.exit_code == 2 and "the nearest run costs 3.09e+13 FLOPs" in res.stderr
    assert runner.invoke(app, [*base, "--budget", "3.09e13"]).exit_code == 0


@pytest.mark.parametrize("world", WORLDS, ids=lambda p: p.stem)
def test_execute_sim_on_every_world(world: Path, tmp_path: Path) -> None:
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal, write_proposals
    from runners.store import PilotStore

    props = tmp_path / "p.json"
    write_proposals(props, [make_proposal(compile_plan("tiny-s", "sparse", 0.7, 2e11))])
    data = tmp_path / "data"
    res = runner.invoke(app, ["execute", str(props), "--engine", "sim", "--world", str(world),
                              "--data", str(data), "--json"])
    assert res.exit_code == 0, res.output
    (rec,) = PilotStore(data).records()
    assert rec.simulated and rec.provenance["world_path"] == str(world.resolve())


def test_truth_plot_writes_a_figure_and_refuses_a_non_figure_path(tmp_path: Path) -> None:
    fig = tmp_path / "figs" / "contrast_7b_prm.png"
    res = runner.invoke(app, ["truth", "--world", "contrast", "--model", "qwen2.5-7b", "--reward", "prm",
                              "--budget", "1e16", "--plot", str(fig)])
    assert res.exit_code == 0, res.output
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {fig}" in res.stderr
    # With --json, stdout is the document alone (the note once came first and broke it).
    res = runner.invoke(app, ["truth", "--world", "contrast", "--model", "qwen2.5-7b", "--reward", "prm",
                              "--budget", "1e16", "--plot", str(fig), "--json"])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)
    bad = tmp_path / "frontier.txt"
    res = runner.invoke(app, ["truth", "--world", "contrast", *ARGS, "--reward", "prm", "--plot", str(bad)])
    assert res.exit_code == 2 and "plot:" in res.output and ".png" in res.output and not bad.exists()


def test_plot_path_checked_before_the_work(tmp_path: Path) -> None:
    (tmp_path / "adir.png").mkdir()
    (tmp_path / "afile").write_text("x")
    base = ["truth", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--budget", "1e16", "--plot"]
    for bad, says in [("adir.png", "is a directory"), ("afile/x.png", "is not a writable directory")]:
        res = runner.invoke(app, [*base, str(tmp_path / bad)])
        assert res.exit_code == 2 and res.stdout == "", res.output  # no table printed first
        assert res.stderr.startswith("error: plot:") and says in res.stderr and len(res.stderr.splitlines()) == 1
    res = runner.invoke(app, [*base, str(tmp_path / "new" / "dir" / "f.png")])
    assert res.exit_code == 0 and (tmp_path / "new" / "dir" / "f.png").read_bytes()[:4] == b"\x89PNG"
