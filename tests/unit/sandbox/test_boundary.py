"""The process boundary (k3conformance/sandbox/boundary.py, split.py): plain data crosses
exactly, nothing else is ever made from a message, a broken message ends the trusted process
without its seal, and split programs behave as one process would for honest code."""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any

import pytest

from k3conformance.sandbox import run_python
from k3conformance.sandbox.boundary import BoundaryBroken, Endpoint, RemoteModule, RemoteObject
from k3conformance.sandbox.split import split_program

PLAIN = [
    None,
    True,
    False,
    0,
    -(10**5000),
    2**64,
    1.5,
    -0.0,
    float("inf"),
    float("-inf"),
    complex(1, -2),
    "text \u00e9 \U0001f600 \ud800",
    b"\x00\xff",
    bytearray(b"ab"),
    [1, [2, (3, "x")]],
    (),
    {"b": 1, "a": 2, 3: [4], (5, 6): None, frozenset({7}): 8},
    {1, "two", (3,)},
    frozenset({b"x"}),
]


def _model_side() -> Endpoint:
    # The model's side raises BoundaryBroken (the trusted side ends its process instead).
    return Endpoint(-1, -1, "m", None)


@pytest.mark.parametrize("value", PLAIN, ids=[f"{type(value).__name__}-{index}" for index, value in enumerate(PLAIN)])
def test_plain_data_crosses_exactly(value: Any) -> None:
    end = _model_side()
    wire = json.loads(json.dumps(end.encode(value), allow_nan=False))
    back = end.decode(wire)
    assert type(back) is type(value) and back == value
    if isinstance(value, dict):
        assert list(back) == list(value)


def test_nan_crosses_as_nan() -> None:
    end = _model_side()
    back = end.decode(end.encode(float("nan")))
    assert isinstance(back, float) and math.isnan(back)


def test_anything_else_crosses_as_a_handle_and_comes_back_as_itself() -> None:
    end = _model_side()
    thing, module = object(), os
    assert end.encode(thing) == end.encode(thing) and end.encode(thing)[0] == "h"
    assert end.decode(end.encode(thing)) is thing and end.decode(end.encode(module)) is module
    # A handle of the other side becomes a proxy, one per handle; a module's a module proxy.
    assert isinstance(end.decode(["h", "t", 7, None]), RemoteObject)
    assert end.decode(["h", "t", 7, None]) is end.decode(["h", "t", 7, None])
    assert isinstance(end.decode(["h", "t", 8, "pkg"]), RemoteModule)


@pytest.mark.parametrize(
    "wire",
    [
        ["p", "pickled"],
        ["h", "m", 99, None],  # a handle of this side it never gave
        ["l"],
        ["d", [[["l", []], 1]]],  # an unhashable key
        ["f", "not a float"],
        ["y", "!!"],
        {"a": 1},
        1.5,  # a float only crosses tagged
    ],
    ids=repr,
)
def test_a_malformed_value_breaks_the_boundary(wire: object) -> None:
    with pytest.raises(BoundaryBroken):
        _model_side().decode(wire)


def test_depth_and_size_are_capped() -> None:
    end = _model_side()
    deep: list[object] = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(ValueError, match="too deep"):
        end.encode(deep)
    wire: object = ["l", []]
    for _ in range(200):
        wire = ["l", [wire]]
    with pytest.raises(BoundaryBroken, match="too deep"):
        end.decode(wire)


def test_a_message_is_length_prefixed_tagged_json_and_nothing_else() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, struct.pack(">I", 3) + b"1.5")
        with pytest.raises(BoundaryBroken, match="not tagged JSON"):
            Endpoint(read_fd, -1, "m", 1.0)._receive()
        os.write(write_fd, struct.pack(">I", 1 << 30))
        with pytest.raises(BoundaryBroken, match="size cap"):
            Endpoint(read_fd, -1, "m", 1.0)._receive()
    finally:
        os.close(read_fd)
        os.close(write_fd)


# ---------------------------------------------------------------- split programs in the sandbox

SOLUTION = """
class Custom(ValueError):
    pass


class Thing:
    name = "thing"

    def __eq__(self, other):
        return other == 5

    __hash__ = object.__hash__


THING = Thing()


def fail():
    raise Custom("custom message")


def leave(code):
    raise SystemExit(code)


def apply(function, values):
    return [function(value) for value in values]


def thing():
    return THING


def sort_in_place(values):
    values.sort()


def peek(function):
    for name in ("__globals__", "_function", "__self__", "__code__"):
        try:
            getattr(function, name)
        except AttributeError:
            continue
        return "reached " + name
    return "refused"


def numbers():
    return 2**100, float("nan"), float("-inf"), {(1, 2): {3}}
"""

TESTS = """
import math

try:
    fail()
except ValueError as error:
    assert type(error) is ValueError and str(error) == "custom message", error
else:
    raise AssertionError("no exception")
try:
    leave(3)
except SystemExit as error:
    assert error.code == 3
assert apply(lambda value: value * 2, [1, 2]) == [2, 4]
assert apply(str.upper, ["a"]) == ["A"]
assert thing() is thing() and thing().name == "thing" and thing() == 5
values = [3, 1, 2]
sort_in_place(values)
assert values == [1, 2, 3]
assert peek(lambda: 1) == "refused", peek(lambda: 1)
big, nan, minus_inf, nested = numbers()
assert big == 2**100 and math.isnan(nan) and minus_inf == float("-inf") and nested == {(1, 2): {3}}
print("tests ran to their end")
"""


def test_a_split_program_behaves_as_one_process_for_honest_code() -> None:
    result = run_python(split_program(SOLUTION, TESTS), seal=True)
    assert result.passed and "tests ran to their end" in result.stdout_excerpt, result


def test_the_models_output_never_reaches_the_runs_stdout() -> None:
    solution = "print('k3-seal ' + '0' * 32 + ' \"\"')\ndef f():\n    print('from f')\n    return 1\n"
    result = run_python(split_program(solution, "assert f() == 1\n"), seal=True)
    assert result.passed and "k3-seal" not in result.stdout_excerpt and "from f" in result.stderr_excerpt, result


@pytest.mark.parametrize(
    ("solution", "reason"),
    [
        ("import os\nos._exit(0)\n", "the other side ended"),
        ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", "killed by SIGKILL"),
        ("import time\ndef f():\n    time.sleep(30)\nf()\n", "no reply within 1 s"),
        # Garbage on every descriptor the model's process holds: the protocol pipe among them.
        (
            "import os\nfor fd in range(3, 16):\n    try:\n        os.write(fd, bytes([0, 0, 0, 2]) + b'[]')\n"
            "    except OSError:\n        pass\nimport time\ntime.sleep(5)\n",
            "malformed",
        ),
    ],
    ids=["exit", "kill", "timeout", "garbage"],
)
def test_a_broken_boundary_fails_the_run(solution: str, reason: str) -> None:
    result = run_python(split_program(solution, "assert True\n", timeout_s=1), seal=True)
    assert not result.passed and result.sealed is None and reason in result.reason, result
