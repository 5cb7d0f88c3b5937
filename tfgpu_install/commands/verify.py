"""`tfgpu-install verify [--env PATH | --host-only [--search DIR]] [--benchmark] [--burn [SECONDS]]
[--report FILE.html] [--cpu-ok] [--json]`.

Runs the layered GPU check inside the env (layers 0-5, stopping at the first failure; 6 with
--benchmark/--burn), records the result for `status` and snapshots, exits 9 when a layer fails.
With --host-only, or when no env is installed yet, runs the host layers 0-4 (no env needed; --burn
is then a cuBLAS SGEMM burn) and exits 3 when there is no NVIDIA GPU.
"""

from __future__ import annotations

import argparse

from tfgpu_install.commands.common import add_env_flag, non_empty
from tfgpu_install.context import Context
from tfgpu_install.guard import argtypes
from tfgpu_install.report import Result

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

    return verify(ctx, VerifyRequest(
        env=args.env, benchmark=args.benchmark, burn=args.burn, cpu_ok=args.cpu_ok, timeout=args.timeout,
        host_only=args.host_only, search=tuple(args.search), report=args.report,
    ))
