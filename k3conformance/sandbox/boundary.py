"""The process boundary between a trusted test process and the model's code (issue 25).

A verdict decided in the process that runs model code can be forged by that code: it can read
the process's memory (the seal's token in a frame), write to any of its descriptors, and
replace whatever the runner checks (docs/sandbox.md, "What is not held"). So the tests run in
a trusted process T that never imports model code, and the model's code runs in a process M
of its own, a fresh interpreter (an exec, not a fork: its memory never held the token) that T
starts after the seal's file is gone, with nothing inherited but a pipe pair and its output
going to T. T is made non-dumpable first, so M (same uid, no capabilities in the sandbox)
cannot ptrace it or open its memory, descriptors or environment under /proc.

Across the pipes only plain data travels, as tagged JSON (never pickle: T never deserializes
code or objects from M): None, bool, int, float (nan and inf included), complex, str, bytes,
bytearray, list, tuple, dict (order kept, any plain keys), set and frozenset. Anything else
is a handle: a `RemoteObject` (or `RemoteModule`) on the other side forwards attribute
access, calls, operators, iteration, `repr` and so on. Exceptions travel as the first builtin
class of their MRO with their message (SystemExit with its code) and are raised as that
builtin class. A callable the tests pass (a key function) becomes a handle M calls back; T
serves M only calls and a few operators on what it passed, never attributes that lead to a
frame or a module (where the token is). Depth and size caps and a per-call timeout hold; a
malformed message, a late reply or M's end ends T at once (`BoundaryBroken`, no seal).

This module runs inside the sandbox on both sides: it imports only the standard library and
is shipped as its own source (`boundary_prelude`).
"""

from __future__ import annotations

import base64
import builtins
import functools
import json
import operator
import os
import select
import struct
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import importlib.machinery

# What only T needs (ctypes, subprocess, threading, importlib.machinery) is imported where
# T uses it: M starts once per verdict, and each import there is paid on every run.

# One message, whole, at most this many bytes; deeper values than MAX_DEPTH or more than
# MAX_ITEMS values in one message are refused.
MAX_MESSAGE = 16 << 20
MAX_DEPTH = 100
MAX_ITEMS = 1_000_000
# Calls inside calls (a callback that calls the model that calls back ...).
MAX_NESTING = 64
CALL_TIMEOUT_S = 20.0
# What T keeps of M's stdout and stderr (written to T's stderr at the end, never its stdout).
OUTPUT_CAP = 64 << 10
BROKEN_STATUS = 70
_LENGTH = struct.Struct(">I")
_PR_SET_DUMPABLE = 4
_TRUSTED, _MODEL = "t", "m"


class BoundaryBroken(Exception):
    """The other side broke the protocol, went silent or ended: no verdict can come of the run."""


# What a served "op" may do: the operator each forwarded special method stands for. The
# arguments arrive decoded, so a reflected method (__radd__) is the same operator with its
# operands swapped by the caller.
_OPERATIONS: dict[str, Callable[..., Any]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "ge": operator.ge, "hash": hash, "bool": bool, "len": len, "iter": iter, "next": next,
    "contains": operator.contains, "getitem": operator.getitem, "setitem": operator.setitem,
    "delitem": operator.delitem, "repr": repr, "str": str, "format": format, "dir": dir,
    "reversed": reversed, "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "matmul": operator.matmul, "truediv": operator.truediv, "floordiv": operator.floordiv,
    "mod": operator.mod, "divmod": divmod, "pow": pow, "lshift": operator.lshift,
    "rshift": operator.rshift, "and": operator.and_, "xor": operator.xor, "or": operator.or_,
    "neg": operator.neg, "pos": operator.pos, "abs": abs, "invert": operator.invert, "int": int,
    "float": float, "complex": complex, "index": operator.index, "round": round,
    "names": lambda module: sorted(name for name in vars(module) if not name.startswith("__")),
}  # fmt: skip
# What T answers for M, on the objects T passed it (a key function, a file-like object):
# nothing that hands M an attribute walk towards T's frames or modules.
_TRUSTED_OPERATIONS = frozenset(
    {"eq", "ne", "lt", "le", "gt", "ge", "hash", "bool", "len", "iter", "next", "contains", "getitem", "repr", "str"}
)
# Never handed from T to M: each leads to frames, globals or modules (where the token is).
_NEVER_EXPORTED = (
    types.ModuleType,
    types.FrameType,
    types.TracebackType,
    types.CodeType,
    types.CellType,
    types.FunctionType,  # its __globals__; a function T passes is wrapped (_Callback) instead
)
_PLAIN_SCALARS = (type(None), bool, int, str)
_CONTAINER_TAGS: dict[type, str] = {list: "l", tuple: "t", set: "e", frozenset: "z"}


class _Callback:
    """A function T passes to M: callable, and nothing else of it is reachable from M."""

    __slots__ = ("_function",)

    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<callback {getattr(self._function, '__qualname__', 'function')}>"


class Endpoint:
    """One side of the pipe pair: sends requests, serves the other side's while it waits."""

    def __init__(self, read_fd: int, write_fd: int, side: str, timeout_s: float | None) -> None:
        self._read_fd, self._write_fd, self.side = read_fd, write_fd, side
        self._other = _MODEL if side == _TRUSTED else _TRUSTED
        self._timeout_s = timeout_s
        self._exported: dict[int, Any] = {}  # handle -> one of this side's objects (kept alive)
        self._handles: dict[int, int] = {}  # id(object) -> handle
        self._proxies: dict[int, Any] = {}  # handle -> proxy of the other side's object
        # One wrapper per function T passes, so the same function crosses as the same handle.
        self._callbacks: dict[int, _Callback] = {}
        self._pending: list[int] = []  # ids of this side's requests awaiting replies, innermost last
        self._next_call = 0
        self._items = 0

    # ------------------------------------------------------------------ requests

    def request(self, op: str, *arguments: Any) -> Any:
        """Ask the other side for `op`; serve its requests (callbacks) until the reply comes."""
        value, _ = self._request(op, list(arguments))
        return value

    def call(self, target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Call a remote callable; lists, dicts, sets and bytearrays passed get the callee's
        changes written back (a call by value would hide a function that mutates its input)."""
        value, written = self._request("call", [target, list(args), [[name, kwargs[name]] for name in kwargs]])
        mutable = (list, dict, set, bytearray)
        for key, state in written:
            original: Any = args[key] if isinstance(key, int) and 0 <= key < len(args) else kwargs.get(str(key))
            if type(original) not in mutable or type(state) is not type(original):
                raise self._broken("a write-back for an argument that was not a mutable container")
            if isinstance(original, (dict, set)):
                original.clear()
                original.update(state)
            else:
                original[:] = state
        return value

    def _request(self, op: str, arguments: list[Any]) -> tuple[Any, list[tuple[int | str, Any]]]:
        if len(self._pending) >= MAX_NESTING:
            raise RecursionError("calls across the process boundary nest too deep")
        self._next_call += 1
        call = self._next_call
        self._send(["q", call, op, [self.encode(argument) for argument in arguments]])
        self._pending.append(call)
        try:
            while True:
                message = self._receive()
                kind = message[0] if isinstance(message, list) and message else None
                if kind == "q":
                    self._serve(message)
                    continue
                if kind not in ("r", "x") or len(message) != 4 or message[1] != call:
                    raise self._broken("a reply out of turn or malformed")
                if kind == "x":
                    raise self._exception(message[2], message[3])
                value, written = message[2], message[3]
                if not isinstance(written, list):
                    raise self._broken("malformed write-backs")
                decoded = [self._write_back(entry) for entry in written]
                return self.decode(value), decoded
        finally:
            self._pending.pop()

    def _write_back(self, entry: Any) -> tuple[int | str, Any]:
        if not isinstance(entry, list) or len(entry) != 2 or type(entry[0]) not in (int, str):
            raise self._broken("a malformed write-back")
        return entry[0], self.decode(entry[1])

    # ------------------------------------------------------------------ serving

    def serve_forever(self) -> None:
        """M's loop: serve T's requests until T closes the pipe."""
        while True:
            try:
                message = self._receive()
            except BoundaryBroken:
                return
            if not (isinstance(message, list) and message and message[0] == "q"):
                return
            self._serve(message)

    def _serve(self, message: list[Any]) -> None:
        if len(message) != 4 or type(message[1]) is not int or not isinstance(message[3], list):
            raise self._broken("a malformed request")
        _, call, op, raw = message
        try:
            arguments = [self.decode(argument) for argument in raw]
            written: list[list[Any]] = []
            if op == "call" and len(arguments) == 3:
                value = self._serve_call(arguments, written)
            else:
                value = self._serve_other(op, arguments)
            reply = ["r", call, self.encode(value), written]
        except BoundaryBroken:
            raise
        except BaseException as error:
            reply = ["x", call, *self._describe(error)]
        self._send(reply)

    def _serve_call(self, arguments: list[Any], written: list[list[Any]]) -> Any:
        target, args, pairs = arguments
        if not isinstance(args, list) or not isinstance(pairs, list):
            raise TypeError("malformed call")
        kwargs = {str(pair[0]): pair[1] for pair in pairs}
        if self.side == _TRUSTED and not self._is_own(target):
            raise TypeError("only what the tests passed may be called back")
        value = target(*args, **kwargs)
        if self.side == _MODEL:
            mutable = (list, dict, set, bytearray)
            written.extend([index, self.encode(arg)] for index, arg in enumerate(args) if type(arg) in mutable)
            written.extend([name, self.encode(arg)] for name, arg in kwargs.items() if type(arg) in mutable)
        return value

    def _serve_other(self, op: str, arguments: list[Any]) -> Any:
        if self.side == _TRUSTED:
            return self._serve_for_model(op, arguments)
        if op == "import" and len(arguments) == 1 and type(arguments[0]) is str:
            import importlib

            return importlib.import_module(arguments[0])
        if op == "exec" and len(arguments) == 2:
            module = types.ModuleType("__main__")
            module.__file__ = str(arguments[1])
            sys.modules["__main__"] = module
            exec(compile(str(arguments[0]), str(arguments[1]), "exec"), module.__dict__)
            return module
        if op == "getattr" and len(arguments) == 2:
            return getattr(arguments[0], str(arguments[1]))
        if op == "setattr" and len(arguments) == 3:
            return setattr(arguments[0], str(arguments[1]), arguments[2])
        if op == "delattr" and len(arguments) == 2:
            return delattr(arguments[0], str(arguments[1]))
        if op == "op" and arguments and arguments[0] in _OPERATIONS:
            return _OPERATIONS[arguments[0]](*arguments[1:])
        raise TypeError(f"unknown request {op!r}")

    def _serve_for_model(self, op: str, arguments: list[Any]) -> Any:
        """What T does for M: operators on T's own objects, public attributes that lead to
        no frame or module; never an import, an exec or a walk."""
        if op == "op" and arguments and arguments[0] in _TRUSTED_OPERATIONS:
            if not any(self._is_own(argument) for argument in arguments[1:2]):
                raise TypeError("only what the tests passed may be asked")
            return _OPERATIONS[arguments[0]](*arguments[1:])
        if op == "getattr" and len(arguments) == 2 and self._is_own(arguments[0]):
            name = str(arguments[1])
            if name.startswith("_"):
                raise AttributeError(name)
            return getattr(arguments[0], name)
        raise TypeError(f"{op!r} is not served to the model's process")

    def _is_own(self, value: Any) -> bool:
        return id(value) in self._handles

    # ------------------------------------------------------------------ values

    def encode(self, value: Any, depth: int = 0) -> Any:
        """`value` as JSON-ready tagged data; what is not plain becomes a handle."""
        if depth > MAX_DEPTH:
            raise ValueError("a value too deep to cross the process boundary")
        kind = type(value)
        if kind in _PLAIN_SCALARS:
            return value if kind is not int or -(1 << 62) < value < 1 << 62 else ["i", hex(value)]
        if kind is float:
            return ["f", value.hex()]
        if kind is complex:
            return ["c", value.real.hex(), value.imag.hex()]
        if kind is bytes or kind is bytearray:
            return ["y" if kind is bytes else "Y", base64.b64encode(value).decode("ascii")]
        tag = _CONTAINER_TAGS.get(kind)
        if tag is not None:
            return [tag, [self.encode(item, depth + 1) for item in value]]
        if kind is dict:
            return ["d", [[self.encode(key, depth + 1), self.encode(item, depth + 1)] for key, item in value.items()]]
        return self._handle(value)

    def _handle(self, value: Any) -> list[Any]:
        if isinstance(value, (RemoteObject, RemoteModule)):
            end, handle = _proxy_parts(value)
            if end is not self:
                raise TypeError("a proxy of another boundary")
            return ["h", self._other, handle, None]
        if self.side == _TRUSTED:
            if isinstance(value, types.FunctionType):
                value = self._callbacks.setdefault(id(value), _Callback(value))
            elif isinstance(value, _NEVER_EXPORTED):
                raise TypeError(f"a {type(value).__name__} is not handed to the model's process")
        handle = self._handles.get(id(value), len(self._exported) + 1)
        self._exported[handle] = value
        self._handles[id(value)] = handle
        module = value.__name__ if isinstance(value, types.ModuleType) else None
        return ["h", self.side, handle, module]

    def decode(self, data: Any, depth: int = 0) -> Any:
        """Tagged data back into values: only plain data and proxies are ever made."""
        if depth > MAX_DEPTH:
            raise self._broken("a value too deep")
        self._items += 1
        if self._items > MAX_ITEMS:
            raise self._broken("too many values in one message")
        if type(data) in _PLAIN_SCALARS:
            return data
        if type(data) is not list or not data or type(data[0]) is not str:
            raise self._broken("a malformed value")
        try:
            return self._decode_tagged(data, depth)
        except BoundaryBroken:
            raise
        except (ValueError, TypeError, IndexError, KeyError, OverflowError) as error:
            raise self._broken(f"a malformed value ({type(error).__name__})") from None

    def _decode_tagged(self, data: list[Any], depth: int) -> Any:
        tag = data[0]
        if tag == "i" and len(data) == 2 and type(data[1]) is str:
            return int(data[1], 16)
        if tag == "f" and len(data) == 2 and type(data[1]) is str:
            return float.fromhex(data[1])
        if tag == "c" and len(data) == 3 and type(data[1]) is str and type(data[2]) is str:
            return complex(float.fromhex(data[1]), float.fromhex(data[2]))
        if tag in ("y", "Y") and len(data) == 2 and type(data[1]) is str:
            raw = base64.b64decode(data[1].encode("ascii"), validate=True)
            return raw if tag == "y" else bytearray(raw)
        if tag in ("l", "t", "e", "z") and len(data) == 2 and type(data[1]) is list:
            items = [self.decode(item, depth + 1) for item in data[1]]
            return {"l": list, "t": tuple, "e": set, "z": frozenset}[tag](items)
        if tag == "d" and len(data) == 2 and type(data[1]) is list:
            pairs = [(self.decode(pair[0], depth + 1), self.decode(pair[1], depth + 1)) for pair in data[1]]
            if any(type(pair) is not tuple for pair in pairs):
                raise TypeError("pair")
            return dict(pairs)
        if tag == "h" and len(data) == 4 and type(data[2]) is int and data[1] in (_TRUSTED, _MODEL):
            return self._resolve(data[1], data[2], data[3])
        raise TypeError(f"tag {tag!r}")

    def _resolve(self, side: str, handle: int, module: Any) -> Any:
        if side == self.side:
            if handle not in self._exported:
                raise self._broken("a handle this side never gave")
            return self._exported[handle]
        proxy = self._proxies.get(handle)
        if proxy is None:
            proxy = RemoteModule(self, handle, module) if type(module) is str else RemoteObject(self, handle)
            self._proxies[handle] = proxy
        return proxy

    # ------------------------------------------------------------------ exceptions

    def _describe(self, error: BaseException) -> list[Any]:
        """An exception as (builtin class name, [message, SystemExit code])."""
        name = next(
            cls.__name__
            for cls in type(error).__mro__
            if cls.__module__ == "builtins" and getattr(builtins, cls.__name__, None) is cls
        )
        try:
            message = str(error)
        except BaseException:
            message = ""
        code: Any = None
        if isinstance(error, SystemExit):
            code = error.code if type(error.code) in _PLAIN_SCALARS else str(error.code)
        return [name, [message[:10_000], code]]

    def _exception(self, name: Any, detail: Any) -> BaseException:
        cls = getattr(builtins, name, None) if type(name) is str else None
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise self._broken("an exception that is not a builtin one")
        if not (type(detail) is list and len(detail) == 2 and type(detail[0]) is str):
            raise self._broken("a malformed exception")
        message, code = detail
        if cls is SystemExit:
            return SystemExit(code if type(code) in _PLAIN_SCALARS else message)
        try:
            return cls(message)
        except Exception:
            error = cls.__new__(cls)
            error.args = (message,)
            return error

    # ------------------------------------------------------------------ wire

    def _send(self, message: list[Any]) -> None:
        data = json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")
        if len(data) > MAX_MESSAGE:
            raise ValueError("a value too large to cross the process boundary")
        out = _LENGTH.pack(len(data)) + data
        try:
            while out:
                out = out[os.write(self._write_fd, out) :]
        except OSError as error:
            raise self._broken(f"the other side is gone ({error.strerror})") from None

    def _receive(self) -> Any:
        deadline = None if self._timeout_s is None else time.monotonic() + self._timeout_s
        (length,) = _LENGTH.unpack(self._read_exactly(_LENGTH.size, deadline))
        if length > MAX_MESSAGE:
            raise self._broken("a message over the size cap")
        data = self._read_exactly(length, deadline)
        self._items = 0
        try:
            return json.loads(
                data.decode("ascii"),
                parse_float=_refuse,
                parse_constant=_refuse,
                object_pairs_hook=_refuse,
            )
        except (ValueError, TypeError, RecursionError):
            raise self._broken("a message that is not tagged JSON") from None

    def _read_exactly(self, count: int, deadline: float | None) -> bytes:
        chunks, left = [], count
        while left:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self._read_fd], [], [], remaining)[0]:
                    raise self._broken(f"no reply within {self._timeout_s:g} s")
            chunk = os.read(self._read_fd, min(left, 1 << 20))
            if not chunk:
                raise self._broken("the other side ended")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _broken(self, why: str) -> BoundaryBroken:
        error = BoundaryBroken(f"the process boundary broke: {why}")
        if self.side == _TRUSTED:
            broken(error)  # T ends here: a test must not catch it and go on
        return error


def _refuse(*_: Any) -> Any:
    raise ValueError("not part of the wire format")


def _proxy_parts(proxy: RemoteObject | RemoteModule) -> tuple[Endpoint, int]:
    if isinstance(proxy, RemoteModule):
        return proxy.__dict__["_k3_end"], proxy.__dict__["_k3_handle"]
    return object.__getattribute__(proxy, "_k3_end"), object.__getattribute__(proxy, "_k3_handle")


def _end(proxy: Any) -> Endpoint:
    end: Endpoint = object.__getattribute__(proxy, "_k3_end")
    return end


def _op(name: str, *arguments: Any) -> Any:
    return _end(arguments[0]).request("op", name, *arguments)


def _reflected(name: str) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        return _end(self).request("op", name, other, self)

    return method


def _forward(name: str) -> Callable[..., Any]:
    def method(self: Any, *arguments: Any) -> Any:
        return _end(self).request("op", name, self, *arguments)

    return method


class RemoteObject:
    """An object of the other process: everything done to it is done there."""

    __slots__ = ("_k3_end", "_k3_handle")

    def __init__(self, end: Endpoint, handle: int) -> None:
        object.__setattr__(self, "_k3_end", end)
        object.__setattr__(self, "_k3_handle", handle)

    def __getattribute__(self, name: str) -> Any:
        if name in ("_k3_end", "_k3_handle", "__class__"):
            return object.__getattribute__(self, name)
        return _end(self).request("getattr", self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        _end(self).request("setattr", self, name, value)

    def __delattr__(self, name: str) -> None:
        _end(self).request("delattr", self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _end(self).call(self, args, kwargs)

    def __enter__(self) -> Any:
        return _end(self).request("getattr", self, "__enter__")()

    def __exit__(self, *details: Any) -> Any:
        return _end(self).request("getattr", self, "__exit__")(None, None, None)

    def __round__(self, *digits: Any) -> Any:
        return _end(self).request("op", "round", self, *digits)

    def __hash__(self) -> int:
        value: int = _op("hash", self)
        return value


# The special methods a proxy forwards (each names its operator in _OPERATIONS), and the
# binary ones that have a reflected form (__radd__: the same operator, operands swapped).
_NOT_SPECIAL_METHODS = frozenset({"hash", "round", "names"})
_REFLECTED = frozenset(
    {
        "add",
        "sub",
        "mul",
        "matmul",
        "truediv",
        "floordiv",
        "mod",
        "divmod",
        "pow",
        "lshift",
        "rshift",
        "and",
        "xor",
        "or",
    }
)
for _name in _OPERATIONS:
    if _name not in _NOT_SPECIAL_METHODS:
        setattr(RemoteObject, f"__{_name}__", _forward(_name))
    if _name in _REFLECTED:
        setattr(RemoteObject, f"__r{_name}__", _reflected(_name))


# Attributes of a module proxy the import system sets and reads: kept on this side, never
# asked of the model's process (a __path__ from there would let this side's path finder
# import the model's files here).
_LOCAL_MODULE_NAMES = frozenset(
    {"__path__", "__file__", "__spec__", "__loader__", "__cached__", "__package__", "__builtins__", "__all__"}
)


class RemoteModule(types.ModuleType):
    """A module of the model's process, as the tests import it."""

    def __init__(self, end: Endpoint, handle: int, name: str) -> None:
        super().__init__(name)
        self.__dict__["_k3_end"] = end
        self.__dict__["_k3_handle"] = handle

    def __getattr__(self, name: str) -> Any:
        if name in _LOCAL_MODULE_NAMES or name.startswith("_k3_"):
            raise AttributeError(name)
        return self.__dict__["_k3_end"].request("getattr", self, name)

    def __repr__(self) -> str:
        return f"<module {self.__name__!r} of the model's process>"


class _ModelImporter:
    """Imports of the repository's top-level packages (and their submodules) in T resolve to
    module proxies of M; nothing of the repository is ever looked for on T's sys.path."""

    def __init__(self, end: Endpoint, packages: frozenset[str]) -> None:
        self._end, self._packages = end, packages

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        import importlib.machinery

        if name.partition(".")[0] not in self._packages:
            return None
        loader: Any = self  # a loader by its two methods, without importlib.abc's import cost
        return importlib.machinery.ModuleSpec(name, loader, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = self._end.request("import", spec.name)
        if not isinstance(module, RemoteModule):
            raise ImportError(f"{spec.name} is not a module")
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing runs here: the module ran in the model's process."""


# The model's process: serves T until T closes its end. Everything it needs is imported
# before the repository is on sys.path (at its end, as the in-process runner had it).
_MODEL_MAIN = """
import sys, types
read_fd, write_fd, repository, source = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
boundary = types.ModuleType("k3_boundary")
sys.modules["k3_boundary"] = boundary
exec(compile(source, "k3_boundary.py", "exec"), boundary.__dict__)
del sys.argv[1:]
if repository:
    sys.path.append(repository)
boundary.Endpoint(read_fd, write_fd, "m", None).serve_forever()
# T is done with it: skip the interpreter's teardown (T waits for this process's end).
sys.stdout.flush()
sys.stderr.flush()
import os
os._exit(0)
"""


class ModelProcess:
    """T's side: M started and served, its output kept (bounded) for T's stderr."""

    def __init__(self, repository: str = "", timeout_s: float = CALL_TIMEOUT_S) -> None:
        import ctypes
        import subprocess
        import threading

        # Not dumpable: M (same uid, no capabilities) may not ptrace T nor open its
        # /proc/<pid>/mem, fd or environ. Set before M exists.
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")
        to_model_read, to_model_write = os.pipe()
        from_model_read, from_model_write = os.pipe()
        output_read, output_write = os.pipe()
        interpreter = [sys.executable, "-s", "-B", *(["-P"] if sys.version_info >= (3, 11) else [])]
        source = globals().get("_K3_SOURCE") or _own_source()
        try:
            self.process = subprocess.Popen(
                [*interpreter, "-c", _MODEL_MAIN, str(to_model_read), str(from_model_write), repository, source],
                stdin=subprocess.DEVNULL,
                stdout=output_write,
                stderr=output_write,
                pass_fds=(to_model_read, from_model_write),
                close_fds=True,
                cwd=repository or None,
            )
        finally:
            for fd in (to_model_read, from_model_write, output_write):
                os.close(fd)
        self.end = Endpoint(from_model_read, to_model_write, _TRUSTED, timeout_s)
        self._output_fd = output_read
        self.output = bytearray()
        self._dropped = 0
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()

    def _drain_output(self) -> None:
        while True:
            try:
                chunk = os.read(self._output_fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            room = OUTPUT_CAP - len(self.output)
            self.output += chunk[:room]
            self._dropped += max(0, len(chunk) - room)

    def install_importer(self, packages: Sequence[str]) -> None:
        """Make the repository's top-level `packages` importable here, as module proxies."""
        sys.meta_path.insert(0, _ModelImporter(self.end, frozenset(packages)))

    def close(self) -> str:
        """End M (its output pipe too) and return what it printed, cut to OUTPUT_CAP."""
        import subprocess

        os.close(self.end._write_fd)
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._drain.join(timeout=1)
        text = self.output.decode("utf-8", errors="replace")
        return text + (f"\n[… {self._dropped} more bytes]" if self._dropped else "")


def broken(error: BoundaryBroken) -> None:
    """End T at once, without its seal: nothing after a broken boundary can be trusted."""
    os.write(2, f"\nBoundaryBroken: {error}\n".encode(errors="replace"))
    os._exit(BROKEN_STATUS)


@functools.cache
def boundary_prelude() -> str:
    """Program text that makes this module `k3_boundary` inside the sandbox (T side), from
    its own source; M gets the same source on its command line."""
    source = _own_source()
    return (
        "import sys as _k3_sys, types as _k3_types\n"
        f"_K3_SOURCE = {source!r}\n"
        "k3_boundary = _k3_types.ModuleType('k3_boundary')\n"
        "_k3_sys.modules['k3_boundary'] = k3_boundary\n"
        "k3_boundary._K3_SOURCE = _K3_SOURCE\n"
        "exec(compile(_K3_SOURCE, 'k3_boundary.py', 'exec'), k3_boundary.__dict__)\n"
    )


def _own_source() -> str:
    import inspect

    return inspect.getsource(sys.modules[__name__])
