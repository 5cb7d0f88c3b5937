"""VerifyEnv ("verify.run"): the install's last step runs the layered GPU check in the env.

check() is honest and cheap: True only when a recorded *successful* verification matches the
env's current fingerprint (packages, activation, library files, driver, plan), so a re-run of a
complete install does not re-verify, and any change does. apply() runs the check, records the
report (success or not) and raises VerifyFailed naming the first failing layer. undo() removes
the record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.env.verification import BadRecord, read_record, record_path, verified_ok, write_record
from tfgpu_install.errors import VerifyFailed
from tfgpu_install.guard.jsondoc import text
from tfgpu_install.guard.shellquote import command
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint
from tfgpu_install.verify.host import CheckPlan, run_verification, verify_fingerprint


class VerifyEnv(Step):
    id = "verify.run"
    # The executor's own fingerprint skip applies too; check() already covers it.
    fingerprinted = False

    def __init__(self, env: Path, plan: CheckPlan, timeout: Optional[float] = None) -> None:
        self.env = Path(env)
        self.plan = plan
        self.timeout = timeout

    def describe(self) -> str:
        where = "TensorFlow on the CPU (--allow-cpu)" if self.plan.cpu_only else "GPU layers 0-5, ending in a matmul"
        return f"verify {self.env}: {where}"

    def touches(self, ctx: Context) -> list[str]:
        return [str(record_path(ctx, self.env))]

    def effective_plan(self) -> CheckPlan:
        """The plan with the cuDNN version actually placed (redist/archive sources): the
        version is known only once cudnn.place has run, from the placed files themselves."""
        from dataclasses import replace

        from tfgpu_install.fetch.cudnn_redist import dir_version

        for d in self.plan.lib_dirs:
            found = dir_version(Path(d))
            if found:
                return replace(self.plan, cudnn=found)
        return self.plan

    def check(self, ctx: Context) -> bool:
        try:
            doc = read_record(ctx, self.env)
        except BadRecord:  # an unreadable record is simply not a verification (apply rewrites it)
            return False
        if doc is None or not verified_ok(doc):
            return False
        try:
            return bool(doc.fingerprint == verify_fingerprint(ctx, self.env, self.effective_plan()))
        except OSError:
            return False

    def apply(self, ctx: Context) -> UndoRecord:
        plan = self.effective_plan()
        # On a GPU a short matmul benchmark too: the install's last screen reports GFLOP/s and the speed-up.
        report = run_verification(ctx, self.env, plan, timeout=self.timeout, benchmark=not plan.cpu_only)
        checkpoint(ctx, self.id, "middle")
        path = write_record(ctx, self.env, report, verify_fingerprint(ctx, self.env, plan), plan)
        if not report.ok:
            bad = report.first_failure
            what = f"layer {bad.layer} ({bad.name}): {bad.summary}" if bad else report.summary()
            raise VerifyFailed(f"verification failed at {what}",
                               hint=(bad.hint if bad and bad.hint else
                                     f"run `{command(ctx, 'tfgpu-install', 'doctor', '--env', str(self.env))}`")
                               + f" (full report: `{command(ctx, 'tfgpu-install', 'verify', '--env', str(self.env))}`)")
        return {"record": str(path), "gpu_verified": report.gpu_verified, "mode": report.mode}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        path = Path(text(record, "record") or record_path(ctx, self.env))
        try:
            path.unlink()
        except FileNotFoundError:
            pass
