"""Where the bundled suites and fixtures are: inside the installed package (the wheel's copies),
else beside the package in the repository; and `k3conformance run` runs pytest on them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from run_files import REPO

from k3conformance import cli
from k3conformance.datasets import bundled


def test_a_checkout_reads_the_repository_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bundled.FIXTURES_ENV_VAR, raising=False)
    assert bundled.fixtures_dir() == REPO / "fixtures"
    assert bundled.suites_dir() == REPO / "suites"


def test_an_installed_package_reads_its_own_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "site-packages" / "k3conformance"
    for name in ("suites", "fixtures"):
        (package / name).mkdir(parents=True)
    monkeypatch.setattr(bundled, "_PACKAGE", package)
    monkeypatch.delenv(bundled.FIXTURES_ENV_VAR, raising=False)
    assert (bundled.fixtures_dir(), bundled.suites_dir()) == (package / "fixtures", package / "suites")
    monkeypatch.setenv(bundled.FIXTURES_ENV_VAR, str(tmp_path / "mine"))
    assert bundled.fixtures_dir() == tmp_path / "mine"


def _run_argv(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> list[str]:
    started: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> None:
        started.append(argv)

    monkeypatch.setattr(os, "execv", execv)
    cli.main(["run", *args])
    (argv,) = started
    return argv


def test_run_hands_every_argument_to_pytest_on_the_bundled_suites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _run_argv(monkeypatch, ["--k3-endpoint", "reference:tp8", "-n", "2"])
    assert argv[1:] == [
        "-m",
        "pytest",
        "--rootdir",
        str(REPO),  # so node ids read suites/test_X.py::..., as in the checkout
        "-o",
        f"cache_dir={tmp_path / '.pytest_cache'}",  # the cache in the current directory, not in the package
        "--k3-endpoint",
        "reference:tp8",
        "-n",
        "2",
        str(REPO / "suites"),
    ]


def test_run_names_a_bundled_suite_file_as_the_repository_does(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = _run_argv(monkeypatch, ["-p", "no:cacheprovider", "suites/test_small_model.py::test_x"])
    assert argv[3:] == ["--rootdir", str(REPO), "-p", "no:cacheprovider", f"{REPO}/suites/test_small_model.py::test_x"]
