"""The planner's own files: atomic, readable by others, standard JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from planner.files import atomic_write_text, dumps_json, shown_path


def test_dumps_json_is_standard_json() -> None:
    doc = {"nan": float("nan"), "inf": [float("-inf"), np.float32("nan")], "n": np.int64(3),
           "x": np.float64(0.25), "ok": np.bool_(True), "path": Path("a/b")}

    def strict(name: str) -> None:
        raise ValueError(name)

    back = json.loads(dumps_json(doc), parse_constant=strict)
    assert back == {"nan": None, "inf": [None, None], "n": 3, "x": 0.25, "ok": True, "path": "a/b"}


def test_atomic_write_leaves_no_temporary_and_honours_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        path = atomic_write_text(tmp_path / "sub" / "f.json", "{}")
    finally:
        os.umask(old)
    assert path.read_text() == "{}" and path.stat().st_mode & 0o777 == 0o640
    with pytest.raises(IsADirectoryError):
        atomic_write_text(tmp_path / "sub", "x")  # a directory cannot be replaced by a file
    assert sorted(p.name for p in (tmp_path).iterdir()) == ["sub"]
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["f.json"]


def test_atomic_write_sweeps_only_its_own_idle_temporaries(tmp_path: Path) -> None:
    # What a writer killed between mkstemp and the rename leaves beside regimes.json.
    from planner.files import TEMPORARY_IDLE_S

    old_own, young_own = tmp_path / ".regimes.json.tmp-dead", tmp_path / ".regimes.json.tmp-live"
    other, foreign = tmp_path / ".report.html.tmp-dead", tmp_path / ".tmp-someone-elses"
    for p in (old_own, young_own, other, foreign):
        p.write_text("half")
    stale = os.stat(old_own).st_mtime - TEMPORARY_IDLE_S - 60
    for p in (old_own, other, foreign):
        os.utime(p, (stale, stale))
    atomic_write_text(tmp_path / "regimes.json", "{}")
    left = sorted(p.name for p in tmp_path.iterdir())
    # Only this file's idle temporary goes: a young one may be a live writer's, and the
    # others are another file's (swept when that file is written) or not the planner's.
    assert left == sorted([young_own.name, other.name, foreign.name, "regimes.json"])
    # A name with glob characters sweeps its own temporaries, not a pattern's matches.
    odd, lookalike = tmp_path / ".r[1].json.tmp-dead", tmp_path / ".r1.json.tmp-dead"
    for p in (odd, lookalike):
        p.write_text("half")
        os.utime(p, (stale, stale))
    atomic_write_text(tmp_path / "r[1].json", "{}")
    assert not odd.exists() and lookalike.exists()


def test_atomic_write_takes_any_name_a_folder_takes(tmp_path: Path) -> None:
    # ".NAME.tmp-" and mkstemp's 8 characters overflowed 255 bytes for names of 242 or more,
    # which check_creatable passes: the write failed after the work was done.
    from planner.files import check_creatable

    for n in (240, 242, 250, 255):
        path = tmp_path / ("a" * (n - 5) + ".json")
        check_creatable(path, "out")
        atomic_write_text(path, "{}")
        assert path.read_text() == "{}"
    assert len(list(tmp_path.iterdir())) == 4  # no temporary left


def test_shown_path_escapes_only_the_bytes_that_are_not_utf_8() -> None:
    # A latin-1 name decodes with a surrogate; the text shown must encode as UTF-8.
    odd = Path(os.fsdecode(b"/x/runs_\xff/caf\xc3\xa9 $5"))
    assert shown_path(odd) == "/x/runs_\\xff/caf\u00e9 $5"
    assert shown_path("plain/path") == "plain/path"
    shown_path("a\ud800b").encode("utf-8")  # a surrogate no byte decodes to: still writable
