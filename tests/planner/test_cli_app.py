"""Shared CLI parsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli.app import parse_option
from planner.errors import ConfigError


@pytest.mark.parametrize(("text", "want"), [
    ("quick=true", True), ("quick=False", False), ("quick=NO", False), ("quick=yes", True),
    ("eval_samples=128", 128), ("learning_rate=1e-3", 1e-3), ("world=flat", "flat"), ("x=[1, 2]", [1, 2]),
])
def test_parse_option_values(text: str, want: object) -> None:
    # "False" kept as a string would be truthy: -o quick=False ran a quick experiment.
    assert parse_option(text) == (text.split("=")[0], want)


def test_parse_option_needs_key_and_value() -> None:
    with pytest.raises(ConfigError, match="not KEY=VALUE"):
        parse_option("quick")


def test_an_os_error_mid_command_is_one_line_naming_the_file(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import errno

    from typer.testing import CliRunner

    import planner.report
    from planner.cli import app

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "o" / "report.md"))

    monkeypatch.setattr(planner.report, "build_report", full_disk)
    (tmp_path / "d").mkdir()
    res = CliRunner().invoke(app, ["report", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "-q"])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.output
    assert res.stderr.startswith(f"error: {tmp_path / 'o' / 'report.md'}: No space left on device;")


def test_sigterm_is_an_interrupt_inside_the_block_and_a_second_one_cannot_cut_the_clean_up() -> None:
    import os
    import signal
    import time

    from planner.cli.app import Terminated, interrupted_code, terminate_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    cleaned = False
    with pytest.raises(Terminated) as info:
        with terminate_as_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # cut short by the handler
            finally:
                os.kill(os.getpid(), signal.SIGTERM)  # during the clean-up: ignored
                time.sleep(0.05)
                cleaned = True
    assert cleaned
    assert interrupted_code(info.value) == 143 and interrupted_code(KeyboardInterrupt()) == 130
    assert signal.getsignal(signal.SIGTERM) == before


def test_an_engine_option_given_twice_with_two_values_is_refused() -> None:
    """The last one silently won (-o world=paper -o world=flat raced flat), while --world
    beside another -o world= was refused."""
    from planner.cli.app import engine_options
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^option: world given twice \(world='paper' and world='flat'\); give it once$"):
        engine_options("sim", ["world=paper", "world=flat"], None)
    assert engine_options("sim", ["world=paper", "world=paper"], None) == {"world": "paper"}  # said twice, one value
    assert engine_options("trl", ["eval_samples=64", "quick=true"], None) == {"eval_samples": 64, "quick": True}


@pytest.mark.parametrize("cli", ["race", "execute"])
def test_a_device_given_as_a_flag_and_an_option_must_agree(cli: str, tmp_path: Path) -> None:
    """--device cuda beside -o device=cpu ran on cuda without a word."""
    from typer.testing import CliRunner

    from planner.cli import app as planner_app
    from runners.cli import app as runners_app

    if cli == "race":
        app, args = planner_app, ["race", "--budget", "5e11", "--models", "tiny-s", "--rewards", "sparse"]
    else:
        from planner.compiler import compile_plan
        from planner.proposals import make_proposal, write_proposals

        write_proposals(tmp_path / "p.json", [make_proposal(compile_plan("tiny-s", "sparse", 0.5, 5e11))])
        app, args = runners_app, ["execute", str(tmp_path / "p.json")]
    res = CliRunner().invoke(app, [*args, "--engine", "trl", "--device", "cuda", "-o", "device=cpu",
                                   "--data", str(tmp_path / "d")])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == "error: device: --device cuda and -o device=cpu disagree; give one"


def test_the_app_s_main_takes_click_s_arguments_by_position(capsys: pytest.CaptureFixture[str]) -> None:
    """Click's main(args, prog_name, complete_var, standalone_mode): the override took
    standalone_mode by keyword only, so a positional call raised TypeError (multiple values)."""
    import typer

    from planner.cli import app

    cmd = typer.main.get_command(app)
    assert cmd.main(["--help"], "planner", None, False) == 0
    assert "Usage: planner" in capsys.readouterr().out


def test_a_mistyped_command_gets_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    """click's "Did you mean 'suggest'?" was followed by "; see ...", reading "?; see"."""
    import typer

    from planner.cli import app

    cmd = typer.main.get_command(app)
    with pytest.raises(SystemExit) as exit_:
        cmd.main(["sugest"], "planner")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: No such command 'sugest'. Did you mean 'suggest'? (see `planner --help`)")
    with pytest.raises(SystemExit):
        cmd.main(["race", "--budgt", "1"], "planner")
    assert capsys.readouterr().err.strip().endswith("; see `planner race --help`")


def test_a_reader_that_went_away_is_a_quiet_exit_not_an_os_error_line() -> None:
    # `runners truth --json | head -1`: the guard took the broken pipe for a bad path and
    # printed "error: Broken pipe; check the path, its permissions and free space", exit 2.
    # The convention (click's, rich's): nothing on stderr, exit 1.
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write is EPIPE
    try:
        res = subprocess.run([sys.executable, "-c", "from runners.cli import main; main()", "truth", "--world",
                              "paper", "--model", "qwen2.5-1.5b", "--reward", "prm", "--budget", "1e16", "--json"],
                             stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert res.stderr == ""
    assert res.returncode == 1


def test_a_terminal_that_cannot_encode_a_character_gets_a_question_mark(tmp_path: Path) -> None:
    """PYTHONIOENCODING=ascii (an old cluster's locale): the proposals table's ± (rich
    writes through sys.stdout) was a UnicodeEncodeError traceback after the batch was
    written."""
    import os
    import subprocess
    import sys

    from typer.testing import CliRunner

    from planner.cli import app

    data = tmp_path / "data"
    base = ["--budget", "1e16", "--pilot-budget", "1e15", "--models", "qwen2.5-1.5b", "--rewards", "sparse",
            "--data", str(data)]
    res = CliRunner().invoke(app, ["race", *base, "--engine", "sim", "--max-runs", "4", "--quiet"])
    assert res.exit_code == 0, res.output
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "200"}
    res = subprocess.run([sys.executable, "-c", "from planner.cli import main; main()", "suggest", *base,
                          "--out", str(tmp_path / "p.json")], capture_output=True, env=env, timeout=120)
    out, err = res.stdout.decode("ascii"), res.stderr.decode("utf-8", "replace")
    assert res.returncode == 0 and "Traceback" not in err, err
    assert "?" in out and "±" not in out  # mean?std where the terminal has no ±


@pytest.mark.parametrize(("package", "command"), [("planner", "suggest"), ("runners", "truth")])
def test_python_m_runs_each_command_line_and_names_itself(package: str, command: str) -> None:
    # Where the console scripts are not on PATH (a venv not activated) `python -m` is the way in;
    # click names the program after it, so usage lines tell the user what to type again.
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", package, "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert command in res.stdout
    assert f"python -m {package}" in res.stdout
    bad = subprocess.run([sys.executable, "-m", package, "no-such-command"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2
    assert "no-such-command" in bad.stderr


def test_a_malformed_option_is_shown_options_the_engines_take() -> None:
    # The hint was num_workers=2, which no engine takes.
    from runners.engines.sim import SimEngine
    from runners.engines.trl import TrlEngine

    with pytest.raises(ConfigError, match=r"^option: 'foo' is not KEY=VALUE; e\.g\. -o eval_samples=128 \(trl\)"):
        parse_option("foo")
    TrlEngine(eval_samples=128), SimEngine(truth=True)  # the hint's own examples are accepted
