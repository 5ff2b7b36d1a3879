"""SIGTERM handled like Ctrl-C, so a run stopped by `kill`, a batch scheduler or a container
runtime ends as an interrupted run instead of vanishing.

pytest turns Ctrl-C (KeyboardInterrupt in the main thread) into an orderly stop: the session
finishes, the run summary says `interrupted`, and `--k3-resume` picks the run up. SIGTERM
would end the process on the spot and leave the summary saying `running`. So the first
SIGTERM raises KeyboardInterrupt in the main thread; a second one, while the run winds
down, ends the process as SIGTERM always did. A handler someone else installed is left alone.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest

_INSTALLED = pytest.StashKey[bool]()


def _interrupt(signal_number: int, frame: FrameType | None) -> None:
    signal.signal(signal_number, signal.SIG_DFL)
    raise KeyboardInterrupt(f"signal {signal.Signals(signal_number).name}")


def interrupt_on_sigterm(config: pytest.Config) -> None:
    """From `pytest_configure`: make SIGTERM stop this process (controller, worker or single) like Ctrl-C."""
    # Signal handlers can only be set from the main thread (xdist workers run pytest there).
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    signal.signal(signal.SIGTERM, _interrupt)
    config.stash[_INSTALLED] = True


def restore_sigterm(config: pytest.Config) -> None:
    """From `pytest_unconfigure`: SIGTERM back to its default, if it is still ours."""
    if not config.stash.get(_INSTALLED, False):
        return
    del config.stash[_INSTALLED]
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
