"""tfgpu_install/env/verification.py: the one reader and writer of the verification record."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import pytest

from tests.support.tfenv import make_venv
from tfgpu_install.context import Context
from tfgpu_install.env.verification import (
    MAX_BYTES,
    BadRecord,
    RecordedPlan,
    VerificationRecord,
    gpu_verified,
    read_record,
    read_record_file,
    record_path,
    verified_ok,
    write_record,
)
from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.verify.host import CheckPlan, VerifyReport, run_verification

PLAN = CheckPlan(cuda="12.3", cudnn="8.9.7.29")


def test_record_round_trip(ctx: Context, tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "env")
    report = run_verification(ctx, venv, PLAN)
    path = write_record(ctx, venv, report, "f" * 64, PLAN)
    assert path == record_path(ctx, venv)
    doc = read_record(ctx, venv)
    assert doc is not None and doc.fingerprint == "f" * 64 and doc.plan is not None and doc.plan.cudnn == "8.9.7.29"
    assert doc.report is not None and VerifyReport.from_json(doc.report.raw).layers == report.layers
    assert doc.report.raw == json.loads(path.read_text())["report"]  # kept as written (the snapshot carries it)
    assert not list(path.parent.glob("*.tmp*"))


def test_no_record_is_none(ctx: Context, tmp_path: Path) -> None:
    assert read_record(ctx, tmp_path / "never-verified") is None
    assert not verified_ok(None) and not gpu_verified(None)


@pytest.mark.parametrize("content, why", [
    (b"{not json", "not JSON"),
    (b"\xff\xfe garbage", "not JSON"),
    (b"[1, 2]", "a JSON list, not an object"),
    (b'{"report": "ok"}', '"report" is a str'),
    (b'{"plan": [1]}', '"plan" is a list'),
    (b'{"fingerprint": 7}', '"fingerprint" is not a string'),
    # Typed once where it is read: a field of another type is no verdict (an "ok" of "no" was a pass).
    (b'{"report": {"ok": "no"}}', '"report"."ok" is a str, not a bool'),
    (b'{"report": {"ok": true, "gpu_verified": 1}}', '"report"."gpu_verified" is a int, not a bool'),
    (b'{"report": {"layers": {}}}', '"report"."layers" is not a list'),
    (b'{"plan": {"cuda": 12.3}}', '"plan"."cuda" is a float, not a str'),
    (b'{"plan": {"lib_dirs": "/a"}}', '"plan"."lib_dirs" is not a list of paths'),
    (b'{"created": ["x"]}', '"created" is a list, not a str'),
])
def test_a_damaged_record_is_one_error_with_the_fix(ctx: Context, tmp_path: Path, content: bytes, why: str) -> None:
    env = tmp_path / "env"
    path = record_path(ctx, env)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(BadRecord) as info:
        read_record(ctx, env)
    err = info.value
    assert isinstance(err, BadInputError) and err.code == ExitCode.BAD_INPUT and err.ref == "bad-verify-record"
    assert why in err.message and str(path) in err.message
    assert err.hint == f"delete {path} and re-run verify"


def test_an_oversized_record_is_not_read_whole(ctx: Context, tmp_path: Path) -> None:
    env = tmp_path / "env"
    path = record_path(ctx, env)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as fh:
        fh.write(b'{"pad": "')
        fh.truncate(MAX_BYTES + 100)  # sparse: no disk spent
    with pytest.raises(BadRecord, match="over"):
        read_record(ctx, env)


def test_an_unreadable_record_is_a_bad_record(ctx: Context, tmp_path: Path) -> None:
    env = tmp_path / "env"
    path = record_path(ctx, env)
    path.mkdir(parents=True)  # a directory where the file should be: open() fails with EISDIR
    with pytest.raises(BadRecord, match="cannot be read"):
        read_record(ctx, env)


def _record(tmp_path: Path, doc: object) -> Optional[VerificationRecord]:
    path = tmp_path / f"verify-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(doc))
    return read_record_file(path)


def test_verdicts(tmp_path: Path) -> None:
    assert verified_ok(_record(tmp_path, {"report": {"ok": True}}))
    assert not verified_ok(_record(tmp_path, {"report": {"ok": False}}))
    assert gpu_verified(_record(tmp_path, {"report": {"ok": True, "gpu_verified": True}}))
    assert not gpu_verified(_record(tmp_path, {"report": {"ok": True, "gpu_verified": False}}))
    assert gpu_verified(_record(tmp_path, {"report": {"ok": True}, "gpu_verified": True}))  # an older record's layout
    assert not gpu_verified(_record(tmp_path, {"report": {"ok": False, "gpu_verified": True}}))


def test_the_record_is_typed_once(tmp_path: Path) -> None:
    rec = _record(tmp_path, {"format": 1, "ts": "2026-01-01", "fingerprint": "f", "plan": {"cuda": "12.3",
                             "lib_dirs": ["/x"], "cpu_only": True}, "report": {"ok": True, "when": "w",
                             "layers": [{"name": "driver", "status": "pass"}, {"name": "tensorflow", "status": "fail"},
                                        "junk"]}})
    assert rec is not None and rec.created == "2026-01-01" and rec.fingerprint == "f"  # "ts": the oldest records
    assert rec.plan == RecordedPlan(cuda="12.3", lib_dirs=("/x",), cpu_only=True)
    assert rec.report is not None and rec.report.layers_passed == ("driver",) and rec.report.when == "w"
    assert rec.gpu_verified is None and not rec.empty
    empty = _record(tmp_path, {})
    assert empty is not None and empty.empty and empty.plan is None and empty.report is None


def test_callers_that_go_on_without_it_say_so(ctx: Context, tmp_path: Path) -> None:
    """status reports the damage; the verify step's check() says "not verified"; nothing raises."""
    from tfgpu_install.app.status import _verification
    from tfgpu_install.steps.verify import VerifyEnv

    env = tmp_path / "env"
    path = record_path(ctx, env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(["not", "a", "record"]))
    seen = _verification(ctx, env)
    assert seen is not None and seen["ok"] is False and "unreadable verification record" in seen["summary"]
    assert VerifyEnv(env, PLAN).check(ctx) is False
    assert os.path.exists(path)  # reading never deletes
