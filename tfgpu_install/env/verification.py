"""The verification record: what the last run of the GPU check found for an env, kept in the env's
state dir as verify.json. The only module that reads or writes it, with one error policy:

- no record: `read_record` returns None;
- a record that cannot be used (unreadable file, over MAX_BYTES, not JSON, not an object, a
  "report" or "plan" that is not an object, a "fingerprint" that is not a string): `BadRecord`, a
  BadInputError naming the file, with the fix (delete it and re-run verify).

A caller that can go on without the record (status, the install's last screen, the verify step's
check, the snapshot) catches BadRecord, and only BadRecord, and says what it saw.

The record is typed once, here, where it is read (`VerificationRecord`): a "plan" or "report" field of
another type than the check writes (an "ok" that is not true/false/null ...) is a BadRecord too. The
report is also kept as written (`RecordedReport.raw`): the snapshot carries it byte for byte and the
check's own reader (verify.host.VerifyReport.from_json) reads its layers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Protocol, TypeVar

from tfgpu_install.context import Context
from tfgpu_install.env.state import env_state_dir
from tfgpu_install.errors import BadInputError
from tfgpu_install.guard.jsondoc import JSONValue


class _Json(Protocol):
    """What the record keeps of a verification (verify.host's CheckPlan and VerifyReport): the env's
    room stores the documents without importing the check that makes them."""

    def to_json(self) -> object: ...


class _Report(_Json, Protocol):
    @property
    def when(self) -> str: ...

FORMAT = 1
NAME = "verify.json"
MAX_BYTES = 16 * 1024 * 1024  # a report with a long TF log is ~100 KiB; more is not ours


_T = TypeVar("_T")


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


@dataclass(frozen=True)
class RecordedPlan:
    """What the check compared against (verify.host.CheckPlan as it wrote it)."""

    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    tensorflow: Optional[str] = None
    lib_dirs: tuple[str, ...] = ()
    cpu_only: bool = False


@dataclass(frozen=True)
class RecordedReport:
    """The check's report (verify.host.VerifyReport.to_json): the fields read here, and all of it as written."""

    raw: Mapping[str, JSONValue]  # as json.loads read it
    ok: Optional[bool] = None
    gpu_verified: Optional[bool] = None  # the report's own (None when it does not say)
    when: Optional[str] = None
    summary: Optional[str] = None
    mode: Optional[str] = None
    layers_passed: tuple[str, ...] = ()  # the names of the layers that passed


@dataclass(frozen=True)
class VerificationRecord:
    fingerprint: Optional[str] = None
    created: Optional[str] = None  # when the check ran ("ts" in the oldest records)
    plan: Optional[RecordedPlan] = None  # None when the record has none (or an empty one)
    report: Optional[RecordedReport] = None  # None when the record has none
    gpu_verified: Optional[bool] = None  # the report's, else what the oldest records kept at the top
    empty: bool = False  # the document was {}: it says nothing (status shows no verification)

    @property
    def ok(self) -> bool:
        """The check passed."""
        return bool(self.report and self.report.ok)


def read_record(ctx: Context, env: Path) -> Optional[VerificationRecord]:
    """The env's record, None when there is none; BadRecord when there is one that cannot be used."""
    return read_record_file(record_path(ctx, env))


def read_record_file(path: Path) -> Optional[VerificationRecord]:
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
    return _typed(path, doc)


def _typed(path: Path, doc: Mapping[str, JSONValue]) -> VerificationRecord:
    report = doc.get("report")
    legacy = _field(path, doc, "gpu_verified", bool)
    typed = _report(path, report) if isinstance(report, dict) else None
    return VerificationRecord(
        fingerprint=_field(path, doc, "fingerprint", str),
        created=_field(path, doc, "created", str) or _field(path, doc, "ts", str),
        plan=_plan(path, doc.get("plan")),
        report=typed,
        gpu_verified=typed.gpu_verified if typed is not None and "gpu_verified" in typed.raw else legacy,
        empty=not doc)


def _plan(path: Path, plan: object) -> Optional[RecordedPlan]:
    if not isinstance(plan, dict) or not plan:
        return None
    dirs = plan.get("lib_dirs") or []
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise _bad(path, '"plan"."lib_dirs" is not a list of paths')
    return RecordedPlan(cuda=_field(path, plan, "cuda", str, "plan"), cudnn=_field(path, plan, "cudnn", str, "plan"),
                        tensorflow=_field(path, plan, "tensorflow", str, "plan"), lib_dirs=tuple(dirs),
                        cpu_only=bool(_field(path, plan, "cpu_only", bool, "plan")))


def _report(path: Path, report: Mapping[str, JSONValue]) -> RecordedReport:
    layers = report.get("layers", [])
    if not isinstance(layers, list):
        raise _bad(path, '"report"."layers" is not a list')
    passed = tuple(str(lay["name"]) for lay in layers if isinstance(lay, dict) and lay.get("status") == "pass"
                   and isinstance(lay.get("name"), str))
    return RecordedReport(raw=report, ok=_field(path, report, "ok", bool, "report"),
                          gpu_verified=_field(path, report, "gpu_verified", bool, "report"),
                          when=_field(path, report, "when", str, "report"),
                          summary=_field(path, report, "summary", str, "report"),
                          mode=_field(path, report, "mode", str, "report"), layers_passed=passed)


def _field(path: Path, doc: Mapping[str, JSONValue], key: str, kind: type[_T], part: str = "") -> Optional[_T]:
    """doc[key] when it is a `kind` (None when absent or null); BadRecord when it is something else."""
    value = doc.get(key)
    if value is None or isinstance(value, kind):
        return value
    where = f'"{part}"."{key}"' if part else f'"{key}"'
    raise _bad(path, f"{where} is a {type(value).__name__}, not a {kind.__name__}")


def verified_ok(record: Optional[VerificationRecord]) -> bool:
    """The record says the check passed."""
    return bool(record and record.ok)


def gpu_verified(record: Optional[VerificationRecord]) -> bool:
    """The record says the check passed on the GPU (older records kept gpu_verified at the top)."""
    return bool(record and record.ok and record.gpu_verified)


def _bad(path: Path, why: str) -> BadRecord:
    return BadRecord(f"{path}: not a verification record: {why}", hint=f"delete {path} and re-run verify")
