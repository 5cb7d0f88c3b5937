"""The verification record: what the last run of the GPU check found for an env, kept in the env's
state dir as verify.json. The only module that reads or writes it, with one error policy:

- no record: `read_record` returns None;
- a record that cannot be used (unreadable file, over MAX_BYTES, not JSON, not an object, a
  "report" or "plan" that is not an object, a "fingerprint" that is not a string): `BadRecord`, a
  BadInputError naming the file, with the fix (delete it and re-run verify).

A caller that can go on without the record (status, the install's last screen, the verify step's
check, the snapshot) catches BadRecord, and only BadRecord, and says what it saw.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, Protocol

from tfgpu_install.context import Context
from tfgpu_install.env.state import env_state_dir
from tfgpu_install.errors import BadInputError


class _Json(Protocol):
    """What the record keeps of a verification (verify.host's CheckPlan and VerifyReport): the env's
    room stores the documents without importing the check that makes them."""

    def to_json(self) -> dict[str, Any]: ...


class _Report(_Json, Protocol):
    @property
    def when(self) -> str: ...

FORMAT = 1
NAME = "verify.json"
MAX_BYTES = 16 * 1024 * 1024  # a report with a long TF log is ~100 KiB; more is not ours


class BadRecord(BadInputError):
    ref = "bad-verify-record"


def record_path(ctx: Context, env: Path) -> Path:
    return env_state_dir(ctx, Path(env)) / NAME


def write_record(ctx: Context, env: Path, report: _Report, fingerprint: str, plan: _Json) -> Path:
    path = record_path(ctx, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "env": str(env), "created": report.when, "fingerprint": fingerprint,
           "plan": plan.to_json(), "report": report.to_json()}
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    os.replace(tmp, path)  # never half-written
    return path


def read_record(ctx: Context, env: Path) -> Optional[dict[str, Any]]:
    """The env's record, None when there is none; BadRecord when there is one that cannot be used."""
    return read_record_file(record_path(ctx, env))


def read_record_file(path: Path) -> Optional[dict[str, Any]]:
    """`read_record` for a path already known (the no-op fast path keeps its imports few)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _bad(path, f"cannot be read ({exc.strerror or exc})") from exc
    if len(raw) > MAX_BYTES:
        raise _bad(path, f"over {MAX_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise _bad(path, f"not JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise _bad(path, f"a JSON {type(doc).__name__}, not an object")
    for key in ("report", "plan"):
        if key in doc and not isinstance(doc[key], dict):
            raise _bad(path, f'"{key}" is a {type(doc[key]).__name__}, not an object')
    if "fingerprint" in doc and not isinstance(doc["fingerprint"], str):
        raise _bad(path, '"fingerprint" is not a string')
    return doc


def verified_ok(doc: Optional[dict[str, Any]]) -> bool:
    """The record says the check passed."""
    return bool(doc and (doc.get("report") or {}).get("ok"))


def gpu_verified(doc: Optional[dict[str, Any]]) -> bool:
    """The record says the check passed on the GPU (older records kept gpu_verified at the top)."""
    report = (doc or {}).get("report") or {}
    return bool(report.get("ok") and report.get("gpu_verified", (doc or {}).get("gpu_verified")))


def _bad(path: Path, why: str) -> BadRecord:
    return BadRecord(f"{path}: not a verification record: {why}", hint=f"delete {path} and re-run verify")
