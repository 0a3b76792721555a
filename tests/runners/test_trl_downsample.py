"""Max-variance down-sampling: the subset rule (exhaustive check) and the TRL extension
keeping exactly that subset for advantages, old log-probs and the update."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.grpo.compat import check_trl_version
from runners.grpo.downsample import max_variance_indices, max_variance_subset


def _brute_force_best(rewards: list[float], k: int) -> float:
    return max(statistics.pvariance([rewards[i] for i in c]) for c in itertools.combinations(range(len(rewards)), k))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -1.0, 3.0]), min_size=1, max_size=9),
    st.integers(min_value=1, max_value=9),
)
def test_subset_has_the_largest_variance_of_all_subsets(rewards: list[float], k: int) -> None:
    k = min(k, len(rewards))
    keep = max_variance_subset(rewards, k)
    assert keep == sorted(set(keep)) and len(keep) == k
    got = statistics.pvariance([rewards[i] for i in keep])
    assert got == pytest.approx(_brute_force_best(rewards, k), abs=1e-9)


def test_binary_rewards_keep_both_outcomes_balanced() -> None:
    # 2 successes out of 8, keep 4: both successes and two failures (variance 0.25).
    assert sorted(max_variance_subset([0, 1, 0, 0, 0, 1, 0, 0], 4)) == [0, 1, 2, 5]
    # All equal: nothing to prefer, the subset is still well-formed.
    assert max_variance_subset([1.0] * 6, 3) == [0, 1, 2]


def test_ties_in_variance_go_to_the_subset_with_more_high_rewards() -> None:
    # Keep 3 of three successes and three failures: {1, 1, 0} and {1, 0, 0} have the same
    # variance; the documented tie-break keeps two successes (the earliest of each value).
    assert max_variance_subset([1, 0, 0, 1, 1, 0], 3) == [0, 1, 3]
    assert max_variance_subset([0.0, 0.5, 1.0], 1) == [2]  # every single row ties at 0


def test_nan_rewards_fill_the_low_end_last() -> None:
    assert max_variance_subset([float("nan"), 0.0, 1.0, 1.0], 2) == [1, 2]
    assert max_variance_subset([float("nan"), 1.0, float("nan")], 2) == [0, 1]


def test_flat_indices_keep_groups_contiguous() -> None:
    idx = max_variance_indices([[0, 1, 2, 3, 4, 5, 6, 7], [5, 5, 9, 0, 5, 5, 5, 5]], 4)
    # Second group: {0, 5, 5, 9} (variance 10.19) from the earliest 5s.
    assert idx == [0, 1, 6, 7, 8, 9, 10, 11]


def test_bad_k_is_rejected() -> None:
    with pytest.raises(ValueError, match="k must be"):
        max_variance_subset([0.0, 1.0], 3)


def test_trl_version_range_is_enforced() -> None:
    assert check_trl_version()  # the installed TRL is in range
    with pytest.raises(RuntimeError, match=r"trl 1\.17\.0 is not supported .*tested on trl>=1\.16,<1\.17"):
        check_trl_version("1.17.0")


# --------------------------------------------------------------------------- with TRL

G, K, GROUPS = 8, 4, 2


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig

    from planner.registry import get_model
    from runners.grpo.loading import load_policy, load_tokenizer, random_policy
    from runners.grpo.trainer import RaceGRPOTrainer
    from runners.tinyworld.task import make_problems
    from runners.tinyworld.tokenizer import build_tokenizer

    arch = get_model("tiny-s")
    folder = random_policy(arch, tmp_path_factory.mktemp("policy"), tokenizer=build_tokenizer())
    tok = load_tokenizer(arch, folder)
    model = load_policy(str(folder), arch, tok, device="cpu")
    seen: list[str] = []

    def by_position(prompts: list[Any], completions: list[str], **_: Any) -> list[float]:
        # Reward = rank within the group, so the max-variance subset is known: {0, 1, 6, 7}.
        seen.extend(completions)
        return [float(i % G) for i in range(len(completions))]

    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("out")), per_device_train_batch_size=GROUPS * G,
        num_generations=G, num_iterations=2, max_completion_length=10, max_steps=2,
        gradient_checkpointing=False, bf16=False, use_cpu=True, report_to=[], save_strategy="no",
        disable_tqdm=True,
    )
    rows = [{"prompt": p.prompt} for p in make_problems("train", 8, 0)]
    tr = RaceGRPOTrainer(
        model=model, reward_funcs=[by_position], args=args, train_dataset=Dataset.from_list(rows),
        processing_class=tok, peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        completions_kept=K,
    )
    tr.seen = seen  # type: ignore[attr-defined]
    return tr


def test_trainer_keeps_the_max_variance_rows(trainer: Any) -> None:
    torch = pytest.importorskip("torch")
    prompts = [r["prompt"] for r in trainer.train_dataset.select(range(GROUPS))]
    inputs = [{"prompt": p} for p in prompts for _ in range(G)]
    trainer.model.train()
    trainer.seen.clear()
    out = trainer._generate_and_score_completions(inputs)

    # Rewards ran once, on all G completions of each group (a PRM is billed once per rollout).
    assert len(trainer.seen) == GROUPS * G
    keep = [0, 1, 6, 7, 8, 9, 14, 15]
    kept_text = trainer.processing_class.batch_decode(out["completion_ids"], skip_special_tokens=True)
    assert kept_text == [trainer.seen[i] for i in keep]
    # Everything downstream sees K rows per group: masks, old log-probs (mu = 2), advantages.
    n = GROUPS * K
    assert out["completion_ids"].shape[0] == out["prompt_ids"].shape[0] == n
    assert out["old_per_token_logps"].shape[0] == n
    adv = out["advantages"].view(GROUPS, K)
    # Advantages are normalised within the kept subset [0, 1, 6, 7]: mean 3.5.
    assert torch.allclose(adv[:, 0], -adv[:, 3]) and torch.allclose(adv[:, 1], -adv[:, 2])
    assert float(adv[0, 0] / adv[0, 1]) == pytest.approx(3.5 / 2.5, rel=1e-4)
    # Restored for the sampler of the next round.
    assert trainer.num_generations == G
    # The mean reward over all generated completions is what progress reports.
    assert trainer.generated_reward_means[-1] == pytest.approx(3.5)


def test_round_sizer_shrinks_the_round(trainer: Any) -> None:
    prompts = [r["prompt"] for r in trainer.train_dataset.select(range(GROUPS))]
    inputs = [{"prompt": p} for p in prompts for _ in range(G)]
    asked: list[tuple[int, int]] = []
    trainer.round_sizer = lambda groups, multiple: asked.append((groups, multiple)) or 1
    trainer.model.train()
    try:
        out = trainer._generate_and_score_completions(inputs)
    finally:
        trainer.round_sizer = None
    assert asked == [(GROUPS, 1)]
    assert out["completion_ids"].shape[0] == K  # one group, down-sampled to K


def test_kept_must_not_exceed_generated(tmp_path: Path) -> None:
    from trl import GRPOConfig

    from runners.grpo.trainer import RaceGRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path), num_generations=4, per_device_train_batch_size=4,
                      use_cpu=True, bf16=False, report_to=[])
    with pytest.raises(ValueError, match=r"completions_kept must be in \[2, num_generations=4\], got 5"):
        RaceGRPOTrainer(model="never-loaded", args=args, completions_kept=5)
