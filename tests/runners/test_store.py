"""The pilot store: atomic, exclusive, schema-stable, corrupt files reported not fatal."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from planner.compiler import compile_plan
from planner.schema import ComputeCard, FlopsSplit, Metrics, RunRecord, run_id_for
from runners.store import ROW_SCHEMA, PilotStore

PLAN = compile_plan("tiny-s", "sparse", 0.7, 1e12)


def record(i: int, *, status: str = "ok", native: float | None = 0.5, attempt: int = 1,
           writer: int = 0) -> RunRecord:
    card = ComputeCard(flops=PLAN.flops, rho=PLAN.flops.rho)
    return RunRecord(
        run_id=run_id_for(f"p{i}", 0), proposal_id=f"p{i}", status=status, engine="test",  # type: ignore[arg-type]
        simulated=True, model="tiny-s", model_params=4.5e5, reward="sparse", budget=1e12,
        rho_planned=PLAN.rho, seed=0, plan=PLAN, card=card,
        metrics=Metrics(native=native, pass1=None if i % 2 else 0.25),
        error=None if status == "ok" else "error: boom", attempt=attempt,
        provenance={"writer": writer},
    )


def test_row_schema_covers_every_record_column() -> None:
    # A column added to RunRecord.to_row must get a fixed dtype here, or files could drift.
    assert set(record(0).to_row()) == set(ROW_SCHEMA)


def test_roundtrip_and_polars_glob_with_null_metrics(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    for i in range(4):
        store.write(record(i, native=None if i == 1 else 0.1 * i))
    back = {r.run_id: r for r in store.records()}
    assert back[run_id_for("p2", 0)] == record(2, native=0.2)
    assert back[run_id_for("p1", 0)].metrics.native is None
    # Mixed null / float metric columns across files still read as one dataset.
    df = pl.read_parquet(str(tmp_path / "runs" / "*.parquet"))
    assert df.height == 4
    assert df.schema["native"] == pl.Float64 and df["native"].null_count() == 1
    assert store.table().height == 4


def test_failed_kept_apart_and_first_ok_wins(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    store.write(record(0, status="failed", attempt=1))
    store.write(record(0, status="failed", attempt=1))  # same attempt again: kept as a2
    assert store.failed_attempts(run_id_for("p0", 0)) == 2
    path, created = store.add(record(0, native=0.3))
    assert created and path.parent.name == "runs"
    before = path.stat()
    again, created2 = store.add(record(0, native=0.9))  # a rerun: no duplicate, no rewrite
    assert again == path and not created2
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert [r.metrics.native for r in store.records()] == [0.3]
    assert sorted(r.attempt for r in store.records(status="failed")) == [1, 2]
    assert len(store.records(status=None)) == 3
    # The dataset glob sees only ok records.
    assert pl.read_parquet(str(tmp_path / "runs" / "*.parquet")).height == 1


def test_corrupt_files_reported_by_name_and_skipped(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    for i in range(3):
        store.write(record(i))
    good = store.path_for(record(0)).read_bytes()
    runs = tmp_path / "runs"
    (runs / "truncated-s0.parquet").write_bytes(good[: len(good) // 2])
    (runs / "garbage-s0.parquet").write_bytes(b"not parquet at all")
    (runs / "empty-s0.parquet").write_bytes(b"")
    pl.DataFrame({"x": [1]}).write_parquet(runs / "wrongcols-s0.parquet")
    (runs / ".tmp-123.part").write_bytes(good[:10])  # an in-flight temporary: invisible
    scan = store.scan()
    assert len(scan.records) == 3
    assert sorted(c.path.name for c in scan.corrupt) == [
        "empty-s0.parquet", "garbage-s0.parquet", "truncated-s0.parquet", "wrongcols-s0.parquet",
    ]
    assert all(c.reason for c in scan.corrupt)


def test_corrupt_reasons_say_what_is_wrong(tmp_path: Path) -> None:
    # These read as a bare "'schema_version'", a JSON parser's message with no field, and a
    # polars glob hint; a store whose runs/ was a file read as an empty store.
    store = PilotStore(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    row = record(1).to_row()
    pl.DataFrame([row], schema=ROW_SCHEMA).drop("schema_version").write_parquet(runs / "nocol-s0.parquet")
    pl.DataFrame([row | {"provenance_json": "{bad"}], schema=ROW_SCHEMA).write_parquet(runs / "prov-s0.parquet")
    pl.DataFrame([row | {"provenance_json": "[1]"}], schema=ROW_SCHEMA).write_parquet(runs / "list-s0.parquet")
    (runs / "dir-s0.parquet").mkdir()
    reasons = {c.path.name: c.reason for c in store.scan().corrupt}
    assert reasons["nocol-s0.parquet"].startswith("record: no column 'schema_version'")
    assert reasons["prov-s0.parquet"].startswith("record: provenance_json is not valid JSON")
    assert reasons["list-s0.parquet"] == "record: provenance_json must be a JSON object, got list"
    assert reasons["dir-s0.parquet"] == "a directory, not a record file"
    other = PilotStore(tmp_path / "other")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "runs").write_text("x")
    (bad,) = other.scan().corrupt
    assert bad.reason == "runs/ is a file, not the folder of records"


def test_rewriting_a_corrupt_record_moves_it_aside(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    target = store.path_for(record(5))
    target.parent.mkdir(parents=True)
    target.write_bytes(b"PAR1 truncated")
    assert store.run_ids() == set()  # a corrupt file does not count as done ...
    _path, created = store.add(record(5))  # ... so the rerun writes it, keeping the wreck
    assert created and store.run_ids() == {run_id_for("p5", 0)}
    moved = store.corrupt()
    assert len(moved) == 1 and moved[0].path.parent.name == "corrupt"
    assert moved[0].path.read_bytes() == b"PAR1 truncated"


def test_a_dangling_link_is_listed_corrupt_and_a_rerun_replaces_it(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    target = store.path_for(record(6))
    target.parent.mkdir(parents=True)
    target.symlink_to(tmp_path / "gone.parquet")  # e.g. a store copied with `cp -s`, source deleted
    found = store.corrupt()
    assert [c.path for c in found] == [target] and "dangling link" in found[0].reason
    assert store.fingerprint() == {f"runs/{target.name}": (target.lstat().st_size, target.lstat().st_mtime_ns)}
    _path, created = store.add(record(6))  # the link held the name: it is moved aside, ours lands
    assert created and store.run_ids() == {run_id_for("p6", 0)}
    assert [c.path.parent.name for c in store.corrupt()] == ["corrupt"]


def _writer(root: str, writer: int, n: int, shared: int) -> None:
    store = PilotStore(Path(root))
    for i in range(n):
        store.write(record((writer + 1) * 1000 + i, writer=writer))
        if i < shared:  # every writer also races the others on the same few run ids
            store.write(record(i, writer=writer))


def test_four_processes_fifty_records_each(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 50, 10)) for w in range(4)]
    for p in procs:
        p.start()
    store = PilotStore(tmp_path)
    partial_reads = 0
    # Read while they write: a reader must never see a half-written record.
    while any(p.is_alive() for p in procs):
        scan = store.scan()
        assert scan.corrupt == [], scan.corrupt
        partial_reads += 1
        time.sleep(0.01)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    scan = store.scan()
    assert scan.corrupt == []
    own = [r for r in scan.records if int(r.proposal_id[1:]) >= 1000]
    assert len(own) == 200 and len({r.run_id for r in own}) == 200
    for w in range(4):
        mine = sorted(int(r.proposal_id[1:]) for r in own if r.provenance["writer"] == w)
        assert mine == [(w + 1) * 1000 + i for i in range(50)]
    shared = [r for r in scan.records if int(r.proposal_id[1:]) < 1000]
    assert len(shared) == 10  # raced ids: exactly one record each, intact
    assert len(os.listdir(tmp_path / "runs")) == 210  # and no temporaries left behind
    assert pl.read_parquet(str(tmp_path / "runs" / "*.parquet")).height == 210
    assert partial_reads > 0


@pytest.mark.parametrize("bad", [{"card_json": "{}"}, {"status": "maybe"}, {"budget": -1.0}])
def test_rows_that_parse_but_are_invalid_are_corrupt(tmp_path: Path, bad: dict) -> None:
    store = PilotStore(tmp_path)
    row = record(1).to_row() | bad
    (tmp_path / "runs").mkdir()
    pl.DataFrame([row], schema=ROW_SCHEMA).write_parquet(tmp_path / "runs" / "x-s0.parquet")
    store.write(record(2))
    scan = store.scan()
    assert [r.proposal_id for r in scan.records] == ["p2"]
    assert [c.path.name for c in scan.corrupt] == ["x-s0.parquet"]


@pytest.mark.parametrize(("update", "reason"), [
    ({"model": "tiny-m"}, "model/reward: tiny-m/sparse but its plan is for tiny-s/sparse"),
    ({"reward": "dense"}, "model/reward: tiny-s/dense"),
    ({"budget": 1e20}, "budget: 1e+20 but its plan's budget is 1e+12"),
    ({"budget": float("inf")}, "budget: inf"),
    ({"rho_planned": 0.1}, "rho_planned: 0.1 but its plan's rho"),
    ({"seed": 3}, "run_id: 'p1-s0' is not proposal_id-s<seed>"),
    ({"metrics": Metrics(native=1e200)}, "metrics.native: 1e+200 is not a rate in [0, 1]"),
    ({"metrics": Metrics(native=0.5, judge_base=-50.0)}, "metrics.judge_base: -50.0 is not a rate"),
    ({"card": ComputeCard(flops=PLAN.flops, rho=0.99)}, "card.rho: 0.99 but its FLOPs give"),
    ({"card": ComputeCard(flops=FlopsSplit(search=1e300, learning=1e300, reward=0, total=1e300), rho=1.0)},
     "card.flops: search + learning + reward = 2e+300 but total = 1e+300"),
])
def test_records_that_contradict_themselves_are_corrupt(tmp_path: Path, update: dict, reason: str) -> None:
    """A hand edit that keeps the flat columns and the JSON in step still cannot file a
    run under another setting, feed the surrogate a metric that is no rate, or misstate
    its allocation: the file is listed as corrupt and skipped, the rest still loads."""
    store = PilotStore(tmp_path)
    bad = record(1).model_copy(update=update)  # no validation: as a hand edit would
    (tmp_path / "runs").mkdir()
    pl.DataFrame([bad.to_row()], schema=ROW_SCHEMA).write_parquet(tmp_path / "runs" / "p1-s0.parquet")
    store.write(record(2))
    scan = store.scan()
    assert [r.proposal_id for r in scan.records] == ["p2"]
    assert [c.path.name for c in scan.corrupt] == ["p1-s0.parquet"]
    assert reason in scan.corrupt[0].reason, scan.corrupt[0].reason
    assert not store.has_ok(run_id_for("p1", 0))  # so the next execute reruns it


def test_a_failed_attempts_partial_card_is_not_held_to_an_ok_records_sums(tmp_path: Path) -> None:
    """A run that died reports the FLOPs it metered, maybe without their split."""
    store = PilotStore(tmp_path)
    card = ComputeCard(flops=FlopsSplit(search=0, learning=0, reward=0, total=5e9), rho=0.0, partial=True)
    store.write(record(3, status="failed").model_copy(update={"card": card}))
    assert store.corrupt() == [] and store.failed_attempts(run_id_for("p3", 0)) == 1


def test_flops_card_with_extra_fields_round_trips(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    card = ComputeCard(flops=FlopsSplit(search=1, learning=2, reward=0, total=3), rho=2 / 3,
                       partial=True, phase="search")
    rec = record(7, status="failed").model_copy(update={"card": card})
    store.write(rec)
    back = store.records(status="failed")[0]
    assert back.card.model_extra == {"partial": True, "phase": "search"}


def test_sweep_removes_only_old_temporaries(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    store.write(record(1))
    old, young = tmp_path / "runs" / ".tmp-old.part", tmp_path / "runs" / ".tmp-young.part"
    old.write_bytes(b"x")
    young.write_bytes(b"y")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert store.sweep_temporaries(3600) == 1
    assert not old.exists() and young.exists() and len(store.records()) == 1


def test_a_record_under_another_runs_name_is_corrupt_and_replaced(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    a, b = store.write(record(0)), store.write(record(1))
    b.unlink()
    b.write_bytes(a.read_bytes())  # run p0's record saved as p1's file
    scan = store.scan()
    assert [r.run_id for r in scan.records] == [run_id_for("p0", 0)]
    assert [c.path.name for c in scan.corrupt] == [b.name] and "p0" in scan.corrupt[0].reason
    assert not store.has_ok(run_id_for("p1", 0))  # so the next execute reruns p1 ...
    path, created = store.add(record(1, native=0.9))  # ... and its record replaces the wreck
    assert created and path == b
    assert {r.run_id: r.metrics.native for r in store.records()} == {run_id_for("p0", 0): 0.5, run_id_for("p1", 0): 0.9}
    assert len(list(store.corrupt_dir.iterdir())) == 1


def test_a_failed_record_in_runs_does_not_count_as_done(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    failed = store.write(record(0, status="failed"))
    (store.runs_dir).mkdir()
    (store.runs_dir / f"{run_id_for('p0', 0)}.parquet").write_bytes(failed.read_bytes())
    assert not store.has_ok(run_id_for("p0", 0))
    assert store.records(status="ok") == []
    assert "must hold the ok record" in store.scan().corrupt[0].reason


def test_flat_columns_must_agree_with_the_records_json(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    path = store.write(record(0))
    df = pl.read_parquet(path).with_columns(pl.lit(5.0).alias("rho"))
    path.unlink()
    df.write_parquet(path)
    scan = store.scan()
    assert scan.records == []
    assert "column 'rho' is 5.0" in scan.corrupt[0].reason


def test_records_are_readable_by_the_group_and_others(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = PilotStore(tmp_path).write(record(0))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644  # a shared campaign directory, not mkstemp's 0600


def test_a_failed_record_with_a_nan_metric_reads_back(tmp_path: Path) -> None:
    """A diverged run's NaN metric is stored as null in the flat column, as in its JSON:
    a column that disagreed would make the store read its own file as corrupt, and the
    failure (and its attempt count) would be lost."""
    store = PilotStore(tmp_path)
    store.write(record(0, status="failed", native=float("nan")))
    assert store.corrupt() == []
    (back,) = store.records(status="failed")
    assert back.metrics.native is None and back.metrics.pass1 == 0.25
    assert store.failed_attempts(run_id_for("p0", 0)) == 1


def test_check_writable_refuses_a_store_whose_runs_folder_is_a_file(tmp_path: Path) -> None:
    from planner.errors import ConfigError

    root = tmp_path / "d"
    root.mkdir()
    (root / "runs").write_text("not a folder")
    with pytest.raises(ConfigError, match=r"^data: cannot create .*runs"):
        PilotStore(root).check_writable()
    (root / "runs").unlink()
    PilotStore(root).check_writable()  # a fresh store is fine, and the check creates nothing
    assert list(root.iterdir()) == []
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        PilotStore(f).check_writable()


def test_a_record_it_may_not_read_stops_every_reader_and_is_neither_moved_nor_rerun(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Permissions, not damage (a co-worker's umask 077): read as corrupt, the next
    execute ran the run again and moved the intact record to corrupt/. Simulated through
    os.access and os.listdir, since a root test runner reads any file whatever its mode."""
    from runners.store import UnreadableError

    store = PilotStore(tmp_path)
    path, _ = store.add(record(7))
    store.add(record(8))
    real_access, real_listdir = os.access, os.listdir
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != path and real_access(p, mode))
    for read in (store.records, store.corrupt, lambda: store.has_ok(run_id_for("p7", 0))):
        with pytest.raises(UnreadableError, match=r"^data: cannot read '.*p7-s0\.parquet' \(permission denied\); "
                                                  r"fix its permissions"):
            read()
    with pytest.raises(UnreadableError):
        store.add(record(7))  # the rerun's record is not published over it
    assert path.exists() and not store.corrupt_dir.exists()
    monkeypatch.setattr(os, "access", real_access)

    def no_listing(p: object) -> list[str]:
        if Path(str(p)) == store.runs_dir:
            raise PermissionError(13, "Permission denied")
        return real_listdir(p)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "listdir", no_listing)
    with pytest.raises(UnreadableError, match=r"^data: cannot list '.*runs'"):
        store.records()  # not an empty store whose every run is to be redone


def test_a_pipe_named_like_a_record_is_corrupt_not_a_reader_that_blocks(tmp_path: Path) -> None:
    store = PilotStore(tmp_path)
    store.add(record(9))
    fifo = store.path_for(record(10))
    os.mkfifo(fifo)
    found = store.corrupt()
    assert [c.path for c in found] == [fifo] and "not a regular file" in found[0].reason
    assert store.run_ids() == {run_id_for("p9", 0)}
    _path, created = store.add(record(10))  # the rerun moves it aside
    assert created and store.run_ids() == {run_id_for("p9", 0), run_id_for("p10", 0)}


def test_a_wreck_replaced_by_another_writers_record_is_not_moved_aside(tmp_path: Path) -> None:
    """Writer B read the wreck and failed; meanwhile writer A moved it aside and published
    its good record under the name. B's quarantine must move the file it read, not A's."""
    store = PilotStore(tmp_path)
    final = store.path_for(record(11))
    final.parent.mkdir(parents=True)
    final.write_bytes(b"PAR1 garbage")
    wreck = os.lstat(final).st_ino  # what B read
    store._quarantine(final, wreck)  # A moves it aside ...
    store.add(record(11))  # ... and publishes
    store._quarantine(final, wreck)  # B, late
    assert store.run_ids() == {run_id_for("p11", 0)}
    assert [c.path.read_bytes() for c in store.corrupt()] == [b"PAR1 garbage"]


def test_a_wreck_that_fails_to_stat_once_is_still_moved_aside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An lstat of the wreck failing with another error than "not found" (EIO) went to the
    catch-all with its inode unset: UnboundLocalError instead of the record written."""
    import errno

    import runners.store as store_mod

    store = PilotStore(tmp_path)
    final = store.path_for(record(13))
    final.parent.mkdir(parents=True)
    final.write_bytes(b"PAR1 garbage")
    real_lstat = os.lstat
    failed: list[int] = []

    def flaky(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if not failed and Path(str(path)) == final:
            failed.append(1)
            raise OSError(errno.EIO, "input/output error", str(path))
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_mod.os, "lstat", flaky)
    _path, created = store.add(record(13))
    monkeypatch.undo()
    assert failed and created and store.run_ids() == {run_id_for("p13", 0)}
    assert [c.path.read_bytes() for c in store.corrupt()] == [b"PAR1 garbage"]


def test_a_record_published_between_the_check_and_the_move_is_put_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import runners.store as store_mod

    store = PilotStore(tmp_path)
    final = store.path_for(record(12))
    final.parent.mkdir(parents=True)
    final.write_bytes(b"PAR1 garbage")
    wreck = os.lstat(final).st_ino
    good = PilotStore(tmp_path / "elsewhere")
    good_path, _ = good.add(record(12))
    real_replace = os.replace
    calls: list[int] = []

    def late(src: object, dst: object) -> None:
        if not calls:  # another writer moves the wreck aside and publishes, just before our move
            calls.append(1)
            real_replace(final, store.corrupt_dir / "theirs")
            os.link(good_path, final)
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(store_mod.os, "replace", late)
    store._quarantine(final, wreck)
    monkeypatch.setattr(store_mod.os, "replace", real_replace)
    assert store.run_ids() == {run_id_for("p12", 0)}
    assert [c.path.read_bytes() for c in store.corrupt()] == [b"PAR1 garbage"]


def _panicking_copy(good: bytes) -> bytes | None:
    """``good`` with one byte flipped where this polars panics reading it (a BaseException,
    not an error): a flipped byte in a compressed page's frame header does it."""
    import io

    from polars.exceptions import PanicException

    magic = b"\x28\xb5\x2f\xfd"  # each zstd frame: one per page
    for start in [i for i in range(len(good)) if good.startswith(magic, i)]:
        for off in range(4, 16):
            bad = bytearray(good)
            bad[start + off] ^= 0xFF
            try:
                pl.read_parquet(io.BytesIO(bytes(bad)))
            except PanicException:
                return bytes(bad)
            except Exception:
                continue
    return None


def test_a_file_polars_panics_on_is_corrupt_quietly(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # polars' PanicException is a BaseException: scan, has_ok and add let it through, so
    # one damaged file crashed `runners status` and every `execute` on the store; caught, it
    # still printed a dozen lines of Rust panic on stderr before the one-line reason.
    store = PilotStore(tmp_path)
    store.write(record(0))
    path = store.write(record(1))
    bad = _panicking_copy(path.read_bytes())
    if bad is None:
        pytest.skip("no flipped byte makes this polars panic")
    path.unlink()
    path.write_bytes(bad)
    capfd.readouterr()
    scan = store.scan()
    assert [r.run_id for r in scan.records] == [run_id_for("p0", 0)]
    assert [c.path.name for c in scan.corrupt] == [path.name]
    assert "\n" not in scan.corrupt[0].reason and "panicked" not in scan.corrupt[0].reason
    assert "panicked" not in capfd.readouterr().err
    assert not store.has_ok(run_id_for("p1", 0))
    # A rerun's record moves the wreck aside and takes its place.
    again, created = store.add(record(1))
    assert created and again == path
    assert [r.run_id for r in store.records()] == [run_id_for("p0", 0), run_id_for("p1", 0)]
    assert len(list((tmp_path / "corrupt").iterdir())) == 1


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda f: f.drop("native"), "no column 'native'"),
    (lambda f: f.with_columns(pl.lit(1).alias("zzz")), "an unknown column 'zzz'"),
    (lambda f: f.with_columns(pl.col("seed").cast(pl.Float64)), "column 'seed' is Float64, not Int64"),
])
def test_a_file_whose_columns_differ_is_corrupt_and_replaced(tmp_path: Path, edit: Any, reason: str) -> None:
    # Its record rebuilds from the JSON, so the store counted it intact and never rewrote
    # it, while the docs' one-line read of the dataset refused the whole table.
    store = PilotStore(tmp_path)
    store.write(record(0))
    path = store.write(record(1))
    edit(pl.read_parquet(path)).write_parquet(path)
    with pytest.raises(pl.exceptions.PolarsError):
        pl.read_parquet(tmp_path / "runs" / "*.parquet")
    scan = store.scan()
    assert [c.path.name for c in scan.corrupt] == [path.name]
    assert reason in scan.corrupt[0].reason
    assert not store.has_ok(run_id_for("p1", 0))
    again, created = store.add(record(1))
    assert created and again == path
    assert pl.read_parquet(tmp_path / "runs" / "*.parquet").height == 2


def test_a_page_header_polars_aborts_on_is_corrupt_not_a_dead_process(tmp_path: Path) -> None:
    # One byte, a data page's value count made negative, made polars' reader try to allocate
    # 2^61 bytes and abort the process (exit 134, past any except): `runners status`,
    # `execute` and `planner suggest` all died on one damaged record. In a child process, so
    # that a regression fails this test instead of killing the suite.
    import subprocess
    import sys

    store = PilotStore(tmp_path / "d")
    store.write(record(0))
    path = store.write(record(1))
    good = path.read_bytes()
    at = good.find(b",\x15\x02\x15")  # a page header's num_values field: zigzag(1)
    assert at > 0, "no data page header with one value found: the record layout changed"
    bad = bytearray(good)
    bad[at + 2] = 0x19  # zigzag(-13)
    path.write_bytes(bytes(bad))
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("RUST_BACKTRACE", None)
    done = subprocess.run([sys.executable, "-m", "runners", "status", "--data", str(tmp_path / "d")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    corrupt = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("corrupt ")]
    assert len(corrupt) == 1 and path.name in corrupt[0]
    assert "panicked" not in done.stderr and "memory allocation" not in done.stderr


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through Linux's /proc")
def test_reading_records_starts_no_arrow_pool_threads(tmp_path: Path) -> None:
    """pyarrow's dataset scan (behind pl.read_parquet(use_pyarrow=True) and pq.read_table)
    starts pool threads that were now and then still live at interpreter exit, and C++
    aborted the process after the command's own exit code (exit 134; benchmarks/store_exit.py). The
    store reads each file on the calling thread. Arrow's pool threads carry the
    interpreter's name; a fresh child process, so no earlier test has started the pools."""
    import subprocess
    import sys

    store = PilotStore(tmp_path / "d")
    for i in range(3):
        store.write(record(i))
    child = f"""
import os, sys
import pyarrow, pyarrow.parquet, polars
from runners.store import PilotStore
with open("/proc/self/comm") as fh:
    me = fh.read().strip()  # python, python3, python3.11: what Arrow's threads inherit
def named():
    out = set()
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{{t}}/comm") as fh:
            if fh.read().strip() == me:
                out.add(t)
    return out
before = named()
scan = PilotStore({str(tmp_path / "d")!r}).scan(status=None)
assert len(scan.records) == 3 and not scan.corrupt, scan
print(len(named() - before))
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0", f"the scan started {done.stdout.strip()} pool thread(s)"


@pytest.mark.parametrize("name", ["pilot[v2]", "runs*", "run?"])
def test_a_store_whose_path_has_glob_characters_reads_its_records(tmp_path: Path, name: str) -> None:
    # polars reads a path as a glob: under "pilot[v2]" every record matched nothing and
    # read as corrupt, and the next execute moved each aside and ran it again.
    store = PilotStore(tmp_path / name)
    path = store.write(record(0))
    for sibling in ("run1", "runs1"):  # other stores "run?" and "runs*" would match too
        (tmp_path / sibling / "runs").mkdir(parents=True)
        (tmp_path / sibling / "runs" / path.name).write_bytes(path.read_bytes())
    scan = store.scan()
    assert scan.corrupt == [] and [r.run_id for r in scan.records] == [run_id_for("p0", 0)]
    assert store.has_ok(run_id_for("p0", 0))
    before = store.fingerprint()
    assert store.add(record(0, native=0.9)) == (path, False)  # kept, not moved aside
    assert store.fingerprint() == before and not (tmp_path / name / "corrupt").exists()


def test_the_installed_store_satisfies_the_record_store_protocol(tmp_path: Path) -> None:
    """``planner.engine.open_store`` loads the store through an entry point (typed Any, so
    mypy never compares PilotStore with the Protocol the planner drives): the methods keep
    the Protocol's parameters and defaults, and a scan has the StoreScan fields."""
    import inspect

    from planner.engine import RecordStore, StoreScan, open_store

    store = open_store(tmp_path)
    assert isinstance(store, PilotStore) and isinstance(store, RecordStore)
    assert store.root == tmp_path
    for method in ("write", "records", "scan"):
        mine = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(store, method)).parameters.values()]
        theirs = [(p.name, p.kind, p.default)
                  for p in list(inspect.signature(getattr(RecordStore, method)).parameters.values())[1:]]
        assert mine == theirs, method
    store.write(record(0))
    scan = store.scan()
    assert set(StoreScan.__annotations__) <= set(vars(scan))
    assert [r.run_id for r in scan.records] == [record(0).run_id] and scan.corrupt == []


def test_a_store_whose_path_is_not_utf_8_reads_its_records(tmp_path: Path) -> None:
    # A folder named in latin-1 (b"caf\xe9"), or any non-ASCII path under a non-UTF-8
    # locale: Python holds such a name with surrogates, which polars cannot take as a path.
    # Every record read as corrupt ("0 ok, 4 corrupt") and the next execute moved each
    # aside and ran it again.
    root = tmp_path / os.fsdecode(b"caf\xe9 store")
    store = PilotStore(root)
    store.write(record(0))
    scan = store.scan(status=None)
    assert scan.corrupt == [] and [r.run_id for r in scan.records] == [record(0).run_id]
    store.write(record(0))  # a rerun finds the intact record there: kept, not moved aside
    assert not (root / "corrupt").exists() and len(store.records()) == 1
