"""Reading back the files a run left: never through a link, never blocking, never more than the caps.

The work directory was the program's to shape. Any name in it may be a symbolic link to a
host file, a FIFO, a socket, a hard link, or a sparse file of 16 MiB that took no disk;
and a process of the run that outlived it could swap one for another between a check and
an open (`renameat2(RENAME_EXCHANGE)`). So the host walks it with `openat` from a
descriptor of the directory, one component at a time, each open with `O_NOFOLLOW` (a link
is refused, not followed) and `O_NONBLOCK` (a FIFO opens at once instead of blocking a
pool thread), and reads only what `fstat` on the open descriptor calls a regular file with
one link. What it reads is capped in files and bytes (`SandboxLimits.collect_files`,
`collect_bytes`): past a cap it stops and says so, and the caller keeps nothing.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from k3conformance.sandbox.limits import MIB, PROGRAM_BODY, PROGRAM_FILE, SEAL_FILE, SandboxLimits

# Deeper directories are left out: a program can nest them far past the recursion limit.
MAX_DEPTH = 32


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


# The sandbox's own files at the top of the work directory.
_OWN_FILES = frozenset({PROGRAM_FILE, PROGRAM_BODY, SEAL_FILE})


# What open/openat raise for a name the program turned into something not to read: a link
# (ELOOP), a socket or a device without a reader (ENXIO, ENODEV), a file it made unreadable,
# a name gone or not a directory any more.
_SKIPPED_ERRORS = frozenset(
    {errno.ELOOP, errno.ENXIO, errno.ENODEV, errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR}
)


@dataclass
class _Budget:
    files: int
    bytes: int
    found: dict[str, str] = field(default_factory=dict)
    problem: str | None = None


def collect_files(
    workdir: Path, wanted: Sequence[str] | None, limits: SandboxLimits
) -> tuple[dict[str, str] | None, str | None]:
    """The regular files under `wanted` (relative paths of files or directories; None: the
    whole directory) as text, and None with the reason when a cap was reached."""
    budget = _Budget(limits.collect_files, limits.collect_bytes)
    root = os.open(workdir, _DIRECTORY_FLAGS)
    try:
        for relative in sorted(set(wanted)) if wanted is not None else [""]:
            _collect_path(root, [part for part in relative.split("/") if part], budget, limits)
            if budget.problem is not None:
                return None, budget.problem
    finally:
        os.close(root)
    return budget.found, None


def _collect_path(root: int, parts: list[str], budget: _Budget, limits: SandboxLimits) -> None:
    if any(part in (".", "..") for part in parts):
        raise ValueError(f"a collected path must stay inside the work directory: {'/'.join(parts)!r}")
    directory = os.dup(root)
    try:
        for index, part in enumerate(parts):
            try:
                child = os.open(part, _FILE_FLAGS, dir_fd=directory)
            except OSError as error:
                if error.errno in _SKIPPED_ERRORS:
                    return
                raise
            os.close(directory)
            directory = child
            mode = os.fstat(child).st_mode
            if not stat.S_ISDIR(mode):
                if index == len(parts) - 1:
                    _read_file(child, "/".join(parts), budget, limits)
                return
        _collect_directory(directory, "/".join(parts), budget, limits, depth=0)
    finally:
        os.close(directory)


def _collect_directory(directory: int, prefix: str, budget: _Budget, limits: SandboxLimits, depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    for name in sorted(os.listdir(directory)):
        if budget.problem is not None:
            return
        if name == "__pycache__" or (not prefix and name in _OWN_FILES):
            continue
        try:
            child = os.open(name, _FILE_FLAGS, dir_fd=directory)
        except OSError as error:
            if error.errno in _SKIPPED_ERRORS:
                continue
            raise
        try:
            relative = f"{prefix}/{name}" if prefix else name
            if stat.S_ISDIR(os.fstat(child).st_mode):
                _collect_directory(child, relative, budget, limits, depth + 1)
            else:
                _read_file(child, relative, budget, limits)
        finally:
            os.close(child)


def _read_file(descriptor: int, relative: str, budget: _Budget, limits: SandboxLimits) -> None:
    """Read an open descriptor when it is a regular file with one link, within the caps."""
    status = os.fstat(descriptor)
    # A second link could be a host file the program linked in (rlimit backend): skip it.
    if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1:
        return
    if len(budget.found) >= budget.files:
        budget.problem = f"more than {budget.files} files to collect"
        return
    size = min(status.st_size, limits.file_size_bytes)
    if size > budget.bytes:
        budget.problem = f"more than {limits.collect_bytes / MIB:g} MiB to collect"
        return
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    budget.bytes -= len(data)
    budget.found[relative] = data.decode("utf-8", errors="replace")
