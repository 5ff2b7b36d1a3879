"""One sandboxed run: write its files, start the launcher, watch it (wall time, output caps, escaped processes), collect what it left, and describe the outcome."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from k3conformance.sandbox.cgroup import RunCgroup, create_run_cgroup, memory_cgroup_parent
from k3conformance.sandbox.collect import collect_files
from k3conformance.sandbox.launcher import _environment, _launcher_argv
from k3conformance.sandbox.limits import (
    _DRAIN_GRACE_S,
    _EXIT_POLL_S,
    _GONE_GRACE_S,
    _LAUNCHER_FAILED,
    _PER_RUN,
    _READ_CHUNK,
    BUBBLEWRAP,
    GIB,
    MIB,
    NOGROUP_GID,
    OUTPUT_TAIL_CHARS,
    PER_RUN_UID_BASE,
    PROGRAM_BODY,
    PROGRAM_FILE,
    RLIMIT,
    SAFE_PATH,
    SANDBOX_DIR,
    SEAL_FILE,
    SEAL_MARK,
    WORLD_WRITABLE_DIRS,
    ExecutionResult,
    SandboxError,
    SandboxLimits,
    _Isolation,
    fallback_limits,
)
from k3conformance.sandbox.workfolder import make_work_folder, release_mount


@dataclass
class _Watched:
    """What the watcher saw of one run."""

    outputs: dict[str, bytearray] = field(default_factory=lambda: {"stdout": bytearray(), "stderr": bytearray()})
    timed_out: bool = False
    overflowing_stream: str | None = None
    duration_s: float = 0.0
    status: bytes = b""
    # Every process of the run has exited: its files can no longer change under the host.
    all_gone: bool = False


# What a run brings back: nothing (False), everything (True) or the named paths.
Collect = bool | Sequence[str]


def _execute(
    program: str,
    limits: SandboxLimits,
    isolation: _Isolation,
    files: Mapping[str, str] | None = None,
    collect: Collect = False,
    seal: bool = False,
) -> ExecutionResult:
    folder = make_work_folder(limits.disk_bytes, limits.disk_files)
    workdir = folder.path
    cgroup = _run_cgroup(limits)
    in_force = limits if cgroup is not None else fallback_limits(limits)
    try:
        for relative, text in (files or {}).items():
            path = _inside(workdir, relative, seal)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        token = secrets.token_hex(16) if seal else None
        if token is not None:
            (workdir / SEAL_FILE).write_text(token, encoding="ascii")
            (workdir / PROGRAM_BODY).write_text(program, encoding="utf-8")
            (workdir / PROGRAM_FILE).write_text(_SEALED_MAIN, encoding="utf-8")
        else:
            (workdir / PROGRAM_FILE).write_text(program, encoding="utf-8")
        result, all_gone = _run_in(workdir, in_force, isolation, token, cgroup)
        result = _with_disk_limit(result, folder.exhausted(), in_force)
        if collect is False:
            return result
        if not all_gone:
            outlived = "processes of the run outlived the kill; nothing was collected"
            return dataclasses.replace(result, files=None, collect_problem=outlived)
        wanted = None if collect is True else list(collect)
        found, problem = collect_files(workdir, wanted, in_force)
        return dataclasses.replace(result, files=found, collect_problem=problem)
    finally:
        if cgroup is not None:
            cgroup.remove()
        release_mount(folder)
        _remove_tree(workdir)


def _run_cgroup(limits: SandboxLimits) -> RunCgroup | None:
    """A memory cgroup for one run, capped at the run's sandbox memory; None where there is none."""
    parent = memory_cgroup_parent()
    if isinstance(parent, str):
        return None
    try:
        return create_run_cgroup(parent, limits.sandbox_memory_bytes)
    except OSError:
        return None


def _with_disk_limit(result: ExecutionResult, exhausted: str | None, limits: SandboxLimits) -> ExecutionResult:
    """A failed run that used up its work folder's tmpfs failed on a sandbox limit: say so first."""
    if exhausted is None or result.passed or result.reason.startswith("killed: disk limit"):
        return result
    cap = _size(limits.disk_bytes) if exhausted == "space" else f"{limits.disk_files} files"
    return dataclasses.replace(result, reason=_one_line(f"killed: disk limit (work folder {cap}): {result.reason}"))


# The main.py of a sealed run. It takes the token and the program's text before any of the
# program runs, runs the program as __main__ (its own module, so pickling, dataclasses and
# typing see its names), and prints the token (with the program's K3_SEAL_PAYLOAD) only
# when the program reached its end: an os._exit(0), sys.exit(0) or exit() on the way
# leaves the run without its seal, so status 0 alone passes nothing. What it needs after
# the program is bound to locals first (the program may rebind `os` or `json` in __main__),
# and it ends with os._exit: no atexit handler or thread of the program writes after it.
_SEALED_MAIN = f"""
def _k3_sealed_run():
    import json, os, sys

    dumps, write, end, stdout, stderr = json.dumps, os.write, os._exit, sys.stdout, sys.stderr
    with open({SEAL_FILE!r}, "rb") as handle:
        token = handle.read()
    os.unlink({SEAL_FILE!r})
    path = os.path.abspath({PROGRAM_BODY!r})
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    namespace = sys.modules["__main__"].__dict__
    namespace.pop("_k3_sealed_run", None)
    namespace["__file__"] = path
    exec(compile(source, path, "exec"), namespace)
    payload = dumps(str(namespace.get("K3_SEAL_PAYLOAD", "")))
    stdout.flush()
    stderr.flush()
    line = b"\\n{SEAL_MARK} " + token + b" " + payload.encode("ascii") + b"\\n"
    while line:
        line = line[write(1, line) :]
    end(0)


_k3_sealed_run()
"""


def _inside(workdir: Path, relative: str, seal: bool = False) -> Path:
    parts = Path(relative).parts
    reserved = {PROGRAM_FILE, SEAL_FILE} | ({PROGRAM_BODY} if seal else set())
    if not parts or Path(relative).is_absolute() or ".." in parts or relative in reserved:
        raise ValueError(f"sandbox file path must stay inside the program's directory: {relative!r}")
    return workdir.joinpath(*parts)


def _run_in(
    workdir: Path,
    limits: SandboxLimits,
    isolation: _Isolation,
    token: str | None = None,
    cgroup: RunCgroup | None = None,
) -> tuple[ExecutionResult, bool]:
    """The run's result, and whether every process of it is gone (so its files hold still)."""
    # The launcher reports a failed setup through this pipe; exec closes it on success.
    # bubblewrap keeps it (--info-fd) and writes its namespace info once the sandbox exists.
    status_read, status_write = os.pipe()
    try:
        started = time.monotonic()
        process = subprocess.Popen(
            _launcher_argv(workdir, limits, isolation, status_write, cgroup.procs_file if cgroup else ""),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_environment(SANDBOX_DIR if isolation.backend == BUBBLEWRAP else str(workdir)),
            cwd=workdir,
            start_new_session=True,
            pass_fds=(status_write,),
        )
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
    try:
        watched = _watch(process, limits, started, isolation, workdir, status_read, cgroup)
    finally:
        os.close(status_read)
    _raise_if_setup_failed(watched.status, watched, isolation)
    result = _result(process.returncode, watched, limits, isolation, token)
    if cgroup is not None:
        result = _with_memory_cap(result, cgroup, limits)
    return result, watched.all_gone


def _with_memory_cap(result: ExecutionResult, cgroup: RunCgroup, limits: SandboxLimits) -> ExecutionResult:
    """The run's peak memory, and a failed run whose processes the cgroup's OOM killer took named as such."""
    result = dataclasses.replace(result, memory_peak_bytes=cgroup.peak_bytes())
    if result.passed or cgroup.oom_kills() == 0:
        return result
    cap = f"killed: memory limit ({_size(limits.sandbox_memory_bytes)} over the whole sandbox)"
    return dataclasses.replace(result, reason=_one_line(f"{cap}: {result.reason}"))


def _watch(
    process: subprocess.Popen[bytes],
    limits: SandboxLimits,
    started: float,
    isolation: _Isolation,
    workdir: Path,
    status_fd: int,
    cgroup: RunCgroup | None = None,
) -> _Watched:
    """Collect output until the program exits, times out or floods a stream; then kill what is left."""
    assert process.stdout is not None and process.stderr is not None
    watched = _Watched()
    streams = {process.stdout.fileno(): "stdout", process.stderr.fileno(): "stderr"}
    exit_fd = _open_pidfd(process.pid)
    try:
        with selectors.DefaultSelector() as selector:
            for fd in streams:
                selector.register(fd, selectors.EVENT_READ)
            if exit_fd is not None:
                selector.register(exit_fd, selectors.EVENT_READ)
            _watch_until_exit(process.pid, selector, streams, exit_fd, watched, limits, started)
            watched.duration_s = time.monotonic() - started
            # Read before the kill: bubblewrap's info names the namespace's init, whose end
            # (the kernel kills and reaps everything else in the namespace first) is the
            # end of every process of the run.
            watched.status = _read_status(status_fd)
            namespace_init = _namespace_init(watched.status) if isolation.backend == BUBBLEWRAP else None
            # The leader is not reaped yet, so its group id cannot have been reused.
            _kill_group(process.pid)
            if cgroup is not None:
                cgroup.kill_all()  # those that left the group too
            process.wait()
            run_uid = None
            if isolation.backend == RLIMIT and isolation.uid_mode == _PER_RUN:
                run_uid = PER_RUN_UID_BASE + process.pid
                _sweep_uid(run_uid, keep=workdir)
            watched.all_gone = _wait_until_gone(process.pid, run_uid, namespace_init, cgroup)
            if watched.overflowing_stream is None:
                _drain(selector, streams, watched, limits)
    finally:
        if exit_fd is not None:
            os.close(exit_fd)
        process.stdout.close()
        process.stderr.close()
    return watched


def _watch_until_exit(
    pid: int,
    selector: selectors.BaseSelector,
    streams: dict[int, str],
    exit_fd: int | None,
    watched: _Watched,
    limits: SandboxLimits,
    started: float,
) -> None:
    deadline = started + limits.wall_seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            watched.timed_out = True
            return
        for key, _ in selector.select(remaining if exit_fd is not None else min(remaining, _EXIT_POLL_S)):
            if key.fd == exit_fd:
                return
            if not _read_chunk(key.fd, streams[key.fd], watched, limits):
                selector.unregister(key.fd)
            if watched.overflowing_stream is not None:
                return
        if exit_fd is None and _has_exited(pid):
            return


def _drain(selector: selectors.BaseSelector, streams: dict[int, str], watched: _Watched, limits: SandboxLimits) -> None:
    deadline = time.monotonic() + _DRAIN_GRACE_S
    while any(fd in streams for fd in selector.get_map()):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        for key, _ in selector.select(remaining):
            if key.fd in streams and not _read_chunk(key.fd, streams[key.fd], watched, limits):
                selector.unregister(key.fd)
            if watched.overflowing_stream is not None:
                return


def _read_chunk(fd: int, stream: str, watched: _Watched, limits: SandboxLimits) -> bool:
    """Read what `fd` has into its buffer; False at end of file."""
    chunk = os.read(fd, _READ_CHUNK)
    if not chunk:
        return False
    buffer = watched.outputs[stream]
    room = limits.output_bytes - len(buffer)
    buffer += chunk[:room]
    if len(chunk) > room:
        watched.overflowing_stream = stream
    return True


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # kernel before 5.3: poll instead


def _has_exited(pid: int) -> bool:
    # WNOWAIT leaves the zombie in place, so the process group stays reserved until we kill it.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _namespace_init(status: bytes) -> tuple[int, int] | None:
    """(pid, pid-namespace inode) of bubblewrap's init from its --info-fd JSON."""
    try:
        info = json.loads(status.decode(errors="replace"))
        return int(info["child-pid"]), int(info["pid-namespace"])
    except (ValueError, KeyError, TypeError):
        return None


def _namespace_alive(init: tuple[int, int]) -> bool:
    # The pid may be reused once the init is reaped, but never by a process of the dead
    # namespace: an init still in it has the namespace's inode. A namespace's init becomes
    # a zombie only after the kernel reaped every other process of it, so a zombie init
    # is a dead namespace. Its links may still resolve until someone reaps it: the init is
    # reparented to the host's init once bubblewrap is killed, which here reaps only every
    # two seconds or so (a wait that cost every sandboxed program about 1.9 s).
    pid, inode = init
    try:
        if os.stat(f"/proc/{pid}/ns/pid").st_ino != inode:
            return False
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _wait_until_gone(
    pgid: int, uid: int | None, namespace_init: tuple[int, int] | None, cgroup: RunCgroup | None = None
) -> bool:
    """Wait (briefly: the kill is already sent) until no process of the run is alive: none
    in its process group, none of its per-run uid, none in its cgroup, and bubblewrap's
    namespace is gone."""
    deadline = time.monotonic() + _GONE_GRACE_S
    while True:
        alive = (
            (namespace_init is not None and _namespace_alive(namespace_init))
            or (cgroup is not None and bool(cgroup.pids()))
            or _any_alive(pgid, uid)
        )
        if not alive:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(_EXIT_POLL_S / 4)


def _any_alive(pgid: int, uid: int | None) -> bool:
    """Whether a live (not zombie) process is in group `pgid` or runs as `uid`."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rpartition(b")")[2].split()
            if fields[0] in (b"Z", b"X"):
                continue
            if int(fields[2]) == pgid:
                return True
            if uid is not None:
                with open(f"/proc/{entry.name}/status", "rb") as handle:
                    for line in handle:
                        if line.startswith(b"Uid:"):
                            if int(line.split()[1]) == uid:
                                return True
                            break
        except (OSError, IndexError, ValueError):
            continue  # it exited meanwhile
    return False


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _sweep_uid(uid: int, keep: Path) -> None:
    """Kill every process of a per-run uid (those that left the group too) and remove its files
    from world-writable directories, except its own directory `keep` (removed by its owner)."""
    kill = shutil.which("kill", path=SAFE_PATH)
    # kill(-1) as that uid reaches exactly its processes, atomically, without pid races.
    # "-9 -1" is the one spelling procps, util-linux and busybox kill all accept.
    command = [kill, "-9", "-1"] if kill else [sys.executable, "-I", "-S", "-c", _KILL_ALL]
    subprocess.run(
        command,
        user=uid,
        group=NOGROUP_GID,
        extra_groups=[],
        env={"PATH": SAFE_PATH},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    for directory in WORLD_WRITABLE_DIRS:
        _remove_entries_owned_by(uid, directory, keep)


_KILL_ALL = "import os\ntry:\n    os.kill(-1, 9)\nexcept OSError:\n    pass\n"


def _remove_entries_owned_by(uid: int, directory: str, keep: Path) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.path == str(keep) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            continue


def _read_status(status_fd: int) -> bytes:
    # Non-blocking: a process outside the group could still hold the write end.
    os.set_blocking(status_fd, False)
    try:
        return os.read(status_fd, _READ_CHUNK)
    except BlockingIOError:
        return b""


def _raise_if_setup_failed(status: bytes, watched: _Watched, isolation: _Isolation) -> None:
    if status.startswith(_LAUNCHER_FAILED):
        raise SandboxError(f"sandbox setup failed: {status[1:].decode(errors='replace')}")
    if isolation.backend == BUBBLEWRAP and not status.lstrip().startswith(b"{"):
        stderr = watched.outputs["stderr"].decode(errors="replace").strip()
        first_line = stderr.splitlines()[0] if stderr else "no message"
        raise SandboxError(f"bubblewrap did not start the sandbox: {first_line}")


def _remove_tree(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except OSError:
        # The program may have taken the write bit off its own directories.
        _make_directories_writable(path)
        shutil.rmtree(path, ignore_errors=True)


def _make_directories_writable(path: Path) -> None:
    try:
        os.chmod(path, 0o700, follow_symlinks=False)
        children = list(os.scandir(path))
    except OSError:
        return
    for child in children:
        if child.is_dir(follow_symlinks=False):
            _make_directories_writable(Path(child.path))


def _result(
    returncode: int, watched: _Watched, limits: SandboxLimits, isolation: _Isolation, token: str | None = None
) -> ExecutionResult:
    exit_code, signal_number = _exit_status(returncode, isolation.backend)
    if watched.timed_out or watched.overflowing_stream is not None:
        exit_code, signal_number = None, None  # we killed it; its status says nothing about the program
    stderr = watched.outputs["stderr"].decode(errors="replace")
    stdout = watched.outputs["stdout"].decode(errors="replace")
    sealed: str | None = None
    if token is not None:
        stdout, sealed = _unseal(stdout, token)
    reason = _reason(watched, exit_code, signal_number, stderr, limits)
    if reason == "passed" and token is not None and sealed is None:
        reason = "exited with status 0 before the end of the program (the sandbox's seal is missing)"
    return ExecutionResult(
        passed=reason == "passed",
        reason=reason,
        exit_code=exit_code,
        signal=signal_number,
        timed_out=watched.timed_out,
        duration_s=watched.duration_s,
        stdout_excerpt=_excerpt(stdout),
        stderr_excerpt=_excerpt(stderr),
        backend=isolation.backend,
        sealed=sealed,
    )


def _unseal(stdout: str, token: str) -> tuple[str, str | None]:
    """The output without the seal line, and the seal's payload (None when it is not there)."""
    marker = f"\n{SEAL_MARK} {token} "
    start = stdout.rfind(marker)
    end = stdout.find("\n", start + len(marker)) if start >= 0 else -1
    if end < 0:
        return stdout, None
    try:
        payload = json.loads(stdout[start + len(marker) : end])
    except ValueError:
        return stdout, None
    if not isinstance(payload, str):
        return stdout, None
    return stdout[:start] + stdout[end + 1 :], payload


def _exit_status(returncode: int, backend: str) -> tuple[int | None, int | None]:
    if returncode < 0:
        return None, -returncode
    # bwrap exits with 128 + N when the program died of signal N.
    if backend == BUBBLEWRAP and 128 < returncode <= 128 + 64:
        return None, returncode - 128
    return returncode, None


def _reason(
    watched: _Watched, exit_code: int | None, signal_number: int | None, stderr: str, limits: SandboxLimits
) -> str:
    if watched.overflowing_stream is not None:
        return f"output limit exceeded ({watched.overflowing_stream} over {_size(limits.output_bytes)})"
    if watched.timed_out:
        return f"timed out after {limits.wall_seconds:g} s"
    if signal_number is not None:
        return _signal_reason(signal_number, limits)
    if exit_code == 0:
        return "passed"
    return _one_line(_failure_reason(exit_code, stderr, limits))


def _signal_reason(signal_number: int, limits: SandboxLimits) -> str:
    if signal_number == signal.SIGXCPU:
        return f"killed: CPU time limit ({limits.cpu_seconds:g} s)"
    if signal_number == signal.SIGXFSZ:
        return f"killed: file size limit ({_size(limits.file_size_bytes)})"
    try:
        name = signal.Signals(signal_number).name
    except ValueError:
        name = f"signal {signal_number}"
    if signal_number == signal.SIGKILL:
        return f"killed by {name} (CPU hard limit, out of memory, or the program itself)"
    return f"killed by {name}"


def _failure_reason(exit_code: int | None, stderr: str, limits: SandboxLimits) -> str:
    lines = stderr.rstrip().splitlines()
    exception = _final_exception(lines)
    if exception is None:
        return f"exit status {exit_code}"
    name = exception.split(":", 1)[0]
    if name == "AssertionError":
        message = exception.partition(":")[2].strip()
        return f"assertion failed: {message or _failing_line(lines) or 'assert'}"
    if name == "MemoryError":
        return f"killed: memory limit ({_size(limits.memory_bytes)} address space): {exception}"
    if "[Errno 28]" in exception:  # ENOSPC: the work folder's tmpfs, or /tmp's, is full
        return f"killed: disk limit (work folder {_size(limits.disk_bytes)}, {limits.disk_files} files): {exception}"
    if "[Errno 27]" in exception:  # EFBIG: Python ignores SIGXFSZ, so the write raises
        return f"killed: file size limit ({_size(limits.file_size_bytes)}): {exception}"
    if "[Errno 11]" in exception and ("fork" in stderr or "thread" in stderr):
        return f"killed: process limit ({limits.processes}): {exception}"
    return f"exit status {exit_code}: {exception}"


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::.*)?$")


def _final_exception(lines: list[str]) -> str | None:
    """The "Name: message" line a Python traceback ends with."""
    for line in reversed(lines):
        if line.startswith("Traceback (most recent call last)"):
            # A traceback cut off while written (a forked child killed mid-write): an earlier,
            # whole one from the same run says why.
            continue
        if line.strip() and not line[0].isspace():
            return line if _EXCEPTION_LINE.match(line) else None
    return None


def _failing_line(lines: list[str]) -> str | None:
    """The source line a traceback shows last: the assert statement that failed."""
    for line in reversed(lines[:-1]):
        text = line.strip()
        if text and not text.startswith("File ") and set(text) - set("^~ "):
            return text
    return None


def _excerpt(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL_CHARS else "…" + text[-(OUTPUT_TAIL_CHARS - 1) :]


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _size(count: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"
