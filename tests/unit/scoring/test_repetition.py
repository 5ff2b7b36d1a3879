"""The repetition detector: loops of several shapes are flagged, healthy repetitive text is not."""

from __future__ import annotations

import random

import pytest

from k3conformance.scoring.repetition import RepetitionConfig, RepetitionReport, detect, detect_output, find_loops

_WORDS = [
    "the",
    "kernel",
    "routes",
    "each",
    "token",
    "to",
    "eight",
    "experts",
    "and",
    "the",
    "server",
    "streams",
    "the",
    "answer",
    "back",
    "while",
    "we",
    "check",
    "whether",
    "a",
    "cache",
    "miss",
    "changes",
    "results",
    "so",
    "reasoning",
    "should",
    "stay",
    "coherent",
    "across",
    "long",
    "contexts",
    "because",
    "every",
    "layer",
    "depends",
    "on",
    "accurate",
    "expert",
    "weights",
]


def varied_prose(chars: int, seed: int = 0) -> str:
    """Sentences of random words and numbers: repetitive vocabulary, no repeated blocks."""
    rng = random.Random(seed)
    sentences: list[str] = []
    size = 0
    while size < chars:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 20))]
        words[rng.randrange(len(words))] += f" {rng.randint(0, 9999)}"
        sentence = " ".join(words).capitalize() + ". "
        sentences.append(sentence)
        size += len(sentence)
    return "".join(sentences)[:chars].rstrip() + "."


def assert_loop(report: RepetitionReport, block: str, min_repeats: int = 4) -> None:
    assert report.looping and report.tail_loop
    assert report.loop_block is not None
    assert report.loop_block in block * 2  # the block itself, or a rotation of it (see below)
    assert report.loop_repeats >= min_repeats


def is_rotation(found: str | None, block: str) -> bool:
    """The loop is the longest periodic end of the text, so it reaches back into whatever
    text before it happens to end like the block does ("...done. " before "Let me... again. "):
    the reported block is then a rotation of the model's block, and the loop a few
    characters longer."""
    return found is not None and len(found) == len(block) and found in block * 2


def assert_healthy(report: RepetitionReport) -> None:
    assert not report.looping and not report.tail_loop
    assert report.loop_block is None and report.loop_repeats == 0 and report.loop_chars == 0


# --- loops -----------------------------------------------------------------------------


def test_sentence_repeated_50_times() -> None:
    sentence = "Let me re-check the boundary condition again. "
    report = detect("We start by reading the file. " + sentence * 50)
    assert_loop(report, sentence)
    assert is_rotation(report.loop_block, sentence)
    assert report.loop_repeats == 50
    assert len(sentence) * 50 <= report.loop_chars < len(sentence) * 51
    assert report.seq_rep_4 > 0.9
    assert report.high_seq_rep


def test_multiline_code_block_repeated() -> None:
    block = "def parse(line):\n    key, value = line.split('=')\n    return key.strip(), value.strip()\n\n"
    report = detect("Here is the parser:\n\n```python\n" + block * 12)
    assert_loop(report, block)
    assert is_rotation(report.loop_block, block)
    assert report.loop_repeats == 12


def test_loop_after_long_healthy_prefix() -> None:
    """The reported failure: a healthy start, then repetition until the token limit."""
    prefix = varied_prose(200_000)
    block = "\nWait, I need to verify the expert routing table once more before answering."
    report = detect(prefix + block * 300)
    assert_loop(report, block)
    assert is_rotation(report.loop_block, block)
    assert report.loop_repeats == 300
    # Loops start at a token: the block's leading newline is left out of the first copy.
    assert len(block) * 300 - 1 <= report.loop_chars < len(block) * 301
    assert report.seq_rep_4 > 0.9


def test_loop_cut_mid_block_at_token_limit() -> None:
    block = "So the answer is 42, but let me double-check the arithmetic step. "
    text = varied_prose(5_000) + " " + block * 20 + block[:23]
    report = detect(text)
    assert_loop(report, block)
    assert report.loop_repeats == 20  # the cut copy is covered but not counted
    assert report.loop_chars >= len(block) * 20 + 23


def test_paragraph_loop_near_max_block_chars() -> None:
    paragraph = varied_prose(1_950, seed=7) + "\n\n"
    report = detect(varied_prose(3_000, seed=8) + "\n\n" + paragraph * 5)
    assert_loop(report, paragraph)
    assert report.loop_block is not None and len(report.loop_block) == 200
    assert report.loop_block in paragraph * 2
    assert report.loop_repeats == 5
    assert report.longest_adjacent_repeat == len(paragraph)


def test_seq_rep_4_of_a_window_filling_paragraph_loop_clears_the_threshold() -> None:
    """The calibration point of seq_rep_threshold: the longest blocks score lowest."""
    paragraph = varied_prose(1_950, seed=7) + "\n\n"
    report = detect(varied_prose(50_000) + paragraph * 12)
    assert report.looping
    assert report.seq_rep_4 > RepetitionConfig().seq_rep_threshold
    assert report.high_seq_rep


def test_block_longer_than_2000_chars_is_a_loop() -> None:
    """The earlier detector stopped at 2,000-character blocks; a repeated page loops too."""
    paragraph = varied_prose(5_000, seed=9) + "\n\n"
    report = detect("Intro. " + paragraph * 4)
    assert_loop(report, paragraph)
    assert report.kind == "block" and report.loop_repeats == 4 and not report.escaped


def test_chinese_loop_is_flagged() -> None:
    """No spaces between words: each CJK character counts as a token for the guard."""
    sentence = "我们需要再检查一遍这个函数的边界条件。"
    assert_loop(detect("首先读取文件。" + sentence * 30), sentence)


def test_three_repeats_are_not_a_loop_but_four_are() -> None:
    sentence = "The cache key includes the sampling seed. "
    assert_healthy(detect("Intro text here. " + sentence * 3))
    assert_loop(detect("Intro text here. " + sentence * 4), sentence)


def test_loop_the_model_escapes_is_flagged_as_escaped() -> None:
    """A loop in the middle of the reasoning, after which the model answers: max_tokens never
    sees it, the detector does."""
    sentence = "Let me think about this carefully. "
    prefix = varied_prose(2_000, seed=1) + " "
    report = detect(prefix + sentence * 10 + varied_prose(3_000, seed=2))
    assert report.looping and report.escaped and not report.tail_loop
    assert report.kind == "block" and report.loop_repeats == 10
    assert report.loop_start == len(prefix)
    assert report.loop_block == sentence


def test_a_line_repeated_a_few_times_in_the_middle_is_healthy() -> None:
    """Tail loops need 4 copies; escaped ones 6, since healthy text may repeat a line."""
    sentence = "Let me think about this carefully. "
    assert_healthy(detect(varied_prose(2_000, seed=1) + " " + sentence * 5 + varied_prose(3_000, seed=2)))
    report = detect(varied_prose(2_000, seed=1) + " " + sentence * 6 + varied_prose(3_000, seed=2))
    assert report.looping and report.escaped


@pytest.mark.parametrize("word", ["hmm, ", "Wait, ", "Hmm. ", "ha ", "嗯，"])
def test_short_token_loop_at_the_tail(word: str) -> None:
    """The shape of the public K3 report: "prolonged repetition (hmm, or other words)"."""
    report = detect(varied_prose(3_000) + " " + word * 400)
    assert report.looping and report.kind == "short-token" and report.tail_loop and not report.escaped
    assert report.loop_repeats >= 399


def test_two_token_loop_and_escaped_short_token_loop() -> None:
    report = detect("Let me see. " + "Wait, no. " * 30 + "The answer is 12, since 3 times 4 is 12.")
    assert report.looping and report.kind == "short-token" and report.escaped
    assert report.loop_repeats == 30


def test_short_token_run_below_threshold_is_healthy() -> None:
    """Natural text repeats a word a handful of times ("very, very, very"), not two dozen."""
    assert_healthy(detect("It was very, " + "very, " * 6 + "cold. " + varied_prose(2_000)))
    assert_healthy(detect("The sequence is " + "0, " * 500 + "0."))  # numbers are not words


def test_counter_loop() -> None:
    """Copies differ only by a counter: no verbatim repeat, still a loop."""
    steps = "".join(f"Step {n}: let me verify the bound once more for index {n}. " for n in range(14, 120))
    report = detect(varied_prose(2_000) + " " + steps)
    assert report.looping and report.kind == "counter" and report.tail_loop
    assert report.loop_repeats >= 100
    assert report.loop_block is not None and report.loop_block.startswith("Step 14:")


def test_escaped_counter_loop() -> None:
    steps = "".join(f"Try k = {n}. No, that does not work either. " for n in range(3, 30))
    report = detect("We need k. " + steps + "So k = 31 works: 31 squared is 961.")
    assert report.looping and report.kind == "counter" and report.escaped


def test_one_word_counter_loop() -> None:
    """SmolLM2-135M's real loop (fixtures/repetition/real_smollm2.json, repeat-word-003): one
    word and a counter, line after line to the token limit."""
    report = detect("".join(f"{n}. house 4\n" for n in range(1, 25)))
    assert report.looping and report.kind == "counter" and report.tail_loop
    assert report.loop_repeats >= 16


def test_a_short_numbered_list_of_one_word_is_healthy() -> None:
    """Under 16 copies a numbered list of one repeated word is still a list (asked for or not)."""
    assert_healthy(detect("".join(f"{n}. house\n" for n in range(1, 13))))


@pytest.mark.parametrize(
    "row",
    ["| item {n} | Yes |\n", "def test_x_{n}(): assert f({n}) == {n}\n", "x[{n}] = {n}\n"],
    ids=["table row", "unrolled test", "assignment"],
)
def test_a_counter_of_one_or_two_words_in_code_or_a_table_is_structure(row: str) -> None:
    assert_healthy(detect("".join(row.format(n=n) for n in range(1, 60))))


def test_a_word_and_a_number_line_after_line() -> None:
    """SmolLM2-135M's real loop (repeat-word-013): "Cat 3:" 32 times. A word and a number are
    two tokens; the number alone would be structure (`0, 0, 0`)."""
    report = detect("Cat 3:\n" * 32)
    assert report.looping and report.kind == "short-token" and report.tail_loop
    assert_healthy(detect("Cat 3:\n" * 8 + "That is all."))
    assert_healthy(detect("3: 4:\n" * 40))


def test_numbered_list_carrying_data_is_not_a_counter_loop() -> None:
    """Every number position must move as a counter; squares do not."""
    rows = "".join(f"Row {n}: the square of this value is {n * n} exactly. " for n in range(1, 300))
    assert_healthy(detect(rows))


# --- healthy text ------------------------------------------------------------------------


def test_markdown_table_with_similar_rows() -> None:
    rng = random.Random(3)
    rows = [f"| item {n} | {rng.randint(1, 9)} | {rng.choice(['ok', 'fail'])} |" for n in range(1, 2_001)]
    report = detect("| item | count | status |\n|---|---|---|\n" + "\n".join(rows))
    assert_healthy(report)
    assert report.seq_rep_4 < 0.7
    assert not report.high_seq_rep


def test_markdown_table_of_identical_separator_rows() -> None:
    """MiMo-Code's false positive: periodic, but one distinct token per block."""
    report = detect("| a | b | c |\n" + "|---|---|---|\n" * 3_000)
    assert_healthy(report)
    assert report.seq_rep_4 > 0.9 and report.high_seq_rep  # why seq_rep_4 is not the verdict


def test_python_file_with_repetitive_structure() -> None:
    functions = [f"def test_x_{n}():\n    assert f({n}) == {n}\n\n\n" for n in range(2_000)]
    report = detect("from module import f\n\n\n" + "".join(functions))
    assert_healthy(report)
    assert report.seq_rep_4 < 0.7
    assert not report.high_seq_rep


def test_bulleted_list_of_similar_items() -> None:
    items = [f"- Check expert {n}: weights loaded, routing ok, latency {n % 7 + 3} ms" for n in range(1_500)]
    report = detect("Checklist:\n" + "\n".join(items))
    assert_healthy(report)
    assert report.seq_rep_4 < 0.7
    assert not report.high_seq_rep


def test_varied_prose() -> None:
    report = detect(varied_prose(100_000))
    assert_healthy(report)
    assert report.seq_rep_4 < 0.1
    assert not report.high_seq_rep


@pytest.mark.parametrize("text", [None, "", "ok", "Hello, world.", "abc" * 3])
def test_short_empty_and_none(text: str | None) -> None:
    report = detect(text)
    assert_healthy(report)
    assert report.seq_rep_4 == 0.0


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Padding follows.\n" + "=" * 5_000, "unspaced"),
        ("Hmm" + "!" * 2_000, "unspaced"),
        ("So" + "..." * 800, "unspaced"),
        ("Rule:\n" + "- " * 3_000, "short-token"),
        ("Let me write the loop.\n" + "i = i + 1\n" * 300, "block"),
        ("Now:\n" + "n += 1\n" * 400, "block"),
        ("The letters are " + "a b c " * 300, "block"),
        ("The answer is " + "the" * 500, "unspaced"),
        ("The answer is " + "\u200d".join(["wait"] * 500), "short-token"),
        ("The answer is " + "\u200b".join(["wait"] * 500), "short-token"),
    ],
    ids=["equals", "bangs", "dots", "dashes", "i=i+1", "n+=1", "abc", "unspaced-word", "zwj-word", "zwsp-word"],
)
def test_the_loop_shapes_of_issue_21_are_loops(text: str, kind: str) -> None:
    """Reproduction 12: a short block repeated hundreds of times, unspaced or zero-width-joined
    repeats of one word, repeated punctuation: each was read as healthy."""
    report = detect(text)
    assert report.looping and report.tail_loop and report.kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "Adverb\n" + "Adverb\n" * 13,
        "It is ent 40" + "th" * 40,
        "The answer is 5. " + "Fancy 3" * 20 + "Fan",
        "Hmm " + "op" * 40,
    ],
    ids=["word-per-line", "unspaced-pair", "word-and-number-cut", "pair"],
)
def test_a_short_unit_repeated_to_the_end_of_a_small_budget_is_a_loop(text: str) -> None:
    """Real SmolLM2 loops under weight noise (docs/real-engine.md): 13 to 40 copies within 48
    tokens, too few for the other kinds, which are set for thousands of tokens."""
    report = detect(text)
    assert report.looping and report.tail_loop and report.kind == "short-tail"


@pytest.mark.parametrize(
    "text",
    [
        "Adverb\n" * 11,  # 11 copies
        "ha" * 15,  # 30 characters
        "Zeros: " + "0, " * 40,  # digits and punctuation: structure
        "Big: 1" + "0" * 60,
        "| a |" * 20,  # a table
        "Adverb\n" * 13 + "Those were the adverbs.",  # left before the end
    ],
    ids=["few-copies", "few-characters", "zeros", "big-number", "table", "escaped"],
)
def test_short_units_that_are_not_short_tail_loops(text: str) -> None:
    assert "short-tail" not in {loop.kind for loop in find_loops(text)}


def test_rules_tables_and_a_few_short_lines_are_not_loops() -> None:
    assert_healthy(detect("Title\n" + "=" * 80 + "\nBody.\n" + "-" * 120 + "\nMore body text follows here."))
    assert_healthy(detect("Grid:\n" + "| . | # |\n" * 500))
    assert_healthy(detect("| a | b | c |\n" + "|---|---|---|\n" * 1000))
    assert_healthy(detect("Increment three times:\n" + "i += 1\n" * 3 + "Then return i, which is now 3."))
    assert_healthy(detect("A wide table: |" + "---|" * 40 + "\nwith forty columns."))


# --- API ---------------------------------------------------------------------------------


def test_detect_output_reports_each_part_and_the_join() -> None:
    sentence = "I should answer now, but first I will recheck. "
    reports = detect_output("Thinking. " + sentence * 5, sentence * 5)
    assert set(reports) == {"reasoning", "content", "combined"}
    assert reports["reasoning"].looping
    assert reports["content"].looping
    # Tokens ignore whitespace: the join's newline does not break the run.
    assert reports["combined"].looping and reports["combined"].loop_repeats == 10


def test_detect_output_loop_spanning_the_join() -> None:
    """Three copies in each part: neither part alone loops, together they do."""
    line = "Recomputing the expert weights for layer twelve."
    reports = detect_output("Plan:\n" + "\n".join([line] * 3), "\n".join([line] * 3))
    assert not reports["reasoning"].looping and not reports["content"].looping
    assert reports["combined"].looping and reports["combined"].loop_repeats >= 5


def test_detect_output_with_missing_parts() -> None:
    reports = detect_output(None, None)
    assert all(not report.looping for report in reports.values())
    assert detect_output(None, "x " * 3).keys() == {"reasoning", "content", "combined"}


def test_to_record_is_plain_data() -> None:
    record = detect("Step. " + "Try the next candidate value. " * 8).to_record()
    assert record["looping"] is True and record["loop_repeats"] == 8
    assert record["kind"] == "block" and record["escaped"] is False
    assert set(record) == {
        "kind",
        "escaped",
        "loop_count",
        "loop_start",
        "tail_loop",
        "loop_block",
        "loop_repeats",
        "loop_chars",
        "seq_rep_4",
        "longest_adjacent_repeat",
        "looping",
        "high_seq_rep",
    }


def test_config_changes_the_rule() -> None:
    sentence = "Check the shard again. "
    text = "Start. " + sentence * 5
    assert detect(text).looping
    assert not detect(text, RepetitionConfig(min_repeats=6)).looping
    assert not detect(text, RepetitionConfig(min_block_chars=30)).looping
    assert not detect(text, RepetitionConfig(min_distinct_tokens=5)).looping


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="min_block_chars <= max_block_chars"):
        RepetitionConfig(min_block_chars=50, max_block_chars=10)
    with pytest.raises(ValueError, match="one copy is not a repeat"):
        RepetitionConfig(min_repeats=1)


def _longest_square_by_brute_force(text: str, max_length: int) -> int:
    for length in range(min(max_length, len(text) // 2), 0, -1):
        if any(text[i : i + length] == text[i + length : i + 2 * length] for i in range(len(text) - 2 * length + 1)):
            return length
    return 0


@pytest.mark.parametrize("seed", range(8))
def test_longest_adjacent_repeat_matches_brute_force(seed: int) -> None:
    """The pruned search (only lengths a square could have) finds what trying every length finds."""
    from k3conformance.scoring.repetition import _longest_adjacent_repeat

    rng = random.Random(seed)
    pieces = ["a", "ab", "the", "x y", "中文", "  ", "|---|", "def f():\n    return 1\n", "foo", "bar.", "42"]
    for _ in range(60):
        separator = rng.choice([" ", "", "\n", " | "])
        words = [rng.choice(pieces) for _ in range(rng.randint(1, 60))]
        text = separator.join(words)
        if rng.random() < 0.4:
            block = text[: rng.randint(1, 30)]
            text += block * rng.randint(2, 4) + separator.join(words[:3])
        max_length = rng.choice([5, 50, 2000])
        assert _longest_adjacent_repeat(text, max_length) == _longest_square_by_brute_force(text, max_length), text


def test_item_score_records_the_kind_of_loop() -> None:
    """The per-item looping record carries the kind, and "escaped" for a loop the model left."""
    from k3conformance.endpoint.completion import Completion
    from k3conformance.scoring.item_score import ItemScore

    def completion(reasoning: str, content: str) -> Completion:
        return Completion(content, reasoning, "reasoning_content", None, "stop", {"completion_tokens": 9}, "k3", 0.1)

    score = ItemScore()
    score.add_completion(completion("Let me see. " + "hmm, " * 50 + "So it is 4.", "4"), 1.0, answered=True)
    score.add_completion(completion(varied_prose(3_000), "4"), 1.0, answered=True)
    record = score.to_record()
    assert record["looping"] == 1
    assert record["loop_kinds"] == {"short-token": 1, "escaped": 1}
    assert record["details"][0]["loop_kind"] == "short-token" and record["details"][0]["loop_escaped"] is True
    assert record["details"][1]["loop_kind"] is None
    merged = ItemScore()
    merged.merge(record)
    merged.merge(record)
    assert merged.loop_kinds == {"short-token": 2, "escaped": 2}


# vLLM issues 42426 and 40357: a broken kernel writes one character or one word from its first token.
@pytest.mark.parametrize(
    "text",
    [
        "!!!!!!!!!!",
        "!!!!!!!!",
        "foss foss foss",
        "foss foss foss foss foss foss",
        "! ! ! ! ! ! ! !",
        "嗯嗯嗯嗯嗯嗯嗯嗯",
    ],
)
def test_a_text_of_one_character_or_one_word_is_degenerate_at_any_length(text: str) -> None:
    report = detect(text)
    assert report.looping and report.kind == "degenerate" and report.tail_loop


@pytest.mark.parametrize("text", ["!!!", "no no", "Yes", "00000000", "Hello world", "foss foss bar", "1 1 1 1"])
def test_short_or_mixed_texts_and_digits_are_not_degenerate(text: str) -> None:
    assert not detect(text).looping
