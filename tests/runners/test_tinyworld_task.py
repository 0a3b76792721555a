"""The tiny world's tokenizer and task: determinism, grading rules, the corpus noise model."""

from __future__ import annotations

import random

import pytest

from planner.registry import get_model, list_models
from runners.tinyworld.task import (
    FlawModel,
    Problem,
    apply_op,
    grade,
    make_problems,
    problem_from_prompt,
    reference_completion,
    sample_solution,
)
from runners.tinyworld.tokenizer import VOCAB_SIZE, build_tokenizer, char_ids


def test_tokenizer_round_trips_and_matches_registry_vocab(tmp_path) -> None:
    from transformers import PreTrainedTokenizerFast

    tok = build_tokenizer()
    text = "Q:3+4*2\n3+4=7\n7*2=4\nA:4"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id and ids[1:] == char_ids(text)
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert len({tok.pad_token_id, tok.bos_token_id, tok.eos_token_id}) == 3
    tok.save_pretrained(tmp_path)
    again = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    assert again(text)["input_ids"] == ids and again.padding_side == "left"
    for name in list_models(None):
        if get_model(name).family == "tiny":
            assert get_model(name).vocab_size == VOCAB_SIZE == len(tok), name


def test_problems_are_deterministic_and_splits_differ() -> None:
    a, b = make_problems("train", 50, 3), make_problems("train", 50, 3)
    assert a == b
    assert a != make_problems("train", 50, 4)
    held = {p.prompt for p in make_problems("heldout", 50, 3)}
    assert held != {p.prompt for p in a}
    assert all(2 <= p.num_ops <= 5 for p in a)
    assert all(6 <= p.num_ops <= 8 for p in make_problems("harder", 50, 3))


def test_reference_solution_grades_perfect() -> None:
    for p in make_problems("harder", 30, 0):
        g = grade(p, reference_completion(p))
        assert g.answer_correct and g.well_formed
        assert g.steps_correct == g.steps_total == p.num_ops
        assert all(g.step_labels) and len(g.step_labels) == p.num_ops + 1
        assert problem_from_prompt(p.prompt) == p


def test_grade_charges_a_wrong_step_once_and_catches_format() -> None:
    p = problem_from_prompt("Q:3+4*2-5\n")
    assert (p.answer, p.steps) == ("9", ("3+4=7", "7*2=4", "4-5=9"))
    # Step 2 wrong (7*2=5); step 3 carries 5 forward correctly: 5-5=0.
    g = grade(p, "3+4=7\n7*2=5\n5-5=0\nA:0")
    assert g.step_labels == [True, False, True, False]
    assert (g.steps_correct, g.answer_correct, g.well_formed) == (2, False, True)
    # Right answer, skipped steps: correct but not well formed.
    g = grade(p, "3+4=7\nA:9")
    assert g.answer_correct and not g.well_formed and g.steps_correct == 1
    # A step that does not use the problem's operand is wrong even if the arithmetic holds.
    assert grade(p, "3+5=8\n8*2=6\n6-5=1\nA:1").step_labels[0] is False
    # Trailing <eos> text is ignored; a second answer line makes it malformed (last counts).
    assert grade(p, reference_completion(p) + "<eos>").well_formed
    g = grade(p, reference_completion(p) + "\nA:1")
    assert not g.answer_correct and not g.well_formed
    assert grade(p, "").step_labels == [] and not grade(p, "garbage").answer_correct


def test_arithmetic_is_mod_10() -> None:
    assert (apply_op(7, "*", 8), apply_op(3, "-", 5), apply_op(9, "+", 9)) == (6, 8, 8)


def test_corpus_mixes_correct_and_flawed_solutions() -> None:
    rng = random.Random(0)
    problems = make_problems("train", 2000, 0)
    grades = [grade(p, sample_solution(p, rng)) for p in problems]
    share = sum(g.answer_correct for g in grades) / len(grades)
    assert 0.35 < share < 0.7, share  # a mix, not all right nor all wrong
    assert all(g.well_formed for g in grades)  # flaws are in the arithmetic, not the format
    # The misconception: hard steps have a fixed rate in [0.3, 0.7]; easy steps have none.
    fm = FlawModel()
    assert fm.misconception_rate(7, "*", 8) == FlawModel().misconception_rate(7, "*", 8)  # fixed, not drawn
    assert 0.3 <= fm.misconception_rate(7, "*", 8) <= 0.7
    assert fm.misconception_rate(2, "*", 3) == 0 and fm.misconception_rate(5, "-", 3) == 0


@pytest.mark.parametrize("split", ["train", "harder"])
def test_lengths_fit_the_registry_defaults(split: str) -> None:
    tok = build_tokenizer()
    d = get_model("tiny-s").defaults
    ps: list[Problem] = make_problems(split, 200, 1)  # type: ignore[arg-type]
    comp = [len(char_ids(reference_completion(p))) + 1 for p in ps]  # + <eos>
    prompt = [len(tok(p.prompt)["input_ids"]) for p in ps]
    if split == "train":
        assert max(comp) <= d.completion_len and max(prompt) <= d.prompt_len
    else:
        assert max(comp) > d.completion_len  # harder needs a longer generation cap


def test_grading_reads_ascii_digits_only() -> None:
    from runners.tinyworld.task import grade, make_problems, reference_completion

    p = make_problems("train", 1, 0)[0]
    assert grade(p, reference_completion(p)).answer_correct
    fullwidth = reference_completion(p).translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    g = grade(p, fullwidth)
    assert not g.answer_correct and g.step_share == 0.0


def test_heldout_overlaps_train_as_docs_tinyworld_says() -> None:
    # docs/tinyworld.md: of the 256 evaluation prompts, 0-3 appear in 512 training problems and
    # 12-18 in 8,192 (seeds 0-4): heldout is an independent draw, not a disjoint set.
    from runners.grpo.run import EVAL_SEED
    from runners.tinyworld.task import make_problems

    ev = [p.prompt for p in make_problems("heldout", 256, EVAL_SEED)]
    for n, (lo, hi) in ((512, (0, 3)), (8192, (12, 18))):
        seen = []
        for seed in range(5):
            train = {q.prompt for q in make_problems("train", n, seed)}
            seen.append(sum(p in train for p in ev))
        assert (min(seen), max(seen)) == (lo, hi), (n, seen)


def test_a_stray_special_token_breaks_the_line_it_sits_in() -> None:
    """A special token the policy wrote mid-answer must not vanish and join its neighbours
    into a correct-looking answer: it reaches the grade as text, whichever way TRL or the
    evaluation decodes the ids."""
    from runners.rewards import build_reward_system
    from runners.tinyworld.tokenizer import decode_completion, special_id

    p = problem_from_prompt("Q:3+4*2-5\n")
    tok = build_tokenizer()
    eos = special_id("<eos>")
    for special in ("<pad>", "<bos>", "<unk>"):
        for text in ("3+4=7\n7*2=4\n4-5=9\nA:9", "3+4=7\n7*2=4\n4-5=9\nA:99"):
            cut = text.index("A:") + 3  # between the answer's two digits, or after its last
            ids = [*char_ids(text[:cut]), special_id(special), *char_ids(text[cut:]), eos]
            for decoded in (tok.batch_decode([ids], skip_special_tokens=True)[0], decode_completion(ids)):
                assert special in decoded, decoded
                assert not grade(p, decoded).answer_correct, decoded
                assert build_reward_system("sparse", "tiny")([p.prompt], [decoded]) == [0.0]
        # In a step line it breaks that step, as any garbled line does.
        ids = [*char_ids("3+4=7\n7*"), special_id(special), *char_ids("2=4\n4-5=9\nA:9"), eos]
        g = grade(p, decode_completion(ids))
        assert g.step_labels == [True, False, False, True] and not g.well_formed
    # A well-formed completion still decodes and grades as before: <eos> and the padding
    # after it are cut, the prompt's framing (left padding, <bos>) is dropped.
    ids = [*char_ids(reference_completion(p)), eos, special_id("<pad>"), special_id("<pad>")]
    assert decode_completion(ids) == tok.decode(ids, skip_special_tokens=True) == reference_completion(p)
    assert grade(p, decode_completion(ids)).well_formed and grade(p, decode_completion(ids)).answer_correct
    framed = [special_id("<pad>"), special_id("<bos>"), *char_ids(p.prompt)]
    assert tok.decode(framed, skip_special_tokens=True) == p.prompt
    assert tok.decode(ids) == reference_completion(p) + "<eos><pad><pad>"  # without skipping: as is
    # Text after an <eos> is not part of the completion.
    assert not grade(p, "3+4=7\n7*2=4\n4-5=9<eos>\nA:9").answer_correct


def test_char_ids_are_what_its_docstring_says() -> None:
    from runners.tinyworld.tokenizer import ALPHABET, SPECIALS, special_id

    assert char_ids(ALPHABET) == list(range(len(SPECIALS), len(SPECIALS) + len(ALPHABET))) == list(range(4, 22))
    unk = special_id("<unk>")
    assert unk == 3 and char_ids(" \r١<x") == [unk] * 5  # space, CR, an Arabic-Indic digit, '<', 'x'
    assert char_ids("<eos>") == [unk] * 5 and char_ids("") == []
    tok = build_tokenizer()
    text = "Q:3+4\n3+4=7\nA:7"
    assert tok(text)["input_ids"] == [tok.bos_token_id, *char_ids(text)]
    assert tok("<eos>")["input_ids"] == [tok.bos_token_id, special_id("<eos>")]  # the tokenizer does read these
