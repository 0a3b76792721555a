"""`planner suggest`, `planner race` and `planner bench` through typer's CliRunner."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.frontier import allocation_shares
from planner.proposals import read_proposals, write_proposals
from planner.regime import LABELS, regime_labels
from runners.store import PilotStore

runner = CliRunner()


def test_suggest_on_empty_data_writes_an_initial_design_fast(tmp_path: Path) -> None:
    out = tmp_path / "proposals.json"
    t0 = time.perf_counter()
    res = runner.invoke(app, ["suggest", "--budget", "1e18", "--data", str(tmp_path / "none"), "--out", str(out)])
    elapsed = time.perf_counter() - t0
    assert res.exit_code == 0, res.output
    assert elapsed < 10
    ps = read_proposals(out)
    assert ps.target_budget == 1e18
    assert len(ps.proposals) == 3 * 5 * 4  # Qwen sizes x reward systems x initial design
    p = ps.proposals[0]
    assert p.budget == pytest.approx(1e16, rel=0.03) and "initial design" in p.reason
    assert {q.reward for q in ps.proposals} == {"sparse", "structured", "dense", "proxy-prm", "prm"}


def test_suggest_table_is_one_whole_line_per_proposal_at_80_columns(tmp_path: Path) -> None:
    out = tmp_path / "proposals.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e18", "--data", str(tmp_path / "none"), "--out", str(out)],
                        env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    rows = [line for line in res.stdout.splitlines() if "initial design" in line]
    assert len(rows) == len(ps) == 60  # no wrapped reasons
    assert all(len(line) <= 80 for line in res.stdout.splitlines())
    assert res.stderr.startswith("note: no pilot store at") and "proposing the initial design" in res.stderr
    for p, line in zip(ps, rows, strict=True):  # setting and rho printed whole
        assert f"{p.model}/{p.reward}" in line and f"{p.plan.rho:.3f}" in line


def test_suggest_says_when_a_settings_pilot_budget_was_raised(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-7b", "--rewards", "sparse",
                              "--data", str(tmp_path / "none"), "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    (b,) = {p.budget for p in ps}  # one pilot budget, above the default budget / 100
    assert b > 1e14 and f"pilot budget raised for qwen2.5-7b/sparse (to {b:.2g})" in res.output
    # Far below any run's cost (1 FLOP), the pilots still share one budget, and it is said.
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--pilot-budget", "1", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    (b,) = {p.budget for p in read_proposals(out).proposals}
    assert 1e13 < b < 1e16 and "pilot budget raised for qwen2.5-1.5b/sparse" in res.output
    assert "pilots scattered" not in res.output


def test_suggest_says_when_a_settings_pilots_cannot_share_a_budget(tmp_path: Path) -> None:
    """A decision budget of a few 7B PRM prompt groups: no budget up to it lands every design
    point, so the pilots land on budgets of their own. Said, not silent. (One design point
    used to get no pilot: the *target* budget buys no plan at its rho, and that error was
    read as the pilot's; compile_pilot now falls back to the plain plan there.)"""
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "5e14", "--models", "qwen2.5-7b", "--rewards", "prm",
                              "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    assert len(ps) == 4 and len({p.budget for p in ps}) == 4 and all(p.budget < 5e14 for p in ps)
    assert all("pilots scattered over" in p.reason for p in ps)
    assert "pilots scattered for qwen2.5-7b/prm" in " ".join(res.output.split())


def test_race_says_which_settings_pilots_were_raised_and_to_what(tmp_path: Path) -> None:
    # The note once took the dearest run of each setting below the decision budget: a
    # single acquisition run at 1e15 read as "prm raised to 1e15", and sparse, whose pilots
    # ran at the requested 1e14, as raised too.
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse,prm", "--max-runs", "10", "--data", str(data), "--quiet"],
                        env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    pilots: dict[str, set[float]] = {}
    for r in PilotStore(data).records():
        if r.budget < 1e16 / 1.5:
            pilots.setdefault(r.reward, set()).add(r.budget)
    assert pilots["sparse"] == {1e14}
    (prm,) = pilots["prm"]
    assert 1.01e14 < prm < 1e15
    [line] = [ln for ln in res.stdout.splitlines() if ln.startswith("pilot budget raised")]
    assert f"qwen2.5-1.5b/prm (to {prm:.2g})" in line and "sparse" not in line
    # A setting a cap left without runs has no pilots to speak of.
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e18", "--pilot-budget", "1e14", "--models",
                              "qwen2.5-7b", "--rewards", "sparse,dense", "--max-runs", "1", "--data",
                              str(tmp_path / "e"), "--quiet"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    [line] = [ln for ln in res.stdout.splitlines() if ln.startswith("pilot budget raised")]
    assert "qwen2.5-7b/sparse" in line and "dense" not in line and "no runs for qwen2.5-7b/dense" in res.stderr


def test_race_in_a_log_prints_a_line_per_round(tmp_path: Path) -> None:
    # Not a terminal (nohup, SLURM, CI): rich's live table would show only when it ends.
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-runs", "6", "--data", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    rounds = [ln for ln in res.stdout.splitlines() if ln.startswith("race round ")]
    assert rounds[0].startswith("race round 1: 4/6 runs, ") and "qwen2.5-1.5b/sparse " in rounds[0]
    assert len(rounds) >= 2 and rounds[-1].startswith(f"race round {len(rounds)}: 6/6 runs")
    # A setting the cap leaves without runs says so, not a call the others' runs made.
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse,prm", "--max-runs", "1", "--data", str(tmp_path / "e")])
    assert res.exit_code == 0, res.output
    rounds = [ln for ln in res.stdout.splitlines() if ln.startswith("race round ")]
    assert rounds and all(ln.endswith("qwen2.5-1.5b/prm no runs") for ln in rounds)


def test_race_refuses_another_worlds_store_before_preparing_the_engine(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # With the trl engine the preparation is minutes of pretraining, then the refusal.
    import planner.engine

    args = ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
            "--max-runs", "2", "--data", str(tmp_path / "d")]
    assert runner.invoke(app, args).exit_code == 0
    prepared: list[object] = []
    monkeypatch.setattr(planner.engine, "prepare_engine", lambda *a, **k: prepared.append(a))
    res = runner.invoke(app, [*args, "--world", "flat"])
    assert res.exit_code == 2 and res.stderr.startswith("error: data:") and prepared == []


def test_suggest_lists_and_n(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b,qwen2.5-7b",
                              "--rewards", "sparse,prm", "--n", "3", "--pilot-budget", "1e15",
                              "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    ps = read_proposals(out).proposals
    assert len(ps) == 3 and json.loads(res.output)[0]["id"] == ps[0].id


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--budget", "lots"], "budget"),
        (["--budget", "1e16", "--models", "nope"], "models: unknown model 'nope'"),
        (["--budget", "1e16", "--models", "qwen2.5-math-prm-7b"], "models"),
        (["--budget", "1e16", "--rewards", "vibes"], "rewards: unknown reward system 'vibes'"),
        (["--budget", "1e16", "--target", "elo"], "target"),
        (["--budget", "1e16", "--pilot-budget", "1e17"], "pilot-budget"),
        (["--budget", "1e10", "--models", "qwen2.5-7b"], "budget"),
        # Typer's own parsing errors too: one line, not a boxed panel.
        (["--budget", "1e16", "--n", "abc"], "Invalid value for '--n'"),
        (["--budget", "1e16", "--bogus"], "No such option: --bogus"),
        (["--n", "2"], "Missing option '--budget'"),
        (["--budget", "1e16", "--rewards", ""], "rewards: empty list"),
        (["--budget", "1e16", "--models", ","], "models: empty list"),
        # A name lost in editing, or given twice, is a slip: say so rather than guess.
        (["--budget", "1e16", "--models", "qwen2.5-1.5b,,qwen2.5-3b"], "models: empty item"),
        (["--budget", "1e16", "--rewards", "sparse,"], "rewards: empty item"),
        (["--budget", "1e16", "--rewards", "sparse,prm,sparse"], "rewards: sparse given more than once"),
        # Past what the samplers take: a traceback from the first fit, mid-race in `race`.
        (["--budget", "1e16", "--seed", "99999999999999999999999"], "Invalid value for '--seed'"),
        (["--budget", "1e16", "--seed", "-5"], "Invalid value for '--seed'"),
    ],
)
def test_suggest_bad_input_is_one_line(tmp_path: Path, args: list[str], field: str) -> None:
    res = runner.invoke(app, ["suggest", *args, "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2
    line = res.output.strip()
    assert "\n" not in line and line.startswith(f"error: {field}"), line
    assert not (tmp_path / "p.json").exists()


def test_race_does_not_stop_on_a_rho_star_outside_its_interval(tmp_path: Path) -> None:
    """paper.toml, qwen2.5-1.5b: with only its anchors near rho 0.53 at the target budget,
    the sparse call was accepted at rho* 0.535 while its interval said [0.55, 0.98] (true
    rho* 0.714). Now a run at the posterior's best rho is required first, and the race ends
    with every confident call's rho* inside its interval."""
    data = tmp_path / "data"
    res = runner.invoke(app, ["race", "--engine", "sim", "--world", "paper", "--budget", "1e16", "--models",
                              "qwen2.5-1.5b", "--rewards", "sparse,prm", "--max-runs", "30", "--data", str(data),
                              "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads((data / "regimes.json").read_text())
    assert doc["stop_reason"] == "confident"
    for e in doc["settings"]:
        assert e["rho_star_ci"][0] <= e["rho_star"] <= e["rho_star_ci"][1], e
    sparse = doc["settings"][0]
    assert sparse["reward"] == "sparse" and abs(sparse["rho_star"] - 0.714) < 0.05


def test_race_sim_writes_regimes_and_resumes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ["race", "--engine", "sim", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
            "--rewards", "sparse,prm", "--max-runs", "10", "--data", str(data), "--quiet"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((data / "regimes.json").read_text())
    assert doc["engine"] == "sim" and doc["simulated"] is True and doc["world"] == "paper"
    assert doc["stop_reason"] in ("max-runs", "confident") and doc["runs"] <= 10
    from planner.versions import fitting_versions

    assert doc["fitted_with"] == fitting_versions() and doc["fitted_with"]["botorch"]  # what made these calls
    assert [(e["model"], e["reward"]) for e in doc["settings"]] == [("qwen2.5-1.5b", "sparse"), ("qwen2.5-1.5b", "prm")]
    e = doc["settings"][0]
    assert e["target"] == "native" and e["budget"] == 1e16
    for entry in doc["settings"]:
        # rho* need not lie in its interval: rho* is held to rhos measured at the target
        # budget and the interval is of the samples' optima, so an open call (this race may
        # stop on max-runs) can have it outside (ours then asks a validation run). What
        # classify guarantees is that both are within the called regime.
        lo, hi = entry["rho_star_ci"]
        assert lo <= hi, entry
        rhos = np.array([entry["rho_star"], lo, hi])
        labels = regime_labels(allocation_shares(entry["model"], entry["reward"], rhos))
        assert [LABELS[i] for i in labels] == [entry["regime"]] * 3, entry
    assert abs(sum(e["probabilities"].values()) - 1) < 1e-9 and e["runs"] >= 4 and e["flops_spent"] > 0
    store = PilotStore(data)
    # The store never replaces a record, so a rewrite keeps the file count; only the files'
    # times show it. Backdated, so a rewrite shows even within a coarse mtime resolution.
    for path in (data / "runs").glob("*.parquet"):
        os.utime(path, ns=(10**18, 10**18))
    before = store.fingerprint()
    assert len(before) == doc["runs"]
    # Resume with the same cap: nothing more to run, nothing rewritten.
    res2 = runner.invoke(app, args)
    assert res2.exit_code == 0, res2.output
    assert store.fingerprint() == before
    # Resuming into it from another world would pass its runs off as this one's: refused.
    res_w = runner.invoke(app, [*args, "--world", "flat"])
    assert res_w.exit_code == 2 and res_w.stderr.startswith("error: data:") and "world 'paper'" in res_w.stderr
    assert store.fingerprint() == before
    # suggest reads the same data and proposes new runs (not ones already recorded).
    out = tmp_path / "next.json"
    junk = data / "runs" / "junk-s0.parquet"
    junk.write_bytes(b"not parquet")
    res3 = runner.invoke(app, ["suggest", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
                               "--rewards", "sparse,prm", "--n", "2", "--data", str(data), "--out", str(out)])
    assert res3.exit_code == 0, res3.output
    assert "warning: 1 unreadable record file(s)" in res3.stderr and "junk-s0.parquet" in res3.stderr
    new = read_proposals(out).proposals
    assert len(new) == 2 and all(p.prediction is not None for p in new)
    # After the pilots: the target-budget anchors first, then the acquisition.
    assert all(("anchor" in p.reason and p.budget == 1e16) or "acquisition" in p.reason for p in new)


def test_race_prints_one_whole_line_per_setting_at_80_columns(tmp_path: Path) -> None:
    from planner.regime import format_probability

    data = tmp_path / "data"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--pilot-budget", "1e15",
                              "--models", "qwen2.5-1.5b", "--rewards", "sparse,proxy-prm", "--max-runs", "8",
                              "--data", str(data)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    # Not a terminal: a whole line per round (a log is grepped, not read at 80 columns).
    rounds = [line for line in lines if line.startswith("race round ")]
    assert rounds and all(" runs, " in line and "FLOPs" in line for line in rounds)
    assert all(len(line) <= 80 for line in lines if line not in rounds)
    assert any(line.startswith("stopped: max-runs") for line in lines)  # not glued to a table
    assert [line.strip() for line in lines if "regimes at" in line] == ["regimes at 1e+16 FLOPs (native)"]
    assert "*: that noise is the fit's guess" in " ".join(res.output.split())
    for e in json.loads((data / "regimes.json").read_text())["settings"]:
        key = f"{e['model']}/{e['reward']}"
        row = [line for line in lines if line.strip().startswith(key)][-1]  # the final table's row
        cells = row.split()
        assert cells[0] == key and cells[1] == f"{e['rho_star']:.2f}" and cells[3].rstrip("?~") == e["regime"]
        assert cells[-1] == str(e["runs"])
        # ours knows the noise; without seed replicates it is the fit's guess, marked *
        assert e["noise_source"] == "inferred"
        assert cells[-3:-1] == (["-"] if e["stake_sd"] is None else [f"{e['stake_sd']:.1f}", "sd*"])
        assert e["noise_sd"] > 0 and e["stake_sd"] * e["noise_sd"] == pytest.approx(e["stake"])
        # Rounded down: 76.9% beside a 90% confidence must not print as more than it is.
        p = [format_probability(e["probabilities"][lab], 0, percent=True)
             for lab in ("search-heavy", "update-heavy", "reward-heavy")]
        assert cells[-4] == "/".join(p)


def test_race_grid_strategy_stops_when_exhausted(tmp_path: Path) -> None:
    res = runner.invoke(app, ["race", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--strategy", "grid", "--data", str(tmp_path), "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "regimes.json").read_text())
    assert doc["strategy"] == "grid" and doc["stop_reason"] == "exhausted" and doc["runs"] == 5


@pytest.mark.parametrize("strategy", ["ours", "optuna-tpe", "grid"])
def test_race_refuses_a_seed_its_samplers_cannot_take_before_any_run(tmp_path: Path, strategy: str) -> None:
    for seed in ("4294967296", "-1"):
        res = runner.invoke(app, ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                                  "--strategy", strategy, "--seed", seed, "--data", str(tmp_path / "d")])
        assert res.exit_code == 2 and res.output.startswith("error: Invalid value for '--seed'"), res.output
        assert not (tmp_path / "d").exists()
    res = runner.invoke(app, ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--strategy", strategy, "--seed", "4294967295", "--max-runs", "2",
                              "--data", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output  # the largest seed every sampler takes


def test_race_rejects_unknown_engine_and_world_for_trl(tmp_path: Path) -> None:
    res = runner.invoke(app, ["race", "--budget", "1e16", "--engine", "warp", "--data", str(tmp_path)])
    assert res.exit_code == 2 and res.output.startswith("error: engine")
    res = runner.invoke(app, ["race", "--budget", "1e16", "--engine", "trl", "--world", "paper", "--data", str(tmp_path)])
    assert res.exit_code == 2 and res.output.startswith("error: world")
    # An unknown engine is the first mistake, not the world it cannot take.
    res = runner.invoke(app, ["race", "--budget", "1e16", "--engine", "SIM", "--world", "paper", "--data", str(tmp_path)])
    assert res.exit_code == 2 and res.output.startswith("error: engine: unknown engine 'SIM'"), res.output


def test_help_lists_the_commands() -> None:
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for name in ("suggest", "race", "bench"):
        assert name in res.output


def test_bench_runs_through_the_cli(tmp_path: Path) -> None:
    """`planner bench` loads benchmarks/planner_bench.py by path; its dataclasses must import."""
    out = tmp_path / "bench.json"
    res = runner.invoke(
        app,
        ["bench", "--quick", "--worlds", "flat", "--strategies", "grid", "--seeds", "1", "--out", str(out),
         "--first-rep", "3", "--flops-per-setting", "4"],
    )
    assert res.exit_code == 0, res.output

    def strict(name: str) -> None:
        raise ValueError(f"bare {name} in JSON")

    doc = json.loads(out.read_text(), parse_constant=strict)  # standard JSON: no NaN/Infinity
    assert doc["rows"][-1]["strategy"] == "constant" and doc["rows"][-1]["regret_median"] is None
    config = doc["config"]
    o = doc["outcomes"][0]  # the grid has no posterior: no stake, but the truth's gap is kept
    assert len(o["stake"]) == len(o["gap"]) == len(o["same"]) and set(o["stake"]) == {None}
    assert min(o["gap"]) >= 0 and doc["stake"] == []
    assert config["first_rep"] == 3 and config["flops_per_setting"] == 4.0  # options reach the script
    assert out.with_suffix(".png").stat().st_size > 0 and out.with_suffix(".svg").exists()  # the figure beside it
    quiet = tmp_path / "noplot.json"
    res = runner.invoke(app, ["bench", "--quick", "--worlds", "flat", "--strategies", "grid", "--seeds", "1",
                              "--out", str(quiet), "--no-plot"])
    assert res.exit_code == 0 and quiet.exists() and not quiet.with_suffix(".png").exists()
    bad = runner.invoke(app, ["bench", "--quick", "--worlds", "flat", "--strategies", "grid", "--seeds", "1",
                              "--out", str(tmp_path / "bad.json"), "--flops-per-setting", "-1"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: flops-per-setting:")
    assert not (tmp_path / "bad.json").exists()


def test_bench_portable_math_runs_pinned_in_a_fresh_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The math libraries read their pins when they load, so `planner bench --portable-math`
    hands over to the script, which restarts itself pinned: the results file must show the
    pins in effect (OpenBLAS on its generic kernels, ATen on its default path), not just set."""
    for k in ("MKL_CBWR", "OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY"):
        monkeypatch.delenv(k, raising=False)
    out = tmp_path / "pinned.json"
    res = runner.invoke(app, ["bench", "--quick", "--worlds", "flat", "--strategies", "grid", "--seeds", "1",
                              "--out", str(out), "--no-plot", "--portable-math"])
    assert res.exit_code == 0, res.output
    machine = json.loads(out.read_text())["machine"]
    assert machine["portable_math"] is True and machine["torch_cpu_capability"] == "DEFAULT"
    arch = {b["architecture"] for b in machine["blas"] if b["internal_api"] == "openblas"}
    assert arch == {"Katmai"} and machine["env"]["MKL_CBWR"] == "COMPATIBLE"
    bad = runner.invoke(app, ["bench", "--quick", "--worlds", "mars", "--out", str(tmp_path / "b.json"),
                              "--portable-math"])
    assert bad.exit_code == 2 and not (tmp_path / "b.json").exists()  # the child's one line and exit code


def test_anchors_option_sets_the_target_budget_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    base = ["--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
            "--data", str(data)]
    res = runner.invoke(app, ["race", *base, "--engine", "sim", "--max-runs", "4", "--quiet"])
    assert res.exit_code == 0, res.output  # the 4 pilots
    for k, expect in ((0, 0), (2, 2)):
        out = tmp_path / f"next{k}.json"
        res = runner.invoke(app, ["suggest", *base, "--anchors", str(k), "--out", str(out)])
        assert res.exit_code == 0, res.output
        props = read_proposals(out).proposals
        assert sum("anchor" in p.reason for p in props) == expect
    bad = runner.invoke(app, ["race", *base, "--strategy", "grid", "--anchors", "0", "--quiet"])
    assert bad.exit_code == 2 and "anchors" in bad.output


def test_suggest_with_the_whole_phase_pending_says_why_it_proposes_nothing(tmp_path: Path) -> None:
    base = ["suggest", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
            "--rewards", "sparse", "--data", str(tmp_path / "data")]
    first = tmp_path / "first.json"
    res = runner.invoke(app, [*base, "--out", str(first)])
    assert res.exit_code == 0, res.output
    assert len(read_proposals(first).proposals) == 4  # the initial design
    again = tmp_path / "again.json"
    res = runner.invoke(app, [*base, "--pending", str(first), "--out", str(again)])
    assert res.exit_code == 0, res.output
    assert len(read_proposals(again).proposals) == 0
    assert "4 pending runs complete the current phase" in " ".join(res.output.split())


def test_suggest_matches_pending_runs_by_plan_not_by_id(tmp_path: Path) -> None:
    """A run pending under another id (a hand-written file, another --target: the id names
    it) is the same run: proposing it again would have execute refuse the twin. The
    anchors' phase, where nothing but the id used to match a pending run."""
    data = tmp_path / "data"
    base = ["--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
            "--data", str(data)]
    res = runner.invoke(app, ["race", *base, "--engine", "sim", "--world", "paper", "--max-runs", "4", "--quiet"])
    assert res.exit_code == 0, res.output  # the 4 pilots
    anchors, renamed = tmp_path / "anchors.json", tmp_path / "renamed.json"
    assert runner.invoke(app, ["suggest", *base, "--out", str(anchors)]).exit_code == 0
    props = read_proposals(anchors).proposals
    assert len(props) == 2 and all("anchor" in p.reason for p in props)
    write_proposals(renamed, [p.model_copy(update={"id": f"mine-{i}"}) for i, p in enumerate(props)])
    out = tmp_path / "again.json"
    res = runner.invoke(app, ["suggest", *base, "--pending", str(renamed), "--out", str(out)])
    assert res.exit_code == 0, res.output
    again = read_proposals(out).proposals
    assert not {p.plan for p in again} & {p.plan for p in props}, [p.reason for p in again]


def test_suggest_shows_the_calls_so_far_on_stderr(tmp_path: Path) -> None:
    """A manual loop (suggest, execute, suggest) saw no call until every setting was
    decided; the calls so far are the race's table, on stderr, and a setting without a
    run shows none."""
    data = tmp_path / "data"
    base = ["--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b", "--data", str(data)]
    res = runner.invoke(app, ["race", *base, "--rewards", "sparse", "--engine", "sim", "--world", "paper",
                              "--max-runs", "4", "--quiet"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "next.json"
    res = runner.invoke(app, ["suggest", *base, "--rewards", "sparse,prm", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)  # the table stays off stdout
    err = " ".join(res.stderr.split())
    assert "calls so far at 1e+16 FLOPs (native)" in err
    (sparse,) = [ln for ln in res.stderr.splitlines() if ln.strip().startswith("qwen2.5-1.5b/sparse")]
    (prm,) = [ln for ln in res.stderr.splitlines() if ln.strip().startswith("qwen2.5-1.5b/prm")]
    assert "heavy" in sparse and "no runs" in prm and "heavy" not in prm
    # The batch's caveats reach stderr under --json too (the prm design's predictions are guesses).
    assert "note: (...): a guess" in err and "qwen2.5-1.5b/prm: its reward system has no fitted run" in err
    fresh = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                                "--data", str(tmp_path / "empty"), "--out", str(tmp_path / "p.json")])
    assert fresh.exit_code == 0 and "calls so far" not in fresh.stderr


def test_suggest_n_with_pending_proposes_the_rest_of_the_phase(tmp_path: Path) -> None:
    """--n 2 with the first two design points pending gives the other two: they used to be
    cut to the first 2 before the pending ones were dropped, leaving nothing."""
    base = ["suggest", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
            "--rewards", "sparse", "--n", "2"]
    first, second, both = tmp_path / "first.json", tmp_path / "second.json", tmp_path / "both.json"
    assert runner.invoke(app, [*base, "--out", str(first)]).exit_code == 0
    res = runner.invoke(app, [*base, "--pending", str(first), "--out", str(second)])
    assert res.exit_code == 0, res.output
    a, b = read_proposals(first).proposals, read_proposals(second).proposals
    assert len(a) == len(b) == 2 and not {p.id for p in a} & {p.id for p in b}
    write_proposals(both, [*a, *b])
    res = runner.invoke(app, [*base, "--pending", str(both), "--out", str(tmp_path / "third.json")])
    assert res.exit_code == 0 and "4 pending runs complete the current phase" in " ".join(res.output.split())


def test_suggest_ignores_pending_runs_of_settings_not_asked_about(tmp_path: Path) -> None:
    # The acquisition conditioned on them through a surrogate that knows only the
    # requested settings: a KeyError traceback.
    data, other, out = tmp_path / "data", tmp_path / "other.json", tmp_path / "next.json"
    one = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]
    res = runner.invoke(app, ["race", *one, "--engine", "sim", "--world", "paper", "--max-runs", "6",
                              "--quiet", "--data", str(data)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", "--budget", "1e15", "--models", "qwen2.5-3b", "--rewards", "prm",
                              "--out", str(other)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", *one, "--data", str(data), "--pending", str(other), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "pending: 4 of its runs are of settings not asked about here (e.g. qwen2.5-3b/prm)" in res.stderr
    props = read_proposals(out).proposals
    assert props and all((p.model, p.reward) == ("qwen2.5-1.5b", "sparse") for p in props)


def test_suggest_takes_several_pending_files(tmp_path: Path) -> None:
    # A second --pending silently replaced the first, whose runs were proposed again.
    base = ["suggest", "--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b",
            "--rewards", "sparse", "--n", "1"]
    files = [tmp_path / f"p{i}.json" for i in range(3)]
    assert runner.invoke(app, [*base, "--out", str(files[0])]).exit_code == 0
    res = runner.invoke(app, [*base, "--pending", str(files[0]), "--out", str(files[1])])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*base, "--pending", str(files[0]), "--pending", str(files[1]), "--pending",
                              str(files[1]), "--out", str(files[2])])
    assert res.exit_code == 0, res.output
    ids = [read_proposals(f).proposals[0].id for f in files]
    assert len(set(ids)) == 3
    res = runner.invoke(app, [*base, "--pending", str(files[0]), "--pending", str(files[2]), "--out", str(files[2])])
    assert res.exit_code == 2 and "is also --pending" in res.output


def test_cost_power_option_reaches_the_acquisition(tmp_path: Path) -> None:
    data = tmp_path / "data"
    base = ["--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b", "--rewards", "prm",
            "--data", str(data)]
    res = runner.invoke(app, ["race", *base, "--engine", "sim", "--world", "paper", "--max-runs", "4", "--quiet"])
    assert res.exit_code == 0, res.output  # the 4 pilots
    budgets = {}
    for p in ("1", "0"):
        out = tmp_path / f"next{p}.json"
        res = runner.invoke(app, ["suggest", *base, "--anchors", "0", "--cost-power", p, "--n", "1", "--out", str(out)])
        assert res.exit_code == 0, res.output
        (prop,) = read_proposals(out).proposals
        assert prop.reason.startswith("acquisition")
        budgets[p] = prop.budget
    assert budgets["1"] < budgets["0"]  # gain per FLOP buys a cheaper run than gain alone
    bad = runner.invoke(app, ["suggest", *base, "--cost-power", "1.5"])
    assert bad.exit_code == 2 and bad.output.startswith("error: cost_power") and "[0, 1]" in bad.output
    bad = runner.invoke(app, ["race", *base, "--strategy", "grid", "--cost-power", "0.5", "--quiet"])
    assert bad.exit_code == 2 and "cost-power" in bad.output


def test_suggest_refuses_to_overwrite_its_pending_file_and_a_file_as_data(tmp_path: Path) -> None:
    base = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]
    p = tmp_path / "p.json"
    assert runner.invoke(app, [*base, "--out", str(p)]).exit_code == 0
    before = p.read_bytes()
    res = runner.invoke(app, [*base, "--out", str(p), "--pending", str(p)])
    assert res.exit_code == 2 and res.stderr.startswith("error: out:") and "--pending" in res.stderr
    assert p.read_bytes() == before  # the pending list survives
    res = runner.invoke(app, [*base, "--out", str(tmp_path / "q.json"), "--data", str(p)])
    assert res.exit_code == 2 and res.stderr.startswith("error: data:") and "is a file" in res.stderr


def test_race_cap_that_buys_no_run_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    data = tmp_path / "mf"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-flops", "1e13", "--data", str(data), "--quiet"])
    assert res.exit_code == 2 and res.stderr.startswith("error: max-flops: the cap allows no run")
    assert not (data / "regimes.json").exists()


def test_baseline_race_says_its_p_is_a_point_call(tmp_path: Path) -> None:
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--pilot-budget", "1e15",
                              "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--strategy", "random",
                              "--max-runs", "3", "--data", str(tmp_path)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "this strategy has no posterior: a point call" in text and "posterior probability" not in text


def test_bench_checks_names_and_out_before_racing(tmp_path: Path) -> None:
    base = ["bench", "--quick", "--worlds", "flat", "--seeds", "1"]
    for extra, says in ((["--strategies", "nope"], "strategies: unknown 'nope'"),
                        (["--worlds", "mars"], "worlds: unknown 'mars'"),
                        (["--strategies", ","], "strategies: empty list")):
        res = runner.invoke(app, [*base, *extra, "--out", str(tmp_path / "b.json")])
        assert res.exit_code == 2 and res.stderr.startswith(f"error: {says}"), res.output
    (tmp_path / "afile").write_text("x")
    res = runner.invoke(app, [*base, "--out", str(tmp_path / "afile" / "b.json")])
    assert res.exit_code == 2 and res.stderr.startswith("error: out:")
    assert not (tmp_path / "b.json").exists()


def test_a_setting_without_runs_shows_no_call(tmp_path: Path) -> None:
    """Capped before its first run, a setting has only other settings' runs behind it: the
    table says so instead of printing a call and a stake that read as measured."""
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--budget", "1e16", "--data", str(data), "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse,prm", "--max-runs", "1", "--quiet"],
                        env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    rows = {line.split()[0]: line for line in res.output.splitlines() if line.strip().startswith("qwen2.5-1.5b/")}
    assert rows["qwen2.5-1.5b/prm"].split()[-3:] == ["-", "-", "0"]
    assert "no runs" in rows["qwen2.5-1.5b/prm"] and "no runs" not in rows["qwen2.5-1.5b/sparse"]
    doc = json.loads((data / "regimes.json").read_text())
    prm = next(e for e in doc["settings"] if e["reward"] == "prm")
    assert prm["runs"] == 0 and prm["decided"] == "open"
    assert res.stderr.startswith("note: no runs for qwen2.5-1.5b/prm (max-runs came first):")


def test_settings_capped_before_their_first_run_are_named_once(tmp_path: Path) -> None:
    """The closing note listed every capped setting twice, "no runs for a, b, ... (a, b, ...:
    max-runs came first)": with the default 15 settings and a small cap, 13 names twice."""
    res = runner.invoke(app, ["race", "--budget", "1e16", "--data", str(tmp_path / "d"), "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse,dense,prm", "--max-runs", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    note = next(line for line in " ".join(res.stderr.split()).split("note: ") if line.startswith("no runs for"))
    assert note.startswith("no runs for qwen2.5-1.5b/dense, qwen2.5-1.5b/prm (max-runs came first):"), note
    assert note.count("qwen2.5-1.5b/prm") == 1


def test_a_baselines_setting_without_runs_is_said_to_be_called_from_the_prior(tmp_path: Path) -> None:
    """Baselines have no surrogate to predict a setting from the other settings' runs."""
    res = runner.invoke(app, ["race", "--budget", "1e16", "--data", str(tmp_path / "d"), "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse,prm", "--max-runs", "1", "--strategy", "random", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "regimes.json (runs 0) are the prior's (no runs to call from)" in res.stderr
    assert "surrogate" not in res.stderr


def test_race_says_where_it_raised_a_pilot_budget(tmp_path: Path) -> None:
    res = runner.invoke(app, ["race", "--budget", "1e16", "--pilot-budget", "1e14", "--data", str(tmp_path / "d"),
                              "--models", "qwen2.5-1.5b", "--rewards", "sparse,prm", "--max-runs", "6", "--quiet"])
    assert res.exit_code == 0, res.output
    raised = [line for line in res.output.splitlines() if line.startswith("pilot budget raised")]
    assert len(raised) == 1 and "qwen2.5-1.5b/prm (to 2.4e+14) from 1e+14" in raised[0]
    assert "sparse" not in raised[0]  # 1e14 buys sparse's design
    budgets = {r.budget for r in PilotStore(tmp_path / "d").records() if r.reward == "prm"}
    assert len(budgets) == 1 and f"{budgets.pop():.2g}" == "2.4e+14"
    entries = {e["reward"]: e for e in json.loads((tmp_path / "d" / "regimes.json").read_text())["settings"]}
    assert f"{entries['prm']['pilot_budget']:.2g}" == "2.4e+14" and entries["sparse"]["pilot_budget"] == 1e14


def test_the_report_refit_makes_the_races_calls(tmp_path: Path) -> None:
    """The report refits the store's runs (file order); the race fitted them in the order
    it ran them. The fit is a function of the set of runs, so both make the same calls,
    with the posterior draws of the race's --seed (kept in its regimes.json)."""
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--budget", "1e16", "--data", str(data), "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse,prm", "--max-runs", "10", "--quiet", "--seed", "3"])
    assert res.exit_code == 0, res.output
    race = json.loads((data / "regimes.json").read_text())
    res = runner.invoke(app, ["report", "--data", str(data), "--out", str(tmp_path / "r"), "-q"])
    assert res.exit_code == 0, res.output
    refit = json.loads((tmp_path / "r" / "regimes.json").read_text())
    at_target = {e["reward"]: e for e in refit["settings"] if e["budget"] == 1e16 and e["target"] == "native"}
    for e in race["settings"]:
        r = at_target[e["reward"]]
        assert (r["regime"], r["rho_star"]) == (e["regime"], e["rho_star"])
        assert r["probabilities"] == e["probabilities"]


def test_outputs_that_cannot_be_created_are_refused_up_front(tmp_path: Path) -> None:
    base = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]
    long = tmp_path / ("x" * 300 + ".json")
    res = runner.invoke(app, [*base, "--out", str(long)])
    assert res.exit_code == 2 and res.stderr.startswith("error: out: the name") and "255" in res.stderr
    if Path("/proc/self").is_dir():  # writable by root's permission bits, yet takes no file
        res = runner.invoke(app, [*base, "--out", "/proc/p.json"])
        assert res.exit_code == 2 and res.stderr.startswith("error: out: cannot create"), res.output
        res = runner.invoke(app, ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                                  "--data", "/proc/race", "--quiet"])
        assert res.exit_code == 2 and res.stderr.startswith("error: data: cannot create"), res.output


def test_race_refuses_a_file_as_data_before_any_run(tmp_path: Path) -> None:
    f = tmp_path / "store"
    f.write_text("not a directory")
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-runs", "1", "--data", str(f), "--quiet"])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: data: {str(f)!r} is a file; give a directory"
    assert f.read_text() == "not a directory"


def test_race_warns_of_an_unreadable_record_before_it_runs(tmp_path: Path) -> None:
    data = tmp_path / "d"
    base = ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
            "--data", str(data), "--quiet"]
    assert runner.invoke(app, [*base, "--max-runs", "2"]).exit_code == 0
    victim = sorted((data / "runs").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:100])  # a truncated copy
    res = runner.invoke(app, [*base, "--max-runs", "3"])
    assert res.exit_code == 0
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: 1 unreadable record file")]
    assert len(warned) == 1 and victim.name in warned[0]  # said once, not again at the end


def test_suggest_names_pending_for_a_broken_pending_file(tmp_path: Path) -> None:
    bad = tmp_path / "pending.json"
    bad.write_text('{"proposals": [{"id": 3}]}')
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--pending", str(bad), "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2 and res.stderr.startswith("error: pending: ") and "planner suggest" in res.stderr
    race = tmp_path / "d"  # a race's summary for the pending proposals: no field of it to fix
    res = runner.invoke(app, ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--max-runs", "2", "--data", str(race), "--quiet"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--pending", str(race / "regimes.json"), "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 2 and res.stderr.startswith(
        "error: pending: the file is a race's summary (regimes.json) with no 'proposals' list"), res.stderr
    assert not (tmp_path / "p.json").exists()


def test_suggest_leaves_out_a_design_point_that_failed_twice_in_a_store_of_failures(tmp_path: Path) -> None:
    from planner.schema import run_id_for

    base = ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse"]
    assert runner.invoke(app, [*base, "--out", str(tmp_path / "p.json")]).exit_code == 0
    first = read_proposals(tmp_path / "p.json").proposals[0]
    store = PilotStore(tmp_path / "d")  # only failed/: no run has succeeded yet
    from runners.engines.sim import SimEngine

    rec = SimEngine("paper").run(first, 0)
    for attempt in (1, 2):
        store.add(rec.model_copy(update={"status": "failed", "error": "error: oom", "attempt": attempt}))
    assert not (tmp_path / "d" / "runs").exists()
    res = runner.invoke(app, [*base, "--data", str(tmp_path / "d"), "--out", str(tmp_path / "q.json")])
    assert res.exit_code == 0, res.output
    again = {p.id for p in read_proposals(tmp_path / "q.json").proposals}
    assert first.id not in again and run_id_for(first.id, 0) == rec.run_id


def test_an_output_file_inside_a_stores_record_folder_is_refused(tmp_path: Path) -> None:
    """``--out DIR/runs/<run>.parquet`` (a slip of the shell's completion) would replace a
    recorded run with JSON: refused, the record intact, the fix named."""
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--data", str(data), "--quiet", "--max-runs", "1"])
    assert res.exit_code == 0, res.output
    (victim,) = (data / "runs").glob("*.parquet")
    before = victim.read_bytes()
    writers = (["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--data", str(data)],
               ["plan", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--rho", "0.5", "--budget", "1e15"])
    for cmd in writers:
        res = runner.invoke(app, [*cmd, "--out", str(victim)])
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith("error: out: ") and "inside a pilot store's runs/ folder" in res.stderr
        assert str(data / victim.name) in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert victim.read_bytes() == before and len(PilotStore(data).records()) == 1
    # a folder that merely shares the name is no store: a file there is fine
    (tmp_path / "runs").mkdir()
    res = runner.invoke(app, ["plan", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--rho", "0.5",
                              "--budget", "1e15", "--out", str(tmp_path / "runs" / "p.json")])
    assert res.exit_code == 0, res.output
    # The race's results (and a report's) are not overwritten by a proposals or plan file.
    summary = data / "regimes.json"
    before = summary.read_bytes()
    for cmd in writers:
        res = runner.invoke(app, [*cmd, "--out", str(summary)])
        assert res.exit_code == 2, res.output
        assert res.stderr.strip() == (f"error: out: {str(summary)!r} holds a race's results, which this would "
                                      f"replace; write it elsewhere, e.g. {str(data / 'proposals.json')!r}")
    assert summary.read_bytes() == before
    report = tmp_path / "r" / "regimes.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"generated_by": "planner report", "settings": []}))
    res = runner.invoke(app, ["plan", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--rho", "0.5",
                              "--budget", "1e15", "--out", str(report)])
    assert res.exit_code == 2 and "holds a report's regime calls" in res.stderr
    # A proposals file is rewritten as before.
    again = tmp_path / "p.json"
    for _ in range(2):
        res = runner.invoke(app, ["plan", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--rho", "0.5",
                                  "--budget", "1e15", "--out", str(again)])
        assert res.exit_code == 0, res.output


def test_race_refuses_a_seed_count_past_the_cap_before_anything_runs(tmp_path: Path) -> None:
    from planner.schema import MAX_SEEDS

    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--data", str(tmp_path / "d"), "--quiet",
                              "--seeds", "100000000"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        f"error: seeds: must be 1-{MAX_SEEDS} (each seed is a run of every proposal), got 100000000")
    assert not (tmp_path / "d").exists()


def test_race_refuses_a_worker_count_past_the_cap_before_anything_runs(tmp_path: Path) -> None:
    """--workers with a digit too many was an OverflowError traceback from the local backend
    (its worker slots are a list that long); one far past any cluster, a MemoryError."""
    from runners.backends import MAX_WORKERS

    for workers in ("99999999999999999999999", str(2**40), str(MAX_WORKERS + 1)):
        res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                                  "--rewards", "sparse", "--data", str(tmp_path / "d"), "--quiet",
                                  "--workers", workers])
        assert res.exit_code == 2, (res.output, res.exception)
        assert res.stderr.strip() == f"error: workers: must be 1-{MAX_WORKERS} (runs in flight at once), got {workers}"
        assert not (tmp_path / "d").exists()


def test_a_race_that_replaces_another_races_summary_says_so(tmp_path: Path) -> None:
    data = tmp_path / "d"
    base = ["race", "--data", str(data), "--models", "qwen2.5-1.5b", "--quiet", "--max-runs", "4"]
    res = runner.invoke(app, [*base, "--budget", "1e16", "--rewards", "sparse,prm"])
    assert res.exit_code == 0 and "replaced" not in res.stderr
    res = runner.invoke(app, [*base, "--budget", "1e16", "--rewards", "sparse,prm"])  # a resume: the same race
    assert res.exit_code == 0 and "replaced" not in res.stderr
    res = runner.invoke(app, [*base, "--budget", "1e16", "--rewards", "sparse"])
    assert res.exit_code == 0
    assert "held the native race at 1e+16 FLOPs of 2 setting(s); it is replaced" in " ".join(res.stderr.split())
    assert len(json.loads((data / "regimes.json").read_text())["settings"]) == 1


def test_race_refuses_a_folder_where_it_writes_its_summary_before_any_run(tmp_path: Path) -> None:
    """It ran every run and then failed naming a temporary file."""
    (tmp_path / "d" / "regimes.json").mkdir(parents=True)
    res = runner.invoke(app, ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--max-runs", "2", "--data", str(tmp_path / "d"), "--quiet"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (f"error: data: {str(tmp_path / 'd' / 'regimes.json')!r} is a directory where "
                                  "the race writes its summary; move it away")
    assert not (tmp_path / "d" / "runs").exists()


@pytest.mark.parametrize("command", ["race", "suggest"])
def test_anchors_above_the_most_are_refused_at_once(tmp_path: Path, command: str) -> None:
    """A million anchors spun for minutes building proposals no cap would let run."""
    from planner.errors import ConfigError
    from planner.strategies import RaceProblem
    from planner.strategies.ours import MAX_ANCHOR, RaceStrategy

    res = runner.invoke(app, [command, "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--anchors", str(MAX_ANCHOR + 1), "--data", str(tmp_path / "d")])
    assert res.exit_code == 2 and res.output.startswith("error: Invalid value for '--anchors'"), res.output
    problem = RaceProblem([("qwen2.5-1.5b", "sparse")], budget=1e16, pilot_budget=1e15)
    RaceStrategy(problem, n_anchor=MAX_ANCHOR)
    for bad in (MAX_ANCHOR + 1, -1, 1.5):
        with pytest.raises(ConfigError, match=r"^anchors: target-budget runs per setting"):
            RaceStrategy(problem, n_anchor=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^n_init"):
        RaceStrategy(problem, n_init=0)


def test_suggest_does_not_design_a_setting_again_whose_pilots_are_pending_from_a_wider_suggest(tmp_path: Path) -> None:
    """A setting's design (pilot budget, rho shift) depends on which settings are asked:
    pending pilots of 7b from a suggest over 1.5b and 7b were none of a 7b-only design's
    points, so it proposed 4 more 7b pilots at another budget (twice the pilot spend, and
    no longer one IsoFLOP set)."""
    data = tmp_path / "data"
    wide = tmp_path / "wide.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b,qwen2.5-7b",
                              "--rewards", "sparse", "--data", str(data), "--out", str(wide)])
    assert res.exit_code == 0, res.output
    pending_7b = [p for p in read_proposals(wide).proposals if p.model == "qwen2.5-7b"]
    assert len(pending_7b) == 4
    for models, new in (("qwen2.5-7b", set()), ("qwen2.5-7b,qwen2.5-3b", {"qwen2.5-3b"})):
        out = tmp_path / f"{models}.json"
        res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", models, "--rewards", "sparse",
                                  "--data", str(data), "--out", str(out), "--pending", str(wide)])
        assert res.exit_code == 0, res.output
        props = read_proposals(out).proposals
        assert {p.model for p in props} == new and not {p.id for p in props} & {p.id for p in pending_7b}


def test_suggest_says_when_every_call_is_decided_where_a_race_would_stop(tmp_path: Path) -> None:
    """A manual suggest/execute loop had no word that a race would have stopped."""
    data = str(tmp_path / "d")
    base = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--data", data]
    res = runner.invoke(app, ["race", *base, "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "d" / "regimes.json").read_text())["stop_reason"] == "confident"
    res = runner.invoke(app, ["suggest", *base, "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stderr.split())
    assert "note: every setting's call is decided (P >= 0.9, checked at the target budget): `planner race` would stop here" in said
    # Before the anchors have checked anything, no such note.
    early = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--data", str(tmp_path / "e")]
    assert runner.invoke(app, ["race", *early, "--quiet", "--max-runs", "4"]).exit_code == 0
    res = runner.invoke(app, ["suggest", *early, "--out", str(tmp_path / "q.json")])
    assert res.exit_code == 0 and "is decided" not in res.stderr, res.output


def test_suggest_marks_a_prediction_for_an_unfitted_reward_as_a_guess(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "p.json"
    res = runner.invoke(app, ["race", "--budget", "1e16", "--engine", "sim", "--world", "paper", "--models",
                              "qwen2.5-1.5b", "--rewards", "sparse", "--max-runs", "4", "--data", str(data), "--quiet"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse,prm",
                              "--data", str(data), "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    props = read_proposals(out).proposals
    assert {p.reward for p in props} == {"prm"} and all(p.prediction and p.prediction.extrapolated for p in props)
    rows = [line for line in res.stdout.splitlines() if "qwen2.5-1.5b/prm" in line and "initial design" in line]
    assert len(rows) == len(props) and all(f"({p.prediction.mean:.3f}±" in line  # type: ignore[union-attr]
                                           for p, line in zip(props, rows, strict=True))
    said = " ".join(res.stdout.split())
    assert "(...): a guess" in said and "qwen2.5-1.5b/prm: its reward system has no fitted run" in said
    # The prm pilots' budget was raised to 2.4x the sparse pilots': past any fitted run's, too.
    assert all(p.prediction and p.prediction.extrapolated_why
               == "its reward system has no fitted run and no fitted run reached its budget and one fitted "
               "setting without seed replicates (its run noise is the fit's guess; --seeds 2 measures it)"
               for p in props)


def test_suggest_names_a_budget_no_run_reached_as_what_makes_the_anchors_a_guess(tmp_path: Path) -> None:
    """After pilots only, the anchors at the target budget are predicted from the pilots'
    level (a user's one-setting loop: 0.558 +- 0.007 predicted, 0.638 measured): marked,
    and the note says why."""
    data, out = tmp_path / "data", tmp_path / "p.json"
    base = ["--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--data", str(data)]
    assert runner.invoke(app, ["race", *base, "--engine", "sim", "--max-runs", "4", "--quiet"]).exit_code == 0
    res = runner.invoke(app, ["suggest", *base, "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    props = read_proposals(out).proposals
    assert props and all(p.budget == 1e16 and p.reason.startswith("anchor") for p in props)
    assert all(p.prediction and (p.prediction.extrapolated_why or "").startswith("no fitted run reached its budget")
               for p in props)
    assert "qwen2.5-1.5b/sparse: no fitted run reached its budget" in " ".join(res.stdout.split())


def _sim_metrics_overridden(monkeypatch: pytest.MonkeyPatch, metrics: Callable[[Any], dict[str, Any]]) -> None:
    """The CLI's sim engine, its records' metrics updated by ``metrics(proposal)`` (the race
    only loads installed engines, so the loader is patched)."""
    import planner.engine

    real = planner.engine.load_engine

    def load(name: str, **options: object) -> object:
        sim = real(name, **options)

        class Overridden(type(sim)):  # type: ignore[misc]
            def run(self, proposal, seed, progress=None):  # type: ignore[no-untyped-def]
                rec = super().run(proposal, seed, progress)
                return rec.model_copy(update={"metrics": rec.metrics.model_copy(update=metrics(proposal))})

        sim.__class__ = Overridden
        return sim

    monkeypatch.setattr(planner.engine, "load_engine", load)


def test_a_race_whose_runs_all_measure_the_same_says_why_it_has_nothing_to_propose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pass1 of a policy that never solves a problem: no trend to fit, so no surrogate and
    nothing to acquire with; the race ends exhausted with open prior calls, and says why."""
    _sim_metrics_overridden(monkeypatch, lambda proposal: {"native": 0.0})
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-runs", "20", "--data", str(data), "--quiet"])
    assert res.exit_code == 0, res.output
    (entry,) = json.loads((data / "regimes.json").read_text())["settings"]
    assert entry["decided"] == "open" and entry["runs"] < 20
    assert "every run measured the same native (0)" in " ".join(res.stderr.split())
    # A manual loop hears the same where its suggest proposes nothing.
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--data", str(data), "--out", str(tmp_path / "p.json")])
    assert res.exit_code == 0 and read_proposals(tmp_path / "p.json").proposals == ()
    assert res.stderr.startswith("note: nothing to propose: every run measured the same native (0)")


def test_a_race_whose_every_run_failed_writes_no_call_and_exits_non_zero(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not one measured value in any setting: the calls would be the prior's, which
    regimes.json once carried with exit 0 (a trl race on --device cuda without a GPU)."""
    def crash(proposal: Any) -> dict[str, Any]:
        raise RuntimeError("the engine broke")

    _sim_metrics_overridden(monkeypatch, crash)
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-runs", "6", "--data", str(data), "--quiet"])
    assert res.exit_code == 1, res.output
    assert not (data / "regimes.json").exists()
    said = " ".join(res.stderr.split())
    assert "error: no run of this race measured native (every attempt failed" in said
    assert len(list((data / "failed").iterdir())) > 0  # the failed attempts are kept


def test_a_setting_whose_ok_runs_measure_no_target_is_not_said_to_have_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _sim_metrics_overridden(monkeypatch, lambda proposal: {"judge": None} if proposal.reward == "prm" else {})
    data = tmp_path / "d"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse,prm", "--target", "judge", "--max-runs", "10", "--data", str(data),
                              "--quiet"])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stderr.split())
    assert "no runs for qwen2.5-1.5b/prm (its ok runs measured no judge)" in said and "every attempt failed" not in said
    prm = next(e for e in json.loads((data / "regimes.json").read_text())["settings"] if e["reward"] == "prm")
    assert prm["runs"] == 0 and prm["failed_runs"] > 0


@pytest.mark.parametrize("name", ["run[v2]", "a[/b]"])
def test_suggest_prints_an_output_path_with_brackets_as_written(tmp_path: Path, name: str) -> None:
    # Printed as rich markup, "run[v2]" lost its "[v2]" and "a[/b]" (a closing tag) was a
    # MarkupError traceback after proposals.json had been written.
    out = tmp_path / name / "p.json"
    res = runner.invoke(app, ["suggest", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.exists() and f"wrote{out}" in "".join(res.output.split())  # however rich wraps it


def test_the_live_table_shows_no_call_for_a_setting_without_runs() -> None:
    """The live table (a terminal) as the final one and the log's line: a setting whose runs
    all failed, or were capped, has only other settings' runs behind its call; printed with a
    regime, P and a stake it read as measured while the race went on."""
    from rich.console import Console

    from planner.cli.race_display import RaceDisplay, round_line
    from planner.frontier import Setting
    from planner.loop import RaceProgress
    from planner.regime import RegimeCall
    from planner.strategies import RaceProblem

    sparse, prm = Setting("qwen2.5-1.5b", "sparse"), Setting("qwen2.5-1.5b", "prm")
    problem = RaceProblem((sparse, prm), budget=1e16, pilot_budget=1e15)
    call = RegimeCall(0.7, (0.6, 0.8), "update-heavy", {"search-heavy": 0.2, "update-heavy": 0.8,
                                                        "reward-heavy": 0.0}, stake=0.01)
    progress = RaceProgress(2, 12, 4e15, {sparse: call, prm: call}, 4, 0.1, {sparse: 4, prm: 0})
    console = Console(width=100, record=True)
    console.print(RaceDisplay(problem, quiet=True)._table(progress))
    rows = {line.split()[0]: line for line in console.export_text().splitlines()
            if line.strip().startswith("qwen2.5-1.5b/")}
    assert "no runs" in rows["qwen2.5-1.5b/prm"] and "update-heavy" not in rows["qwen2.5-1.5b/prm"]
    assert "update-heavy" in rows["qwen2.5-1.5b/sparse"]
    assert "qwen2.5-1.5b/prm no runs" in round_line(progress, problem)  # as the log's line says


def test_the_live_table_at_60_columns_sheds_columns_rather_than_crop_the_call() -> None:
    """A terminal under 80 columns cropped the live table at its edge: P% and the stake went
    first, and at 60 a setting's probabilities read "3/97" for "3/97/0". Live redraws in
    place, so it cannot print over-wide lines for the terminal to wrap as the final table
    does: narrower, every setting keeps its name, runs, call and its call's P, whole."""
    from rich.console import Console

    from planner.cli.race_display import RaceDisplay, calls_table
    from planner.frontier import Setting
    from planner.loop import RaceProgress
    from planner.regime import RegimeCall
    from planner.strategies import RaceProblem

    sure, unsure, none = (Setting("qwen2.5-1.5b", "structured"), Setting("qwen2.5-7b", "proxy-prm"),
                          Setting("qwen2.5-1.5b", "prm"))
    problem = RaceProblem((sure, unsure, none), budget=1e16, pilot_budget=1e15)
    probs = {"search-heavy": 0.03, "update-heavy": 0.97, "reward-heavy": 0.0}
    calls = {sure: RegimeCall(0.7, (0.6, 0.8), "update-heavy", probs, stake=0.01),
             unsure: RegimeCall(0.3, (0.2, 0.45), "search-heavy", {"search-heavy": 0.62, "update-heavy": 0.38,
                                                                   "reward-heavy": 0.0}, stake=0.01)}
    calls[none] = calls[sure]
    progress = RaceProgress(2, 12, 4e15, calls, 4, 0.1, {sure: 4, unsure: 7, none: 0})
    live = RaceDisplay(problem, quiet=True)._table(progress)

    def shown(renderable: object, width: int) -> list[str]:
        console = Console(width=width, record=True)
        console.print(renderable)
        return console.export_text().splitlines()

    for width, rows in ((60, {sure.key: [sure.key, "4", "0.70", "update-heavy", "97"],
                              unsure.key: [unsure.key, "7", "0.30", "search-heavy?", "62"],
                              none.key: [none.key, "0", "-", "no", "runs", "-"]}),
                        (50, {sure.key: [sure.key, "4", "update-heavy", "97"]})):
        lines = shown(live, width)  # the same renderable: a terminal resized mid-race
        assert all(len(line) <= width for line in lines)
        got = {line.split()[0]: line.split() for line in lines if line.startswith("qwen2.5-")}
        assert all(got[key] == cells for key, cells in rows.items()), lines
    wide = calls_table("race round 2: 12 runs, 4e+15 FLOPs", problem, calls,
                       measured=progress.setting_runs)
    assert shown(live, 80) == shown(wide, 80)  # 80 columns and up: the table as before


def test_race_table_at_40_columns_keeps_every_cell(tmp_path: Path) -> None:
    # COLUMNS=40 (a split pane): rich cropped the calls table at the 40th column, so the
    # P% and stake cells, the call's evidence, were cut off and the title read "...1e+16 FLO".
    data = tmp_path / "data"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--pilot-budget", "1e15",
                              "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--max-runs", "4",
                              "--data", str(data)], env={"COLUMNS": "40"})
    assert res.exit_code == 0, res.output
    (e,) = json.loads((data / "regimes.json").read_text())["settings"]
    assert "regimes at 1e+16 FLOPs (native)" in res.output
    row = [line for line in res.output.splitlines() if line.strip().startswith("qwen2.5-1.5b/sparse")][-1]
    cells = row.split()
    assert cells[1] == f"{e['rho_star']:.2f}" and cells[-1] == str(e["runs"]) and "sd" in cells[-2]


def test_race_warns_before_adding_runs_to_a_store_made_with_another_trl(tmp_path: Path) -> None:
    """Sim runs name no trl, so a store of runs whose cards say trl 0.9.0 stands in for a real
    campaign begun before an upgrade: one warning line on stderr, and the race goes on."""
    from planner.compiler import compile_plan
    from planner.engine import load_engine, open_store
    from planner.proposals import make_proposal

    data = tmp_path / "data"
    rec = load_engine("sim").run(make_proposal(compile_plan("qwen2.5-1.5b", "sparse", 0.3, 1e14)), 0)
    open_store(data).write(rec.model_copy(update={"card": rec.card.model_copy(update={"software": {
        **rec.card.software, "trl": "0.9.0"}})}))
    res = runner.invoke(app, ["race", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
                              "--engine", "sim", "--max-runs", "3", "--data", str(data), "--quiet"])
    assert res.exit_code == 0, res.output
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "trl 0.9.0 -> " in warnings[0]
    assert len(PilotStore(data).records()) > 1


def test_race_pace_says_the_caps_elapsed_time_and_when_the_nearest_cap_is_reached() -> None:
    from planner.cli.race_display import RacePace, clock

    assert clock(59.6) == "1:00" and clock(252) == "4:12" and clock(3852) == "1:04:12"
    now = iter([0.0, 100.0, 250.0, 400.0, 400.0 + 3600.0 * 2])
    pace = RacePace(runs_cap=20, flops_cap=1e13, now=lambda: next(now))
    # Round 1: no pace yet (a resume's earlier runs were not timed here).
    assert pace.round(8, 8e11).line() == "8/20 runs, 8e+11/1e+13 FLOPs, 1:40 in" and pace.left is None
    # Round 2: 4 runs and 2e12 FLOPs in 150 s: the run cap is 8 runs (300 s) away, the FLOP
    # cap 7.2e12 FLOPs (540 s): the nearer one is named.
    line = pace.round(12, 2.8e12).line()
    assert line == "12/20 runs, 2.8e+12/1e+13 FLOPs, 4:10 in (the run cap in about 5:00 at the last round's pace)"
    assert pace.short() == "12/20 runs, 2.8e+12/1e+13 FLOPs, 4:10 in, cap ~5:00"
    # Round 3: 1 run in 150 s but 5e12 FLOPs: now the FLOP cap is nearer (66 s).
    assert "(the FLOP cap in about 1:06 at" in pace.round(13, 7.8e12).line()
    # Without caps, only the spend and the time.
    free = RacePace(now=iter([0.0, 30.0, 90.0]).__next__)
    free.round(4, 1e12)
    assert free.round(8, 2e12).line() == "8 runs, 2e+12 FLOPs, 1:30 in" and free.left is None


def test_race_log_lines_carry_the_run_cap_and_the_time(tmp_path: Path) -> None:
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-runs", "8", "--data", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    rounds = [ln for ln in res.stdout.splitlines() if ln.startswith("race round ")]
    assert rounds[0].startswith("race round 1: 4/8 runs, ") and " in;" in rounds[0] and "pace" not in rounds[0]
    # From the second round on, the nearer cap's time at the last round's pace; none once reached.
    assert len(rounds) >= 3 and rounds[-1].startswith(f"race round {len(rounds)}: 8/8 runs, ")
    assert all("(the run cap in under a minute at the last round's pace)" in ln for ln in rounds[1:-1])
    assert "pace" not in rounds[-1]
