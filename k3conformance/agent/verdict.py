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
from collections.abc import Mapping, Sequence

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
import importlib, importlib.util, io, linecache, os, re, sys, types, unittest
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


class _HiddenFinder:
    # The hidden tests' modules and packages, made from the source in this program, never
    # from files: `from . import helper` and `from hidden_tests.base import Case` work.
    def __init__(self, hidden, directory):
        self.directory, self.sources = directory, {}
        for path, source in hidden.items():
            if path.startswith(directory + "/") and path.endswith(".py"):
                name = path[: -len(".py")].replace("/", ".")
                package = name.endswith(".__init__")
                self.sources[name.removesuffix(".__init__")] = (path, source, package)

    def find_spec(self, name, path=None, target=None):
        if name != self.directory and not name.startswith(self.directory + "."):
            return None
        entry = self.sources.get(name)
        package = entry[2] if entry else any(other.startswith(name + ".") for other in self.sources)
        if entry is None and not package and name != self.directory:
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self, is_package=package or name == self.directory)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        entry = self.sources.get(module.__name__)
        if entry is None:
            return
        path, source, _ = entry
        filename = os.path.realpath(path)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module.__file__ = filename
        exec(compile(source, filename, "exec"), module.__dict__)


class _Param:
    def __init__(self, values, marks):
        self.values, self.marks = values, marks


class _Raises:
    def __init__(self, expected, match):
        self.expected, self.match, self.value = expected, match, None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            raise AssertionError("DID NOT RAISE " + repr(self.expected))
        if not issubclass(kind, self.expected):
            return False
        if self.match is not None and not re.search(self.match, str(value)):
            raise AssertionError("the message " + repr(str(value)) + " does not match " + repr(self.match))
        self.value = value
        return True


class _Mark:
    # What the projects' pytest-style tests use of pytest's marks: parametrize and skips;
    # any other mark is a label.
    def parametrize(self, names, values, ids=None, **_):
        if isinstance(names, str):
            names = [name.strip() for name in names.split(",") if name.strip()]
        names, values = list(names), list(values)

        def decorate(function):
            function._k3_parametrize = [(names, values), *getattr(function, "_k3_parametrize", [])]
            return function

        return decorate

    def skipif(self, condition, reason="", **_):
        def decorate(function):
            if condition:
                function._k3_skip = reason or "skipped"
            return function

        return decorate

    def skip(self, function=None, reason="", **_):
        def decorate(function):
            function._k3_skip = reason or "skipped"
            return function

        return decorate(function) if callable(function) else decorate

    xfail = skip

    def __getattr__(self, name):
        def mark(*arguments, **_):
            if len(arguments) == 1 and callable(arguments[0]):
                return arguments[0]
            return lambda function: function

        return mark


def _pytest_stand_in():
    # The sandbox's interpreter has no pytest: the projects' pytest-style tests get the few
    # names they use (a test that needs more, a fixture say, errors and is never selected).
    stand_in = types.ModuleType("pytest")

    def raises(expected, *arguments, match=None, **keywords):
        if arguments:
            with _Raises(expected, match):
                arguments[0](*arguments[1:], **keywords)
            return None
        return _Raises(expected, match)

    def skip(reason="", **_):
        raise unittest.SkipTest(reason)

    def fixture(*arguments, **_):
        return arguments[0] if len(arguments) == 1 and callable(arguments[0]) else (lambda function: function)

    def importorskip(name, *_, **__):
        try:
            return __import__(name)
        except ImportError:
            raise unittest.SkipTest(name + " is not installed")

    stand_in.raises, stand_in.skip, stand_in.fixture, stand_in.importorskip = raises, skip, fixture, importorskip
    stand_in.mark, stand_in.param = _Mark(), lambda *values, marks=(), **_: _Param(values, marks)
    stand_in.fail = lambda reason="", **_: (_ for _ in ()).throw(AssertionError(reason))
    return stand_in


def _expanded(name, function, owner):
    combinations = [("", {})]
    for names, values in getattr(function, "_k3_parametrize", []):
        grown = []
        for suffix, keywords in combinations:
            for index, value in enumerate(values):
                value = value.values if isinstance(value, _Param) else value
                value = (value,) if len(names) == 1 else tuple(value)
                grown.append((suffix + "[" + str(index) + "]", {**keywords, **dict(zip(names, value))}))
        combinations = grown
    skip = getattr(function, "_k3_skip", None)
    for suffix, keywords in combinations:
        def test(self, keywords=keywords):
            if skip is not None:
                raise unittest.SkipTest(skip)
            if owner is None:
                return function(**keywords)
            instance = owner()
            method = getattr(instance, name)
            if hasattr(instance, "setup_method"):
                instance.setup_method(method)
            try:
                method(**keywords)
            finally:
                if hasattr(instance, "teardown_method"):
                    instance.teardown_method(method)

        yield name + suffix, test


def _plain_cases(module):
    # pytest-style tests as unittest cases: the module's test functions under the class name
    # `functions`, each plain `Test*` class's test methods under its own name.
    loader, cases = unittest.TestLoader(), []
    owners = [("functions", None, {name: value for name, value in vars(module).items()
                                   if name.startswith("test") and isinstance(value, types.FunctionType)
                                   and value.__module__ == module.__name__})]
    for name, value in list(vars(module).items()):
        if (name.startswith("Test") and isinstance(value, type) and not issubclass(value, unittest.TestCase)
                and value.__module__ == module.__name__):
            methods = {attribute: getattr(value, attribute) for attribute in dir(value)
                       if attribute.startswith("test") and callable(getattr(value, attribute))}
            owners.append((name, value, methods))
    for class_name, owner, functions in owners:
        methods = dict(item for name, function in functions.items() for item in _expanded(name, function, owner))
        if methods:
            case = type(class_name, (unittest.TestCase,), {"__module__": module.__name__, **methods})
            case.__qualname__ = class_name
            cases.append(loader.loadTestsFromTestCase(case))
    return cases


def _hidden_suite(hidden, directory, select):
    loader, suite = unittest.TestLoader(), unittest.TestSuite()
    if importlib.util.find_spec("pytest") is None:
        sys.modules["pytest"] = _pytest_stand_in()
    sys.meta_path.insert(0, _HiddenFinder(hidden, directory))
    for path in sorted(hidden):
        if not path.startswith(directory + "/") or not path.endswith(".py"):
            continue
        name = path[: -len(".py")].replace("/", ".")
        if not name.rpartition(".")[2].startswith("test"):
            continue
        try:
            module = importlib.import_module(name)
        except Exception as error:
            suite.addTest(_failed_import(name, error))
            continue
        suite.addTest(loader.loadTestsFromModule(module))
        suite.addTests(_plain_cases(module))
    if not select:
        return suite
    chosen, pending, wanted = unittest.TestSuite(), [suite], set(select)
    while pending:
        item = pending.pop(0)
        if isinstance(item, unittest.TestSuite):
            pending[:0] = list(item)
        elif item.id() in wanted:
            chosen.addTest(item)
    return chosen


model = k3_boundary.ModelProcess(os.path.realpath("repo"), ARGUMENTS["timeout"])
model.install_importer([name for name in ARGUMENTS["packages"] if name not in sys.stdlib_module_names])
suite = _hidden_suite(ARGUMENTS["hidden"], ARGUMENTS["directory"], ARGUMENTS["select"])
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


def hidden_verdict_program(
    hidden: Mapping[str, str], directory: str, packages: list[str], select: Sequence[str] = ()
) -> str:
    """T's program: the boundary, then unittest over the `hidden` test files (path -> source,
    under `directory`), with `packages` served by the model's process; only the tests whose ids
    are in `select` when it names any (a real project's suite: the ones its own code passes)."""
    tests = {path: text for path, text in hidden.items() if fnmatch.fnmatch(posixpath.basename(path), "*.py")}
    arguments = {
        "hidden": tests,
        "directory": directory,
        "packages": packages,
        "timeout": CALL_TIMEOUT_S,
        "select": sorted(select),
    }
    runner = _RUNNER_HEAD % json.dumps(arguments) + RECORDER + _RUNNER
    return "import json\n" + boundary_prelude() + runner
