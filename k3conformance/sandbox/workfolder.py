"""The run's work folder on a filesystem of its own size: a tmpfs per run, where the host may mount one.

`RLIMIT_FSIZE` caps each file, not their number: a program could otherwise fill the host's
disk with many files of real data until its CPU or wall time ran out. A tmpfs mounted on the
fresh work directory with `size=` and `nr_inodes=` lets the kernel refuse the write past
`SandboxLimits.disk_bytes` or the file past `disk_files` (`ENOSPC`), whatever writes it;
sparse files take no pages. Its pages are memory: those the sandbox writes are charged to the
run's memory cgroup (cgroup.py), and they are freed when the folder is unmounted after the
run. Mounting needs `CAP_SYS_ADMIN` in the host's mount namespace (root, as in CI); where
the probe mount fails, the work folder is a plain directory under the system's temporary
directory and the backend's notice says so.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

_MS_NOSUID = 0x2


_MS_NODEV = 0x4


_MNT_DETACH = 0x2


@dataclass(frozen=True)
class WorkFolder:
    path: Path
    mounted: bool  # on a tmpfs of its own, capped

    def exhausted(self) -> str | None:
        """Which cap of the tmpfs the run used up ("space", "files"), None when neither."""
        if not self.mounted:
            return None
        try:
            status = os.statvfs(self.path)
        except OSError:
            return None
        if status.f_bavail == 0:
            return "space"
        if status.f_favail == 0:
            return "files"
        return None


@functools.cache
def tmpfs_problem() -> str | None:
    """Why no tmpfs can be mounted for a work folder here; None when it can (probed once, cached)."""
    probe = Path(tempfile.mkdtemp(prefix="k3sandbox-probe-"))
    try:
        _mount_tmpfs(probe, 1 << 20, 16)
        _unmount(probe)
    except OSError as error:
        return f"cannot mount a tmpfs: {error.strerror or error}"
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return None


def make_work_folder(disk_bytes: int, disk_files: int) -> WorkFolder:
    """A fresh, private work directory: a capped tmpfs where the host may mount one."""
    path = Path(tempfile.mkdtemp(prefix="k3sandbox-"))
    if tmpfs_problem() is not None:
        return WorkFolder(path, mounted=False)
    try:
        # One inode is the folder itself.
        _mount_tmpfs(path, disk_bytes, disk_files + 1)
    except OSError:
        return WorkFolder(path, mounted=False)
    return WorkFolder(path, mounted=True)


def release_mount(folder: WorkFolder) -> None:
    """Unmount the folder's tmpfs (everything in it goes with it); the directory stays."""
    if folder.mounted:
        _unmount(folder.path)


def _mount_tmpfs(path: Path, size: int, inodes: int) -> None:
    options = f"size={size},nr_inodes={inodes},mode=0700".encode()
    libc = _libc()
    if libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def _unmount(path: Path) -> None:
    # Detached: nothing of the run is alive any more, and nothing can block the host here.
    if _libc().umount2(os.fsencode(path), _MNT_DETACH) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
