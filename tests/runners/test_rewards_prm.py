"""PRM reward systems on the qwen2.5 code path, with local tiny random-init models (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from runners.rewards import build_reward_system
from runners.rewards.prm import ProcessRewardModel, load_prm
from runners.tinyworld.tokenizer import build_tokenizer


def _tiny_prm(folder: Path, head: list[int], *, sep: bool = True) -> ProcessRewardModel:
    from transformers import Qwen2Config

    cfg = Qwen2Config(vocab_size=23, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)
    cfg.score_head = head
    torch.manual_seed(0)
    model = ProcessRewardModel(cfg)
    model.save_pretrained(folder)
    tok = build_tokenizer()
    if sep:  # Qwen2.5-Math-PRM marks step ends with <extra_0>
        tok.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    tok.save_pretrained(folder)
    return model


def _as_tiny(arch):  # type: ignore[no-untyped-def]
    """``arch`` with the shape of :func:`_tiny_prm`'s checkpoints: the loader refuses a
    checkpoint whose shape is not its registry scorer's (the meter bills that shape)."""
    import dataclasses

    return dataclasses.replace(arch, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               num_key_value_heads=1, intermediate_size=64, vocab_size=23)


@pytest.fixture
def tiny_qwen_scorers(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.registry as reg

    real = reg.get_model
    monkeypatch.setattr(reg, "get_model", lambda n: _as_tiny(real(n)) if real(n).role != "policy" else real(n))


# With and without <extra_0>: Qwen2.5-Math-PRM's layout, and Skywork's (prm_formats).
@pytest.mark.parametrize(("name", "head", "sep"), [("prm", [32, 2], True), ("proxy-prm", [1], True),
                                                   ("proxy-prm", [1], False)])
@pytest.mark.usefixtures("tiny_qwen_scorers")
def test_qwen_prm_reward_scores_steps_and_meters(tmp_path: Path, name: str, head: list[int], sep: bool) -> None:
    _tiny_prm(tmp_path, head, sep=sep)
    rs = build_reward_system(name, "qwen2.5", scorer_path=tmp_path)
    comps = ["1+1=2\n\n2*3=6\n\nA:6", "3=3", ""]
    out = rs.funcs[0](["Q:1+1*3"] * 3, comps, answer=["6"] * 3)
    assert len(out) == 3 and all(0.0 < s < 1.0 for s in out)
    assert rs.scored and rs.scored[0][0] == 3 and rs.calls[0][0] == 3
    # The reduction is the minimum over steps: appending a step can only lower the score.
    longer = rs.funcs[0](["Q:1+1*3"], [comps[0] + "\n\n9-9=0"], answer=["6"])[0]
    assert longer <= out[0] + 1e-6


def test_step_scores_are_read_at_separators(tmp_path: Path) -> None:
    from runners.rewards.prm import qwen_step_scores

    model = _tiny_prm(tmp_path, [32, 2])
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    steps = qwen_step_scores(model, tok, ["Q:1"], ["a\n\nb\n\nc"], scored := [])
    assert len(steps[0]) == 3 and len(scored) == 1


def _qwen_like_tokenizer(tag: bool) -> object:
    """A word-level stand-in with Qwen2.5's chat markers (and Qwen2.5-Math-PRM's step tag)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *(["<extra_0>"] if tag else [])]
    words = ["\n", "system", "user", "assistant", "Please", "reason", "step", "by", ",", "and", "put", "your",
             "final", "answer", "within", "\\boxed{}.", "What", "is", "2+3?", "2+3=5", "So", "5", "5.", "<unk>"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate([*specials, *words])}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"\n| "), behavior="isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  bos_token="<|endoftext|>", additional_special_tokens=specials[1:])
    return tok


def test_qwen_math_prm_input_is_its_model_cards_chat_with_a_tag_after_every_step() -> None:
    """Qwen2.5-Math-PRM's card: system prompt, the problem as the user turn, the steps joined
    and ended by <extra_0> as the assistant turn, through the chat template; scored at each tag."""
    from runners.rewards.prm_formats import QWEN_PRM_SYSTEM, encode_qwen_prm, prm_encoder

    tok = _qwen_like_tokenizer(tag=True)
    assert prm_encoder(tok) is encode_qwen_prm
    ids, pos = encode_qwen_prm(tok, "What is 2+3?", "2+3=5\n\nSo 5.\n\n")
    want = (f"<|im_start|>system\n{QWEN_PRM_SYSTEM}<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
            "<|im_start|>assistant\n2+3=5<extra_0>So 5.<extra_0><|im_end|>\n")
    assert ids == tok(want, add_special_tokens=False)["input_ids"]
    tag = tok.convert_tokens_to_ids("<extra_0>")
    assert len(pos) == 2 and all(ids[q] == tag for q in pos)
    # A tokenizer that carries the template renders the same conversation through it.
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                         "{% endfor %}")
    assert encode_qwen_prm(tok, "What is 2+3?", "2+3=5\n\nSo 5.") == (ids, pos)


def test_skywork_prm_input_is_its_reference_layout_a_newline_after_every_line() -> None:
    """Skywork's prepare_input(step_token="\\n"): bos + problem + "\\n", then each line and the
    newline's token, scored there; a blank line is no step."""
    from runners.rewards.prm_formats import encode_skywork_prm, prm_encoder

    tok = _qwen_like_tokenizer(tag=False)
    assert prm_encoder(tok) is encode_skywork_prm
    ids, pos = encode_skywork_prm(tok, "What is 2+3?", "2+3=5\n\nSo 5.")
    enc = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    nl = enc("\n")[0]
    assert ids == [*enc("<|endoftext|>What is 2+3?\n"), *enc("2+3=5"), nl, *enc("So 5."), nl]
    assert pos == [len(ids) - 1 - len(enc("So 5.")) - 1, len(ids) - 1] and all(ids[q] == nl for q in pos)
    assert encode_skywork_prm(tok, "What is 2+3?", "")[1] == [len(enc("<|endoftext|>What is 2+3?\n"))]


@pytest.mark.usefixtures("tiny_qwen_scorers")
def test_the_prm_reward_reads_the_problem_column_not_the_policys_prompt(tmp_path: Path) -> None:
    """The policy's prompt carries the instruction; the PRM was trained on the problem alone."""
    _tiny_prm(tmp_path, [32, 2])
    rs = build_reward_system("prm", "qwen2.5", scorer_path=tmp_path)
    comp = ["1+1=2\n\nA:2"]
    with_q = rs.funcs[0](["Q:1+1\nPlease reason"], comp, answer=["2"], question=["Q:1+1"])
    plain = rs.funcs[0](["Q:1+1"], comp, answer=["2"])
    other = rs.funcs[0](["Q:1+1\nPlease reason"], comp, answer=["2"])
    assert with_q == pytest.approx(plain) and rs.scored[0] == rs.scored[1] and rs.scored[2] != rs.scored[0]
    assert other != pytest.approx(with_q)


def test_skywork_value_head_keys_are_mapped(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    from planner.registry import get_model

    ours = _tiny_prm(tmp_path, [1])
    weights = load_file(tmp_path / "model.safetensors")
    renamed = {k.replace("score.", "v_head.summary."): v for k, v in weights.items()}
    save_file(renamed, tmp_path / "model.safetensors", metadata={"format": "pt"})
    loaded = load_prm(tmp_path, _as_tiny(get_model("skywork-prm-1.5b")))
    assert torch.equal(loaded.score.weight, ours.score.weight)


def test_a_scorer_checkpoint_of_another_shape_is_refused(tmp_path: Path) -> None:
    """The meter bills the registry scorer's shape: a 7B PRM behind a 1.5B name, or a tiny
    test checkpoint, would be billed as something it is not."""
    from planner.errors import ConfigError
    from planner.registry import get_model

    _tiny_prm(tmp_path, [1])
    with pytest.raises(ConfigError, match=r"^scorer_path: .* has hidden_size 32 \(skywork-prm-1.5b: 1536\)"):
        load_prm(tmp_path, get_model("skywork-prm-1.5b"))
    import dataclasses  # every priced size counts, not only hidden, layers and vocabulary

    wider = dataclasses.replace(_as_tiny(get_model("skywork-prm-1.5b")), intermediate_size=256)
    with pytest.raises(ConfigError, match=r"has intermediate_size 64 \(skywork-prm-1.5b: 256\)"):
        load_prm(tmp_path, wider)


def test_missing_scorer_for_family_is_a_config_error(tmp_path: Path) -> None:
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match="family"):
        build_reward_system("prm", "gpt")


def test_tiny_prm_reads_a_stray_special_token_as_its_own_id() -> None:
    """Stripped, "A:<pad>9" reached the PRM as the well-formed answer "A:9"."""
    from runners.rewards.prm import tiny_encode
    from runners.tinyworld.tokenizer import char_ids, special_id

    prompt = "Q:3+4\n"
    bos, eos, pad = special_id("<bos>"), special_id("<eos>"), special_id("<pad>")
    ids, pos = tiny_encode(prompt, "3+4=7\nA:<pad>7")
    assert ids == [bos, *char_ids(prompt + "3+4=7\nA:"), pad, *char_ids("7"), eos]
    assert pos == [1 + len(prompt) + 5, len(ids) - 1]  # the '\n' after the step, then <eos>
    # Clean text is encoded as before; what follows an <eos> is cut, as the grade cuts it.
    clean = tiny_encode(prompt, "3+4=7\nA:7")
    assert tiny_encode(prompt, "3+4=7\nA:7<eos><pad><pad>") == clean
    assert clean == ([bos, *char_ids(prompt + "3+4=7\nA:7"), eos], [1 + len(prompt) + 5, len(clean[0]) - 1])
