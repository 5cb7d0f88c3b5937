"""`verify`: the layered GPU check inside an env (layers 0-5, stopping at the first failure; 6 with
--benchmark/--burn), recorded for `status` and snapshots; exit 9 when a layer fails. With
host_only, or when no env is installed yet, the host layers 0-4 (no env needed) and exit 3 when
there is no NVIDIA GPU."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.layout import user_path
from tfgpu_install.errors import UsageError

if TYPE_CHECKING:
    from tfgpu_install.verify.host import CheckPlan, VerifyReport


def default_env(ctx: Context) -> Path:
    """The default env (tfgpu_install/env/registry.py); UsageError when there is none."""
    from tfgpu_install.env.registry import default_env as registered

    env = registered(ctx)
    if env is None:
        raise UsageError("no environment given and none installed yet",
                         hint="pass --env PATH, or install one first: `tfgpu-install --profile stable`")
    return env


@dataclass(frozen=True)
class VerifyRequest:
    env: Optional[str] = None  # None: the env most recently installed or verified
    benchmark: bool = False
    burn: float = 0.0  # seconds of sustained matmuls (host-only: a cuBLAS SGEMM burn)
    cpu_ok: bool = False
    timeout: Optional[float] = None
    host_only: bool = False
    search: tuple[str, ...] = ()  # host-only: more Python envs / site dirs to find CUDA wheels in
    report: Optional[str] = None  # with burn: the health report's HTML file


@dataclass(frozen=True)
class Verified:
    """What `verify` found (commands/verify.py renders it): the check's report; in an env, the plan it
    checked against and the record written; on the host (no env), whether no GPU was found and whether
    no env is installed yet; the health report's file when one was asked for."""

    report: VerifyReport
    plan: Optional[CheckPlan] = None  # None: the host check
    record: Optional[Path] = None
    health_report: Optional[Path] = None
    no_gpu: bool = False  # the host check found no NVIDIA GPU (exit 3)
    no_env: bool = False  # the host check ran because nothing is installed yet


def verify(ctx: Context, req: VerifyRequest) -> Verified:
    from tfgpu_install.env.verification import read_record, write_record
    from tfgpu_install.verify.host import CheckPlan, plan_from_env, run_verification, verify_fingerprint

    if req.burn < 0:
        raise UsageError("--burn takes a number of seconds >= 0")
    report_to = user_path(req.report) if req.report else None
    if report_to is not None:  # refused before minutes of burn, not after
        from tfgpu_install.verify.healthreport import check_report_target

        check_report_target(report_to, req.burn)
    if req.host_only:
        return host_check(req, ctx, no_env=False)
    if req.env:
        env = user_path(req.env)
    else:
        try:
            env = default_env(ctx)
        except UsageError:  # nothing installed yet: say what this machine has, then how to install
            return host_check(req, ctx, no_env=True)
    record = read_record(ctx, env) if (env / "bin" / "python").exists() else None
    plan = CheckPlan.from_record(record.plan) if record and record.plan else plan_from_env(env)
    if req.cpu_ok and not plan.cpu_only:
        from dataclasses import replace

        plan = replace(plan, cpu_only=True)
    report = run_verification(ctx, env, plan, benchmark=req.benchmark, burn=req.burn, timeout=req.timeout)
    path = write_record(ctx, env, report, verify_fingerprint(ctx, env, plan), plan)
    return Verified(report, plan, path, health_report=_health_report(report_to, report))


def _health_report(path: Optional[Path], report: VerifyReport) -> Optional[Path]:
    """The burn's curves into `path` (whatever the check found: a failed check still gets its page)."""
    if path is None:
        return None
    from tfgpu_install.verify.healthreport import write_report

    return write_report(path, report)


def host_check(req: VerifyRequest, ctx: Context, no_env: bool) -> Verified:
    from tfgpu_install.verify.hostcheck import found_no_gpu, run_host_check

    report = run_host_check(ctx, [Path(s).expanduser() for s in req.search], burn=req.burn, timeout=req.timeout)
    health = _health_report(user_path(req.report) if req.report else None, report)
    return Verified(report, health_report=health, no_gpu=found_no_gpu(report), no_env=no_env)
