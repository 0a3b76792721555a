"""`planner flops` / `planner plan` through typer's CliRunner: outputs and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.proposals import read_proposals

runner = CliRunner()


def test_plan_json_and_out(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(
        app, ["plan", "--model", "tiny-s", "--reward", "sparse", "--rho", "0.6", "--budget", "3e12", "--json", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data["flops"]) == {"search", "learning", "reward", "total"}
    assert abs(data["flops"]["total"] - 3e12) <= 0.02 * 3e12
    assert abs(data["rho"] - 0.6) <= 0.05
    for knob in ("completions_per_prompt", "completions_kept", "num_iterations", "rounds", "lora_rank", "lora_targets"):
        assert knob in data
    ps = read_proposals(out)
    assert len(ps.proposals) == 1 and ps.proposals[0].plan.rho == pytest.approx(data["rho"])


def test_plan_table() -> None:
    res = runner.invoke(app, ["plan", "-m", "qwen2.5-7b", "-r", "prm", "--rho", "0.45", "--budget", "1e18"])
    assert res.exit_code == 0, res.output
    assert "reward" in res.stdout and "num_iterations" in res.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["plan", "-m", "gpt-5", "-r", "sparse", "--rho", "0.5", "--budget", "1e16"], "model"),
        (["plan", "-m", "tiny-s", "-r", "magic", "--rho", "0.5", "--budget", "1e16"], "reward"),
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "1.5", "--budget", "1e16"], "rho"),
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0", "--budget", "1e16"], "rho"),
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.5", "--budget", "-1e16"], "budget"),
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.5", "--budget", "0"], "budget"),
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.5", "--budget", "lots"], "budget"),
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.5", "--budget", "nan"], "budget"),
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.5", "--budget", "inf"], "budget"),
        # A typo'd exponent compiled a plan of ~1e297 prompts and exited 0.
        (["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.5", "--budget", "1e180"], "budget: 1e+180 FLOPs is beyond"),
        (["plan", "-m", "qwen2.5-7b", "-r", "prm", "--rho", "0.3", "--budget", "1e13"], "budget"),
        (["flops", "-m", "nope"], "model"),
        (["plan", "-m", "qwen2.5-math-prm-7b", "-r", "sparse", "--rho", "0.5", "--budget", "1e17"], "model"),
        # A tiny PRM's 256-token context once made this a complaint about --completion-len.
        (["plan", "-m", "tiny-prm-s", "-r", "sparse", "--rho", "0.5", "--budget", "1e11"], "model"),
        (["plan", "-m", "qwen2.5-1.5b", "-r", "sparse", "--rho", "0.5", "--budget", "1e3"], "budget"),
        (["plan", "-m", "qwen2.5-1.5b", "-r", "sparse", "--rho", "0.5", "--budget", "1e17",
          "--prompt-len", "30000", "--completion-len", "30000"], "completion-len"),
    ],
)
def test_bad_input_one_line_naming_field(args: list[str], field: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}")


def test_plan_out_not_written_on_error(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "2", "--budget", "1e12", "--out", str(out)])
    assert res.exit_code == 2 and not out.exists()


def test_help_is_fast_and_lazy() -> None:
    import subprocess
    import sys
    import time

    t0 = time.perf_counter()
    code = "import sys, planner.cli; assert 'torch' not in sys.modules and 'trl' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert time.perf_counter() - t0 < 5


def test_plan_out_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    base = ["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.7", "--budget", "1e12", "--out"]
    for bad in (tmp_path, tmp_path / "afile" / "p.json"):
        res = runner.invoke(app, [*base, str(bad)])
        assert res.exit_code == 2 and res.stderr.startswith("error: out:"), res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # no stray temporary


def test_written_files_are_readable_by_others(tmp_path: Path) -> None:
    import os

    old = os.umask(0o022)
    try:
        out = tmp_path / "p.json"
        assert runner.invoke(app, ["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.7", "--budget", "1e12",
                                   "--out", str(out)]).exit_code == 0
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600


def test_flops_beyond_the_context_is_counted_with_a_note() -> None:
    res = runner.invoke(app, ["flops", "-m", "qwen2.5-1.5b", "--seq", "100000", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["forward"] > 0
    assert "exceed qwen2.5-1.5b's context of 32768" in res.stderr


@pytest.mark.parametrize(("model", "seq"), [("tiny-s", 256), ("qwen2.5-1.5b", 1024)])
def test_flops_default_length_fits_the_model(model: str, seq: int) -> None:
    # 1024 tokens everywhere made the bare `planner flops -m tiny-s` warn about its own default.
    res = runner.invoke(app, ["flops", "-m", model, "--json"])
    assert res.exit_code == 0 and res.stderr == ""
    assert json.loads(res.stdout)["seq"] == seq


@pytest.mark.parametrize(("flag", "field"), [("--prompt-len", "prompt-len"), ("--completion-len", "completion-len")])
def test_plan_beyond_the_context_names_the_length_that_overflows(flag: str, field: str) -> None:
    res = runner.invoke(app, ["plan", "--model", "qwen2.5-1.5b", "--reward", "sparse", "--rho", "0.5",
                              "--budget", "1e16", flag, "100000000"])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {field}: prompt + completion = ")
    assert "exceed qwen2.5-1.5b's context of 32768" in res.stderr


def test_a_reward_models_train_pass_has_no_lm_head() -> None:
    """A reward model has a score head, no LM head: its FLOPs cannot depend on the vocabulary
    (the backward counted a phantom 2dV head per position, 7% of a skywork-prm step)."""
    import dataclasses

    from planner.accountant import LoRA, forward_flops, train_pass_flops
    from planner.registry import get_model

    for name in ("skywork-prm-1.5b", "qwen2.5-math-prm-7b"):
        prm = get_model(name)
        wide = dataclasses.replace(prm, vocab_size=2 * prm.vocab_size)
        lora = LoRA(16, ("q_proj", "v_proj"))
        assert forward_flops(prm, 1, 1024) == forward_flops(wide, 1, 1024)
        assert train_pass_flops(prm, 1, 1024, lora) == train_pass_flops(wide, 1, 1024, lora)


def test_flops_train_step_recomputes_the_body_unless_told_not_to() -> None:
    """TRL checkpoints activations by default, so the default step carries the recompute
    (one more body forward); --no-checkpointing drops it."""
    from planner.accountant import forward_flops, lm_head_flops_per_token
    from planner.registry import get_model

    on = json.loads(runner.invoke(app, ["flops", "-m", "qwen2.5-1.5b", "--seq", "768", "--json"]).stdout)
    off = json.loads(runner.invoke(app, ["flops", "-m", "qwen2.5-1.5b", "--seq", "768", "--json",
                                         "--no-checkpointing"]).stdout)
    assert on["gradient_checkpointing"] is True and off["gradient_checkpointing"] is False
    arch = get_model("qwen2.5-1.5b")
    body = on["forward_lora"] - 768 * lm_head_flops_per_token(arch)
    assert on["train_step"] - off["train_step"] == pytest.approx(body, rel=0.05)  # less the early stop
    assert off["train_step"] > 2 * forward_flops(arch, 1, 768)
