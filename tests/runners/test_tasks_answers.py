"""Answer checking for the GPU path, on real data nobody here wrote (../shared/data).

The data tests skip cleanly when the folder is absent; they print the measured rates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.tasks import (
    extract_answer,
    extract_boxed,
    extract_gsm8k_answer,
    gsm8k_worked_result,
    load_math,
    to_grpo_rows,
    verify,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")


def _jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_extractors() -> None:
    assert extract_boxed(r"so \boxed{\frac{1}{2}} and then \boxed{x^{2}}") == "x^{2}"
    assert extract_boxed(r"\boxed{3") is None and extract_boxed("none") is None
    assert extract_gsm8k_answer("a\n#### 1,234") == "1234"
    assert gsm8k_worked_result("9 + 6 = <<9+6=15>>15 liters out of the 24 liters.\n#### 15") == "15"
    assert gsm8k_worked_result("net is $400 000 - $282 000 = $118 000.\n#### 118000") == "118000"
    assert extract_answer("#### 7") == "7" and extract_answer("nothing") is None


def test_verify_is_symbolic_not_textual() -> None:
    assert verify(r"\frac{1}{2}", "0.5", exact_shortcut=False)
    assert verify(r"\boxed{2\sqrt{2}}", r"\sqrt{8}", exact_shortcut=False)
    assert verify("18.0", "18", exact_shortcut=False)
    assert not verify("17", "18") and not verify(None, "1") and not verify("", "1")
    assert not verify(r"\frac{1}{3}", "0.33", exact_shortcut=False)


@needs_data
def test_math500_answers_verify_against_their_own_boxed_solution() -> None:
    rows = _jsonl(DATA / "math500" / "test.jsonl")
    boxed = [extract_boxed(r["solution"]) for r in rows]
    # exact_shortcut=False: every pair goes through math-verify's parser and comparator.
    ok = [verify(b, r["answer"], exact_shortcut=False) for b, r in zip(boxed, rows, strict=True)]
    rate = sum(ok) / len(rows)
    # Control: each answer against the next problem's boxed answer mostly fails.
    shifted = boxed[1:] + boxed[:1]
    cross = sum(verify(b, r["answer"], exact_shortcut=False) for b, r in zip(shifted, rows, strict=True))
    print(f"MATH-500: {sum(ok)}/{len(rows)} = {rate:.4f} verify; shifted control {cross}/{len(rows)}")
    assert len(rows) == 500 and rate >= 0.99
    assert cross / len(rows) < 0.05


@needs_data
@pytest.mark.parametrize("split", ["train", "test"])
def test_gsm8k_answers_verify_against_themselves_and_the_worked_result(split: str) -> None:
    rows = _jsonl(DATA / "gsm8k" / f"{split}.jsonl")
    golds = [extract_gsm8k_answer(r["answer"]) for r in rows]
    assert all(g is not None for g in golds)
    self_ok = sum(verify(g, g, exact_shortcut=False) for g in golds)
    worked = sum(verify(gsm8k_worked_result(r["answer"]), g) for r, g in zip(rows, golds, strict=True))
    print(f"GSM8K {split}: #### verifies against itself {self_ok}/{len(rows)}; "
          f"against the worked solution's last stated result {worked}/{len(rows)} = {worked / len(rows):.4f}")
    assert self_ok == len(rows)
    # Control: against another problem's answer it must fail (a verify that always says
    # yes passes both lines above). Neighbouring answers are equal only by coincidence.
    shifted = golds[1:] + golds[:1]
    cross = sum(verify(a, g, exact_shortcut=False) for a, g in zip(shifted, golds, strict=True))
    same = sum(a == g for a, g in zip(shifted, golds, strict=True))
    print(f"GSM8K {split}: shifted control {cross}/{len(rows)} ({same} equal as text)")
    assert cross == same
    # GSM8K's worked text sometimes ends on another number or disagrees with its own ####
    # (e.g. "$0.25 each" vs "#### 25"); what is left must be rare.
    assert worked / len(rows) >= 0.985


@needs_data
def test_loaders_read_local_files_and_make_trl_rows() -> None:
    gsm = load_math("gsm8k", path=DATA / "gsm8k", split="test")
    math = load_math("math500", path=DATA / "math500" / "test.jsonl", limit=10)
    assert len(gsm) == 1319 and gsm[0].answer == "18" and len(math) == 10
    rows = to_grpo_rows(gsm[:2])
    assert rows[0]["prompt"][0]["role"] == "user" and "\\boxed{}" in rows[0]["prompt"][0]["content"]
    assert rows[0]["answer"] == "18"
    assert rows[0]["question"] == gsm[0].question  # the PRMs read the problem without the instruction


def test_loader_errors_name_the_field(tmp_path: Path) -> None:
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match="dataset"):
        load_math("nope", path=tmp_path)
    with pytest.raises(ConfigError, match="path"):
        load_math("gsm8k", path=tmp_path / "missing.jsonl")
    (tmp_path / "test.jsonl").write_text('{"question": "q", "answer": "#### 3"}\n' * 3)
    assert len(load_math("gsm8k", path=tmp_path, limit=2)) == 2
    with pytest.raises(ConfigError, match=r"^limit: must be at least 1"):
        load_math("gsm8k", path=tmp_path, limit=0)  # was one row
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ConfigError, match=r"^path: .*bad\.jsonl could not be read") as exc:
        load_math("gsm8k", path=tmp_path / "bad.jsonl")
    assert "\n" not in str(exc.value)


def test_a_json_array_file_is_read(tmp_path: Path) -> None:
    from planner.errors import ConfigError

    # A folder's test.json holding one JSON array (not JSON lines) raised polars' ComputeError.
    (tmp_path / "test.json").write_text(json.dumps([{"question": "q1", "answer": "#### 3"},
                                                    {"question": "q2", "answer": "#### 1,234"}], indent=1))
    assert [(it.question, it.answer) for it in load_math("gsm8k", path=tmp_path)] == [("q1", "3"), ("q2", "1234")]
    (tmp_path / "other.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"^path: .*array of other things than objects"):
        load_math("gsm8k", path=tmp_path / "other.json")


@pytest.mark.parametrize(("pred", "gold", "same"), [
    ("18.", "18", True), ("18 dollars", "18", True), ("18 eggs", "18", True), ("1\\,000", "1000", True),
    ("1 000", "1000", True), ("$1,234.", "1234", True), ("\\frac{1}{2}.", "0.5", True),
    ("5 pi", "5", False), ("17 dollars", "18", False),
    # Integers exactly, decimals to 6 places (a relative 1e-6 took 1000001 for 1000000).
    ("1000001", "1000000", False), ("1,000,001", "1000000", False), ("0.000001", "0.000002", False),
    ("0.5000006", "0.5", False), ("0.5000004", "0.5", True), ("18.00", "18", True), ("\\$1,234.00", "1234", True),
])
def test_plain_numbers_with_units_separators_and_a_full_stop(pred: str, gold: str, same: bool) -> None:
    from runners.tasks.answers import verify

    assert verify(pred, gold, exact_shortcut=False) is same


def _grouped(g: str, sep: str) -> str:
    whole, _, frac = g.lstrip("-").partition(".")
    return ("-" if g.startswith("-") else "") + f"{int(whole):,}".replace(",", sep) + (f".{frac}" if frac else "")


GSM8K_FORMS = {
    "\\$1,234": lambda g: "\\$" + _grouped(g, ","), "$1,234": lambda g: "$" + _grouped(g, ","),
    "1{,}234": lambda g: _grouped(g, "{,}"), "1\\,234": lambda g: _grouped(g, "\\,"),
    "g.00": lambda g: g + ("0" if "." in g else ".00"), "g\\text{ dollars}": lambda g: g + "\\text{ dollars}",
    "g dollars": lambda g: g + " dollars", "g.": lambda g: g + ".",
}


@needs_data
@pytest.mark.parametrize("form", list(GSM8K_FORMS))
def test_gsm8k_answers_verify_in_the_forms_models_write(form: str) -> None:
    golds = [str(extract_gsm8k_answer(r["answer"])) for r in _jsonl(DATA / "gsm8k" / "test.jsonl")]
    write = GSM8K_FORMS[form]
    ok = sum(verify(write(g), g, exact_shortcut=False) for g in golds)
    shifted = golds[1:] + golds[:1]
    cross = sum(verify(write(a), g, exact_shortcut=False) for a, g in zip(shifted, golds, strict=True))
    same = sum(a == g for a, g in zip(shifted, golds, strict=True))
    print(f"GSM8K test golds written as {form}: {ok}/{len(golds)} verify; shifted control {cross} ({same} equal)")
    assert ok == len(golds) and cross == same


def test_boxes_that_disagree_are_no_answer() -> None:
    from runners.tasks.answers import extract_answer

    assert extract_answer("\\boxed{17} \\boxed{19} \\boxed{18}") is None  # a hedge, not an answer
    assert extract_answer("so \\boxed{18}, i.e. \\boxed{ 18 }") == "18"
    assert extract_answer("\\boxed{\\boxed{18}}") == "18"  # one top-level box, read to its core
    # Equal answers written two ways are one answer, not a hedge; unequal ones stay a hedge.
    assert extract_answer("so \\boxed{18}. In dollars: \\boxed{\\$18}") == "\\$18"
    assert extract_answer("\\boxed{0.5}, i.e. \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_answer("\\boxed{18}, i.e. \\boxed{\\frac{36}{2}}, or \\boxed{19}") is None
    assert extract_answer("\\boxed{19} \\boxed{18} \\boxed{\\frac{36}{2}}") is None


@needs_data
def test_math500_solutions_score_through_extract_answer() -> None:
    # Row 451 ends "\\boxed{15\\frac{39}{40}}, or \\boxed{\\frac{639}{40}}": two boxes, one answer.
    rows = _jsonl(DATA / "math500" / "test.jsonl")
    ok = [verify(extract_answer(r["solution"]), r["answer"]) for r in rows]
    print(f"MATH-500: {sum(ok)}/{len(rows)} solutions verify through extract_answer")
    assert all(ok), [i for i, k in enumerate(ok) if not k]


def test_last_number_is_the_last_one_written() -> None:
    from runners.tasks import last_number

    assert last_number("3 apples, then 1,234 pears and -5.5 kg") == "-5.5"
    assert last_number("x is 7, and .5 more") == ".5"
    assert last_number("no digits here") is None


def test_the_last_gsm8k_answer_line_is_the_answer() -> None:
    assert extract_gsm8k_answer("first try\n#### 5\nno, wait\n#### $1,207") == "1207"
    assert extract_answer("#### 5\n#### 7") == "7"


@pytest.mark.parametrize(("solution", "result"), [
    # Only the text before "####" is read, so a result that disagrees with it is seen.
    ("3 * 4 = <<3*4=12>>12 eggs.\n#### 13", "12"),
    # The last calculator annotation of the line, not the first.
    ("She has <<2*3=6>>6 and then <<6+1=7>>7 pens.\n#### 7", "7"),
    # The annotation over a later "=": "1 box = 4" is a unit, not the result.
    ("<<10/2=5>>5 boxes, where 1 box = 4 cookies.\n#### 5", "5"),
    # No annotation: the first number after the last "=", not the line's last number.
    ("So 10 - 4 = 6 eggs are left for 2 days.\n#### 6", "6"),
    # ... also where the line starts with "=" (a computation carried over a line break).
    ("16 - 3 - 4\n= 9 eggs for 2 days\n#### 9", "9"),
    # No "=" either: the line's last number.
    ("She sells 9 eggs at $2 each, so 18 dollars.\n#### 18", "18"),
    # The last line that holds a number, not a closing line of words.
    ("12 + 3 = 15 marbles.\nThat is all.\n#### 15", "15"),
])
def test_the_worked_result_follows_the_documented_rules(solution: str, result: str) -> None:
    assert gsm8k_worked_result(solution) == result


def test_every_box_must_agree_with_the_last() -> None:
    # The first box agrees with the last, the middle one does not: still a hedge.
    assert extract_answer("\\boxed{18} \\boxed{19} \\boxed{\\frac{36}{2}}") is None


def test_a_box_inside_a_box_is_part_of_it_after_any_whitespace() -> None:
    """all_boxed resumed its search from the length of the *stripped* content: after ten or
    more leading blanks the search restarted inside the box, and a box in it was listed as
    a second top-level one."""
    from runners.tasks.answers import all_boxed

    for pad in ("", " ", "\n" + " " * 12, " " * 40):
        text = "\\boxed{" + pad + "17 or \\boxed{18}} done"
        assert all_boxed(text) == ["17 or \\boxed{18}"], pad
        assert extract_answer(text) == "18"
    assert all_boxed("\\boxed{1} \\boxed{ 2 } \\fbox{3}") == ["1", "2", "3"]


@pytest.mark.parametrize(("pred", "gold", "same"), [
    # A non-integer against an integer is compared to 6 decimals, either way round.
    ("18.0000004", "18", True), ("18", "18.0000004", True), ("18.000001", "18", False),
    # A unit word of two letters is still a unit ("7 cm." is 7 cm, not 7 * c * m); one
    # letter is a variable.
    ("7 cm.", "7", True), ("1 000 km", "1000", True), ("12 kg", "13", False), ("12 x", "12", False),
])
def test_plain_number_edge_cases(pred: str, gold: str, same: bool) -> None:
    assert verify(pred, gold, exact_shortcut=False) is same


def test_an_answer_math_verify_cannot_read_is_wrong_not_right() -> None:
    # An empty or cut-off box parses to nothing: that is no answer, and verify says so
    # with a bool.
    assert verify("\\boxed{}", "18", exact_shortcut=False) is False
    assert verify("18", "\\boxed{", exact_shortcut=False) is False
    # The exact-match shortcut (the default) accepts equal strings before parsing, even
    # where math-verify reads nothing; without it they go through the parser.
    assert verify("\\$", "\\$") is True
    assert verify("\\$", "\\$", exact_shortcut=False) is False


def test_a_dollar_delimited_answer_is_read_by_its_delimiters() -> None:
    # "$...$" marks the mathematics in an answer written in words: only it is compared.
    assert verify("The answer is $5$ and $7$", "\\{5, 7\\}", exact_shortcut=False)


def test_verify_works_off_the_main_thread() -> None:
    """math-verify's timeouts use SIGALRM, which raises ValueError off the main thread; a
    reward computed in a worker thread must still be checked."""
    import threading

    out: list[object] = []

    def check() -> None:
        try:
            out.append(verify("\\frac{1}{2}", "0.5", exact_shortcut=False))
        except Exception as exc:
            out.append(exc)

    t = threading.Thread(target=check)
    t.start()
    t.join(60)
    assert out == [True]


def test_a_gsm8k_answer_keeps_commas_that_are_not_thousands_separators() -> None:
    """extract_gsm8k_answer dropped every comma: "#### 3, 5" (two answers) read as 35 and
    verified against a gold 35, and "#### (1,2)" read as "(12)"."""
    assert extract_gsm8k_answer("so\n#### 3, 5") == "3, 5"
    assert not verify(extract_answer("so\n#### 3, 5"), "35")
    assert extract_gsm8k_answer("#### (1,2)") == "(1,2)"
    assert verify(extract_answer("the point is\n#### (1,2)"), "(1, 2)")
    # Thousands separators still go, as every GSM8K gold writes them.
    assert extract_gsm8k_answer("#### 1,234,567") == "1234567"
    assert extract_gsm8k_answer("#### $12,000.50") == "12000.50"


@pytest.mark.parametrize(("pred", "gold", "same"), [
    # Letters written against a number are a product, not a unit: "3xy" is 3xy.
    ("3xy", "3", False), ("2mn", "2", False), ("3", "3xy", False),
    ("3xy", "3yx", True),
    # A unit is set off by a space or \text{}: those still compare as the number.
    ("3 cm", "3", True), ("18\\text{ dollars}", "18", True), ("18\\text{dollars}", "18", True),
])
def test_letters_written_against_a_number_are_not_a_unit(pred: str, gold: str, same: bool) -> None:
    """as_number read any letters after a number as a unit word, spaces or none, so "3xy"
    verified against 3 (and a gold "3xy" accepted 3)."""
    assert verify(pred, gold, exact_shortcut=False) is same


def test_a_file_with_no_usable_row_is_named_with_the_row_and_the_fix(tmp_path: Path) -> None:
    """"gave no usable rows; check the file's columns" named neither the file nor what a row
    lacked: a GSM8K file whose answers hold no '#### N' line (its columns are right) read
    the same as one with no question column."""
    from planner.errors import ConfigError

    f = tmp_path / "mine.jsonl"
    f.write_text('{"question": "q", "answer": "18"}\n')
    with pytest.raises(ConfigError) as exc:
        load_math("gsm8k", path=f)
    msg = str(exc.value)
    assert "mine.jsonl" in msg and "row 1" in msg and "#### N" in msg and "\n" not in msg
    f.write_text('{"q": "what?", "answer": "#### 3"}\n')
    with pytest.raises(ConfigError, match=r"mine\.jsonl.*row 1.*'question'") as exc:
        load_math("gsm8k", path=f)
    f.write_text('{"problem": "p", "solution": "\\\\boxed{3}"}\n')
    with pytest.raises(ConfigError, match=r"mine\.jsonl.*row 1.*'answer'"):
        load_math("math500", path=f)


def test_a_bad_json_line_is_named_by_its_number(tmp_path: Path) -> None:
    """polars' error for a bad line ("ExpectedNull at character 0") named no line."""
    from planner.errors import ConfigError

    f = tmp_path / "train.jsonl"
    f.write_text('{"question": "q", "answer": "#### 3"}\n\n{"question": "q2", "answer": "#### 4"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"^path: .*train\.jsonl could not be read: line 4 is not a JSON object") as exc:
        load_math("gsm8k", path=f)
    assert "\n" not in str(exc.value)
    f.write_text('{"question": "q", "answer": "#### 3"}\n[1, 2]\n')
    with pytest.raises(ConfigError, match=r"train\.jsonl could not be read: line 2 is not a JSON object"):
        load_math("gsm8k", path=f)


@pytest.mark.parametrize("line", ["#### \\$18", "#### **18**", "#### **\\$18**", "#### $18", "#### 18"])
def test_a_gsm8k_answer_line_reads_an_escaped_dollar_and_bold(line: str) -> None:
    """Removing every "$" left "\\$18" as "\\18", and markdown bold "**18**" stayed as
    written: both graded a right answer wrong."""
    assert extract_gsm8k_answer(f"so she has 18.\n{line}") == "18"
    assert verify(extract_answer(f"so she has 18.\n{line}"), "18")
