"""benchmarks/bench_cli.py, and the scripts that go through it: bad input is one line and
exit 2, checked before any work, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from planner.errors import ConfigError


@pytest.fixture()
def cli(load_script: Callable[..., ModuleType]) -> ModuleType:
    return load_script("bench_cli")


def _fails(cli: ModuleType, main: Callable[..., object], argv: list[str],
           capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.run(main, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_read_results_names_each_way_a_file_is_not_results(cli: ModuleType, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"config": {}, "outcomes": []}))
    assert cli.read_results(good) == {"config": {}, "outcomes": []}
    cases = {"missing.json": (None, "cannot read it"), "empty.json": ("", "not JSON"),
             "list.json": ("[1]", "holds a JSON list"), "bare.json": ("{}", "has no 'config'"),
             "half.json": ('{"config": {}}', "has no 'outcomes'")}
    for name, (text, said) in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match=said):
            cli.read_results(tmp_path / name)


@pytest.mark.parametrize("script, argv", [
    ("rescore", ["{f}"]),
    ("bench_stake", ["{f}"]),
    ("order_sensitivity", ["{f}", "{f}"]),
    ("duel_vs_shape", ["--results", "{f}"]),
])
@pytest.mark.parametrize("text", ["", "{}"])
def test_stored_file_readers_refuse_a_file_that_is_not_results(
        script: str, argv: list[str], text: str, load_script: Callable[..., ModuleType], cli: ModuleType,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "r.json"
    f.write_text(text)
    err = _fails(cli, load_script(script).main, [a.format(f=f) for a in argv], capsys)
    assert str(f) in err and "planner_bench.py results file" in err


@pytest.mark.parametrize("script, argv, said", [
    ("store_exit", ["--pairs", "0"], "pairs: need at least 1 pair"),
    ("store_exit", ["--readers", "polars"], "readers: unknown 'polars'"),
    ("sim_rate", ["--world", "nope"], "world: no world file 'nope'"),
    ("sim_rate", ["--repeats", "0"], "repeats: need at least 1"),
    ("race_trace", ["--model", "nope"], "model: unknown 'nope'"),
    ("race_trace", ["--reward", "nope"], "reward: unknown 'nope'"),
    ("truth_figure", ["--target", "nope", "--out", "{tmp}/t.png"], "target: unknown 'nope'"),
    ("noise_prior", ["short", "--loc", "abc"], "loc: 'abc' is not a number"),
    ("noise_prior", ["short", "--reps", "0"], "reps: need at least 1"),
    # planner_bench.py has a --seeds of its own: before '--' it would be dropped silently.
    ("noise_prior", ["bench", "--seeds", "1", "--quick"], "seeds: under bench, give planner_bench.py's options"),
    ("noise_prior", ["bench", "--noise-sd", "0.01"], "noise-sd: under bench, give planner_bench.py's options after "
     "'--' (noise_prior.py bench --loc L -- --ours-noise-sd X ...)"),
    ("noise_prior", ["short", "--noise-sd", "0"], "noise-sd: a positive run noise sd"),
    ("prediction_coverage", ["--noise-sd", "abc"], "noise-sd: a positive number or 'world'"),
    ("planner_bench", ["--ours-noise-sd", "sparse=0.01", "--quick"], "ours-noise-sd: one sd for every reward system"),
    ("learning_real", ["--seeds", "1"], "seeds: need at least 2"),
    ("learning_real", ["--rewards", "sparse,nope"], "rewards: unknown 'nope'"),
    ("setting_calls", ["--worlds", "paper,nope"], "worlds: unknown 'nope'"),
    # In this process the math libraries loaded unpinned: a pinned run must not claim it.
    ("planner_bench", ["--portable-math", "--quick", "--out", "{tmp}/b.json"],
     "portable-math: the math libraries read their pins when they load"),
    ("math_paths", ["--world", "nope"], "world: unknown 'nope'"),
    ("math_paths", ["--configs", "native,nope"], "configs: unknown 'nope'"),
    ("math_paths", ["--configs", "portable"], "configs: start with native"),
    ("math_paths", ["--rep", "-1"], "rep: repetitions are numbered from 0"),
])
def test_bad_options_are_one_line_before_any_work(
        script: str, argv: list[str], said: str, load_script: Callable[..., ModuleType], cli: ModuleType,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _fails(cli, load_script(script).main, [a.format(tmp=tmp_path) for a in argv], capsys)
    assert said in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_race_workers_refuses_no_arm_and_defaults_out_of_the_repository(
        load_script: Callable[..., ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_script("race_workers")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        bench.main(["--arms", ","])
    assert exc.value.code == 2 and "--arms: no arm given" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
    # The stored results file the docs cite is not the default: a rerun would replace it.
    assert not bench.DEFAULT_OUT.is_absolute() and bench.DEFAULT_OUT.parent == Path(".")
