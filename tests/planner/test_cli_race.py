"""`planner race` and `planner bench` through typer's CliRunner (`planner suggest`: test_cli_suggest.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.frontier import allocation_shares
from planner.proposals import read_proposals
from planner.regime import LABELS, regime_labels
from runners.store import PilotStore

runner = CliRunner()


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
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("note: pilot budget raised")]
    assert f"qwen2.5-1.5b/prm (to {prm:.2g})" in line and "sparse" not in line
    # A setting a cap left without runs has no pilots to speak of.
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e18", "--pilot-budget", "1e14", "--models",
                              "qwen2.5-7b", "--rewards", "sparse,dense", "--max-runs", "1", "--data",
                              str(tmp_path / "e"), "--quiet"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("note: pilot budget raised")]
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
    # The stop line is one line too, however long its path: it is grepped for "wrote".
    assert all(len(line) <= 80 for line in lines if line not in rounds and not line.startswith("stopped: "))
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
    assert bad.exit_code == 2 and bad.output.startswith("error: cost-power: 1.5 is outside") and "[0, 1]" in bad.output
    bad = runner.invoke(app, ["race", *base, "--strategy", "grid", "--cost-power", "0.5", "--quiet"])
    assert bad.exit_code == 2 and "cost-power" in bad.output


def test_race_cap_that_buys_no_run_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    data = tmp_path / "mf"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-flops", "1e13", "--data", str(data), "--quiet"])
    assert res.exit_code == 2 and res.stderr.startswith("error: max-flops: the cap allows no run")
    assert not (data / "regimes.json").exists()


def test_a_flop_cap_stop_says_what_it_left_on_one_line(tmp_path: Path) -> None:
    # "stopped: max-flops ... 0.84e18 unspent" gave no reason; piped, the line broke before the path.
    data = tmp_path / ("a-long-campaign-folder-name-" * 3) / "data"
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e18", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--max-flops", "5e18", "--data", str(data), "--quiet"])
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("stopped: ")]
    spent = json.loads((data / "regimes.json").read_text())["flops_spent"]
    assert line.startswith("stopped: max-flops after ") and f"{5e18 - spent:.3g} of --max-flops 5e+18 left" in line
    assert line.endswith(f"; wrote {data / 'regimes.json'}")


def test_a_sim_race_at_a_budget_that_saturates_its_world_says_its_calls_are_tie_breaks(tmp_path: Path) -> None:
    # The docs' 1e18: every allocation of two regimes reaches the top in the paper world, and
    # a race read P 0.92-0.98 "decided" calls with nothing said.
    from runners.engines.sim import SimEngine

    eng = SimEngine()
    both = [("qwen2.5-1.5b", "sparse"), ("qwen2.5-7b", "prm")]
    assert eng.tied_settings(both, 1e18) == both and eng.tied_settings(both, 1e16) == []
    from planner.engine import tied_settings

    assert tied_settings(object(), both, 1e18, "native") == []  # an engine without its truth says nothing
    args = ["race", "--engine", "sim", "--models", "qwen2.5-1.5b", "--rewards", "sparse", "--max-runs", "2", "--quiet"]
    res = runner.invoke(app, [*args, "--budget", "1e18", "--data", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    (note,) = [ln for ln in res.stderr.splitlines() if "ties across regimes" in ln]
    assert note.startswith("note: at 1e+18 FLOPs this world's native ties across regimes for qwen2.5-1.5b/sparse (")
    res = runner.invoke(app, [*args, "--budget", "1e16", "--data", str(tmp_path / "b")])
    assert res.exit_code == 0 and "ties across" not in res.stderr


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
    raised = [line for line in res.stderr.splitlines() if line.startswith("note: pilot budget raised")]
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
    assert line == "12/20 runs, 2.8e+12/1e+13 FLOPs, 4:10 in (the run cap in about 5:00 at the pace since round 1)"
    assert pace.short() == "12/20 runs, 2.8e+12/1e+13 FLOPs, 4:10 in, cap ~5:00"
    # Round 3: 1 run in 150 s but 5e12 FLOPs. The pace is every round's since the first,
    # 5 runs and 7e12 FLOPs in 300 s: the FLOP cap is nearer, 2.2e12 FLOPs (94 s) away (at
    # the last round's pace alone it would say 66 s).
    assert "(the FLOP cap in about 1:34 at" in pace.round(13, 7.8e12).line()
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
    # From the second round on, the nearer cap's time at the pace since round 1; none once reached.
    assert len(rounds) >= 3 and rounds[-1].startswith(f"race round {len(rounds)}: 8/8 runs, ")
    assert all("(the run cap in under a minute at the pace since round 1)" in ln for ln in rounds[1:-1])
    assert "pace" not in rounds[-1]


def test_a_second_race_on_a_store_in_use_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    # Two races on one store each counted its runs only when they started: capped at 14
    # each, together they left 15 runs, and the later summary replaced the other's.
    from runners.race_lock import race_lock

    data = tmp_path / "d"
    args = ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
            "--data", str(data), "--quiet"]
    assert runner.invoke(app, [*args, "--max-runs", "4"]).exit_code == 0
    before = sorted(p.name for p in (data / "runs").iterdir()), (data / "regimes.json").read_bytes()
    with race_lock(data):  # another race, mid-way
        res = runner.invoke(app, [*args, "--max-runs", "8"])
    assert res.exit_code == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("error: data: another planner race is running on ") and "--data" in line
    assert (sorted(p.name for p in (data / "runs").iterdir()), (data / "regimes.json").read_bytes()) == before
    res = runner.invoke(app, [*args, "--max-runs", "8"])  # the other race ended: this one goes on
    assert res.exit_code == 0, res.output
    assert len(list((data / "runs").iterdir())) == 8
    assert not (data / ".race.lock").exists()  # it exists only while a race holds it
    # A race refused on a new folder (here: a cap that buys no run) leaves no folder.
    res = runner.invoke(app, [*args[:-3], "--data", str(tmp_path / "new"), "--quiet", "--max-flops", "1"])
    assert res.exit_code == 2 and "allows no run" in res.stderr and not (tmp_path / "new").exists()


def test_the_race_lock_is_held_until_the_summary_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.loop
    from planner.errors import ConfigError
    from runners.race_lock import race_lock

    data, real_write = tmp_path / "d", planner.loop.write_regimes
    tried: list[str] = []

    def write_after_trying_the_lock(path: Path, doc: dict[str, Any]) -> Path:
        try:
            with race_lock(data):
                tried.append("taken")
        except ConfigError as exc:
            tried.append(str(exc))
        return real_write(path, doc)

    monkeypatch.setattr(planner.loop, "write_regimes", write_after_trying_the_lock)
    res = runner.invoke(app, ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-1.5b",
                              "--rewards", "sparse", "--data", str(data), "--quiet", "--max-runs", "4"])
    assert res.exit_code == 0, res.output
    assert len(tried) == 1 and tried[0].startswith("data: another planner race is running on "), tried


def test_a_decided_call_on_one_unreplicated_run_is_named_and_replicates_silence_it(tmp_path: Path) -> None:
    # A user's single-seed sim race called 3b/prm reward-heavy at rho* 0.06, decided, where
    # the truth is 0.50: one lucky run and a guessed noise; with --seeds 2 it came out right.
    from planner.frontier import runs_at_rho_star
    from runners.store import PilotStore

    args = ["race", "--engine", "sim", "--budget", "1e16", "--models", "qwen2.5-7b", "--rewards", "sparse", "--quiet"]
    res = runner.invoke(app, [*args, "--data", str(tmp_path / "one")])
    assert res.exit_code == 0, res.output
    (e,) = json.loads((tmp_path / "one" / "regimes.json").read_text())["settings"]
    assert e["decided"] == "confident" and e["noise_source"] == "inferred"
    recs = PilotStore(tmp_path / "one").records()
    assert runs_at_rho_star(recs, "qwen2.5-7b", "sparse", 1e16, e["rho_star"], "native") == 1
    assert "note: the decided call of qwen2.5-7b/sparse rests on one unreplicated run" in res.stderr
    res = runner.invoke(app, [*args, "--seeds", "2", "--data", str(tmp_path / "two")])
    assert res.exit_code == 0 and "rests on one unreplicated run" not in res.stderr
