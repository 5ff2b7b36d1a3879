"""Repetition (looping) detector for model outputs.

A broken serving kernel (a fused-MoE bug in a public Kimi K3 report) made half of the long
coding outputs fall into mechanical repetition until the token limit, after a healthy start.
This module flags such outputs, one at a time, without flagging healthy text that merely
looks repetitive (Markdown tables, code with similar functions, bulleted lists).

The verdict (`RepetitionReport.looping`) is exactly `tail_loop`:

    a block of B characters, min_block_chars <= B <= max_block_chars, repeated back to back
    at least min_repeats times (the last copy may be cut short, as at a token limit) and
    reaching the very END of the text, whose text holds at least min_distinct_tokens
    distinct tokens.

The end-anchored rule is vLLM's (RepetitionDetectionParams) and MiMo's: a model that loops
until the token limit leaves the loop at the end, while healthy text may repeat a line or
two in the middle. The distinct-token guard is MiMo-Code's fix: `|---|---|` rows or
`0x00, 0x00,` runs are periodic, but a block made of one or two tokens is structure, not a
loop. Tokens are whitespace-separated, except that each CJK character is a token of its
own, since those scripts do not put spaces between words (a Chinese loop would otherwise be
a single "token" and escape the guard).

`seq_rep_4` (Welleck et al. 2019) and `longest_adjacent_repeat` are reported as evidence and
do not change the verdict: `seq_rep_4` is also near 1 on a table of identical separator rows,
which is exactly the false positive the distinct-token guard exists to avoid.

Cost: the tail check reads only the end of the text (at most max_block_chars ×
(min_repeats + 1) characters per candidate period, compared with C-speed slice equality),
then follows the one chosen loop back to where it starts, so time grows with the loop's
length, never with the healthy prefix. `seq_rep_4` and `longest_adjacent_repeat` read the
trailing `window_chars` only.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

# Scripts written without spaces between words: each character counts as one token.
_CJK = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")

_EXCERPT_CHARS = 200


@dataclass(frozen=True)
class RepetitionConfig:
    """Thresholds of the detector; the defaults are the gate's."""

    min_block_chars: int = 12
    max_block_chars: int = 2000
    min_repeats: int = 4
    min_distinct_tokens: int = 3
    window_chars: int = 20000
    # Advisory only (RepetitionReport.high_seq_rep). A loop that fills the window scores
    # about 1 - block tokens / window tokens: 0.90 for a 1,950-character paragraph, >= 0.97
    # for sentences. Healthy text in the tests: prose 0.00, similar Python functions 0.00,
    # a varied table 0.49, a bulleted list of similar items 0.63. 0.85 sits between.
    # A loop that fills less than the window scores lower (five 1,950-character copies
    # after prose: 0.61), and |---| rows score 1.0: why this is not the verdict.
    seq_rep_threshold: float = 0.85

    def __post_init__(self) -> None:
        if not 1 <= self.min_block_chars <= self.max_block_chars:
            raise ValueError("need 1 <= min_block_chars <= max_block_chars")
        if self.min_repeats < 2:
            raise ValueError("min_repeats must be at least 2: one copy is not a repeat")
        if self.min_distinct_tokens < 0 or self.window_chars < 1:
            raise ValueError("min_distinct_tokens must be >= 0 and window_chars >= 1")
        if not 0.0 <= self.seq_rep_threshold <= 1.0:
            raise ValueError("seq_rep_threshold must lie in [0, 1]")


@dataclass(frozen=True)
class RepetitionReport:
    """What `detect` found in one text.

    tail_loop: a qualifying block repeats back to back up to the end (module docstring).
    loop_block: the repeated block as it first appears in the loop, cut to 200 characters.
        The loop is the longest periodic end of the text, so when the text before the loop
        happens to end like the block (". " before "Let me ... again. "), the loop starts
        that much earlier and the block shows as a rotation of the model's own.
    loop_repeats: complete copies of the block in the loop (a cut-short last copy not counted).
    loop_chars: characters covered by the loop, the cut-short last copy included.
    seq_rep_4: 1 - unique / total token 4-grams over the trailing window_chars.
    longest_adjacent_repeat: length of the longest s with s + s in the trailing
        window_chars (whole text when shorter), capped at max_block_chars.
    looping: the verdict; equals tail_loop.
    high_seq_rep: seq_rep_4 >= seq_rep_threshold; advisory, not part of the verdict.
    """

    tail_loop: bool
    loop_block: str | None
    loop_repeats: int
    loop_chars: int
    seq_rep_4: float
    longest_adjacent_repeat: int
    looping: bool
    high_seq_rep: bool = False

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict for the run's records."""
        record = asdict(self)
        record["seq_rep_4"] = round(self.seq_rep_4, 4)
        return record


@dataclass(frozen=True)
class _Loop:
    period: int
    start: int


def detect(text: str | None, config: RepetitionConfig = RepetitionConfig()) -> RepetitionReport:
    """Tell whether `text` ends in a mechanical loop (None reads as the empty text)."""
    text = text or ""
    loop = _find_tail_loop(text, config)
    seq_rep = _seq_rep_4(text, config.window_chars)
    longest = _longest_adjacent_repeat(text[-config.window_chars :], config.max_block_chars)
    if loop is None:
        block, repeats, covered = None, 0, 0
    else:
        covered = len(text) - loop.start
        block = text[loop.start : loop.start + loop.period][:_EXCERPT_CHARS]
        repeats = covered // loop.period
    return RepetitionReport(
        tail_loop=loop is not None,
        loop_block=block,
        loop_repeats=repeats,
        loop_chars=covered,
        seq_rep_4=seq_rep,
        longest_adjacent_repeat=longest,
        looping=loop is not None,
        high_seq_rep=seq_rep >= config.seq_rep_threshold,
    )


def detect_output(
    reasoning: str | None, content: str | None, config: RepetitionConfig = RepetitionConfig()
) -> dict[str, RepetitionReport]:
    """Reports for the reasoning, the content and both joined by a newline.

    The combined text catches a loop that starts in the reasoning and runs on into the
    content; a missing part is left out of the join rather than read as an empty line."""
    combined = "\n".join(part for part in (reasoning, content) if part is not None)
    return {
        "reasoning": detect(reasoning, config),
        "content": detect(content, config),
        "combined": detect(combined, config),
    }


# --- tail loop -------------------------------------------------------------------------


def _find_tail_loop(text: str, config: RepetitionConfig) -> _Loop | None:
    """The period whose back-to-back repeats cover the most of the end, among those that
    qualify; ties go to the shortest period, i.e. the block itself rather than a multiple."""
    end = len(text)
    # A qualifying loop of the longest block needs max_block × min_repeats characters; one
    # more block of headroom lets shorter periods be ranked by how far back they reach.
    scan = min(end, config.max_block_chars * (config.min_repeats + 1))
    candidates: list[tuple[int, int]] = []
    for period in range(config.min_block_chars, min(config.max_block_chars, end // config.min_repeats) + 1):
        covered = period + _common_suffix(text, end, period, scan - period)
        if covered >= config.min_repeats * period:
            candidates.append((covered, period))
    candidates.sort(key=lambda item: (-item[0], item[1]))
    rejected: list[tuple[int, int]] = []
    for covered, period in candidates:
        if any(_same_structure(period, covered, other) for other in rejected):
            continue
        if _distinct_tokens(text[end - min(covered, 3 * period) :]) >= config.min_distinct_tokens:
            # Follow the loop back past the scanned tail: a 100 MB loop is counted in full.
            reach = period + _common_suffix(text, end, period, end - period)
            return _Loop(period=period, start=end - reach)
        rejected.append((period, covered))
    return None


def _same_structure(period: int, covered: int, rejected: tuple[int, int]) -> bool:
    """Whether `period`'s loop is text already rejected for too few distinct tokens, so that
    the |---|---| case costs one token count, not one per multiple of its period.

    Candidates come sorted by coverage, so `rejected` reached at least as far back. A
    multiple of a rejected period repeats the same text; and by Fine and Wilf's theorem a
    suffix with two periods p, q and length >= p + q has period gcd(p, q), so its text is
    again the rejected one's."""
    other_period, _ = rejected
    return period % other_period == 0 or covered >= period + other_period


def _common_suffix(text: str, end: int, shift: int, limit: int) -> int:
    """Largest n <= limit with text[end - n : end] == text[end - shift - n : end - shift]:
    how far back text[i] == text[i - shift] holds from `end`. Galloping then bisecting with
    slice comparisons, so the cost is O(n) at C speed plus O(log n) Python steps."""
    good, step = 0, 1
    while good < limit:
        trial = min(good + step, limit)
        if not _same(text, end, shift, good, trial):
            return _bisect_suffix(text, end, shift, good, trial)
        good, step = trial, step * 2
    return good


def _bisect_suffix(text: str, end: int, shift: int, good: int, bad: int) -> int:
    """The common suffix length, known to be at least `good` and below `bad`."""
    while bad - good > 1:
        middle = (good + bad) // 2
        if _same(text, end, shift, good, middle):
            good = middle
        else:
            bad = middle
    return good


def _same(text: str, end: int, shift: int, start: int, stop: int) -> bool:
    """Whether text[end - stop : end - start] equals the same span `shift` characters earlier."""
    return text[end - stop : end - start] == text[end - shift - stop : end - shift - start]


def _distinct_tokens(region: str) -> int:
    """Distinct tokens of a loop region; its first and last tokens may be cut in half by the
    region's edges, and every whole token of the block also appears inside, so both go."""
    tokens = _tokens(region)
    inner = tokens[1:-1] if len(tokens) > 2 else tokens
    return len(set(inner))


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


# --- evidence: seq-rep-4 and the longest adjacent repeat --------------------------------


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
