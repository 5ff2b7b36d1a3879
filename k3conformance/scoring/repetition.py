"""Repetition (looping) detector for model outputs.

A broken serving kernel (a fused-MoE bug in a public Kimi K3 report, sglang issue 40751)
made half of the long coding outputs fall into "prolonged repetition (hmm, or other
words)". This module flags such outputs, one at a time, without flagging healthy text that
merely looks repetitive (Markdown tables, code with similar functions, numbered lists).

A loop is a run of tokens that repeats a block of q tokens back to back. Tokens are
separated by whitespace or zero-width characters (words joined by U+200B or U+200D are
words), except that each CJK character is a token of its own (those scripts put no spaces
between words). Every such run in the text is found, wherever it is, and
qualifies as one of the kinds below:

- short-token: the block holds one or two distinct tokens, words or sentence punctuation,
  at least one a word ("hmm, hmm, hmm," "Wait, Wait," "嗯，嗯，"), or a word and a number
  ("Cat 3:" line after line, a real SmolLM2 loop), and the run covers at least
  `min_short_token_run` tokens, outside fenced code. Runs with punctuation or numbers alone
  (`|---|` rows, `0, 0, 0,`, `| Yes | Yes |` cells) are structure, and so are
  `None, None, None` in code; no natural text says one word two dozen times in a row
  (GATE_NOTES, the correction on repetition: MiMo-Code's 3-distinct-token guard, kept below
  for blocks, misses these).
- block: the block holds at least `min_distinct_tokens` distinct tokens and
  `min_block_chars` characters, with no upper bound (a 5,000-character paragraph repeated
  is a loop too), and repeats at least `min_repeats` times.
- block, short: a block under `min_block_chars` ("i = i + 1", "n += 1", "a b c") with three
  or more distinct tokens is a loop only with `min_short_block_repeats` copies or more, and
  never when it is a table row (`| . | # |`).
- short-token, punctuation: one or two tokens of punctuation only ("- - -", "! ! !"), no
  letter, digit or table pipe, over `min_punctuation_run` tokens outside fenced code.
- unspaced: inside one token, with nothing between the copies ("thethethe", "!!!!",
  "......"): a unit of at most `max_unit_chars` characters
  repeated `min_unspaced_repeats` times over `min_unspaced_chars` characters or more. These
  three shapes are issue 21's reproduction 12.
- short tail: the text ends in a unit of at most `max_unit_chars` characters holding a letter,
  spaces and line breaks included ("Adverb\n", "Fancy 3", "op"), repeated back to back
  `min_short_tail_repeats` times over `min_short_tail_chars` characters or more, the last
  copy perhaps cut short. A small budget ends a loop before the other kinds' thresholds,
  which are set for thousands of tokens, are reached: SmolLM2-135M broken by weight noise
  loops like this within 48 tokens (docs/real-engine.md). Digits and punctuation alone
  ("0, 0, 0,") stay structure, as above.
- degenerate: the whole text is one character repeated (`min_degenerate_chars` or more,
  whitespace between them aside: "!!!!!!!!") or one word repeated (`min_degenerate_words` or
  more: "foss foss foss"), at any length: a broken kernel writes that from its first token
  (vLLM issues 42426 and 40357); no answer or reasoning is that and nothing else. Digits alone
  ("00000000") stay data.
- counter: the block repeats only once its numbers are masked ("Step 14: let me check
  again. Step 15: let me check again."), at least `min_counter_repeats` times, holds at
  least `min_counter_words` distinct words (or one or two, with `min_few_word_counter_repeats`
  copies and nothing of code or markup in it: "17. house 4\n18. house 4", the real SmolLM2
  loop; a table row with a counter, "| feature 12 | Yes | Yes |", or unrolled tests,
  "def test_x_7(): assert f(7) == 7", are structure), and every number in it moves as a
  counter does: each number position across the copies is constant or an arithmetic progression,
  and at least one moves. A list whose numbers carry data (latencies, squares, dates with
  weekdays) has positions that are not progressions and stays healthy; this is also what
  misses a counter loop that computes something non-linear in each step.

A run that reaches the end of the text (the last copy may be cut short, as at a token
limit) is a tail loop: vLLM's RepetitionDetectionParams look only there. A run that stops
before the end is an escaped loop: the model got out and answered, so the loop is only
seen here (a loop at the tail is seen by max_tokens too). Escaped block loops need
`min_escaped_repeats` copies, more than tail ones, because healthy text may repeat a line
a few times in the middle; a block of `long_block_chars` or more (a paragraph, a page) needs
only `min_repeats` anywhere: no healthy text repeats a paragraph four times verbatim. The verdict `looping` is whether any run qualifies; the report
describes the tail loop if there is one, else the qualifying run that covers most text.

Finding the runs: every token becomes an integer id; a 4-gram of ids that occurs three
times at equal spacing q (its nearest earlier occurrence q tokens back, and that one's q
tokens before it) seeds a run of period q, which is then followed both ways with vectorised
comparisons of ids[j] and ids[j - q]. Nearest earlier occurrences come from one stable sort
of the 4-gram hashes. Counter loops are the same search on ids whose digits are masked. The
cost is one tokenising pass and a sort (O(n log n), in C) plus time linear in the runs
followed; benchmarks/README.md has figures.

`seq_rep_4` (Welleck et al. 2019) and `longest_adjacent_repeat` are reported as evidence and
do not change the verdict: `seq_rep_4` is also near 1 on a table of identical separator rows.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

# Scripts written without spaces between words: each character counts as one token.
_CJK = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# Zero-width characters separate tokens as spaces do: words joined by them are separate words
# to a reader ("wait\u200dwait" is "wait wait").
_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
_SPACE = f"\\s{_ZERO_WIDTH}"
_TOKEN = re.compile(f"[{_CJK}]|[^{_SPACE}{_CJK}]+")
# A token with the whitespace before it: the lengths of these pieces give token offsets.
_PIECE = re.compile(f"[{_SPACE}]*(?:[{_CJK}]|[^{_SPACE}{_CJK}]+)")
_LEADING_SPACE = re.compile(f"^[{_SPACE}]+")


def _bare(piece: str) -> str:
    """A piece without the whitespace (and zero-width characters) before its token."""
    return _LEADING_SPACE.sub("", piece)


_DIGITS = re.compile(r"\d+")
_NUMBER = re.compile(r"\d+[.,;:!?…、，。！？；：]*")
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)

_EXCERPT_CHARS = 200
# A gram of 4 ids: long enough that a block rarely repeats one inside itself, short enough
# that three equally spaced occurrences fit in four copies of any block of 3 or more tokens.
_GRAM = 4
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)

LoopKind = Literal["short-token", "block", "counter", "unspaced", "short-tail", "degenerate"]


@dataclass(frozen=True)
class RepetitionConfig:
    """Thresholds of the detector; the defaults are the gate's (module docstring)."""

    min_block_chars: int = 12
    min_repeats: int = 4
    min_escaped_repeats: int = 6
    long_block_chars: int = 200
    min_distinct_tokens: int = 3
    min_short_token_run: int = 24
    min_counter_repeats: int = 8
    min_counter_words: int = 3
    # A counter block with one or two distinct words ("12. house 4") is a loop only with this
    # many copies and no code or markup character: a numbered list of one repeated word a dozen
    # items long is still a list; SmolLM2's real loops of this shape ran 20 to 24 copies.
    min_few_word_counter_repeats: int = 16
    # A block shorter than min_block_chars ("i = i + 1", "n += 1", "a b c") is a loop only with
    # this many copies: healthy text repeats a short line a few times, never dozens.
    min_short_block_repeats: int = 24
    # A run of one or two punctuation-only tokens ("- - - -", "! ! !") outside fenced code and
    # tables: no healthy text writes hundreds of them in a row.
    min_punctuation_run: int = 200
    # Inside one token (nothing between the copies: "thethethe", "!!!!", "......"): a unit of at most max_unit_chars characters
    # repeated min_unspaced_repeats times or more over min_unspaced_chars characters or more.
    # An 80-character "=====" rule or a "|---|---|" table row stays under these.
    max_unit_chars: int = 32
    min_unspaced_repeats: int = 24
    min_unspaced_chars: int = 200
    # At the end of the text, a unit holding a letter, whitespace included ("Adverb\n"):
    # healthy text does not end in a dozen copies of one short line or word.
    min_short_tail_repeats: int = 12
    min_short_tail_chars: int = 40
    # A whole text that is one character ("!!!!!!!!") or one word ("foss foss foss") over and
    # over, at any length: what a broken kernel writes from its first token (vLLM issues 42426
    # and 40357); no answer or reasoning is that and nothing else.
    min_degenerate_chars: int = 8
    min_degenerate_words: int = 3
    # Evidence only: the longest adjacent repeat is searched up to this length, and both
    # it and seq_rep_4 read the trailing window_chars.
    max_block_chars: int = 2000
    window_chars: int = 20000
    # Advisory only (RepetitionReport.high_seq_rep). A loop that fills the window scores
    # about 1 - block tokens / window tokens: 0.90 for a 1,950-character paragraph, >= 0.97
    # for sentences. Healthy text in the tests: prose 0.00, similar Python functions 0.00,
    # a varied table 0.49, a bulleted list of similar items 0.63. 0.85 sits between.
    seq_rep_threshold: float = 0.85

    def __post_init__(self) -> None:
        if not 1 <= self.min_block_chars <= self.max_block_chars:
            raise ValueError("need 1 <= min_block_chars <= max_block_chars")
        if (
            self.min_repeats < 2
            or self.min_escaped_repeats < 2
            or self.min_counter_repeats < 2
            or self.min_few_word_counter_repeats < 2
        ):
            raise ValueError(
                "min_repeats, min_escaped_repeats and min_counter_repeats must be at least 2: one copy is not a repeat"
            )
        if self.min_short_token_run < 2:
            raise ValueError("min_short_token_run must be at least 2")
        if self.min_distinct_tokens < 0 or self.min_counter_words < 0 or self.window_chars < 1:
            raise ValueError("min_distinct_tokens and min_counter_words must be >= 0 and window_chars >= 1")
        if not 0.0 <= self.seq_rep_threshold <= 1.0:
            raise ValueError("seq_rep_threshold must lie in [0, 1]")


@dataclass(frozen=True)
class LoopVerdict:
    """Whether one text loops, and the loop described (`judge`).

    looping: the verdict: some run qualifies as a loop (module docstring).
    kind: "short-token", "block" or "counter" for the loop described; None when healthy.
    escaped: the described loop stops before the end of the text (the model got out).
    tail_loop: some qualifying loop reaches the end of the text.
    loop_count: how many qualifying loops the text holds.
    loop_start: character offset where the described loop starts (-1 when healthy).
    loop_block: its block as it first appears in the loop, cut to 200 characters. The loop
        is a maximal run, so when the text before it happens to end like the block, the loop
        starts that much earlier and the block shows as a rotation of the model's own.
    loop_repeats: complete copies of the block in the loop (a cut-short last copy not counted).
    loop_chars: characters covered by the loop (a tail loop: up to the end of the text).
    """

    looping: bool
    kind: LoopKind | None
    escaped: bool
    tail_loop: bool
    loop_count: int
    loop_start: int
    loop_block: str | None
    loop_repeats: int
    loop_chars: int


@dataclass(frozen=True)
class RepetitionReport(LoopVerdict):
    """What `detect` found in one text: the verdict and evidence that does not change it.

    seq_rep_4: 1 - unique / total token 4-grams over the trailing window_chars.
    longest_adjacent_repeat: length of the longest s with s + s in the trailing
        window_chars (whole text when shorter), capped at max_block_chars.
    high_seq_rep: seq_rep_4 >= seq_rep_threshold; advisory, not part of the verdict.
    """

    seq_rep_4: float
    longest_adjacent_repeat: int
    high_seq_rep: bool = False

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict for the run's records."""
        record = asdict(self)
        record["seq_rep_4"] = round(self.seq_rep_4, 4)
        return record


@dataclass(frozen=True)
class Loop:
    """One qualifying loop: its kind, where it is (characters) and how many copies."""

    kind: LoopKind
    start: int
    end: int
    block: str
    repeats: int
    tail: bool


def judge(text: str | None, config: RepetitionConfig = RepetitionConfig()) -> LoopVerdict:
    """Tell whether `text` holds a mechanical loop (None reads as the empty text)."""
    text = text or ""
    loops = find_loops(text, config)
    tails = [loop for loop in loops if loop.tail]
    described = tails[0] if tails else max(loops, key=lambda loop: loop.end - loop.start, default=None)
    return LoopVerdict(
        looping=described is not None,
        kind=described.kind if described else None,
        escaped=described is not None and not described.tail,
        tail_loop=bool(tails),
        loop_count=len(loops),
        loop_start=described.start if described else -1,
        loop_block=described.block[:_EXCERPT_CHARS] if described else None,
        loop_repeats=described.repeats if described else 0,
        loop_chars=described.end - described.start if described else 0,
    )


def detect(text: str | None, config: RepetitionConfig = RepetitionConfig()) -> RepetitionReport:
    """`judge`'s verdict on `text`, with seq_rep_4 and the longest adjacent repeat as evidence."""
    text = text or ""
    seq_rep = _seq_rep_4(text, config.window_chars)
    return RepetitionReport(
        **vars(judge(text, config)),
        seq_rep_4=seq_rep,
        longest_adjacent_repeat=_longest_adjacent_repeat(text[-config.window_chars :], config.max_block_chars),
        high_seq_rep=seq_rep >= config.seq_rep_threshold,
    )


_Verdict = TypeVar("_Verdict", bound=LoopVerdict)


def _by_part(
    reasoning: str | None,
    content: str | None,
    config: RepetitionConfig,
    read: Callable[[str | None, RepetitionConfig], _Verdict],
) -> dict[str, _Verdict]:
    # The combined text catches a loop that starts in the reasoning and runs on into the
    # content; a missing part is left out of the join rather than read as an empty line.
    combined = "\n".join(part for part in (reasoning, content) if part is not None)
    return {"reasoning": read(reasoning, config), "content": read(content, config), "combined": read(combined, config)}


def detect_output(
    reasoning: str | None, content: str | None, config: RepetitionConfig = RepetitionConfig()
) -> dict[str, RepetitionReport]:
    """`detect`'s reports for the reasoning, the content and both joined by a newline."""
    return _by_part(reasoning, content, config, detect)


def judge_output(
    reasoning: str | None, content: str | None, config: RepetitionConfig = RepetitionConfig()
) -> dict[str, LoopVerdict]:
    """`judge`'s verdicts on the same three texts as `detect_output`, without the evidence: the
    agent loop judges every turn and records only the verdict, and the longest adjacent repeat
    was two thirds of the detector's time there (agentic suite at 8 samples: 82 s to 52 s)."""
    return _by_part(reasoning, content, config, judge)


# --- finding the loops -----------------------------------------------------------------


@dataclass(frozen=True)
class _Tokens:
    """The text's tokens, their ids, and what is needed to find a token's offset.

    Only the pieces (a token with the whitespace before it) are kept, not the bare tokens
    too: on a 100 MB output each list of strings costs about a gigabyte."""

    text: str
    pieces: list[str]
    ids: npt.NDArray[np.int64]
    masked_ids: npt.NDArray[np.int64]
    piece_ends: npt.NDArray[np.int64]

    @classmethod
    def of(cls, text: str) -> _Tokens:
        pieces = _PIECE.findall(text)
        vocabulary: dict[str, int] = {}
        ids = np.fromiter(
            (vocabulary.setdefault(_bare(piece), len(vocabulary)) for piece in pieces), np.int64, len(pieces)
        )
        # Masking digits per distinct token, not per token: the vocabulary is far smaller.
        masked: dict[str, int] = {}
        masked_of = np.fromiter(
            (masked.setdefault(_DIGITS.sub("0", word), len(masked)) for word in vocabulary), np.int64, len(vocabulary)
        )
        piece_ends = np.cumsum(np.fromiter(map(len, pieces), np.int64, len(pieces)))
        return cls(text, pieces, ids, masked_of[ids] if ids.size else ids, piece_ends)

    def __len__(self) -> int:
        return len(self.pieces)

    def words(self, first: int, stop: int) -> list[str]:
        """The tokens first..stop-1, without their whitespace."""
        return [_bare(piece) for piece in self.pieces[first:stop]]

    def start(self, index: int) -> int:
        """Character offset of token `index` (the end of the text past the last token)."""
        if index >= len(self.pieces):
            return len(self.text)
        return int(self.piece_ends[index]) - len(_bare(self.pieces[index]))


def find_loops(text: str, config: RepetitionConfig = RepetitionConfig()) -> list[Loop]:
    """Every qualifying loop in `text`, in order of position."""
    tokens = _Tokens.of(text)
    loops: list[Loop] = []
    covered: list[tuple[int, int]] = []
    for period, first, stop in _periodic_runs(tokens.ids):
        covered.append((first, stop))
        loop = _qualify(tokens, period, first, stop, config)
        if loop is not None:
            loops.append(loop)
    for period, first, stop in _periodic_runs(tokens.masked_ids):
        if any(first >= start and stop <= end for start, end in covered):
            continue  # the digits were not what changed: judged above as it is
        loop = _qualify_counter(tokens, period, first, stop, config)
        if loop is not None:
            loops.append(loop)
    loops += _unspaced_loops(tokens, config)
    if not any(loop.tail for loop in loops):
        loops += _short_tail_loops(text, config)
    if not loops:
        loops += _degenerate_loops(text, config)
    return sorted(loops, key=lambda loop: loop.start)


_WORD_RUN = re.compile(r"\s*([^\W\d_]+)(?:\s+\1)+\s*")


def _degenerate_loops(text: str, config: RepetitionConfig) -> list[Loop]:
    """The whole text one character or one word repeated (module docstring: degenerate)."""
    stripped = "".join(text.split())
    if len(stripped) >= config.min_degenerate_chars and len(set(stripped)) == 1 and not stripped[0].isdigit():
        return [Loop(kind="degenerate", start=0, end=len(text), block=stripped[0], repeats=len(stripped), tail=True)]
    whole = _WORD_RUN.fullmatch(text)
    if whole is not None:
        copies = len(text.split())
        if copies >= config.min_degenerate_words:
            return [Loop(kind="degenerate", start=0, end=len(text), block=whole[1], repeats=copies, tail=True)]
    return []


def _qualify(tokens: _Tokens, period: int, first: int, stop: int, config: RepetitionConfig) -> Loop | None:
    """The loop made by tokens[first:stop] (period `period`), if it qualifies as one."""
    block = tokens.words(first, first + period)
    distinct = set(block)
    repeats = (stop - first) // period
    tail = _reaches_end(tokens, period, stop)
    if len(distinct) <= 2:
        if not (
            _is_short_token_run(distinct, stop - first, config) or _is_punctuation_run(distinct, stop - first, config)
        ):
            return None
        if _in_fenced_code(tokens.text, tokens.start(first)):
            return None
        kind: LoopKind = "short-token"
    else:
        block_chars = tokens.start(first + period) - tokens.start(first)
        long_block = block_chars >= config.long_block_chars
        needed = config.min_repeats if tail or long_block else config.min_escaped_repeats
        if block_chars < config.min_block_chars:
            if any("|" in word for word in distinct):
                return None  # a short table row: structure, as above
            needed = max(needed, config.min_short_block_repeats)
        if len(distinct) < config.min_distinct_tokens or repeats < needed:
            return None
        kind = "block"
    return _loop(tokens, kind, period, first, stop, tail)


def _is_short_token_run(distinct: set[str], length: int, config: RepetitionConfig) -> bool:
    """One or two words or sentence punctuation, at least one a word, or a word and a number
    ("Cat 3:"), `min_short_token_run` long."""
    return (
        length >= config.min_short_token_run
        and any(_is_word(word) for word in distinct)
        and all(_is_word(word) or _is_sentence_punctuation(word) or _is_number(word) for word in distinct)
    )


# Characters of code and markup: a counter block of one or two words holding any of them is an
# unrolled test ("def test_x_7(): assert f(7) == 7"), a table row or a formula, not a loop.
_CODE_CHARACTERS = frozenset("()[]{}<>=|_/\\`#*+^&%$@~")


def _is_plain(token: str) -> bool:
    return not any(character in _CODE_CHARACTERS for character in token)


def _is_number(token: str) -> bool:
    """Digits with sentence punctuation around them ("3:", "12,", "(4)." is not: brackets are structure)."""
    return bool(_NUMBER.fullmatch(token))


def _is_punctuation_run(distinct: set[str], length: int, config: RepetitionConfig) -> bool:
    """One or two tokens of punctuation only (no letter, digit or table pipe), `min_punctuation_run` long."""
    return length >= config.min_punctuation_run and all(
        word and "|" not in word and not any(character.isalnum() for character in word) for word in distinct
    )


# A unit of 1 to N characters followed by at least M - 1 more copies of itself (N, M filled in).
_UNSPACED = "(.{{1,{unit}}}?)\\1{{{more},}}"


def _unspaced_loops(tokens: _Tokens, config: RepetitionConfig) -> list[Loop]:
    """Loops inside one token (module docstring: unspaced); only tokens long enough are searched."""
    lengths = np.diff(tokens.piece_ends, prepend=0)
    pattern = re.compile(_UNSPACED.format(unit=config.max_unit_chars, more=config.min_unspaced_repeats - 1), re.S)
    loops = []
    for found in np.flatnonzero(lengths >= config.min_unspaced_chars):
        index = int(found)
        token = _bare(tokens.pieces[index])
        offset = tokens.start(index)
        for match in pattern.finditer(token):
            unit = match.group(1)
            if match.end() - match.start() < config.min_unspaced_chars or "|" in unit:
                continue
            # A cut-short last copy (as at a token limit) still ends the loop at the text's end.
            rest = token[match.end() :]
            tail = index == len(tokens) - 1 and (not rest or unit.startswith(rest))
            start = offset + match.start()
            end = len(tokens.text) if tail else offset + match.end()
            repeats = (match.end() - match.start()) // len(unit)
            loops.append(Loop(kind="unspaced", start=start, end=end, block=unit, repeats=repeats, tail=tail))
    return loops


# How far back from the end the short-tail search looks: a longer run is reported from here.
_SHORT_TAIL_WINDOW = 4096


def _short_tail_loops(text: str, config: RepetitionConfig) -> list[Loop]:
    """A short unit with a letter repeated until the text ends (module docstring: short tail).

    For each unit length, the longest end of the text with that period (every character equal
    to the one a unit later) is found with one vectorised comparison; the shortest length
    whose run qualifies names the unit. Linear in the window, whatever the text."""
    window = text[-_SHORT_TAIL_WINDOW:]
    codes = np.frombuffer(window.encode("utf-32-le"), np.uint32)
    for length in range(1, min(config.max_unit_chars, codes.size // 2) + 1):
        differs = np.flatnonzero(codes[:-length] != codes[length:])
        # The run starts just past the last character that differs from the one a unit later.
        first = int(differs[-1]) + 1 if differs.size else 0
        run = codes.size - first
        if run // length < config.min_short_tail_repeats or run < config.min_short_tail_chars:
            continue
        unit = window[first : first + length]
        if not _holds_a_letter(unit) or "|" in unit:
            return []
        start = len(text) - run
        return [Loop(kind="short-tail", start=start, end=len(text), block=unit, repeats=run // length, tail=True)]
    return []


def _holds_a_letter(unit: str) -> bool:
    return any(character.isalpha() for character in unit)


def _qualify_counter(tokens: _Tokens, period: int, first: int, stop: int, config: RepetitionConfig) -> Loop | None:
    """The counter loop made by tokens[first:stop] once digits are masked, if it is one."""
    repeats = (stop - first) // period
    block = tokens.words(first, first + period)
    words = {word.strip(string.punctuation) for word in block if _is_word(word)}
    if repeats < config.min_counter_repeats or not words:
        return None
    few_words = len(words) < config.min_counter_words
    if few_words and (repeats < config.min_few_word_counter_repeats or not all(map(_is_plain, block))):
        return None
    copies = [
        [int(number) for word in tokens.words(start, start + period) for number in _DIGITS.findall(word)]
        for start in range(first, first + repeats * period, period)
    ]
    if not _moves_as_a_counter(copies):
        return None
    return _loop(tokens, "counter", period, first, stop, _reaches_end(tokens, period, stop))


def _moves_as_a_counter(copies: Sequence[Sequence[int]]) -> bool:
    """Every number position is constant or an arithmetic progression over the copies,
    and at least one of them moves."""
    if not copies or not copies[0] or any(len(numbers) != len(copies[0]) for numbers in copies):
        return False
    moves = False
    for column in zip(*copies, strict=True):
        step = column[1] - column[0]
        if any(later - earlier != step for earlier, later in pairwise(column)):
            return False
        moves = moves or step != 0
    return moves


def _loop(tokens: _Tokens, kind: LoopKind, period: int, first: int, stop: int, tail: bool) -> Loop:
    start = tokens.start(first)
    end = len(tokens.text) if tail else tokens.start(stop)
    block = tokens.text[start : tokens.start(first + period)]
    return Loop(kind=kind, start=start, end=end, block=block, repeats=(stop - first) // period, tail=tail)


def _reaches_end(tokens: _Tokens, period: int, stop: int) -> bool:
    """The run ends with the text, or one token before it with that token a cut-short copy."""
    count = len(tokens)
    if stop == count:
        return True
    [copied], [cut] = tokens.words(stop - period, stop - period + 1), tokens.words(stop, stop + 1)
    return stop == count - 1 and copied.startswith(cut)


def _in_fenced_code(text: str, offset: int) -> bool:
    """Whether `offset` lies inside a fenced code block (an odd number of fences before it)."""
    return len(_FENCE.findall(text, 0, offset)) % 2 == 1


# Punctuation that ends or splits a sentence, in Latin and CJK scripts; not table pipes,
# dashes or brackets, which are structure.
_SENTENCE_PUNCTUATION = frozenset(".,;:!?…、，。！？；：")


def _is_sentence_punctuation(token: str) -> bool:
    return all(character in _SENTENCE_PUNCTUATION for character in token)


def _is_word(token: str) -> bool:
    return token.strip(string.punctuation).isalpha()


def _periodic_runs(ids: npt.NDArray[np.int64]) -> list[tuple[int, int, int]]:
    """(period, first, stop) of maximal runs where tokens[first:stop] repeats its first
    `period` tokens back to back at least twice, seeded by 4-grams seen three times at
    equal spacing (module docstring)."""
    count = ids.size
    if count < _GRAM + 2:
        return []
    grams = count - _GRAM + 1
    hashes = np.zeros(grams, np.uint64)
    for offset in range(_GRAM):
        hashes = hashes * _HASH_MULTIPLIER + ids[offset : offset + grams].astype(np.uint64) + np.uint64(1)
    order = np.argsort(hashes, kind="stable")
    same = hashes[order[1:]] == hashes[order[:-1]]
    previous = np.full(grams, -1, np.int64)
    previous[order[1:][same]] = order[:-1][same]
    before = np.where(previous >= 0, previous[np.maximum(previous, 0)], -1)
    positions = np.arange(grams, dtype=np.int64)
    spacing = positions - previous
    seeds = np.flatnonzero((before >= 0) & (previous - before == spacing))
    runs: list[tuple[int, int, int]] = []
    reached = 0
    index = 0
    while index < seeds.size:
        seed = int(seeds[index])
        period = int(spacing[seed])
        start = _extend_back(ids, period, seed)
        stop = _extend_forward(ids, period, seed)
        if stop - start >= period:  # at least one whole copy matched the one before it
            runs.append((period, start - period, stop))
        reached = max(reached, stop, seed + 1)
        index = int(np.searchsorted(seeds, reached))
    return runs


def _extend_forward(ids: npt.NDArray[np.int64], period: int, start: int) -> int:
    """The first j >= start with ids[j] != ids[j - period] (or the end), galloping."""
    count = ids.size
    position, step = start, 64
    while position < count:
        stop = min(count, position + step)
        differ = np.flatnonzero(ids[position:stop] != ids[position - period : stop - period])
        if differ.size:
            return position + int(differ[0])
        position, step = stop, step * 2
    return count


def _extend_back(ids: npt.NDArray[np.int64], period: int, start: int) -> int:
    """The smallest a >= period with ids[j] == ids[j - period] for every j in [a, start)."""
    position, step = start, 64
    while position > period:
        low = max(period, position - step)
        differ = np.flatnonzero(ids[low:position] != ids[low - period : position - period])
        if differ.size:
            return low + int(differ[-1]) + 1
        position, step = low, step * 2
    return period


# --- evidence: seq-rep-4 and the longest adjacent repeat --------------------------------


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _seq_rep_4(text: str, window: int) -> float:
    """1 - unique 4-grams / 4-grams of the tokens in the trailing window (Welleck et al.)."""
    tokens = _tokens(text[-window:])
    if len(text) > window:
        tokens = tokens[1:]  # the window may start inside a token
    grams = list(zip(tokens, tokens[1:], tokens[2:], tokens[3:], strict=False))
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def _longest_adjacent_repeat(region: str, max_length: int) -> int:
    """Length of the longest s with s + s in `region`, at most `max_length`.

    For each length p, s + s occurs exactly where p consecutive positions satisfy
    region[i] == region[i + p]. Checking one length is a vectorised pass over the region;
    checking all of them (O(len(region) × max_length), about 20 ms on a 4 KB answer) is
    avoided by `_possible_lengths`, which keeps only the lengths a square could have.
    Lengths are tried longest first, so a looping text stops at once."""
    codes: npt.NDArray[np.uint32] = np.frombuffer(region.encode("utf-32-le"), dtype=np.uint32)
    longest = min(max_length, codes.size // 2)
    possible = _possible_lengths(region, longest)
    for length in sorted(possible, reverse=True) if possible is not None else range(longest, 0, -1):
        if _has_square(codes, length):
            return length
    return 0


# Past this many pairs of equal 4-grams (tables, code with repeated lines) listing their
# distances costs more than trying every length.
_MAX_GRAM_PAIRS = 20_000


def _possible_lengths(region: str, longest: int) -> set[int] | None:
    """Every length <= `longest` that a square s + s in `region` could have, or None when
    the text repeats too much for the list to be cheaper than trying every length.

    If s holds four consecutive whole tokens, the same token 4-gram starts exactly |s|
    characters later, in the second copy: so |s| is a distance between two occurrences of
    one 4-gram. Otherwise s holds at most three whole tokens and lies between the start of
    some token k (or the region's start) and the start of token k + 5 (or the region's
    end): so |s| is at most the widest such span."""
    matches = list(_TOKEN.finditer(region))
    starts = [0, *(match.start() for match in matches), *[len(region)] * 5]
    short_bound = max(later - earlier for earlier, later in zip(starts, starts[5:], strict=False))
    lengths = set(range(1, min(short_bound, longest) + 1))
    occurrences: dict[tuple[str, ...], list[int]] = {}
    tokens = [match.group() for match in matches]
    for index, gram in enumerate(zip(tokens, tokens[1:], tokens[2:], tokens[3:], strict=False)):
        occurrences.setdefault(gram, []).append(matches[index].start())
    pairs = 0
    for positions in occurrences.values():
        if len(positions) < 2:
            continue
        pairs += len(positions) * (len(positions) - 1) // 2
        if pairs > _MAX_GRAM_PAIRS:
            return None
        for later_index, later in enumerate(positions):
            for earlier in positions[:later_index]:
                if later - earlier <= longest:
                    lengths.add(later - earlier)
    return lengths


def _has_square(codes: npt.NDArray[np.uint32], length: int) -> bool:
    """Whether some run of `length` consecutive positions matches the text `length` later."""
    runs = codes[length:] == codes[:-length]  # runs[i]: a run of `reach` matches starts at i
    reach = 1
    # Doubling the run length by AND-ing shifted copies needs O(log length) cheap passes,
    # and healthy text runs out of long runs after the first one or two.
    while reach < length and runs.any():
        step = min(reach, length - reach)
        runs = runs[:-step] & runs[step:]
        reach += step
    return bool(runs.any())
