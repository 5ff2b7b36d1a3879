"""The build step that makes the wheel the product: it carries the repository's top-level
`suites/` and `fixtures/` inside the package, as `k3conformance/suites` (a package, so
`pytest --pyargs k3conformance.suites` finds it) and `k3conformance/fixtures`.

The folders stay at the repository's top (the layout is part of the design); the sdist carries
them there too (MANIFEST.in), so a wheel built from the sdist gets the same copies. An editable
install copies nothing: `datasets/bundled.py` then reads the checkout's own folders.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = ("suites", "fixtures")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")
SUITES_INIT = '"""The k3conformance suites, as installed with the package (copied from the repository\'s suites/)."""\n'


class BuildWithBundledData(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        package = Path(self.build_lib) / "k3conformance"
        for name in BUNDLED:
            target = package / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(ROOT / name, target, ignore=IGNORED)
        (package / "suites" / "__init__.py").write_text(SUITES_INIT)


setup(cmdclass={"build_py": BuildWithBundledData})
