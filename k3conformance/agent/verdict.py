"""The program that decides a task: the hidden tests in a trusted process, the repository in
the model's (issue 25; `k3conformance/sandbox/boundary.py`).

The trusted process T runs unittest on the hidden tests, whose source travels inside this
program (nothing of them is read from the work folder, which the model's process can write).
Their `from pkg import core` resolves to module proxies of the model's process M, which
imports the repository and serves the calls; the repository is never on T's sys.path. T
reports each test's outcome through the sandbox's seal, which M cannot reach (it is a fresh
interpreter started after the seal's file was deleted, and T is not dumpable). The
`run_tests` tool the model calls for feedback keeps the in-process runner: it decides
nothing.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
from collections.abc import Mapping

from k3conformance.sandbox.boundary import CALL_TIMEOUT_S, boundary_prelude

# Records each test's outcome by unittest id: the report the seal carries. The run_tests tool's
# in-process runner (tools.py) records with the same class.
RECORDER = r"""
class _Recorder(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes.setdefault(test.id(), "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[test.id()] = "failed"

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[test.id()] = "error"

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[test.id()] = "skipped"

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.outcomes[test.id()] = "expected failure"

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes[test.id()] = "unexpected success"

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.outcomes[test.id()] = "failed"
"""

# T's program: the hidden tests as modules made from their source (never from files), the
# repository's packages resolved to M, unittest's run, the report through the seal.
_RUNNER_HEAD = r"""
import io, linecache, os, re, sys, types, unittest
import unittest.case, unittest.loader, unittest.result, unittest.runner, unittest.suite

ARGUMENTS = json.loads(%r)
OUTPUT = os.path.realpath("tool-output.txt")


"""
_RUNNER = r"""
def _failed_import(name, error):
    def failed():
        raise error

    failed.__name__ = name
    return unittest.FunctionTestCase(failed)


def _hidden_suite(hidden, directory):
    # The hidden modules are made from the source in this program, never from files.
    loader, suite = unittest.TestLoader(), unittest.TestSuite()
    package = types.ModuleType(directory)
    package.__path__ = []
    sys.modules[directory] = package
    for path, source in sorted(hidden.items()):
        if not path.startswith(directory + "/") or not path.endswith(".py"):
            continue
        name = path[: -len(".py")].replace("/", ".")
        if not name.rpartition(".")[2].startswith("test"):
            continue
        filename = os.path.realpath(path)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module = types.ModuleType(name)
        module.__file__ = filename
        sys.modules[name] = module
        try:
            exec(compile(source, filename, "exec"), module.__dict__)
        except Exception as error:
            suite.addTest(_failed_import(name, error))
            continue
        suite.addTest(loader.loadTestsFromModule(module))
    return suite


model = k3_boundary.ModelProcess(os.path.realpath("repo"), ARGUMENTS["timeout"])
model.install_importer([name for name in ARGUMENTS["packages"] if name not in sys.stdlib_module_names])
suite = _hidden_suite(ARGUMENTS["hidden"], ARGUMENTS["directory"])
report = io.StringIO()
result = unittest.TextTestRunner(stream=report, verbosity=1, resultclass=_Recorder).run(suite)
printed = model.close()
text = re.sub(r"Ran (\d+) tests? in [0-9.]+s", r"Ran \1 tests", report.getvalue())
with open(OUTPUT, "a", encoding="utf-8") as handle:
    handle.write(text)
if printed:
    sys.stderr.write("--- the model's process printed ---\n" + printed + "\n")
K3_SEAL_PAYLOAD = json.dumps({"run": result.testsRun, "outcomes": result.outcomes, "tampered": []}, sort_keys=True)
"""


def repository_packages(files: Mapping[str, str]) -> list[str]:
    """The repository's top-level module and package names (what the tests may import from it)."""
    names = set()
    for path in files:
        head, _, rest = path.partition("/")
        if rest and rest.endswith(".py"):
            names.add(head)
        elif not rest and head.endswith(".py"):
            names.add(head.removesuffix(".py"))
    return sorted(name for name in names if name.isidentifier())


def hidden_verdict_program(hidden: Mapping[str, str], directory: str, packages: list[str]) -> str:
    """T's program: the boundary, then unittest over the `hidden` test files (path -> source,
    under `directory`), with `packages` served by the model's process."""
    tests = {path: text for path, text in hidden.items() if fnmatch.fnmatch(posixpath.basename(path), "*.py")}
    arguments = {"hidden": tests, "directory": directory, "packages": packages, "timeout": CALL_TIMEOUT_S}
    runner = _RUNNER_HEAD % json.dumps(arguments) + RECORDER + _RUNNER
    return "import json\n" + boundary_prelude() + runner
