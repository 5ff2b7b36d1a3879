"""`--require-signed`: a gate that judges only runs signed by a key the receiver trusts.

A run handed over (a vendor's, a cache's) is signed by whoever sealed it (runs/signature.py). With
trusted public keys, `compare` and `matrix` verify the baseline's and every candidate's signature: a
run unsigned, signed by a foreign key, or edited after it was signed is INCOMPLETE, with the reason;
a signature that holds is a note naming the key id (never the key). The receiver signs its own
baseline too, or trusts the key it was signed with: evidence that must be signed is all signed.
"""

from __future__ import annotations

from collections.abc import Sequence

from k3conformance.gate.verdict import INCOMPLETE, Finding, GateResult, settle
from k3conformance.runs.signature import PublicKey, verify_run
from k3conformance.runs.stored import StoredRun


def signature_findings(runs: Sequence[StoredRun], trusted: Sequence[PublicKey]) -> tuple[list[Finding], list[str]]:
    """(the INCOMPLETE findings, the notes) of verifying each run's signature against `trusted`."""
    findings, notes = [], []
    for run in runs:
        verification = verify_run(run, trusted)
        if verification.problem is not None:
            findings.append(Finding(INCOMPLETE, f"{verification.problem} (--require-signed)"))
        else:
            notes.append(f"signed: {run.label} by trusted key {verification.key_id} (--require-signed)")
    return findings, notes


def require_signed(result: GateResult, runs: Sequence[StoredRun], trusted: Sequence[PublicKey]) -> None:
    """Put the signature findings of `runs` into a settled result: its verdict is INCOMPLETE at best
    where one of them is not signed as required."""
    findings, notes = signature_findings(runs, trusted)
    result.notes += notes
    if findings:
        settle(result, [*result.findings, *findings])
