"""`tfgpu-install verify [--env PATH | --host-only [--search DIR]] [--benchmark] [--burn [SECONDS]]
[--report FILE.html] [--cpu-ok] [--json]`.

Runs the layered GPU check inside the env (layers 0-5, stopping at the first failure; 6 with
--benchmark/--burn), records the result for `status` and snapshots, exits 9 when a layer fails.
With --host-only, or when no env is installed yet, runs the host layers 0-4 (no env needed; --burn
is then a cuBLAS SGEMM burn) and exits 3 when there is no NVIDIA GPU.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tfgpu_install.commands.common import add_env_flag, non_empty
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.guard import argtypes
from tfgpu_install.report import Result, Text

if TYPE_CHECKING:
    from tfgpu_install.app.verify import Verified

DEFAULT_BURN = 60.0  # seconds: long enough for a GPU to approach its steady temperature under load


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_env_flag(p)
    p.add_argument("--benchmark", action="store_true", help="matmul GFLOP/s on CPU and GPU at several sizes")
    p.add_argument("--burn", type=argtypes.seconds(0, 86400), default=0.0, nargs="?", const=DEFAULT_BURN,
                   metavar="SECONDS",
                   help=f"every GPU under full load for SECONDS ({DEFAULT_BURN:g} without a number: time to reach a "
                   "steady temperature), every product checked, NVML sampling heat, clocks, power and throttling, "
                   "health counters before and after")
    p.add_argument("--report", metavar="FILE.html", type=non_empty,
                   help="with --burn: write the burn's health report (curves per GPU, one self-contained HTML "
                   "file; needs the `report` extra: pip install 'tfgpu-install[report]')")
    p.add_argument("--cpu-ok", "--allow-cpu", dest="cpu_ok", action="store_true",
                   help="a CPU-only env (--allow-cpu): skip the GPU layers, check TensorFlow on the CPU")
    p.add_argument("--timeout", type=argtypes.seconds(1, 86400), default=None, metavar="SECONDS",
                   help="kill the check after this long (default: 300 s plus the benchmark and burn time)")
    p.add_argument("--host-only", action="store_true",
                   help="layers 0-4 (hardware, driver, CUDA runtime, cuDNN, cuBLAS) with this machine's own CUDA "
                   "libraries: no env needed")
    p.add_argument("--search", action="append", default=[], metavar="DIR", type=non_empty,
                   help="with --host-only: also look for nvidia-* wheels' libraries in this Python env or "
                   "site-packages dir (repeatable)")


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.app.verify import VerifyRequest, verify

    return render(verify(ctx, VerifyRequest(
        env=args.env, benchmark=args.benchmark, burn=args.burn, cpu_ok=args.cpu_ok, timeout=args.timeout,
        host_only=args.host_only, search=tuple(args.search), report=args.report,
    )))


def render(done: "Verified") -> Result:
    """The check's report, its JSON with what `verify` adds (the plan and record in an env; on the host, no
    env, and the message and fix when there is no GPU, how to install when nothing is)."""
    from tfgpu_install.verify.host import report_blocks
    from tfgpu_install.verify.hostcheck import HOW_TO_INSTALL, NO_GPU

    report = done.report
    if done.plan is not None:
        data = dict(report.to_json(), plan=done.plan.to_json(), record=str(done.record))
    else:
        data = dict(report.to_json(), env=None)
    blocks = report_blocks(report)
    if done.health_report is not None:
        data["report"] = str(done.health_report)
        blocks.append(Text(f"Health report: {done.health_report}", "ok"))
    code = ExitCode.OK if report.ok else ExitCode.VERIFY_FAILED
    if done.no_gpu:
        lay0 = report.layer("hardware")
        data.update(message=NO_GPU, hint=lay0.hint if lay0 else None)
        code = ExitCode.NO_GPU
    if done.no_env:
        data["next"] = HOW_TO_INSTALL
        blocks.append(Text(HOW_TO_INSTALL, "warn"))
    return Result(data=data, blocks=blocks, exit_code=int(code))
