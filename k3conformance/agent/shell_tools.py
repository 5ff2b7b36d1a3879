"""The tools the open coding agents give a model (issue 33), beside the suite's own:

- `bash`: one shell command in the repository (SWE-agent's and mini-swe-agent's `bash`,
  OpenHands' `execute_bash`), run by `/bin/sh -c` inside the sandbox with its own time
  limit (SHELL_TIMEOUT_S at most) and its output cut to SHELL_OUTPUT_CHARS (head and tail
  kept); the files it leaves are the repository from then on;
- `str_replace_editor`: view a file with line numbers (or a folder two levels deep), create
  a file, replace one exact occurrence of a string, insert text after a line: the editor of
  SWE-agent and OpenHands, by the same name and commands (`undo_edit` left out: every
  change is a call the records keep).

Both run like every tool, on a fresh copy of the repository in the sandbox (tools.py), and
paths are relative to the repository root. The shell's output is the command's own: one that
prints times or random numbers gives another text on a resume, whose request then differs
from the recorded one and is sent again.
"""

from __future__ import annotations

from typing import Any

SHELL = "bash"
EDITOR = "str_replace_editor"
# Below the tools' own 30 s wall limit, so the program still reports a command that hangs.
SHELL_TIMEOUT_S = 20
SHELL_OUTPUT_CHARS = 10_000
VIEW_LINES = 2_000


def specs(function: Any, path: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The two tools' declarations, built by tools.py's `_function` with its path schema."""
    return (
        function(
            SHELL,
            "Run one shell command (/bin/sh -c) in the repository root and show its output and exit status. "
            f"It stops after `timeout` seconds (at most {SHELL_TIMEOUT_S}); long output is cut in the middle. "
            "Python is `python3`; there is no network.",
            {"command": {"type": "string"}, "timeout": {"type": "integer", "minimum": 1, "maximum": SHELL_TIMEOUT_S}},
            ["command"],
        ),
        function(
            EDITOR,
            "View, create and edit files. `view`: a file with line numbers (`view_range` [first, last] for a part) "
            "or a folder two levels deep; `create`: a new file with `file_text`; `str_replace`: replace the one "
            "exact occurrence of `old_str` by `new_str`; `insert`: `new_str` after line `insert_line` (0: at the top).",
            {
                "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
                "path": path,
                "file_text": {"type": "string"},
                "old_str": {"type": "string"},
                "new_str": {"type": "string"},
                "insert_line": {"type": "integer", "minimum": 0},
                "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
            },
            ["command", "path"],
        ),
    )


PROGRAMS: dict[str, str] = {
    SHELL: r"""
import signal, subprocess
limit = min(int(ARGUMENTS.get("timeout") or TIMEOUT_S), TIMEOUT_S)
environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": ROOT, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
process = subprocess.Popen(["/bin/sh", "-c", ARGUMENTS["command"]], cwd=ROOT, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment, start_new_session=True)
try:
    output, _ = process.communicate(timeout=limit)
    status = "exit status " + str(process.returncode)
except subprocess.TimeoutExpired:
    os.killpg(process.pid, signal.SIGKILL)
    output, _ = process.communicate()
    status = "timed out after " + str(limit) + " s"
text = clean(output.decode("utf-8", "replace"))
if len(text) > OUTPUT_CHARS:
    half = OUTPUT_CHARS // 2
    text = text[:half] + "\n[... " + str(len(text) - 2 * half) + " characters cut ...]\n" + text[-half:]
emit(text.rstrip("\n") + ("\n" if text.strip() else "") + "[" + status + "]")
""".replace("TIMEOUT_S", str(SHELL_TIMEOUT_S)).replace("OUTPUT_CHARS", str(SHELL_OUTPUT_CHARS)),
    EDITOR: r"""
command, name = ARGUMENTS["command"], ARGUMENTS["path"]
path = inside(name)


def fail(message):
    emit("error: " + message)
    sys.exit(2)


def numbered(lines, first):
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, start=first))


def read():
    if not os.path.isfile(path):
        fail("no such file: " + name)
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def write(text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


if command == "view" and os.path.isdir(path):
    for folder, folders, names in os.walk(path):
        depth = os.path.relpath(folder, path).count(os.sep) + (folder != path)
        folders[:] = sorted(f for f in folders if f != "__pycache__" and not f.startswith(".")) if depth < 2 else []
        for entry in sorted(folders) + sorted(names):
            emit(os.path.relpath(os.path.join(folder, entry), ROOT))
elif command == "view":
    lines = read().split("\n")
    first, last = ARGUMENTS.get("view_range") or [1, min(len(lines), VIEW_LINES)]
    last = len(lines) if last == -1 else last
    if not 1 <= first <= last <= len(lines):
        fail(f"view_range {[first, last]} is outside the file's lines 1 to {len(lines)}")
    emit(numbered(lines[first - 1 : last], first))
    if last < len(lines) and not ARGUMENTS.get("view_range"):
        emit(f"[... {len(lines) - last} more lines: use view_range]")
elif command == "create":
    if os.path.exists(path):
        fail(name + " exists already: edit it with str_replace")
    if "file_text" not in ARGUMENTS:
        fail("create needs file_text")
    write(ARGUMENTS["file_text"])
    emit("created " + name)
elif command == "str_replace":
    text, old, new = read(), ARGUMENTS.get("old_str", ""), ARGUMENTS.get("new_str", "")
    count = text.count(old) if old else 0
    if count != 1:
        fail(f"old_str occurs {count} times in {name}; it must occur exactly once")
    write(text.replace(old, new))
    line = text[: text.index(old)].count("\n")
    shown = (text.replace(old, new)).split("\n")[max(0, line - 3) : line + new.count("\n") + 4]
    emit("edited " + name + ":\n" + numbered(shown, max(0, line - 3) + 1))
elif command == "insert":
    lines, at = read().split("\n"), ARGUMENTS.get("insert_line")
    if at is None or not 0 <= at <= len(lines):
        fail(f"insert_line must be between 0 and {len(lines)}")
    lines[at:at] = ARGUMENTS.get("new_str", "").split("\n")
    write("\n".join(lines))
    emit(f"inserted after line {at} of {name}")
""".replace("VIEW_LINES", str(VIEW_LINES)),
}
