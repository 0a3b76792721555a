"""`runners execute` / `runners status` through typer's CliRunner, end to end with the sim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from planner.cli import app as planner_app
from planner.engine import ProgressFn
from planner.schema import Metrics, Proposal, RunRecord
from runners.cli import app
from runners.engines.sim import SimEngine
from runners.store import PilotStore

RUNNER = CliRunner()


class BrokenSim(SimEngine):
    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        if seed == 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return super().run(proposal, seed, progress)


class DivergingSim(SimEngine):
    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        return rec.model_copy(update={"metrics": rec.metrics.model_copy(update={"native": float("nan")})})


class RefusingSim(SimEngine):
    """Finds bad input only once the run began, as the trl engine does for a checkpoint of
    another shape."""

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        from planner.errors import ConfigError

        if seed == 1:
            raise ConfigError("micro_batches: 3 is more than a round of this plan splits into evenly; give at most 1")
        return super().run(proposal, seed, progress)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_bad_input_found_in_a_run_stops_with_exit_2_and_no_failed_record(proposals: Path, tmp_path: Path,
                                                                         workers: str) -> None:
    # It was retried and recorded as two failed attempts (kind "error"), exit 1.
    data = tmp_path / "data"
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", f"{__name__}:RefusingSim",
                              "--seeds", "2", "--workers", workers, "--no-progress"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines()[-1] == (
        "error: micro_batches: 3 is more than a round of this plan splits into evenly; give at most 1")
    assert [r.status for r in PilotStore(data).records(status=None)] in ([], ["ok"])  # seed 0 may have finished
    assert not list((data / "failed").glob("*")) if (data / "failed").exists() else True


class PlanRefusingSim(SimEngine):
    """An engine whose ``check_plans`` hook refuses a plan it cannot take (the optional
    hook of planner.engine.Engine: a custom engine's memory or shape limits)."""

    def check_plans(self, plans: list[object]) -> None:
        from planner.errors import ConfigError

        raise ConfigError(f"engine: cannot take {len(plans)} plan(s) of this shape; give smaller rounds")

    def prepare(self, settings: object) -> None:
        raise AssertionError("prepared before the plans were checked")


def test_an_engines_plan_check_refuses_before_preparing_or_touching_the_store(proposals: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine",
                              f"{__name__}:PlanRefusingSim", "--no-progress"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == "error: engine: cannot take 1 plan(s) of this shape; give smaller rounds"
    assert not data.exists()


def test_a_diverged_run_is_a_failed_nan_record(proposals: Path, tmp_path: Path) -> None:
    """As the in-process race records it (tests/planner/test_loop.py): one label for one event."""
    data = tmp_path / "data"
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", f"{__name__}:DivergingSim",
                              "--retries", "0", "--no-progress"])
    assert res.exit_code == 1
    (rec,) = PilotStore(data).records(status=None)
    assert rec.status == "failed" and rec.error == "nan: non-finite values in native"
    assert rec.provenance["failure_kind"] == "nan"


@pytest.fixture(scope="module")
def proposals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "p.json"
    res = RUNNER.invoke(planner_app, ["plan", "--model", "tiny-s", "--reward", "sparse", "--rho", "0.7",
                                      "--budget", "1e12", "--out", str(path)])
    assert res.exit_code == 0, res.output
    return path


def test_execute_rerun_and_status(proposals: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim", "--seeds", "2"])
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("2 ok, 0 failed, 0 already done")
    assert "of budget" in res.stderr and "100%" in res.stderr  # the table, once, at the end
    # Not a terminal (a log): a line per finished run as it finishes, not just the end.
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("[")]
    assert [ln[:6] for ln in lines] == ["[1/2] ", "[2/2] "] and all("try 1: ok, native 0." in ln for ln in lines)  # the target, named
    before = PilotStore(data).fingerprint()

    again = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim",
                                "--seeds", "3", "--json"])
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) | {"wall_s": 0} == {
        "ok": 1, "failed": 0, "skipped": 2, "attempts": 1, "corrupt_files": [], "warnings": [], "wall_s": 0,
        "failures": [],
    }
    after = PilotStore(data).fingerprint()
    assert {k: v for k, v in after.items() if k in before} == before and len(after) == 3

    # A store's own runs/ folder given as the store: refused (status read it as empty).
    for cmd in (["status", "--data", str(data / "runs")],
                ["execute", str(proposals), "--data", str(data / "runs"), "--engine", "sim"]):
        res = RUNNER.invoke(app, cmd)
        assert res.exit_code == 2 and res.stderr.strip() == (
            f"error: data: {str(data / 'runs')!r} is a pilot store's runs/ folder; pass the store itself, "
            f"{str(data)!r}")
    # A store that is itself called runs is a store.
    named = tmp_path / "runs"
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(named), "--engine", "sim", "--no-progress"])
    assert res.exit_code == 0, res.stderr
    assert RUNNER.invoke(app, ["status", "--data", str(named)]).exit_code == 0
    (data / "runs" / "half-s0.parquet").write_bytes(b"PAR1\x00\x00")
    st = RUNNER.invoke(app, ["status", "--data", str(data)])
    assert st.exit_code == 0, st.stderr
    assert "3 ok, 0 failed, 1 corrupt" in st.stdout
    assert st.stdout.count("tiny-s.sparse.r0.700") == 3 and "half-s0.parquet" in st.stdout
    js = json.loads(RUNNER.invoke(app, ["status", "--data", str(data), "--json"]).stdout)
    assert len(js["records"]) == 3 and js["corrupt"][0]["file"].endswith("half-s0.parquet")
    # Once a rerun moved the wreck aside, it is history: not counted as a live problem.
    (data / "corrupt").mkdir()
    (data / "runs" / "half-s0.parquet").rename(data / "corrupt" / "half-s0.parquet.1")
    st = RUNNER.invoke(app, ["status", "--data", str(data)])
    assert "3 ok, 0 failed, 0 corrupt (1 moved aside earlier)" in " ".join(st.stdout.split())


def test_execute_refuses_a_store_a_race_is_running_on(proposals: Path, tmp_path: Path) -> None:
    from runners.race_lock import race_lock

    data = tmp_path / "d"
    with race_lock(data):
        (data / "runs").mkdir()
        res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim", "--no-progress"])
        assert res.exit_code == 2 and res.stderr.count("\n") == 1
        assert res.stderr.startswith(f"error: data: a planner race is running on {data} (pid {os.getpid()} on ")
        assert "give these runs their own --data" in res.stderr
        assert not any((data / "runs").iterdir())
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim", "--no-progress"])
    assert res.exit_code == 0, res.output


def test_failed_runs_exit_1_and_show_in_status(proposals: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    engine = f"{__name__}:BrokenSim"
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", engine,
                              "--seeds", "2", "--retries", "1", "--no-progress"])
    assert res.exit_code == 1
    assert res.stdout.startswith("1 ok, 1 failed")
    assert "failed: " in res.stderr and "illegal memory access" in res.stderr
    st = RUNNER.invoke(app, ["status", "--data", str(data)])
    assert "1 ok, 1 failed, 0 corrupt" in st.stdout  # the latest attempt of the failing run
    # It failed before metering anything: its rho is unknown, not 0 (all search).
    (row,) = [line for line in st.stdout.splitlines() if "failed" in line and "tiny-s" in line]
    assert "0.700" in row and "0.000" not in row
    st_all = RUNNER.invoke(app, ["status", "--data", str(data), "--attempts"])
    assert "1 ok, 2 failed" in st_all.stdout
    # A failed record names the world it ran in, as an ok one does.
    (bad, *_) = PilotStore(data).records(status="failed")
    assert bad.provenance["world"] == "paper" and len(bad.provenance["world_sha256"]) == 64


def test_sim_refuses_a_device_instead_of_demanding_a_gpu(proposals: Path, tmp_path: Path) -> None:
    """As `planner race` does: a sim run has no device, and --device cuda must not make
    the local backend wait for GPUs the machine may not have."""
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path / "d"), "--engine", "sim",
                              "--device", "cuda", "--no-progress"])
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: device: only the trl engine takes a device, not 'sim'; drop --device"
    assert not (tmp_path / "d").exists()


def test_sim_prepare_refuses_a_world_without_the_proposals_reward() -> None:
    import dataclasses

    from planner.errors import ConfigError
    from runners.sim.world import load_world

    w = load_world("paper")
    eng = SimEngine(dataclasses.replace(w, rewards={k: v for k, v in w.rewards.items() if k != "prm"}))
    eng.prepare([("qwen2.5-1.5b", "sparse")])
    with pytest.raises(ConfigError, match=r"'rewards\.prm' is missing"):
        eng.prepare([("qwen2.5-1.5b", "prm")])


def test_status_without_store_is_a_one_line_error(tmp_path: Path) -> None:
    res = RUNNER.invoke(app, ["status", "--data", str(tmp_path / "nope")])
    assert res.exit_code == 2 and res.stderr.startswith("error: data:") and res.stderr.count("\n") == 1


def test_help_is_instant_and_imports_nothing_heavy() -> None:
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from runners.cli import app\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(app, ['execute', '--help'])\n"
        "assert r.exit_code == 0 and '--backend' in r.stdout, r.stdout\n"
        "heavy = [m for m in ('torch', 'ray', 'submitit', 'polars', 'transformers') if m in sys.modules]\n"
        "print(heavy, time.perf_counter() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    heavy, seconds = out.rsplit(" ", 1)
    assert heavy == "[]", heavy
    assert float(seconds) < 3.0  # a loaded 2-core box; typically well under 1 s


@pytest.mark.parametrize("other", [["--engine", "sim", "-o", "world=flat"], ["--engine", "trl"]])
def test_a_store_of_one_engine_and_world_refuses_anothers_runs(proposals: Path, tmp_path: Path,
                                                              other: list[str]) -> None:
    # Run ids are proposal id + seed: without the check, these runs would all pass as done.
    data = tmp_path / "data"
    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim"]).exit_code == 0
    before = PilotStore(data).fingerprint()
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), *other])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: data:") and "engine 'sim'" in err
    assert ("world 'paper'" in err) == ("world=flat" in other)
    assert "separate --data directory" in err
    assert PilotStore(data).fingerprint() == before


def test_an_edited_world_file_is_named_as_the_difference(proposals: Path, tmp_path: Path) -> None:
    # Same world name, other contents: the refusal once read "holds runs of world 'paper'
    # ..., not world 'paper'", naming no difference at all.
    from runners.sim.world import resolve_world_path

    edited = tmp_path / "paper-edited.toml"
    edited.write_text(resolve_world_path("paper").read_text().replace("stages = 8", "stages = 9", 1))
    data = tmp_path / "data"
    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim"]).exit_code == 0
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim",
                              "--world", str(edited)])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert "(the world file changed since those runs)" in err and err.count("world file sha256") == 2


def test_world_by_name_as_in_race(proposals: Path, tmp_path: Path) -> None:
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path), "--engine", "sim",
                              "--world", "flat", "--no-progress"])
    assert res.exit_code == 0, res.stderr
    (rec,) = PilotStore(tmp_path).records()
    assert rec.provenance["world"] == "flat"


def test_card_of_a_corrupt_record_says_so(proposals: Path, tmp_path: Path) -> None:
    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path), "--engine", "sim"]).exit_code == 0
    (path,) = (tmp_path / "runs").glob("*.parquet")
    path.write_bytes(b"garbage")
    res = RUNNER.invoke(app, ["card", path.stem, "--data", str(tmp_path)])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1
    assert f"the record of '{path.stem}' is corrupt" in res.stderr and "reruns it" in res.stderr


def test_card_of_a_prefix_of_a_corrupt_records_id_does_not_call_it_corrupt(proposals: Path, tmp_path: Path) -> None:
    """Run ids share dotted prefixes: `card tiny-s` found another run's wreck by prefix and
    said that the record of 'tiny-s' was corrupt."""
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path), "--engine", "sim", "--seeds", "2"])
    assert res.exit_code == 0, res.output
    broken, intact = sorted((tmp_path / "runs").glob("*.parquet"))
    broken.write_bytes(b"garbage")
    for prefix in ("tiny-s", "tiny-s.sparse", broken.name.rsplit(".", 2)[0]):
        assert broken.name.startswith(f"{prefix}.")
        res = RUNNER.invoke(app, ["card", prefix, "--data", str(tmp_path)])
        assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1, res.stderr
        assert f"no run {prefix!r} in {tmp_path}" in res.stderr and "corrupt" not in res.stderr, res.stderr
    res = RUNNER.invoke(app, ["card", broken.stem, "--data", str(tmp_path)])  # its own id: corrupt
    assert res.exit_code == 2 and f"the record of '{broken.stem}' is corrupt" in res.stderr, res.stderr
    assert RUNNER.invoke(app, ["card", intact.stem, "--data", str(tmp_path)]).exit_code == 0
    failed = broken.stem[:-1] + "9"  # a failed attempt's wreck is its run's too
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / f"{failed}.a1.parquet").write_bytes(b"garbage")
    res = RUNNER.invoke(app, ["card", failed, "--data", str(tmp_path)])
    assert res.exit_code == 2 and f"the record of '{failed}' is corrupt ({failed}.a1.parquet" in res.stderr, res.stderr


def test_card_of_an_unknown_run_counts_runs_not_records(proposals: Path, tmp_path: Path) -> None:
    from planner.proposals import read_proposals

    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path), "--engine", "sim"]).exit_code == 0
    store = PilotStore(tmp_path)
    for attempt in (1, 2):  # two failed attempts of one more run: one run, two records
        prop = read_proposals(proposals).proposals[0]
        store.write(RunRecord.failed(prop, 5, engine="sim", simulated=True, error="crash: x").model_copy(
            update={"attempt": attempt}))
    runs = len({r.run_id for r in store.records(status=None)})
    assert runs == len(store.records()) + 1 and len(store.records(status=None)) == runs + 1
    res = RUNNER.invoke(app, ["card", "zzzz", "--data", str(tmp_path)])
    assert res.exit_code == 2 and f"{runs} run(s) are there" in res.stderr, res.stderr


class RacingSim(SimEngine):
    """Another driver records the same run while this one is still running it."""

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        PilotStore(Path(self.data)).write(rec.model_copy(update={"provenance": {**rec.provenance, "by": "other"}}))
        return rec

    data = ""


def test_a_run_another_driver_recorded_first_is_not_reported_ok(proposals: Path, tmp_path: Path) -> None:
    from planner.proposals import read_proposals
    from runners.task import Task, run_task

    RacingSim.data = str(tmp_path)
    (p,) = read_proposals(proposals).proposals
    out = run_task(Task(p, 0, 1, f"{__name__}:RacingSim", str(tmp_path)))
    assert out.status == "skipped"  # its record was dropped: the first one stands
    (rec,) = PilotStore(tmp_path).records()
    assert rec.provenance["by"] == "other"


def test_a_seed_count_past_the_cap_is_refused_at_once(proposals: Path, tmp_path: Path) -> None:
    """A typo of a few digits would build a grid of 10^8 runs before any run: refused
    in one line, up front, by the CLI and the library alike."""
    import time

    from planner.errors import ConfigError
    from planner.proposals import read_proposals
    from planner.schema import MAX_SEEDS
    from runners.execution import execute

    t0 = time.perf_counter()
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path / "d"), "--engine", "sim",
                              "--seeds", "100000000"])
    assert res.exit_code == 2 and res.stderr.strip() == (
        f"error: seeds: must be 1-{MAX_SEEDS} (each seed is a run of every proposal), got 100000000")
    with pytest.raises(ConfigError, match=f"seeds: 100000000 seeds per proposal is more than {MAX_SEEDS}"):
        execute(read_proposals(proposals), data=tmp_path / "d", engine="sim", seeds=10**8)
    assert time.perf_counter() - t0 < 10 and not (tmp_path / "d").exists()


def test_a_seed_past_int64_is_refused_before_any_run(proposals: Path, tmp_path: Path) -> None:
    """The store keeps seeds as Int64: a larger explicit seed would run, then fail to be
    recorded. Refused up front; the largest one the store keeps runs and reads back."""
    from planner.errors import ConfigError
    from planner.proposals import read_proposals
    from planner.schema import MAX_SEED
    from runners.execution import execute

    props = read_proposals(proposals).proposals[:1]
    with pytest.raises(ConfigError, match=r"^seeds: 9223372036854775808 is past the largest seed"):
        execute(props, data=tmp_path / "d", engine="sim", seeds=[0, MAX_SEED + 1])
    assert not (tmp_path / "d").exists()
    execute(props, data=tmp_path / "d", engine="sim", seeds=[MAX_SEED])
    from runners.store import PilotStore
    assert [r.seed for r in PilotStore(tmp_path / "d").records()] == [MAX_SEED]


def test_an_empty_proposals_file_says_there_is_nothing_to_run(tmp_path: Path) -> None:
    """Valid (suggest writes no proposals once nothing is left), but a silent "0 ok" read
    like a run that did nothing by mistake."""
    empty = tmp_path / "p.json"
    empty.write_text('{"schema_version": 1, "proposals": []}')
    res = RUNNER.invoke(app, ["execute", str(empty), "--data", str(tmp_path / "d"), "--engine", "sim"])
    assert res.exit_code == 0, res.stderr
    assert res.stderr.strip() == f"note: {empty} lists no proposals: nothing to run, {tmp_path / 'd'} left as it was"
    assert res.stdout.startswith("0 ok, 0 failed") and not (tmp_path / "d").exists()


def test_a_record_without_its_source_is_named_with_the_fix(proposals: Path, tmp_path: Path) -> None:
    """A record whose provenance lost its world (damaged, edited) was refused as "runs of
    engine 'sim', not engine 'sim', world 'paper'": neither the run nor the fix named."""
    from planner.engine import check_same_source
    from planner.errors import ConfigError
    from planner.proposals import read_proposals

    rec = SimEngine(world="paper").run(read_proposals(proposals).proposals[0], 0)
    check_same_source([rec], SimEngine(world="paper"), tmp_path)
    bad = rec.model_copy(update={"provenance": {}})
    with pytest.raises(ConfigError) as info:
        check_same_source([bad], SimEngine(world="paper"), tmp_path)
    msg = str(info.value)
    assert f"run {rec.run_id}" in msg and "records no world" in msg and str(tmp_path / "runs") in msg
    assert "\n" not in msg


def test_a_trl_store_refuses_runs_made_with_other_outcome_options(proposals: Path, tmp_path: Path) -> None:
    """A run id is proposal + seed: a rerun with another learning rate or evaluation size
    passed as 'already done', and scores on 64 and 256 evaluation problems mixed in one fit."""
    from planner.engine import check_same_source
    from planner.errors import ConfigError
    from planner.proposals import read_proposals
    from runners.engines.trl import TrlEngine

    rec = SimEngine().run(read_proposals(proposals).proposals[0], 0)
    old = rec.model_copy(update={"engine": "trl", "provenance": {"quick": False}})  # before options were kept
    check_same_source([old], TrlEngine(), tmp_path)  # all defaults: an older store still matches
    check_same_source([old], TrlEngine(threads=2), tmp_path)  # speed, not the experiment
    with pytest.raises(ConfigError, match=r"runs of engine 'trl', default options \(e\.g\. .*\), not engine 'trl', options eval_samples=64;"):
        check_same_source([old], TrlEngine(eval_samples=64), tmp_path)
    new = old.model_copy(update={"provenance": {"quick": False, "options": {"eval_samples": 64}}})
    check_same_source([new], TrlEngine(eval_samples=64), tmp_path)
    with pytest.raises(ConfigError, match="default options"):
        check_same_source([new], TrlEngine(), tmp_path)
    with pytest.raises(ConfigError, match=r"learning_rate=0\.01"):
        check_same_source([new], TrlEngine(eval_samples=64, learning_rate=0.01), tmp_path)


def test_a_file_where_the_store_sets_damaged_records_aside_is_refused_before_any_run(
    proposals: Path, tmp_path: Path,
) -> None:
    """A damaged record's run is redone and the wreck moved to corrupt/: a file in that
    folder's place failed the run twice, as crashes recorded as failed attempts."""
    data = tmp_path / "data"
    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim"]).exit_code == 0
    victim = next((data / "runs").glob("*.parquet"))
    victim.write_bytes(b"junk")
    (data / "corrupt").write_text("keep")
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim", "--no-progress"])
    assert res.exit_code == 2, res.output
    msg = res.stderr.strip()
    assert msg.startswith("error: data: cannot create") and "corrupt" in msg and "\n" not in msg
    assert msg.endswith("move that file out of the way, or give another path")  # not: abandon the store
    assert not (data / "failed").exists() and victim.read_bytes() == b"junk"  # nothing run, nothing moved


def test_a_damaged_failed_attempt_is_in_executes_corrupt_files(proposals: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "failed").mkdir(parents=True)
    (data / "failed" / "x-s0.a1.parquet").write_bytes(b"junk")
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim", "--json"])
    assert res.exit_code == 0, res.output
    (entry,) = json.loads(res.stdout)["corrupt_files"]
    assert entry.startswith("x-s0.a1.parquet: ")


@pytest.mark.parametrize(("engine", "says"), [
    ("os:path", "'os:path' is a module, not a class"),
    ("json:loads", "'json:loads' is a function, not a class"),
    (":", "cannot import ':'"),
    ("os:", "cannot import 'os:'"),
    ("no_such_module_x:Engine", "cannot import 'no_such_module_x:Engine'"),
    ("collections:OrderedDict", "is not an engine"),
])
def test_a_module_class_engine_that_is_none_is_named_with_the_fix(
    proposals: Path, tmp_path: Path, engine: str, says: str,
) -> None:
    """os:path and json:loads gave Python's own messages ("'module' object is not callable")."""
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path / "d"), "--engine", engine])
    assert res.exit_code == 2, res.output
    msg = res.stderr.strip()
    assert msg.startswith("error: engine: ") and says in msg and "\n" not in msg
    assert not (tmp_path / "d").exists()


def test_an_engine_module_that_fails_to_import_says_why(proposals: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that exists but imports a missing package read "cannot import 'mod:E'", as if
    the module itself were not there, while one raising anything else gave its reason."""
    (tmp_path / "needs_missing_dep.py").write_text("import no_such_dependency_x\nclass E: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path / "d"),
                              "--engine", "needs_missing_dep:E"])
    assert res.exit_code == 2, res.output
    msg = res.stderr.strip()
    assert msg.startswith("error: engine: cannot import 'needs_missing_dep:E'") and "\n" not in msg
    assert "No module named 'no_such_dependency_x'" in msg, msg
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(tmp_path / "d"), "--engine", "json:NoSuchClass"])
    assert res.exit_code == 2 and "has no attribute 'NoSuchClass'" in res.stderr, res.output
    assert not (tmp_path / "d").exists()


def test_a_record_whose_engine_contradicts_its_provenance_is_named_with_the_fix(proposals: Path, tmp_path: Path) -> None:
    """A record edited to engine 'trl' (its provenance still the sim's) read as a store of
    another engine's runs: 'use a separate --data directory', not the one file to move."""
    from planner.engine import check_same_source
    from planner.errors import ConfigError
    from planner.proposals import read_proposals

    rec = SimEngine(world="paper").run(read_proposals(proposals).proposals[0], 0)
    bad = rec.model_copy(update={"engine": "trl"})
    with pytest.raises(ConfigError) as info:
        check_same_source([bad], SimEngine(world="paper"), tmp_path)
    msg = str(info.value)
    assert f"run {rec.run_id}" in msg and "says engine 'trl' but its provenance says 'sim'" in msg
    assert str(tmp_path / "runs") in msg and "\n" not in msg


def test_a_recorded_plan_under_another_id_is_refused_before_any_run(proposals: Path, tmp_path: Path) -> None:
    """A hand-renamed proposal re-ran its plan (the sim gives it the same numbers) and the
    surrogate fitted the one run twice; so did two ids of one plan in one file."""
    from planner.proposals import read_proposals, write_proposals

    data = tmp_path / "data"
    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim"]).exit_code == 0
    (p,) = read_proposals(proposals).proposals
    before = PilotStore(data).fingerprint()
    renamed = tmp_path / "renamed.json"
    write_proposals(renamed, [p.model_copy(update={"id": "renamed." + p.id})], target_budget=p.budget)
    res = RUNNER.invoke(app, ["execute", str(renamed), "--data", str(data), "--engine", "sim"])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: proposals: renamed.{p.id}: ")
    assert f"already holds run {p.id}-s0 of the same plan" in res.stderr and len(res.stderr.splitlines()) == 1
    assert PilotStore(data).fingerprint() == before
    from planner.proposals import make_proposal

    other_target = tmp_path / "pass1.json"  # its own content-derived id; the record has pass1 already
    write_proposals(other_target, [make_proposal(p.plan, target="pass1")], target_budget=p.budget)
    res = RUNNER.invoke(app, ["execute", str(other_target), "--data", str(data), "--engine", "sim"])
    assert res.exit_code == 2 and f"already holds run {p.id}-s0 of the same plan" in res.stderr
    assert PilotStore(data).fingerprint() == before
    # Another request the compiler maps to the same levers: its own content-derived id and
    # rho_target, the same run (it was run at full cost again, with the same numbers).
    from planner.compiler import compile_plan
    from planner.strategies.base import plan_key

    near = next(q for d in np.linspace(-0.004, 0.004, 81) if d
                and (q := compile_plan(p.model, p.reward, round(p.rho + d, 6), p.budget)).rho_target != p.plan.rho_target
                and plan_key(q) == plan_key(p.plan))
    nearby = tmp_path / "nearby.json"
    write_proposals(nearby, [make_proposal(near, target=p.target)], target_budget=p.budget)
    res = RUNNER.invoke(app, ["execute", str(nearby), "--data", str(data), "--engine", "sim"])
    assert res.exit_code == 2 and f"already holds run {p.id}-s0 of the same plan" in res.stderr
    assert PilotStore(data).fingerprint() == before
    twice = tmp_path / "twice.json"
    write_proposals(twice, [p, p.model_copy(update={"id": "copy." + p.id})], target_budget=p.budget)
    res = RUNNER.invoke(app, ["execute", str(twice), "--data", str(tmp_path / "fresh"), "--engine", "sim"])
    assert res.exit_code == 2 and f"the same plan as {p.id} in this file" in res.stderr
    assert not (tmp_path / "fresh").exists()


def test_card_of_an_unknown_run_names_the_store_not_a_placeholder(proposals: Path, tmp_path: Path) -> None:
    # The hint used to say "see DIR/runs/", a placeholder the user had to translate (and a
    # folder an empty store does not have).
    empty = tmp_path / "empty"
    empty.mkdir()
    res = RUNNER.invoke(app, ["card", "zzzz", "--data", str(empty)])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "DIR" not in res.stderr and "holds no runs" in res.stderr, res.stderr
    data = tmp_path / "data"
    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim"]).exit_code == 0
    res = RUNNER.invoke(app, ["card", "zzzz", "--data", str(data)])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "DIR" not in res.stderr and f"`runners status --data {data}` lists them" in res.stderr, res.stderr


class PercentSim(SimEngine):
    """An engine that reports its target metric as a percentage, not a rate."""

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        rec = super().run(proposal, seed, progress)
        return rec.model_copy(update={"metrics": Metrics(native=100 * (rec.metrics.native or 0.0))})


def test_an_engine_record_the_store_would_read_as_corrupt_is_a_failed_attempt(
    proposals: Path, tmp_path: Path
) -> None:
    # It was written to runs/ and reported ok; every later read listed it corrupt, and
    # every later execute moved it aside and ran it again, reporting it ok once more.
    from planner.proposals import read_proposals
    from runners.task import Task, run_task

    (p,) = read_proposals(proposals).proposals
    out = run_task(Task(p, 0, 1, f"{__name__}:PercentSim", str(tmp_path)))
    assert out.status == "failed" and out.kind == "error"
    assert out.error and "metrics.native" in out.error and "not a rate" in out.error
    store = PilotStore(tmp_path)
    scan = store.scan(status=None)
    assert scan.corrupt == [] and store.records() == []
    (rec,) = scan.records
    assert rec.status == "failed" and rec.metrics.native is None and rec.card.flops.total > 0


def test_the_races_in_process_runner_fails_a_record_the_store_would_read_as_corrupt(
    proposals: Path, tmp_path: Path
) -> None:
    # As a worker does (above): stored ok, the race counted the run, and a resume moved
    # the file aside and ran it again.
    from planner.loop import _one_by_one
    from planner.proposals import read_proposals

    (p,) = read_proposals(proposals).proposals
    store = PilotStore(tmp_path)
    (rec,) = _one_by_one(PercentSim(), store, {})([(p, 0)])
    assert rec.status == "failed" and rec.error and "metrics.native" in rec.error
    assert rec.card.flops.total > 0 and rec.attempt == 1
    scan = store.scan(status=None)
    assert scan.corrupt == [] and [r.status for r in scan.records] == ["failed"]


def test_status_shows_recorded_text_as_text_not_markup(tmp_path: Path) -> None:
    # An engine's error quoting a chat template's "[/INST]" made `runners status` a rich
    # MarkupError traceback: the store could not be listed at all.
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal

    prop = make_proposal(compile_plan("tiny-s", "sparse", 0.7, 1e12))
    error = "error: E: no [bold] answer after [/INST]"
    PilotStore(tmp_path).write(RunRecord.failed(prop, 0, engine="sim", simulated=True, error=error))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "x[bold]-s0.parquet").write_bytes(b"not parquet")  # a corrupt file's name
    res = RUNNER.invoke(app, ["status", "--data", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "no [bold] answer after [/INST]" in res.stdout and "x[bold]-s0.parquet" in res.stdout


@pytest.mark.parametrize("columns", ["80", "40"])
def test_status_on_a_narrow_terminal_elides_no_value(proposals: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    # On an 80-column terminal every cell was cut to "qw…", "1…", "0.…" (at 40, empty boxes):
    # the table fitted the width by eliding the values it exists to show. Whole lines now,
    # which the terminal wraps (and `less -S` scrolls), less the columns the run id spells.
    data = tmp_path / "data"
    assert RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim",
                               "--no-progress"]).exit_code == 0
    (rec,) = PilotStore(data).records()
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: a terminal, as a person's shell is
    monkeypatch.setenv("COLUMNS", columns)
    st = RUNNER.invoke(app, ["status", "--data", str(data)])
    assert st.exit_code == 0, st.stderr
    assert "…" not in st.stdout
    for value in (rec.run_id, f"{rec.card.flops.total:.2e}", f"{rec.metrics.native:.3f}"):
        assert value in st.stdout
    header = next(line for line in st.stdout.splitlines() if "┃" in line and "run" in line)
    assert "reward" not in header and "budget" not in header and "model" not in header
    assert "model, reward and budget are in the run id" in " ".join(st.stdout.split())
    # Nothing to say, no column: no run failed, every run was a first try.
    assert "error" not in header and "try" not in header
    monkeypatch.setenv("COLUMNS", "300")
    wide = RUNNER.invoke(app, ["status", "--data", str(data)]).stdout
    assert f"{rec.budget:.2e}" in wide and "in the run id" not in wide
    # Piped (a file, grep, `less -S`), the table stays whole whatever the width.
    monkeypatch.delenv("TTY_COMPATIBLE")
    monkeypatch.setenv("COLUMNS", columns)
    piped = RUNNER.invoke(app, ["status", "--data", str(data)]).stdout
    assert f"{rec.budget:.2e}" in piped and "in the run id" not in piped
    # An empty store has no run id to spell anything.
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    empty = RUNNER.invoke(app, ["status", "--data", str(tmp_path / "empty")])
    assert empty.exit_code == 0 and "0 ok, 0 failed" in empty.stdout and "in the run id" not in empty.stdout


def test_status_keeps_the_columns_a_hand_written_run_id_does_not_spell(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.compiler import compile_plan
    from planner.proposals import make_proposal

    prop = make_proposal(compile_plan("tiny-s", "sparse", 0.7, 1e12)).model_copy(update={"id": "mine"})
    PilotStore(tmp_path).write(RunRecord.failed(prop, 0, engine="sim", simulated=True, error="error: boom"))
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "80")
    st = RUNNER.invoke(app, ["status", "--data", str(tmp_path)])
    assert st.exit_code == 0, st.output
    header = next(line for line in st.stdout.splitlines() if "┃" in line and "run" in line)
    assert all(col in header for col in ("model", "reward", "budget", "error")), header
    assert "1.00e+12" in st.stdout and "boom" in st.stdout


def test_execute_warns_before_adding_runs_to_a_store_made_by_another_release(proposals: Path,
                                                                           tmp_path: Path) -> None:
    """A store whose runs name another race-planner (or trl) than this machine's gets one
    warning line before the new runs, which still run; the old runs are kept as they were."""
    data = tmp_path / "data"
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim", "--no-progress"])
    assert res.exit_code == 0 and "warning" not in res.stderr
    store = PilotStore(data)
    (old,) = store.records()
    (data / "runs").joinpath(next(p.name for p in (data / "runs").glob("*.parquet"))).unlink()
    store.write(old.model_copy(update={"card": old.card.model_copy(update={"software": {
        **old.card.software, "race-planner": "0.0.1"}})}))
    before = store.fingerprint()
    res = RUNNER.invoke(app, ["execute", str(proposals), "--data", str(data), "--engine", "sim", "--seeds", "2",
                              "--json"])
    assert res.exit_code == 0, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert "race-planner 0.0.1 -> " in line and "--data directory" in line
    assert json.loads(res.stdout)["warnings"] == [line.removeprefix("warning: ")]
    after = store.fingerprint()
    assert {k: v for k, v in after.items() if k in before} == before and len(after) == 2
