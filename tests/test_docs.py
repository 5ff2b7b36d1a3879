"""The README and the docs/ pages stay true to the code: the README is a first screen (at most
300 lines), every link resolves to a file and a heading that exist, every `--k3-*` option they
name is an option, and every file path they name is there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from run_files import REPO

from k3conformance.options import OPTIONS

PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "README.md")
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")
# Paths of this repository (other projects' `tests/...` are named too, and are not checked);
# placeholders such as `suites/test_X.py` have a capital in them.
PATH = re.compile(
    r"(?<![\w/.-])((?:k3conformance/|suites/|benchmarks/|fixtures/|tests/(?:unit|e2e|support|test_))[\w./-]*\w)"
)
ROOMS = tuple(path.name for path in (REPO / "k3conformance").iterdir() if path.is_dir() and path.name != "__pycache__")
ROOM_PATH = re.compile(rf"`((?:{'|'.join(ROOMS)})/[\w/]*\.py)`")


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.*)", line)):
            found.add(re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
    return found


def test_the_readme_is_a_first_screen() -> None:
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue  # a web address: not checked offline
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no such heading")
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_option_named_exists(page: Path) -> None:
    flags = {spec.flag for spec in OPTIONS}
    named = set(re.findall(r"--k3-[a-z0-9-]*[a-z0-9]", page.read_text(encoding="utf-8")))
    assert named - flags == set()


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_file_named_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = [path for path in PATH.findall(text) if not re.search(r"[*A-Z]", path) and not (REPO / path).exists()]
    # `room/module.py` names a module of the package by its path inside it.
    missing += [
        path
        for path in ROOM_PATH.findall(text)
        if not re.search(r"[A-Z]", path) and not (REPO / "k3conformance" / path).exists()
    ]
    assert missing == []
