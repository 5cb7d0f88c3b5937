"""VerifyEnv ("verify.run"): runs the real check in a real venv, records it, check() honours the fingerprint."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.stublibs import StubLibs, plant_pci, stubs  # noqa: F401
from tests.support.tfenv import STABLE_PLAN, make_venv, tf_env  # noqa: F401
from tfgpu_install.context import Context, build_context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.env.verification import read_record, record_path
from tfgpu_install.errors import ExitCode, VerifyFailed
from tfgpu_install.steps.verify import VerifyEnv
from tfgpu_install.verify.host import CheckPlan


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    return make_venv(tmp_path / "env")


def test_no_gpu_apply_fails_and_records(ctx: Context, venv: Path) -> None:
    step = VerifyEnv(venv, CheckPlan(cuda="12.3", cudnn="8.9.7.29"))
    assert step.id == "verify.run" and step.check(ctx) is False
    with pytest.raises(VerifyFailed) as info:
        step.apply(ctx)
    assert info.value.code == ExitCode.VERIFY_FAILED
    assert "layer 0 (hardware): no NVIDIA GPU" in info.value.message
    assert "--allow-cpu" in (info.value.hint or "") and f"verify --env {venv}" in (info.value.hint or "")
    doc = read_record(ctx, venv)
    assert doc is not None and doc.report is not None and doc.report.ok is False
    assert step.check(ctx) is False  # a failed verification never counts as done
    step.undo(ctx, {"record": str(record_path(ctx, venv))})
    assert not record_path(ctx, venv).exists()
    step.undo(ctx, {})  # tolerates what is already gone


def test_stub_gpu_stack_reaches_tensorflow(tmp_env: dict[str, str], stubs: StubLibs, venv: Path) -> None:  # noqa: F811
    plant_pci(Path(tmp_env["TFGPU_ROOT"]), [("0000:01:00.0", "0x10de", "0x030000")])
    ctx = build_context(dict(tmp_env, LD_LIBRARY_PATH=str(stubs.driver)))
    step = VerifyEnv(venv, CheckPlan(cuda="12.3", cudnn="8.9.7.29", lib_dirs=(str(stubs.env),)))
    with pytest.raises(VerifyFailed, match=r"layer 5 \(tensorflow\): import tensorflow failed"):
        step.apply(ctx)
    doc = read_record(ctx, venv)
    assert doc is not None and doc.report is not None
    layers = doc.report.raw["layers"]
    assert isinstance(layers, list)
    # On a GPU, verify.run also benchmarks a matmul (layer 6): skipped, TensorFlow did not load.
    assert [lay["status"] for lay in layers] == ["pass"] * 5 + ["fail", "skip"]


def test_executor_journals_a_failed_verification(ctx: Context, venv: Path) -> None:
    ex = Executor(ctx, venv)
    with pytest.raises(VerifyFailed):
        ex.run([VerifyEnv(venv, CheckPlan())])
    events = [(e.event, e.step) for e in ex.journal.entries()]
    assert ("begin", "verify.run") in events and ("failed", "verify.run") in events


@pytest.mark.slow
def test_cpu_env_verifies_once_until_something_changes(ctx: Context, tf_env: Path) -> None:  # noqa: F811
    """An --allow-cpu env: TF checked on the CPU, gpu_verified false; re-runs skip until the env changes."""
    plan = CheckPlan.from_json(dict(STABLE_PLAN, cpu_only=True))
    step = VerifyEnv(tf_env, plan)
    assert step.check(ctx) is False
    record = step.apply(ctx)
    assert record["gpu_verified"] is False and record["mode"] == "cpu"
    assert step.check(ctx) is True  # nothing changed: no re-verify
    doc = read_record(ctx, tf_env)
    assert doc is not None and doc.report is not None and doc.report.ok is True
    assert VerifyEnv(tf_env, CheckPlan.from_json(dict(STABLE_PLAN, cpu_only=True, cudnn="9.3"))).check(ctx) is False
    marker = next(tf_env.glob("lib/python3*/site-packages")) / "zz_tfgpu_test-1.0.dist-info"
    marker.mkdir()
    try:
        assert step.check(ctx) is False  # a package changed: verify again
    finally:
        shutil.rmtree(marker)
    assert step.check(ctx) is True
    step.undo(ctx, record)
    assert step.check(ctx) is False
