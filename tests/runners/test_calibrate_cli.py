"""``runners calibrate`` through typer's CliRunner: fit the stored real campaign, write a
world that loads and carries the fit, and refuse bad input without writing anything."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runners.cli import app
from runners.sim.world import load_world

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = ROOT / "reports" / "tiny-campaign" / "data"
runner = CliRunner()


def test_calibrate_writes_a_world_that_carries_the_shipped_fit(tmp_path: Path) -> None:
    out = tmp_path / "fitted.toml"
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "tiny-s" in res.output and "tiny-m" in res.output and f"wrote {out}" in res.output
    fitted, shipped = load_world(out), load_world("paper")
    for model in ("tiny-s", "tiny-m"):  # paper.toml's entries are this fit, rounded
        for t in ("native", "pass1", "judge"):
            got, ref = fitted.capacity(model, t), shipped.capacity(model, t)
            assert got.base == pytest.approx(ref.base, abs=6e-4), (model, t)
            assert got.ceiling == pytest.approx(ref.ceiling, abs=6e-4), (model, t)
            assert got.scale == pytest.approx(ref.scale, rel=2e-3), (model, t)
    # everything else is paper.toml unchanged: the Qwen policies, tiny-l, the reward constants
    raw, ref_raw = (tomllib.loads(p.read_text()) for p in (out, ROOT / "configs" / "worlds" / "paper.toml"))
    assert raw["rewards"] == ref_raw["rewards"] and raw["noise"] == ref_raw["noise"]
    assert raw["world"]["name"] == "fitted" and raw["world"]["sources"] == ref_raw["world"]["sources"]
    for model in ("qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "tiny-l"):
        assert raw["models"][model] == ref_raw["models"][model]
    assert "runners calibrate" in raw["models"]["tiny-s"]["notes"]
    # and the sim runs on it
    res = runner.invoke(app, ["truth", "--world", str(out), "--model", "tiny-m", "--reward", "sparse",
                              "--budget", "5e11", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["world"] == "fitted"  # named after the file: records say which world


def test_calibrate_one_model_prints_without_writing(tmp_path: Path) -> None:
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--models", "tiny-m"])
    assert res.exit_code == 0, res.output
    assert "tiny-m" in res.output and "tiny-s" not in res.output and "wrote" not in res.output


@pytest.mark.parametrize(("args", "message"), [
    (["--models", "qwen2.5-7b"], "models: no real runs of 'qwen2.5-7b'"),
    (["--delta", "0"], "delta: must be in (0, 1)"),
    (["--out", "{tmp}/w.json"], "out: "),
    (["--world", "nowhere"], "world: no world file 'nowhere'"),
])
def test_calibrate_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and len(res.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_calibrate_names_the_store_for_its_runs_folder(tmp_path: Path) -> None:
    """DIR/runs (a slip of the shell's completion) read as a store without runs, and the error
    said to run `runners execute ... --engine trl` first: runs that are there."""
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN / "runs"), "--models", "tiny-m"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.strip() == (f"error: data: {str(CAMPAIGN / 'runs')!r} is a pilot store's runs/ folder; "
                                  f"pass the store itself, {str(CAMPAIGN)!r}")


def test_calibrate_refuses_a_store_without_real_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(CAMPAIGN, store)
    for f in (store / "runs").glob("tiny-m.*"):
        f.unlink()
    for f in sorted((store / "runs").glob("tiny-s.*"))[2:]:
        f.unlink()
    res = runner.invoke(app, ["calibrate", "--data", str(store)])
    assert res.exit_code == 2 and "models: 'tiny-s' has 2 real runs; at least 3" in res.output
    assert res.output.rstrip().endswith("run more of it")  # no other model to fit instead
    shutil.copytree(CAMPAIGN / "runs", store / "runs", dirs_exist_ok=True,
                    ignore=lambda _d, names: [n for n in names if n.startswith("tiny-s.")])
    res = runner.invoke(app, ["calibrate", "--data", str(store)])  # tiny-m back: the fix names it
    assert res.exit_code == 2 and res.output.rstrip().endswith("fit the others alone: --models tiny-m")
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["calibrate", "--data", str(empty)])
    assert res.exit_code == 2 and "data: no real runs" in res.output


def test_calibrate_rewrites_any_spelling_of_the_tables(tmp_path: Path) -> None:
    """Quoted or commented headers are the same tables: replaced, not duplicated; renamed."""
    text = (ROOT / "configs" / "worlds" / "paper.toml").read_text()
    text = text.replace("[models.tiny-s]", '[ models."tiny-s" ]  # the small one')
    text = text.replace("[world]", "[world]  # header", 1)
    src = tmp_path / "odd.toml"
    src.write_text(text)
    out = tmp_path / "mine.toml"
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--world", str(src), "--out", str(out)])
    assert res.exit_code == 0, res.output
    world = load_world(out)
    assert world.name == "mine"
    assert world.capacity("tiny-s", "native").base == pytest.approx(load_world("paper").capacity("tiny-s", "native").base,
                                                                     abs=6e-4)


def test_calibrate_replaces_a_policy_written_as_sub_tables(tmp_path: Path) -> None:
    """[models.tiny-m.native] is the same policy's table: left behind, it redefined the new
    [models.tiny-m] and the rewrite did not load."""
    text = (ROOT / "configs" / "worlds" / "paper.toml").read_text()
    old = "native = { base = 0.510, ceiling = 0.975, scale = 22390.0 }\n"
    assert old in text
    text = text.replace(old, "").replace(
        "[models.tiny-l]", "[models.tiny-m.native]\nbase = 0.510\nceiling = 0.975\nscale = 22390.0\n\n[models.tiny-l]")
    src = tmp_path / "sub.toml"
    src.write_text(text)
    assert load_world(src).capacity("tiny-m", "native").base == pytest.approx(0.510)
    out = tmp_path / "mine.toml"
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--world", str(src), "--models", "tiny-m",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "runners calibrate" in tomllib.loads(out.read_text())["models"]["tiny-m"]["notes"]


def test_calibrate_refuses_a_shipped_world_name_and_says_so(tmp_path: Path) -> None:
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--out", str(tmp_path / "paper.toml")])
    assert res.exit_code == 2 and "'paper' is a shipped world's name" in res.output
    assert list(tmp_path.iterdir()) == []


def test_calibrate_reports_corrupt_records_and_fits_the_rest(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(CAMPAIGN, store)
    (store / "runs" / "garbage.parquet").write_bytes(b"not parquet")
    res = runner.invoke(app, ["calibrate", "--data", str(store), "--models", "tiny-m"])
    assert res.exit_code == 0, res.output
    assert "corrupt record skipped:" in res.output and "garbage.parquet" in res.output and "tiny-m" in res.output
    assert (store / "runs" / "garbage.parquet").exists()  # left for the user, not deleted


def test_calibrate_warns_when_no_run_measures_the_native_base(tmp_path: Path) -> None:
    """Runs of partial-credit rewards only: the base is the world's lift mapped back, not a
    measurement (the tiny PRM's runs alone give tiny-m 0.22 where its answer rate is 0.51)."""
    data = tmp_path / "prm-only"
    (data / "runs").mkdir(parents=True)
    for f in (CAMPAIGN / "runs").glob("tiny-m.prm.*.parquet"):
        shutil.copy(f, data / "runs" / f.name)
    res = runner.invoke(app, ["calibrate", "--data", str(data), "--models", "tiny-m"])
    assert res.exit_code == 0, res.output
    assert "warning: tiny-m: every run uses a partial-credit reward (prm)" in " ".join(res.output.split())
    full = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--models", "tiny-m"])
    assert full.exit_code == 0 and "partial-credit" not in full.output


def test_calibrate_keeps_an_existing_out_file_unless_forced(tmp_path: Path) -> None:
    """A world file already at --out (hand-edited, or the world of some store's records) is
    not replaced silently: a one-line refusal before any fitting, and --force replaces it."""
    out = tmp_path / "mine.toml"
    out.write_text("# my hand-edited world\n")
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--models", "tiny-m", "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "out: " in res.output and "--force" in res.output and len(res.output.strip().splitlines()) == 1
    assert out.read_text() == "# my hand-edited world\n"
    res = runner.invoke(app, ["calibrate", "--data", str(CAMPAIGN), "--models", "tiny-m", "--out", str(out),
                              "--force"])
    assert res.exit_code == 0, res.output
    assert load_world(out).name == "mine"
