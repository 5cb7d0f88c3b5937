"""`tfgpu-install verify [--env PATH | --host-only [--search DIR]] [--benchmark] [--burn SECONDS] [--cpu-ok] [--json]`.

Runs the layered GPU check inside the env (layers 0-5, stopping at the first failure; 6 with
--benchmark/--burn), records the result for `status` and snapshots, exits 9 when a layer fails.
With --host-only, or when no env is installed yet, runs the host layers 0-4 (no env needed; --burn
is then a cuBLAS SGEMM burn) and exits 3 when there is no NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

from installer.context import Context
from installer.errors import ExitCode, UsageError
from installer.report import Result, Text
from installer.commands.common import add_env_flag


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--benchmark", action="store_true", help="matmul GFLOP/s on CPU and GPU at several sizes")
    p.add_argument("--burn", type=float, default=0.0, metavar="SECONDS",
                   help="sustained matmuls for SECONDS while NVML samples temperature, clocks and power")
    p.add_argument("--cpu-ok", "--allow-cpu", dest="cpu_ok", action="store_true",
                   help="a CPU-only env (--allow-cpu): skip the GPU layers, check TensorFlow on the CPU")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="kill the check after this long (default: 300 s plus the benchmark and burn time)")
    p.add_argument("--host-only", action="store_true",
                   help="layers 0-4 (hardware, driver, CUDA runtime, cuDNN, cuBLAS) with this machine's own CUDA "
                   "libraries: no env needed")
    p.add_argument("--search", action="append", default=[], metavar="DIR",
                   help="with --host-only: also look for nvidia-* wheels' libraries in this Python env or "
                   "site-packages dir (repeatable)")


def default_env(ctx: Context) -> Path:
    """The env most recently installed or verified (newest journal or record under the state dir)."""
    candidates = []
    for d in (ctx.state_dir / "envs").glob("*"):
        for name in ("verify.json", "journal.jsonl"):
            f = d / name
            if f.is_file():
                candidates.append((f.stat().st_mtime, f))
    for _, f in sorted(candidates, reverse=True):
        env = _env_named_in(f)
        if env:
            return Path(env)
    raise UsageError("no environment given and none installed yet",
                     hint="pass --env PATH, or install one first: `tfgpu-install --profile stable`")


def _env_named_in(f: Path) -> Optional[str]:
    try:
        if f.name == "verify.json":
            return str(json.loads(f.read_text()).get("env") or "") or None
        for line in f.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("event") == "run" and entry.get("env"):
                return str(entry["env"])
    except (OSError, ValueError, AttributeError):
        return None
    return None


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from installer.verify.host import CheckPlan, plan_from_env, read_record, report_blocks, run_verification, verify_fingerprint, write_record

    if args.burn < 0:
        raise UsageError("--burn takes a number of seconds >= 0")
    if args.host_only:
        return host_result(args, ctx, no_env=False)
    if args.env:
        env = Path(args.env).expanduser().resolve()
    else:
        try:
            env = default_env(ctx)
        except UsageError:  # nothing installed yet: say what this machine has, then how to install
            return host_result(args, ctx, no_env=True)
    record = read_record(ctx, env) if (env / "bin" / "python").exists() else None
    plan = CheckPlan.from_json(record["plan"]) if record and record.get("plan") else plan_from_env(env)
    if args.cpu_ok and not plan.cpu_only:
        from dataclasses import replace

        plan = replace(plan, cpu_only=True)
    report = run_verification(ctx, env, plan, benchmark=args.benchmark, burn=args.burn, timeout=args.timeout)
    path = write_record(ctx, env, report, verify_fingerprint(ctx, env, plan), plan)
    data = dict(report.to_json(), plan=plan.to_json(), record=str(path))
    code = ExitCode.OK if report.ok else ExitCode.VERIFY_FAILED
    return Result(data=data, blocks=report_blocks(report), exit_code=int(code))


def host_result(args: argparse.Namespace, ctx: Context, no_env: bool) -> Result:
    from installer.verify.host import report_blocks
    from installer.verify.hostcheck import HOW_TO_INSTALL, NO_GPU, found_no_gpu, run_host_check

    report = run_host_check(ctx, [Path(s).expanduser() for s in args.search], burn=args.burn, timeout=args.timeout)
    data = dict(report.to_json(), env=None)
    blocks = report_blocks(report)
    code = ExitCode.OK if report.ok else ExitCode.VERIFY_FAILED
    if found_no_gpu(report):
        lay0 = report.layer(0)
        data.update(message=NO_GPU, hint=lay0.hint if lay0 else None)
        code = ExitCode.NO_GPU
    if no_env:
        data["next"] = HOW_TO_INSTALL
        blocks.append(Text(HOW_TO_INSTALL, "warn"))
    return Result(data=data, blocks=blocks, exit_code=int(code))
