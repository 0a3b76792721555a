"""``planner race --workers N``: a round's runs in parallel worker processes write the same
records and reach the same calls as the in-process race, with real tiny GRPO runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from runners.store import PilotStore

runner = CliRunner()


def _race(data: Path, cache: Path, *extra: str) -> dict:
    res = runner.invoke(app, [
        "race", "--engine", "trl", "--models", "tiny-s", "--rewards", "sparse", "--budget", "4e10",
        "--pilot-budget", "2e10", "--max-runs", "2", "--data", str(data), "--quiet",
        "-o", "quick=true", "-o", f"cache_dir={cache}", "-o", "eval_samples=8", *extra,
    ])
    assert res.exit_code == 0, res.output
    return json.loads((data / "regimes.json").read_text())


def test_parallel_race_writes_the_records_and_calls_of_the_sequential_one(
    tiny_world_cache: Path, tmp_path: Path
) -> None:
    one = _race(tmp_path / "one", tiny_world_cache)
    two = _race(tmp_path / "two", tiny_world_cache, "--workers", "2")
    a = {r.run_id: r for r in PilotStore(tmp_path / "one").records(status=None)}
    b = {r.run_id: r for r in PilotStore(tmp_path / "two").records(status=None)}
    assert len(a) == 2 and set(a) == set(b)
    for rid, rec in a.items():
        assert rec.status == b[rid].status == "ok"
        assert rec.metrics == b[rid].metrics, rid  # the same function of (plan, seed) in any process
        assert rec.card.flops == b[rid].card.flops
        assert rec.provenance.get("policy") == b[rid].provenance.get("policy")
    for key in ("runs", "stop_reason", "flops_spent"):
        assert one[key] == two[key]
    for x, y in zip(one["settings"], two["settings"], strict=True):
        assert x["probabilities"] == y["probabilities"] and x["rho_star"] == pytest.approx(y["rho_star"])


@pytest.mark.parametrize(("args", "message"), [
    (["--backend", "nowhere"], "backend: unknown backend 'nowhere'"),
    (["--workers", "0"], "--workers"),
])
def test_bad_workers_or_backend_is_refused_before_the_store_exists(tmp_path: Path, args: list[str],
                                                                    message: str) -> None:
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--engine", "sim", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--budget", "1e16", "--max-runs", "2", "--data", str(data), "--quiet", *args])
    assert res.exit_code == 2 and message in res.output
    assert not data.exists()


def test_execute_only_runs_the_given_pairs_of_the_grid(tmp_path: Path) -> None:
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal
    from planner.schema import run_id_for
    from runners.execution import execute

    props = [make_proposal(compile_plan("qwen2.5-1.5b", "sparse", rho, 1e15)) for rho in (0.3, 0.7)]
    want = {run_id_for(props[0].id, 1), run_id_for(props[1].id, 0)}
    res = execute(props, data=tmp_path, engine="sim", seeds=[0, 1], only=want, show_progress=False)
    assert set(res.ok) == want and not res.skipped
    assert PilotStore(tmp_path).run_ids() == want


def test_workers_fill_the_rounds_after_the_anchors(tmp_path: Path) -> None:
    """One setting: 4 pilots, 2 anchors, then rounds of one run (a validation or one
    acquisition pick). With 2 workers that round holds 2 runs, so 8 runs take 3 rounds."""
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--engine", "sim", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--budget", "1e16", "--max-runs", "8", "--data", str(data), "--quiet",
                              "--workers", "2"])
    assert res.exit_code == 0, res.output
    doc = json.loads((data / "regimes.json").read_text())
    assert (doc["runs"], doc["rounds"], doc["stop_reason"]) == (8, 3, "max-runs")
    assert len(PilotStore(data).run_ids()) == 8


def _sim_race(data: Path, *extra: str) -> object:
    return runner.invoke(app, ["race", "--engine", "sim", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                               "--budget", "1e16", "--max-runs", "2", "--data", str(data), "--quiet", *extra])


def test_race_reads_the_backend_config_of_its_backend(tmp_path: Path) -> None:
    """The slurm backend's own refusal (no sbatch here) points at ``cluster = "local"`` in
    --backend-config; the race takes that file as `runners execute` does."""
    import shutil

    if shutil.which("sbatch"):
        pytest.skip("SLURM is installed here: the refusal this test starts from does not happen")
    cfg = tmp_path / "backend.toml"
    cfg.write_text(f'[slurm]\ncluster = "local"\ntime_min = 5\nfolder = "{tmp_path / "jobs"}"\n')
    refused = _sim_race(tmp_path / "no", "--backend", "slurm")
    assert refused.exit_code == 2 and 'cluster = "local"' in refused.output and "--backend-config" in refused.output
    res = _sim_race(tmp_path / "d", "--backend", "slurm", "--backend-config", str(cfg))
    assert res.exit_code == 0, res.output
    assert len(PilotStore(tmp_path / "d").run_ids()) == 2
    assert any((tmp_path / "jobs").iterdir())  # the folder set in the file, not the default


@pytest.mark.parametrize(("text", "extra", "message"), [
    ('[slurm]\nclusterr = "local"\n', ["--backend", "slurm"], "backend-config: field 'slurm.clusterr'"),
    ("[slurm\n", ["--backend", "slurm"], "is not valid TOML"),
    ('[local]\n', [], "backend-config: a race runs in this process"),
])
def test_bad_backend_config_is_refused_before_the_store_exists(tmp_path: Path, text: str, extra: list[str],
                                                                message: str) -> None:
    cfg = tmp_path / "backend.toml"
    cfg.write_text(text)
    data = tmp_path / "d"
    res = _sim_race(data, "--backend-config", str(cfg), *extra)
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output
    assert not data.exists()
