"""A run's sealed head signed for hand-over: who sealed the run, checked with a key the receiver trusts.

The chain (runs/chain.py) binds a run's records to its sealed identity, but whoever rewrites a
whole run can recompute every hash. A release pipeline or a vendor that holds an Ed25519 key signs
what makes the run this run: its run id and shape, the hash of its sealed identity, the hash of its
summary (which seals each records file's head, `records_chain`) and those heads themselves. The
signature lies in the run folder (`signature.json`); a receiver verifies it against the public keys
it trusts. An edited record breaks the chain before its sealed head, or moves the head and with it
the summary; an edited summary or identity changes their hashes; a signature copied into another
run names another run id, identity and heads: each fails, and the failure names what differs.

What a signature proves: that the holder of the key sealed this run as it now stands. Not that the
endpoint was honest, nor that the run was made against the deployment it names: a vendor can sign a
run of anything. A spot check against the live endpoint (`k3conformance audit`) tests that.

The cryptography is `cryptography`'s (the `sign` extra), a well-kept library, not ours. Keys are
PEM files (PKCS#8 private, SubjectPublicKeyInfo public): what `k3conformance keygen` writes, and
what `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` write. No key is ever written
to a log or a report: a public key is named by its key id, the first 16 hex digits of the SHA-256
of its raw bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k3conformance.runs.chain import check_heads, identity_digest, read_object, sealed_identity
from k3conformance.runs.records import SUMMARY_FILE, write_json_atomic
from k3conformance.runs.stored import StoredRun

SIGNATURE_FILE = "signature.json"
FORMAT = "k3conformance run signature v1"
ALGORITHM = "ed25519"
EXTRA = "sign"
_INSTALL = "pip install 'k3conformance[sign]'"
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----\s*", re.DOTALL)
# The parts of what is signed, in the order a failure names them.
_PARTS = ("run_id", "shape", "identity_sha256", "summary_sha256", "records_chain")


class SigningUnavailable(Exception):
    """The `sign` extra (cryptography) is not installed; the message says how to install it."""


class KeyFileError(ValueError):
    """A key file that cannot be read as an Ed25519 key; the message names it (never its content)."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SigningUnavailable(
            f"signing needs the `{EXTRA}` extra (the cryptography library, for Ed25519): {_INSTALL}"
        ) from None
    return ed25519


def _serialization() -> Any:
    _crypto()
    from cryptography.hazmat.primitives import serialization

    return serialization


@dataclass(frozen=True)
class PublicKey:
    """A trusted public key and where it came from, named by its key id, never by its bytes."""

    key: Any
    key_id: str
    source: str


def _raw_public(key: Any) -> bytes:
    serialization = _serialization()
    raw: bytes = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw


def key_id_of(key: Any) -> str:
    """The id of an Ed25519 public key: the first 16 hex digits of the SHA-256 of its raw 32 bytes."""
    return hashlib.sha256(_raw_public(key)).hexdigest()[:16]


def generate_keys(private_path: Path, public_path: Path) -> str:
    """A new key pair: the private key (PKCS#8 PEM, readable by its owner only) and the public one
    (SubjectPublicKeyInfo PEM). Refuses to replace an existing file. Returns the key id."""
    ed25519, serialization = _crypto(), _serialization()
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} exists: a key file is never replaced; choose another name")
    private = ed25519.Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # Created with its mode: there is no moment at which the file is readable by others.
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(private_pem)
    public = private.public_key()
    public_path.write_bytes(
        public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return key_id_of(public)


def load_private_key(path: Path) -> Any:
    ed25519, serialization = _crypto(), _serialization()
    try:
        data = path.read_bytes()
    except OSError as error:
        raise KeyFileError(f"cannot read the private key {path}: {error.strerror or error}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        # The library's message names the format problem, not the key.
        raise KeyFileError(f"{path} is no unencrypted PEM private key ({error})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise KeyFileError(f"{path} holds a {type(key).__name__}, not an Ed25519 private key")
    return key


def load_public_keys(paths: Sequence[Path]) -> list[PublicKey]:
    """Every Ed25519 public key in the files named: each file one key or several PEM blocks."""
    ed25519, serialization = _crypto(), _serialization()
    keys: list[PublicKey] = []
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as error:
            raise KeyFileError(f"cannot read the public key file {path}: {error.strerror or error}") from None
        blocks = [match.group(0) for match in _PEM_BLOCK.finditer(data)]
        if not blocks:
            raise KeyFileError(f"{path} holds no PEM public key (-----BEGIN PUBLIC KEY-----)")
        for number, block in enumerate(blocks, 1):
            if b"PRIVATE KEY" in block.split(b"\n", 1)[0]:
                raise KeyFileError(
                    f"{path} holds a private key (block {number}): give the receiver the public key only "
                    "(k3conformance keygen writes both; openssl pkey -pubout derives it)"
                )
            try:
                key = serialization.load_pem_public_key(block)
            except (ValueError, TypeError) as error:
                raise KeyFileError(f"{path}: block {number} is no PEM public key ({error})") from None
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise KeyFileError(f"{path}: block {number} is a {type(key).__name__}, not an Ed25519 public key")
            keys.append(PublicKey(key, key_id_of(key), str(path)))
    return keys


def signed_content(run_dir: Path) -> dict[str, Any]:
    """What a signature of the run in `run_dir` covers, as the run stands now."""
    summary = read_object(run_dir / SUMMARY_FILE) or {}
    return {
        "format": FORMAT,
        "run_id": summary.get("run_id"),
        "shape": summary.get("shape"),
        "identity_sha256": identity_digest(sealed_identity(run_dir)),
        "summary_sha256": identity_digest(summary),
        "records_chain": summary.get("records_chain"),
    }


def _message(content: Mapping[str, Any]) -> bytes:
    return json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sign_run(run_dir: Path, private_key: Any) -> dict[str, Any]:
    """Sign the run in `run_dir` and write `signature.json` into it (replacing an earlier one)."""
    content = signed_content(run_dir)
    document = {
        "format": FORMAT,
        "algorithm": ALGORITHM,
        "key_id": key_id_of(private_key.public_key()),
        "signed": content,
        "signature": base64.b64encode(private_key.sign(_message(content))).decode("ascii"),
    }
    write_json_atomic(run_dir / SIGNATURE_FILE, document)
    return document


@dataclass(frozen=True)
class Verification:
    """Whether a run's signature holds against the trusted keys: the key id that signed it, or the problem."""

    key_id: str | None
    problem: str | None

    @property
    def verified(self) -> bool:
        return self.problem is None


def verify_run(run: StoredRun, trusted: Sequence[PublicKey]) -> Verification:
    """Whether a stored run carries a signature, by one of `trusted`, of the run as it stands: its
    summary, identity and sealed heads as signed, and its records ending at those heads."""
    label, run_dir = run.label, run.run_dir
    if run_dir is None:
        return Verification(None, f"{label}: no run folder, nothing signed")
    path = run_dir / SIGNATURE_FILE
    if not path.is_file():
        return Verification(None, f"{label}: not signed (no {SIGNATURE_FILE}): sign it with `k3conformance sign`")
    document = read_object(path)
    if document is None or document.get("format") != FORMAT or document.get("algorithm") != ALGORITHM:
        return Verification(None, f"{label}: {SIGNATURE_FILE} is unreadable or no {ALGORITHM} run signature")
    key_id = document.get("key_id")
    matching = [key for key in trusted if key.key_id == key_id]
    if not matching:
        ids = ", ".join(sorted({key.key_id for key in trusted}))
        return Verification(
            None, f"{label}: signed by key {key_id}, which is not among the trusted keys ({ids}): a foreign key"
        )
    current = signed_content(run_dir)
    try:
        signature = base64.b64decode(str(document.get("signature", "")), validate=True)
    except ValueError:
        signature = b""
    from cryptography.exceptions import InvalidSignature

    for key in matching:
        try:
            key.key.verify(signature, _message(current))
        except InvalidSignature:
            continue
        # The signature covers the heads; whether the records still end at them is the chain's to say.
        broken = check_heads(run.records().files, run.summary.get("records_chain"), label)
        if broken:
            return Verification(
                key.key_id, f"{label}: edited after it was signed: {broken[0].removeprefix(label + ': ')}"
            )
        return Verification(key.key_id, None)
    return Verification(str(key_id), f"{label}: {_what_changed(document.get('signed'), current)}")


def _what_changed(signed: object, current: Mapping[str, Any]) -> str:
    """Why a signature of key the receiver trusts does not verify, named by the part that differs."""
    if not isinstance(signed, Mapping):
        return f"its signature does not verify ({SIGNATURE_FILE} edited)"
    if signed.get("run_id") != current["run_id"] or signed.get("shape") != current["shape"]:
        return (
            f"its signature is of run {signed.get('shape')}/{signed.get('run_id')}, not of this one: a signature "
            "copied from another run"
        )
    changed = [part for part in _PARTS if signed.get(part) != current.get(part)]
    names = {
        "identity_sha256": "the sealed identity (identity.json)",
        "summary_sha256": "the summary (summary.json)",
        "records_chain": "the records' sealed heads",
    }
    if changed:
        return f"edited after it was signed: {', '.join(names.get(part, part) for part in changed)} differ from what was signed"
    return f"its signature does not verify ({SIGNATURE_FILE} edited)"
