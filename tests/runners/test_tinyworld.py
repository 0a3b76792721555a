"""The quick-pretrained tiny world: policy, PRMs, PRM reward systems and the three targets."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from planner.errors import ConfigError
from planner.registry import get_model
from runners.rewards import build_reward_system
from runners.tinyworld.evaluate import evaluate_targets, generate, success
from runners.tinyworld.pretrain import ensure_policy, ensure_prm
from runners.tinyworld.task import grade, make_problems, reference_completion, sample_solution

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _one_thread():  # type: ignore[no-untyped-def]
    # Tiny models: spinning OpenMP threads on a shared CPU make generation several-fold slower.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _policy(root: Path):  # type: ignore[no-untyped-def]
    from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

    path = ensure_policy("tiny-s", quick=True, cache_dir=root)
    # Attention choice is the loader's (not saved in config.json); eager is FLOP-countable.
    model = Qwen2ForCausalLM.from_pretrained(path, attn_implementation="eager")
    return model, PreTrainedTokenizerFast.from_pretrained(path)


def test_policy_matches_registry_and_is_cached(tiny_world_cache: Path) -> None:
    path = ensure_policy("tiny-s", quick=True, cache_dir=tiny_world_cache)
    assert ensure_policy("tiny-s", quick=True, cache_dir=tiny_world_cache) == path  # reused
    model, tok = _policy(tiny_world_cache)
    arch = get_model("tiny-s")
    assert model.num_parameters() == arch.num_parameters
    assert (model.config.bos_token_id, model.config.pad_token_id) == (tok.bos_token_id, tok.pad_token_id)
    assert tok.eos_token_id == model.generation_config.eos_token_id
    meta = json.loads((path / "meta.json").read_text())
    assert meta["quick"] and meta["train_seconds"] > 0


def test_quick_policy_learned_the_task_but_not_perfectly(tiny_world_cache: Path) -> None:
    model, tok = _policy(tiny_world_cache)
    probs = make_problems("heldout", 128, 5)
    greedy = generate(model, tok, [p.prompt for p in probs], greedy=True)
    formed = sum(grade(p, c[0]).well_formed for p, c in zip(probs, greedy, strict=True)) / len(probs)
    rate = success(probs, greedy)
    print(f"quick tiny-s: well-formed {formed:.2f}, greedy success {rate:.3f}")
    assert formed > 0.8  # it writes worked solutions in the task's format
    assert 0.1 < rate < 0.9  # succeeds sometimes, far from always


def test_generation_is_paired_by_seed(tiny_world_cache: Path) -> None:
    model, tok = _policy(tiny_world_cache)
    prompts = [p.prompt for p in make_problems("heldout", 16, 0)]
    torch.manual_seed(999)
    a = generate(model, tok, prompts, greedy=False, samples=2, seed=3)
    state = torch.random.get_rng_state()
    b = generate(model, tok, prompts, greedy=False, samples=2, seed=3)
    assert a == b and torch.equal(state, torch.random.get_rng_state())  # caller RNG untouched
    assert a != generate(model, tok, prompts, greedy=False, samples=2, seed=4)


def test_prms_rank_correct_above_flawed_and_are_metered(tiny_world_cache: Path) -> None:
    probs = make_problems("heldout", 200, 11)
    rng = random.Random(0)
    flawed = [sample_solution(p, rng) for p in probs]
    bad = [(p, c) for p, c in zip(probs, flawed, strict=True) if not grade(p, c).answer_correct]
    aucs = {}
    for name, scorer in (("prm", "tiny-prm"), ("proxy-prm", "tiny-prm-s")):
        path = ensure_prm(scorer, quick=True, cache_dir=tiny_world_cache)  # type: ignore[arg-type]
        rs = build_reward_system(name, "tiny", scorer_path=path)
        assert rs.scorer is not None and rs.scorer_name == scorer
        good_s = rs([p.prompt for p in probs], [reference_completion(p) for p in probs])
        bad_s = rs([p.prompt for p, _ in bad], [c for _, c in bad])
        assert all(0.0 <= s <= 1.0 for s in good_s + bad_s)
        # AUC: chance a correct solution outscores a flawed one (0.5 = no signal).
        aucs[name] = sum(g > b for g in good_s for b in bad_s) / (len(good_s) * len(bad_s))
        # Metering: one forward per call here (batch <= 256), padded length recorded.
        assert [b for b, _ in rs.scored] == [len(probs), len(bad)]
        assert all(t >= 2 + 6 + 6 for _, t in rs.scored)  # <bos> Q:d+d\n, a 2-op solution, <eos>
        assert len(rs.calls) == 2
        meta = json.loads((path / "meta.json").read_text())
        assert meta["final_loss"] < meta["initial_loss"]  # training moved the scorer
    print(f"quick PRMs, AUC correct-vs-flawed: {aucs}")
    # Quick PRMs are weak (full ones reach ~0.99 step accuracy, see docs/tinyworld.md),
    # but a scorer trained on inverted or shuffled labels would sit at or below 0.5.
    assert aucs["prm"] > 0.52


def test_prm_scores_each_line_and_reduces_with_min(tiny_world_cache: Path) -> None:
    from runners.rewards.prm import load_prm, tiny_step_scores

    path = ensure_prm("tiny-prm", quick=True, cache_dir=tiny_world_cache)
    model = load_prm(path, get_model("tiny-prm"))
    p = make_problems("heldout", 1, 0)[0]
    steps = tiny_step_scores(model, [p.prompt], [reference_completion(p)], [])[0]
    assert len(steps) == p.num_ops + 1
    rs = build_reward_system("prm", "tiny", scorer_path=path)
    assert rs([p.prompt], [reference_completion(p)])[0] == pytest.approx(min(steps), abs=1e-6)


def test_evaluate_targets_are_paired_and_unbilled(tiny_world_cache: Path) -> None:
    model, tok = _policy(tiny_world_cache)
    path = ensure_prm("tiny-prm", quick=True, cache_dir=tiny_world_cache)
    rs = build_reward_system("prm", "tiny", scorer_path=path)
    a = evaluate_targets(model, tok, rs, n=32, seed=7)
    b = evaluate_targets(model, tok, rs, n=32, seed=7)
    assert a == b and set(a) == {"native", "pass1", "judge"}
    assert all(0.0 <= v <= 1.0 for v in a.values())
    assert rs.scored == [] and rs.calls == []  # evaluation is not billed to the run
    sparse = evaluate_targets(model, tok, build_reward_system("sparse", "tiny"), n=32, seed=7)
    assert (sparse["pass1"], sparse["judge"]) == (a["pass1"], a["judge"])  # reward-independent


def test_pretrain_cli_reports_the_cached_base(tiny_world_cache: Path) -> None:
    from typer.testing import CliRunner

    from runners.cli import app

    res = CliRunner().invoke(app, ["pretrain", "--model", "tiny-s", "--quick", "--cache-dir",
                                   str(tiny_world_cache), "--n", "16"])
    assert res.exit_code == 0, res.output
    assert "tiny-s" in res.output and "greedy" in res.output and "tiny-prm-s" in res.output
    bad = CliRunner().invoke(app, ["pretrain", "--model", "qwen2.5-3b", "--quick"])
    assert bad.exit_code == 2 and "model" in bad.output and "\n" not in bad.output.strip()


def test_sft_is_deterministic_by_seed_and_caches_atomically(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from safetensors.torch import load_file

    from runners.tinyworld import pretrain
    from runners.tinyworld.pretrain import Recipe

    tiny = {("policy", True): Recipe(steps=3, batch_size=4, warmup=1),
            ("prm", True): Recipe(steps=3, batch_size=4, warmup=1, corrupt=0.5)}
    monkeypatch.setattr(pretrain, "_BASE", {**pretrain._BASE, **tiny})
    monkeypatch.setattr(pretrain, "_OVERRIDES", {})
    a = ensure_policy("tiny-s", quick=True, seed=3, cache_dir=tmp_path / "a")
    b = ensure_policy("tiny-s", quick=True, seed=3, cache_dir=tmp_path / "b")
    c = ensure_policy("tiny-s", quick=True, seed=4, cache_dir=tmp_path / "a")
    wa, wb, wc = (load_file(p / "model.safetensors") for p in (a, b, c))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # same seed: bit-identical
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)  # another seed: another model
    assert a.name == b.name and a.name != c.name
    assert [p.name for p in (tmp_path / "a").iterdir() if p.name.startswith(".")] == []  # no temp left
    prm = ensure_prm("tiny-prm-s", quick=True, seed=3, cache_dir=tmp_path / "a")
    assert json.loads((prm / "meta.json").read_text())["recipe"]["steps"] == 3
    with pytest.raises(ConfigError, match="model"):
        ensure_policy("tiny-prm", quick=True, cache_dir=tmp_path)


class _Scripted(torch.nn.Module):
    """A "policy" whose generate appends fixed completion ids to every prompt."""

    def __init__(self, completion: list[int]) -> None:
        super().__init__()
        self.completion = completion

    def generate(self, input_ids: torch.Tensor, **_: object) -> torch.Tensor:
        tail = torch.tensor([self.completion] * input_ids.shape[0], dtype=input_ids.dtype)
        return torch.cat([input_ids, tail], dim=1)


def test_generate_keeps_a_stray_special_token_even_with_a_reloaded_tokenizer(tmp_path: Path) -> None:
    """A saved tokenizer reloads as plain PreTrainedTokenizerFast, whose skip-special decode
    would drop the <pad> and hand the grade "A:9"; the evaluation must not score that correct."""
    from transformers import PreTrainedTokenizerFast

    from runners.tinyworld.task import problem_from_prompt
    from runners.tinyworld.tokenizer import build_tokenizer, char_ids, special_id

    build_tokenizer().save_pretrained(tmp_path)
    tok = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    p = problem_from_prompt("Q:3+4*2-5\n")
    pad, eos = special_id("<pad>"), special_id("<eos>")
    stray = _Scripted([*char_ids("3+4=7\n7*2=4\n4-5=9\nA:"), pad, *char_ids("9"), eos, pad])
    [[text]] = generate(stray, tok, [p.prompt], greedy=True)
    assert text == "3+4=7\n7*2=4\n4-5=9\nA:<pad>9" and success([p], [[text]]) == 0.0
    clean = _Scripted([*char_ids("3+4=7\n7*2=4\n4-5=9\nA:9"), eos, pad])
    assert success([p], generate(clean, tok, [p.prompt], greedy=True)) == 1.0


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"n": -3}, {"samples": 0}])
def test_empty_evaluations_are_refused_naming_the_field(kwargs: dict[str, int]) -> None:
    """n=0 used to reach sum(rewards) / len(rewards) and raise ZeroDivisionError after the
    model had generated nothing; policy_report reported 0.0 success on no problems."""
    from runners.tinyworld.evaluate import policy_report

    field = "eval_samples" if "n" in kwargs else "samples"
    with pytest.raises(ConfigError, match=rf"^{field}: .* set {field} >= 1") as info:
        evaluate_targets(None, None, build_reward_system("sparse", "tiny"), **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    pfield = "n" if "n" in kwargs else "samples"
    with pytest.raises(ConfigError, match=rf"^{pfield}: .* set {pfield} >= 1"):
        policy_report(None, None, **kwargs)  # type: ignore[arg-type]


def test_pretraining_hides_transformers_bars_and_restores_them() -> None:
    # "Writing model shards" and "Loading weights" bars tore the pretraining bar in every log.
    from transformers.utils import logging as hf_logging

    from runners.tinyworld.pretrain import no_transformers_bars

    hf_logging.enable_progress_bar()
    with no_transformers_bars():
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()  # a library caller's setting is its own
    hf_logging.disable_progress_bar()
    with no_transformers_bars():
        pass
    assert not hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
