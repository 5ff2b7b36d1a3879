"""Signed runs for hand-over (runs/signature.py, gate/signed.py, `keygen`, `sign`, `compare --require-signed`):
a signed run verifies and is judged as before; an unsigned run, a foreign key's, a run edited after
signing (a record, the summary) and a signature copied to another run are INCOMPLETE, each named;
no key reaches the output; without the `sign` extra the commands say how to install it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gate_mutations import deepep_case
from stored_runs import RECORDS_FILE, write_run

from k3conformance.cli import main as cli_main
from k3conformance.runs.signature import SIGNATURE_FILE, load_public_keys, verify_run
from k3conformance.runs.stored import load_run


def _pair(root: Path) -> tuple[Path, Path]:
    baseline, _ = deepep_case()
    candidate = json.loads(json.dumps(baseline))
    candidate.update(run_id="run-again", started_at="2026-12-01T05:00:00+00:00", baseline=False)
    base_dir = Path(write_run(root / str(baseline["shape"]) / str(baseline["run_id"]), baseline))
    cand_dir = Path(write_run(root / "cand" / "run-again", candidate))
    return base_dir, cand_dir


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private, public = tmp_path / "vendor.key", tmp_path / "vendor.pub"
    assert cli_main(["keygen", str(private), str(public)]) == 0
    return private, public


def _compare(base: Path, cand: Path, *public: Path) -> int:
    signed = [argument for path in public for argument in ("--require-signed", str(path))]
    return cli_main(["compare", str(base), str(cand), "--gate", "warn", "--format", "json", *signed])


def _reasons(capsys: pytest.CaptureFixture[str]) -> list[str]:
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return [str(reason) for reason in report["reasons"]] + [str(note) for note in report["notes"]]


def test_a_signed_pair_is_judged_as_before_and_an_unsigned_one_is_incomplete(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = keys
    base, cand = _pair(tmp_path / "results")
    # INCONCLUSIVE under warn: exit 0 without a signature requirement.
    assert _compare(base, cand) == 0
    capsys.readouterr()
    assert _compare(base, cand, public) == 1
    reasons = _reasons(capsys)
    assert any("not signed (no signature.json)" in reason and "(--require-signed)" in reason for reason in reasons)
    for run in (base, cand):
        assert cli_main(["sign", str(run), "--key", str(private)]) == 0
    capsys.readouterr()
    assert _compare(base, cand, public) == 0
    notes = _reasons(capsys)
    assert sum("by trusted key" in note for note in notes) == 2
    stored = load_run(str(cand), tmp_path)
    assert verify_run(stored, load_public_keys([public])).verified


def test_an_edited_record_an_edited_summary_a_moved_signature_and_a_foreign_key_are_refused(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    base, cand = _pair(tmp_path / "results")
    for run in (base, cand):
        assert cli_main(["sign", str(run), "--key", str(private)]) == 0
    trusted = load_public_keys([public])

    def problem(run: Path) -> str:
        verification = verify_run(load_run(str(run), tmp_path, baseline=False), trusted)
        assert not verification.verified
        return str(verification.problem)

    # A record edited: its line no longer chains, though summary and identity are as signed.
    edited = tmp_path / "edited"
    shutil.copytree(cand, edited)
    records = (edited / RECORDS_FILE).read_text().replace('"correct": 3', '"correct": 4', 1)
    assert records != (cand / RECORDS_FILE).read_text()
    (edited / RECORDS_FILE).write_text(records)
    assert "edited after it was signed" in problem(edited) and "chain breaks" in problem(edited)
    # The summary edited (its records untouched).
    summary_edited = tmp_path / "summary-edited"
    shutil.copytree(cand, summary_edited)
    summary = json.loads((summary_edited / "summary.json").read_text())
    summary["finished_at"] = "2026-12-01T09:00:00+00:00"
    (summary_edited / "summary.json").write_text(json.dumps(summary))
    assert "edited after it was signed: the summary (summary.json) differ" in problem(summary_edited)
    # The baseline's signature copied into the candidate's folder.
    moved = tmp_path / "moved"
    shutil.copytree(cand, moved)
    shutil.copy(base / SIGNATURE_FILE, moved / SIGNATURE_FILE)
    assert "a signature copied from another run" in problem(moved)
    # Signed by another key than the trusted one.
    other_private, other_public = tmp_path / "other.key", tmp_path / "other.pub"
    assert cli_main(["keygen", str(other_private), str(other_public)]) == 0
    foreign = tmp_path / "foreign"
    shutil.copytree(cand, foreign)
    assert cli_main(["sign", str(foreign), "--key", str(other_private)]) == 0
    assert "a foreign key" in problem(foreign)
    # Trusting both keys (one file of two), the foreign run verifies.
    both = tmp_path / "both.pub"
    both.write_bytes(public.read_bytes() + other_public.read_bytes())
    assert verify_run(load_run(str(foreign), tmp_path, baseline=False), load_public_keys([both])).verified


def test_no_key_reaches_the_output_and_key_files_are_checked(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = keys
    assert private.stat().st_mode & 0o077 == 0
    base, cand = _pair(tmp_path / "results")
    assert cli_main(["sign", str(cand), "--key", str(private)]) == 0
    assert cli_main(["compare", str(base), str(cand), "--require-signed", str(public)]) == 1
    # A private key given as the trusted one, and a key file replaced: bad input.
    assert cli_main(["compare", str(base), str(cand), "--require-signed", str(private)]) == 2
    assert cli_main(["keygen", str(private), str(tmp_path / "new.pub")]) == 2
    output = capsys.readouterr()
    printed = output.out + output.err + (cand / SIGNATURE_FILE).read_text()
    for path in (private, public):
        body = "".join(path.read_text().splitlines()[1:-1])
        assert body[:40] not in printed.replace("\n", "")
    assert "holds a private key" in output.err


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl here to write the keys")
def test_keys_written_by_openssl_sign_and_verify(tmp_path: Path) -> None:
    private, public = tmp_path / "ossl.key", tmp_path / "ossl.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(private)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(private), "-pubout", "-out", str(public)], check=True)
    _, cand = _pair(tmp_path / "results")
    assert cli_main(["sign", str(cand), "--key", str(private)]) == 0
    assert verify_run(load_run(str(cand), tmp_path, baseline=False), load_public_keys([public])).verified


def test_without_the_sign_extra_each_command_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [module for module in sys.modules if module == "cryptography" or module.startswith("cryptography.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cryptography", None)
    base, cand = _pair(tmp_path / "results")
    assert cli_main(["keygen", str(tmp_path / "a.key"), str(tmp_path / "a.pub")]) == 2
    (tmp_path / "a.pub").write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    assert cli_main(["compare", str(base), str(cand), "--require-signed", str(tmp_path / "a.pub")]) == 2
    assert cli_main(["sign", str(cand), "--key", str(tmp_path / "a.pub")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 3
    assert all(
        "signing needs the `sign` extra" in line and "pip install 'k3conformance[sign]'" in line for line in errors
    )


def test_the_matrix_requires_a_signature_of_each_candidate_and_names_the_unsigned_one(
    tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = keys
    results = tmp_path / "results"
    base, signed = _pair(results)
    document = json.loads((signed / "summary.json").read_text())
    document.update(run_id="run-unsigned", started_at="2026-12-01T06:00:00+00:00")
    document.pop("records_chain", None)
    unsigned = Path(write_run(results / "cand-unsigned" / "run-unsigned", document))
    for run in (base, signed):
        assert cli_main(["sign", str(run), "--key", str(private)]) == 0
    capsys.readouterr()
    arguments = ["matrix", str(base), str(signed), str(unsigned), "--gate", "warn", "--format", "json"]
    assert cli_main([*arguments, "--require-signed", str(public)]) == 1
    rows = {row["run"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    # The signed candidate is judged as without the requirement; the unsigned one cannot be.
    assert cli_main(arguments) == 0
    unrequired = {row["run"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    signed_run, unsigned_run = (
        next(run for run in rows if run.endswith(name)) for name in ("run-again", "run-unsigned")
    )
    assert rows[signed_run]["verdict"] == unrequired[signed_run]["verdict"] != "INCOMPLETE"
    assert rows[unsigned_run]["verdict"] == "INCOMPLETE" != unrequired[unsigned_run]["verdict"]
    assert "not signed" in json.dumps(rows[unsigned_run])
