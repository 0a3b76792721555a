"""The trl engine end to end on CPU: `planner plan` -> `runners execute --engine trl` with the
quick-pretrained tiny world, for a low and a high rho; plus the failure path."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planner.cli import app as planner_app
from planner.compiler import compile_plan
from planner.proposals import make_proposal, read_proposals, write_proposals
from planner.schema import RunRecord
from runners.cli import app
from runners.store import PilotStore

RUNNER = CliRunner()
# The guard lands within half a prompt group of the budget, so the budget buys 60-70 groups
# (< 0.8% each side) at both rhos.
BUDGET = 4e10
RHOS = (0.2, 0.85)  # search-heavy (G=37 generated, K=4 kept) and update-heavy (mu=2)


@pytest.fixture(scope="module")
def records(tiny_world_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> list[RunRecord]:
    root = tmp_path_factory.mktemp("trl-e2e")
    plans = []
    for rho in RHOS:
        out = root / f"p{rho}.json"
        res = RUNNER.invoke(planner_app, ["plan", "--model", "tiny-s", "--reward", "sparse", "--rho", str(rho),
                                          "--budget", str(BUDGET), "--out", str(out)])
        assert res.exit_code == 0, res.output
        plans.extend(read_proposals(out).proposals)
    both = write_proposals(root / "p.json", plans)
    res = RUNNER.invoke(app, [
        "execute", str(both), "--data", str(root / "data"), "--engine", "trl", "--retries", "0",
        "-o", "quick=true", "-o", f"cache_dir={tiny_world_cache}", "-o", "eval_samples=16", "-o", "threads=1",
    ])
    assert res.exit_code == 0, res.stdout + res.stderr
    recs = PilotStore(root / "data").records(status=None)
    return sorted(recs, key=lambda r: r.rho_planned)


def test_both_runs_ok_on_budget_and_on_rho(records: list[RunRecord]) -> None:
    assert [r.status for r in records] == ["ok", "ok"], [r.error for r in records]
    for r in records:
        f = r.card.flops
        assert r.engine == "trl" and r.simulated is False
        assert abs(f.total - BUDGET) <= 0.02 * BUDGET, f
        assert abs(r.card.rho - r.plan.rho) <= 0.05, (r.card.rho, r.plan.rho)
        assert f.reward == 0.0 and f.search > 0 and f.learning > 0  # rule reward: no reward FLOPs
        assert r.card.stop_reason == "budget"  # type: ignore[attr-defined]
        # The adapter learned something: LoRA B starts at zero, so any update changes it.
        assert r.provenance["adapter_delta_norm"] > 0
        for t in ("native", "pass1", "judge"):
            for v in (getattr(r.metrics, t), getattr(r.metrics, f"{t}_base")):
                assert v is not None and 0.0 <= v <= 1.0
        walls = r.card.wall_s
        assert walls["search"] > 0 and walls["learning"] > 0 and walls["eval"] > 0
        assert walls["total"] >= walls["search"] + walls["learning"]
        assert r.card.software["trl"].startswith("1.16")
        assert r.card.software["race-planner"] == version("race-planner")  # which planner made it
    low, high = records
    # The two levers really ran: down-sampling (K < G) and reuse (old log-probs when mu > 1).
    assert low.plan.completions_kept < low.plan.completions_per_prompt and low.plan.num_iterations == 1
    assert "old_logprobs" not in low.card.passes  # type: ignore[attr-defined]
    assert high.plan.num_iterations > 1 and high.card.passes["old_logprobs"] > 0  # type: ignore[attr-defined]
    assert low.card.rho < 0.4 < 0.8 < high.card.rho


def _proposal(reward: str = "sparse") -> Any:
    return make_proposal(compile_plan("tiny-s", reward, 0.5, 5e9))


def test_a_crash_raises_run_failed_with_a_partial_card(tmp_path: Path) -> None:
    from runners.engines.trl import TrlEngine
    from runners.task import RunFailed

    (tmp_path / "missing").mkdir()  # exists (a missing path is refused up front), holds no model
    (tmp_path / "missing" / "config.json").write_text("{}")  # (nor one without a config)
    engine = TrlEngine(policy_path=str(tmp_path / "missing"))
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RunFailed) as info:
            engine.run(_proposal(), 0)
        # A tiny run on CPU takes one thread (it fails after that), then gives back the
        # process's count: the race refits its surrogate in this process next.
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert info.value.kind == "error" and "missing" in str(info.value)
    assert info.value.card is not None and info.value.card.flops.total == 0.0


def test_nan_loss_is_a_failure_of_kind_nan(tiny_world_cache: Path) -> None:
    from runners.engines.trl import TrlEngine
    from runners.task import RunFailed, _partial_card

    engine = TrlEngine(quick=True, cache_dir=tiny_world_cache, eval_samples=4, learning_rate=1e30)
    reports: list[dict[str, Any]] = []
    with pytest.raises(RunFailed) as info:
        engine.run(_proposal(), 0, lambda phase, f, b, i: reports.append({"phase": phase, "flops": f, "info": i}))
    assert info.value.kind == "nan", info.value
    card = info.value.card
    assert card is not None and 0 < card.flops.total < 5e9  # what ran before it blew up
    # A run killed outright (OOM, timeout) gets its card from the last progress report: the
    # split and rho too, not a bare total with rho 0.
    last = [r for r in reports if r["phase"] == "train" and r["info"].get("step")][-1]
    partial = _partial_card(last)
    assert partial.flops.total == pytest.approx(last["flops"]) and min(partial.flops.search, partial.flops.learning) > 0
    assert partial.rho == pytest.approx(last["info"]["rho"])


def test_a_micro_batch_count_that_does_not_split_the_round_runs_with_the_next_that_does(
    tiny_world_cache: Path,
) -> None:
    """3 of a round of 152 generated and 64 kept completions: TRL steps through it in 4
    equal micro-batches (a race stopped there, mid-way); one optimizer step per round either
    way, so the run trains and meters what one micro-batch does."""
    from runners.engines.trl import TrlEngine
    from runners.grpo.run import micro_batch_steps

    prop = _proposal()
    assert micro_batch_steps(prop.plan, 3) == 4
    recs = {m: TrlEngine(quick=True, cache_dir=tiny_world_cache, eval_samples=4, micro_batches=m).run(prop, 0)
            for m in (1, 3)}
    for m, rec in recs.items():
        assert rec.status == "ok", rec.error
        assert rec.provenance["micro_batches"] == {1: 1, 3: 4}[m]  # the count used, recorded
        assert abs(rec.card.flops.total - 5e9) <= 0.02 * 5e9 and rec.provenance["adapter_delta_norm"] > 0
    # Micro-batching moves no FLOP: the same rounds of the same plan ran.
    one, three = recs[1].card.flops, recs[3].card.flops
    assert three.search == pytest.approx(one.search, rel=0.02) and three.learning == pytest.approx(one.learning, rel=0.02)


def test_unknown_options_and_devices_are_one_line_errors() -> None:
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    with pytest.raises(ConfigError, match="unknown option 'lr'"):
        TrlEngine(lr=1e-3)
    for device in ("tpu", "cudaXYZ", 1):
        with pytest.raises(ConfigError, match="device must be cpu, cuda or cuda:N"):
            TrlEngine(device=device)
    with pytest.raises(ConfigError, match="'cache_dir' must be a folder path"):
        TrlEngine(cache_dir=5)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "64"])
def test_eval_samples_below_one_is_refused_when_the_engine_is_built(bad: object) -> None:
    """eval_samples=0 would reach evaluate_targets' mean over no rewards after the policy
    (and PRM) had loaded; the engine refuses it with the option's name and the fix."""
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    with pytest.raises(ConfigError, match="option 'eval_samples' must be a positive integer") as info:
        TrlEngine(quick=True, eval_samples=bad)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("key", "value", "most"), [("threads", 100_000, "1,024"), ("eval_samples", 10**12, "100,000")])
def test_an_absurd_thread_or_sample_count_is_refused_when_the_engine_is_built(key: str, value: int, most: str) -> None:
    """threads=100000 crashed every run on a Rust panic (and each was retried);
    eval_samples=1e12 built problems until memory ran out."""
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    with pytest.raises(ConfigError, match=f"option '{key}' is at most {most}, got"):
        TrlEngine(quick=True, **{key: value})
    TrlEngine(quick=True, **{key: 64})


def test_a_gpu_torch_cannot_reach_stops_the_run_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run of the race would fail the same way (CPU-only torch, or cuda:7 on a
    two-GPU node): bad input, raised before any training, not a failed run retried."""
    import torch

    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    with pytest.raises(ConfigError, match=r"device: cuda:7 was asked for, but torch here sees 2 GPUs"):
        TrlEngine(device="cuda:7").run(_proposal(), 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ConfigError, match=r"sees none: torch .* is a CPU build; use --device cpu"):
        TrlEngine(device="cuda").run(_proposal(), 0)


def test_runs_do_not_draw_transformers_bars_or_its_deprecation_warning() -> None:
    """Each run loads weights several times; those bars tore the race's live table."""
    import warnings

    from transformers.utils import logging as hf_logging

    from runners.grpo.run import _quiet_transformers

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            _quiet_transformers()
            assert not hf_logging.is_progress_bar_enabled()
            for name in ("is_gradient_checkpointing", "gradient_checkpointing_enable",
                         "gradient_checkpointing_disable"):
                warnings.warn(f"`{name}` is deprecated and will be removed in v6. Use ...", FutureWarning,
                              stacklevel=1)
            warnings.warn("another FutureWarning still shows", FutureWarning, stacklevel=1)
        assert [str(w.message) for w in seen] == ["another FutureWarning still shows"]
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()


def test_prepare_pretrains_missing_tiny_models_once_before_any_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import runners.tinyworld.pretrain as pretrain
    from runners.engines.trl import TrlEngine

    made: list[str] = []
    monkeypatch.setattr(pretrain, "ensure_policy", lambda name, **kw: made.append(name))
    monkeypatch.setattr(pretrain, "ensure_prm", lambda name, **kw: made.append(name))
    eng = TrlEngine(quick=True, cache_dir=tmp_path)  # an empty cache
    eng.prepare([("tiny-s", "sparse"), ("tiny-s", "prm"), ("qwen2.5-1.5b", "prm")])
    assert made == ["tiny-s", "tiny-prm"]  # each once (tiny-s scores with tiny-prm); Qwen weights are not the tiny world's
    assert capsys.readouterr().err.count("pretraining ") == 2
    # A given policy replaces the policy only: the run still scores with the cached PRM,
    # so it is made here, before any run (and its weights known to the store's check).
    made.clear()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("{}")
    TrlEngine(quick=True, cache_dir=tmp_path, policy_path=str(tmp_path / "mine")).prepare([("tiny-s", "prm")])
    assert made == ["tiny-prm"]


def test_prepare_is_silent_when_the_cache_has_them(tiny_world_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runners.engines.trl import TrlEngine

    TrlEngine(quick=True, cache_dir=tiny_world_cache).prepare([("tiny-s", "prm"), ("tiny-s", "dense")])
    assert capsys.readouterr().err == ""


def test_training_reports_its_phase_before_the_first_step_ends() -> None:
    # A run that dies in the first round's generation died in training, not in the base evaluation.
    from planner.accountant import LoRA
    from planner.registry import get_model
    from runners.grpo.run import RunState, _Watch

    seen: list[str] = []
    state = RunState(policy=get_model("tiny-s"), lora=LoRA(8, ("q_proj",)), scorer=None)
    _Watch(state, [], 1e11, lambda phase, *_: seen.append(phase)).on_train_begin(None, None, None)
    assert seen == ["train"]


def test_prepare_warns_once_per_qwen_model_on_cpu_and_not_on_cuda(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runners.engines.trl import TrlEngine

    settings = [("qwen2.5-7b", "sparse"), ("qwen2.5-7b", "dense"), ("qwen2.5-1.5b", "sparse")]
    TrlEngine(cache_dir=tmp_path).prepare(settings)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("warning: qwen2.5-") for line in err)
    assert "7.6B parameters" in err[0] and "Qwen/Qwen2.5-7B" in err[0] and "--device cuda" in err[0]
    (tmp_path / "config.json").write_text("{}")
    TrlEngine(cache_dir=tmp_path, policy_path=str(tmp_path)).prepare(settings[:1])
    assert f"from {tmp_path}" in capsys.readouterr().err
    TrlEngine(device="cuda", cache_dir=tmp_path).prepare(settings)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("key", "value"), [
    ("policy_path", "/nonexistent"), ("scorer_path", "./prm-typo"), ("data_path", "Qwen/prompts"),
    ("eval_data", "~/no-such-eval"),
])
def test_a_missing_local_path_is_refused_before_any_run(key: str, value: str) -> None:
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    with pytest.raises(ConfigError, match=f"option '{key}': no such file or directory") as info:
        TrlEngine(**{key: value})
    assert "\n" not in str(info.value)
    TrlEngine(policy_path="Qwen/Qwen2.5-1.5B-Instruct")  # a Hub id is not a local path


@pytest.mark.parametrize("key", ["policy_path", "scorer_path"])
def test_a_model_path_that_is_a_file_is_refused_before_any_run(key: str, tmp_path: Path) -> None:
    # It passed as "exists", then a run spent a minute on Hub lookups for the file's name.
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    f = tmp_path / "model.safetensors"
    f.write_bytes(b"x")
    with pytest.raises(ConfigError, match=f"option '{key}': .* is a file; give the model's folder"):
        TrlEngine(**{key: str(f)})
    (tmp_path / "config.json").write_text("{}")
    TrlEngine(**{key: str(tmp_path)})  # a model folder: its shape is checked when a run loads it


@pytest.mark.parametrize("key", ["policy_path", "scorer_path"])
def test_a_model_folder_without_config_json_is_refused_before_any_run(key: str, tmp_path: Path) -> None:
    """A folder that holds no model (a typo'd parent, the wrong cache entry) passed as "exists";
    each run then failed on transformers' "Unrecognized model", was retried and left a
    failed record, exit 1, instead of one line and exit 2."""
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    (tmp_path / "weights.safetensors").write_bytes(b"x")
    with pytest.raises(ConfigError, match=f"option '{key}': .* has no config.json; give the model's folder") as info:
        TrlEngine(**{key: str(tmp_path)})
    assert "\n" not in str(info.value)


def test_run_threads_defaults_to_one_for_tiny_policies_on_cpu_only() -> None:
    from planner.registry import get_model
    from runners.grpo.run import run_threads

    tiny, qwen = get_model("tiny-s"), get_model("qwen2.5-1.5b")
    assert run_threads({}, tiny, "cpu") == 1
    assert run_threads({"threads": 3}, tiny, "cpu") == 3
    assert run_threads({}, tiny, "cuda") is None
    assert run_threads({}, qwen, "cpu") is None


@pytest.mark.parametrize(("exc", "kind"), [
    (MemoryError(), "oom"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
    (RuntimeError("probability tensor contains either `inf`, `nan` or element < 0"), "nan"),
    (ValueError("learning_rate must be finite, got inf"), "error"),
    (KeyError("input_ids"), "error"),
])
def test_a_failures_kind_follows_its_type_not_only_its_words(exc: BaseException, kind: str) -> None:
    """A MemoryError was kind "error" (the docs say oom) and any message naming an inf was
    "nan"; the kind picks the retry advice a user reads."""
    from planner.schema import ComputeCard, FlopsSplit
    from runners.engines.trl import _raise_failed
    from runners.task import RunFailed

    card = ComputeCard(flops=FlopsSplit(search=0.0, learning=0.0, reward=0.0, total=0.0), rho=0.0)
    with pytest.raises(RunFailed) as info:
        _raise_failed(exc, card)
    assert info.value.kind == kind and info.value.card is card


def test_a_home_relative_path_is_used_as_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"~/x" passed the existence check (expanded) but reached the loaders unexpanded, where
    it failed as a malformed Hub id, the error the check is there to prevent."""
    from runners.engines.trl import TrlEngine

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "config.json").write_text("{}")
    (tmp_path / "cache").mkdir()
    engine = TrlEngine(policy_path="~/policy", cache_dir="~/cache")
    assert engine.opts["policy_path"] == str(tmp_path / "policy") and engine.cache_dir == tmp_path / "cache"
    assert TrlEngine(policy_path="Qwen/Qwen2.5-1.5B-Instruct").opts["policy_path"] == "Qwen/Qwen2.5-1.5B-Instruct"


def test_training_on_an_evaluation_set_is_refused(tmp_path: Path) -> None:
    """pass1 is scored on math500 and the test splits: training on them inflated it silently."""
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    with pytest.raises(ConfigError, match="option 'dataset' must be one of polaris, gsm8k, got 'math500'; math500 is"):
        TrlEngine(dataset="math500")
    (tmp_path / "test.jsonl").write_text("{}\n")
    with pytest.raises(ConfigError, match=r"option 'data_path': .*test\.jsonl is a test split"):
        TrlEngine(dataset="gsm8k", data_path=str(tmp_path / "test.jsonl"))
    (tmp_path / "train.jsonl").write_text("{}\n")
    TrlEngine(dataset="gsm8k", data_path=str(tmp_path / "train.jsonl"))


def test_runs_record_the_weights_the_engine_says_they_start_from(
    records: list[RunRecord], tiny_world_cache: Path, tmp_path: Path,
) -> None:
    from planner.registry import get_model, get_reward, scorer_for
    from runners.engines.trl import TrlEngine
    from runners.grpo.loading import weights_fingerprint
    from runners.tinyworld.pretrain import ensure_prm

    eng = TrlEngine(quick=True, cache_dir=tiny_world_cache)
    here = eng.start_weights("tiny-s", "sparse")
    assert str(here["policy_weights"]).startswith("sha256:") and here["scorer_weights"] is None
    for r in records:
        assert r.provenance["policy_weights"] == here["policy_weights"]
        assert r.provenance["scorer_weights"] is None  # a rule reward has no scorer
    scorer = scorer_for(get_reward("prm"), get_model("tiny-s"))
    assert scorer is not None
    prm = ensure_prm(scorer.name, quick=True, cache_dir=tiny_world_cache)  # type: ignore[arg-type]
    prm_weights = eng.start_weights("tiny-s", "prm")["scorer_weights"]
    assert str(prm_weights).startswith("sha256:") and prm_weights == weights_fingerprint(str(prm))
    # A given policy replaces the policy only: the PRM is still the cache's, and known.
    given = TrlEngine(quick=True, cache_dir=tiny_world_cache, policy_path=str(records[0].provenance["policy"]))
    assert given.start_weights("tiny-s", "prm") == {"policy_weights": here["policy_weights"],
                                                    "scorer_weights": prm_weights}
    # Nothing pretrained there: nothing to compare, and nothing trained to find out.
    empty = TrlEngine(quick=True, cache_dir=tmp_path / "cache")
    assert empty.start_weights("tiny-s", "prm") == {"policy_weights": None, "scorer_weights": None}
    assert not (tmp_path / "cache").exists()


def test_a_store_of_runs_from_other_weights_is_refused_before_any_run(
    records: list[RunRecord], tiny_world_cache: Path, tmp_path: Path,
) -> None:
    """Another machine's (or a rebuilt cache's) tiny-s draws other weights under the same
    cache name: its runs and these must not meet in one fit."""
    other = records[0].model_copy(update={"provenance": {**records[0].provenance, "policy_weights": "sha256:" + "0" * 64}})
    data = tmp_path / "data"
    PilotStore(data).write(other)
    props = write_proposals(tmp_path / "p.json", [make_proposal(compile_plan("tiny-s", "sparse", 0.5, BUDGET))])
    res = RUNNER.invoke(app, [
        "execute", str(props), "--data", str(data), "--engine", "trl", "--retries", "0",
        "-o", "quick=true", "-o", f"cache_dir={tiny_world_cache}", "-o", "eval_samples=16", "-o", "threads=1",
    ])
    assert res.exit_code == 2, res.stdout + res.stderr
    msg = res.stderr.strip()
    assert "\n" not in msg and other.run_id in msg and "started from other weights (sha256:000000000000)" in msg
    assert "use a separate --data directory" in msg
    assert [r.run_id for r in PilotStore(data).records(status=None)] == [other.run_id]  # nothing ran, nothing lost


def test_options_no_setting_reads_are_refused_before_any_pretraining(tmp_path: Path) -> None:
    """A tiny-world run trains on its own task, and a rule reward has no scorer: these
    options were recorded (keeping the store apart from default runs) and did nothing."""
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    (tmp_path / "prm").mkdir()
    (tmp_path / "prm" / "config.json").write_text("{}")
    cases = [({"dataset": "gsm8k"}, [("tiny-s", "sparse")], "'dataset' sets the prompts of qwen2.5 policies"),
             ({"eval_data": str(tmp_path)}, [("tiny-s", "prm")], "'eval_data' sets the prompts"),
             ({"scorer_path": str(tmp_path / "prm")}, [("tiny-s", "sparse"), ("tiny-s", "dense")],
              "'scorer_path' replaces a learned scorer .* sparse, dense score by rule")]
    for opts, settings, said in cases:
        with pytest.raises(ConfigError, match=said):
            TrlEngine(quick=True, cache_dir=tmp_path / "cache", **opts).prepare(settings)
    assert not (tmp_path / "cache").exists()  # refused before pretraining anything


def test_an_option_at_its_default_is_the_default_experiment() -> None:
    """The store compares engines' sources: eval_samples=64 on a quick run is the run made
    without it, and must not be refused as another experiment."""
    from runners.engines.trl import TrlEngine

    assert TrlEngine(quick=True, eval_samples=64, micro_batches=1).source["options"] is None
    assert TrlEngine(eval_samples=256, dataset="polaris").source["options"] is None
    assert TrlEngine(quick=True, eval_samples=256).source["options"] == {"eval_samples": 256}


def test_a_policy_checkpoint_of_another_mlp_width_is_refused(tmp_path: Path) -> None:
    """Hidden size, layers and vocabulary alike, a 4x wider MLP: the meter would bill the
    registry's tiny-s, about a third of what each token costs."""
    import dataclasses

    from planner.errors import ConfigError
    from planner.registry import get_model
    from runners.grpo.loading import load_policy, random_policy
    from runners.tinyworld.tokenizer import build_tokenizer

    tok = build_tokenizer()
    arch = get_model("tiny-s")
    wide = random_policy(dataclasses.replace(arch, intermediate_size=4 * arch.intermediate_size), tmp_path / "w",
                         tokenizer=tok)
    with pytest.raises(ConfigError, match=r"policy_path: .* has intermediate_size 768 \(tiny-s: 192\)"):
        load_policy(str(wide), arch, tok, device="cpu")
    same = random_policy(arch, tmp_path / "s", tokenizer=tok)
    assert load_policy(str(same), arch, tok, device="cpu").config.intermediate_size == 192


def test_a_run_longer_than_its_prompt_rows_cycles_through_them_to_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are capped (a 1e15 tiny-s run built 8.8M of them, gigabytes, before its first
    step); past the cap the trainer goes round them again and the guard still stops the
    run on its budget."""
    import runners.grpo.run as run_mod
    from planner.engine import load_engine
    from planner.registry import get_model
    from runners.grpo.loading import random_policy
    from runners.tinyworld.tokenizer import build_tokenizer

    monkeypatch.setattr(run_mod, "MAX_TRAIN_ROWS", 16)  # two rounds of 8 prompts; the plan runs 9
    path = random_policy(get_model("tiny-s"), tmp_path / "policy", tokenizer=build_tokenizer())
    engine = load_engine("trl", policy_path=str(path), eval_samples=4, threads=1)
    proposal = make_proposal(compile_plan("tiny-s", "sparse", 0.5, 3e10))
    assert proposal.plan.total_prompts > 4 * 16
    rec = engine.run(proposal, 0)
    assert rec.card.stop_reason == "budget"
    assert rec.card.flops.total == pytest.approx(proposal.plan.budget, rel=0.02)


def test_a_run_killed_in_its_final_evaluation_keeps_its_split(tmp_path: Path) -> None:
    """The final evaluation's report carries the split it trained: a run killed there (a
    timeout, an OOM in scoring) got a card with the total and search = learning = reward = 0."""
    from planner.engine import load_engine
    from planner.registry import get_model
    from runners.grpo.loading import random_policy
    from runners.task import _partial_card
    from runners.tinyworld.tokenizer import build_tokenizer

    path = random_policy(get_model("tiny-s"), tmp_path / "policy", tokenizer=build_tokenizer())
    engine = load_engine("trl", policy_path=str(path), eval_samples=4, threads=1)
    reports: list[dict[str, Any]] = []
    rec = engine.run(make_proposal(compile_plan("tiny-s", "sparse", 0.5, 1e10)), 0,
                     lambda phase, f, b, i: reports.append({"phase": phase, "flops": f, "info": i}))
    last = reports[-1]
    assert last["phase"] != "train" and last["flops"] == pytest.approx(rec.card.flops.total)
    card = _partial_card(last)
    assert card.flops.learning == pytest.approx(rec.card.flops.learning) and card.rho == pytest.approx(rec.card.rho)


def test_data_folders_without_the_files_a_run_reads_are_refused_before_any_run(tmp_path: Path) -> None:
    """A data_path folder without train.* failed only after the policy load, and an eval_data
    folder without math500/test.* after the policy load and the whole base pass1 on gsm8k."""
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    qwen = [("qwen2.5-1.5b", "sparse")]
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text("{}\n")
    with pytest.raises(ConfigError, match=r"option 'data_path': .*gsm8k has no train\.jsonl") as info:
        TrlEngine(dataset="gsm8k", data_path=str(tmp_path / "gsm8k"), policy_path="Qwen/x").prepare(qwen)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"option 'eval_data': .* has no math500/test\.jsonl;"):
        TrlEngine(eval_data=str(tmp_path), policy_path="Qwen/x").prepare(qwen)
    with pytest.raises(ConfigError, match=r"has no gsm8k/test\.jsonl or math500/test\.jsonl"):
        TrlEngine(eval_data=str(tmp_path / "gsm8k"), policy_path="Qwen/x").prepare(qwen)
    (tmp_path / "gsm8k" / "train.jsonl").write_text("{}\n")
    (tmp_path / "math500").mkdir()
    (tmp_path / "math500" / "test.parquet").write_bytes(b"")
    TrlEngine(dataset="gsm8k", data_path=str(tmp_path / "gsm8k"), eval_data=str(tmp_path),
              policy_path="Qwen/x").prepare(qwen)


def test_a_model_cache_that_is_a_file_is_refused_naming_where_it_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It failed when pretraining began, as "FILE: File exists; check the path", naming
    neither the option nor RACE_CACHE (`runners pretrain --cache-dir FILE` names its flag)."""
    from planner.errors import ConfigError
    from runners.engines.trl import TrlEngine

    f = tmp_path / "p.json"
    f.write_text("{}")
    with pytest.raises(ConfigError, match=r"option 'cache_dir': .*p\.json' is a file; give a directory"):
        TrlEngine(cache_dir=str(f))
    monkeypatch.setenv("RACE_CACHE", str(f))
    with pytest.raises(ConfigError, match=r"RACE_CACHE: .*p\.json' is a file; give a directory"):
        TrlEngine()
    TrlEngine(cache_dir=str(tmp_path))  # the option wins over the variable


def test_an_option_no_setting_reads_is_named_before_the_stores_own_check(tmp_path: Path) -> None:
    """On a store of earlier runs, `-o dataset=gsm8k` for tiny-world settings was refused as
    another experiment ("use a separate --data directory"): a user who did so was then told
    to drop the option, the fix that also kept the store."""
    from planner.schema import ComputeCard, FlopsSplit
    from runners.engines.trl import TrlEngine

    proposal = make_proposal(compile_plan("tiny-s", "sparse", 0.5, BUDGET))
    card = ComputeCard(flops=FlopsSplit(search=2e10, learning=2e10, reward=0.0, total=4e10), rho=0.5)
    engine = TrlEngine(eval_samples=32)
    rec = RunRecord.ok(proposal, 0, engine="trl", simulated=False, card=card,
                       metrics={"native": 0.3, "pass1": 0.1, "judge": 0.7}, wall_s=1.0,
                       provenance={"simulated": False, "engine": "trl", "device": "cpu", **engine.source})
    data = tmp_path / "data"
    PilotStore(data).write(rec)
    props = write_proposals(tmp_path / "p.json", [proposal])
    for argv in (["runners", "execute", str(props)],
                 ["planner", "race", "--budget", "4e12", "--engine", "trl", "--models", "tiny-s",
                  "--rewards", "sparse", "--max-runs", "1", "--quiet"]):
        res = RUNNER.invoke(planner_app if argv[0] == "planner" else app, [
            *argv[1:], "--data", str(data), "-o", "eval_samples=32", "-o", "dataset=gsm8k"])
        assert res.exit_code == 2, res.stdout + res.stderr
        msg = res.stderr.strip()
        assert "\n" not in msg and "option 'dataset' sets the prompts of qwen2.5 policies" in msg and "drop it" in msg
        assert [r.run_id for r in PilotStore(data).records(status=None)] == [rec.run_id]  # nothing lost


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU is here: cuda is no bad input")
def test_an_in_process_trl_race_refuses_cuda_before_pretraining(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The device was checked only as a run began: with an empty cache the race pretrained
    tiny-s for minutes (a PRM for nine more) and only then said there is no GPU."""
    import runners.tinyworld.pretrain as pretrain

    def no(*args: object, **kwargs: object) -> None:
        raise AssertionError("pretraining began before the device was checked")

    monkeypatch.setattr(pretrain, "ensure_policy", no)
    monkeypatch.setattr(pretrain, "ensure_prm", no)
    res = CliRunner().invoke(planner_app, ["race", "--budget", "5e11", "--pilot-budget", "1e11", "--engine", "trl",
                                           "--models", "tiny-s", "--rewards", "sparse", "--device", "cuda", "--quiet",
                                           "--data", str(tmp_path / "d"), "-o", f"cache_dir={tmp_path / 'cache'}"])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error: device: cuda was asked for"), res.stderr
    assert not (tmp_path / "d").exists() and not (tmp_path / "cache").exists()
