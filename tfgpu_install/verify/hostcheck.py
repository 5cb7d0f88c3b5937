"""The check's host layers (0-4: hardware, driver, CUDA runtime, cuDNN, cuBLAS) with no env:
`verify --host-only`, and `verify` before anything is installed ("does my GPU work?").

The tool's own interpreter runs gpucheck/check.py, so it finds the CUDA libraries the machine
has: the system's (through the loader), and nvidia-* wheels (CUDA 11/12 `nvidia/<pkg>/lib`, CUDA 13
`nvidia/cu13/lib`) in this interpreter's site dirs and in any Python env named with `search`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from tfgpu_install.context import Context
from tfgpu_install.verify.gpucheck import tfgpucheck_layers as check_layers
from tfgpu_install.verify.host import (
    BASE_TIMEOUT,
    CHECK_SCRIPT,
    VerifyReport,
    kernel_rows,
    parse_check_output,
    sigterm_as_interrupt,
)

if TYPE_CHECKING:
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import CheckPlan as CheckPlanJson

HOST_LAYERS = ",".join(check_layers.host_layers())
# What layer 0 looks at, in probe's wording ("no NVIDIA GPU found; tried: ...").
TRIED = "the PCI bus (vendor 0x10de display controllers), /proc/driver/nvidia/gpus, /dev/nvidia*, WSL2's /dev/dxg"
NO_GPU = f"no NVIDIA GPU found; tried: {TRIED}"
HOW_TO_INSTALL = ("no environment installed yet: install one with `tfgpu-install --profile stable` (add --allow-cpu "
                  "on a machine without a usable GPU), then run `tfgpu-install verify`")


def site_dirs_of(path: Path) -> list[str]:
    """A site-packages dir as given, or the site dirs inside a Python env (venv, conda prefix, /usr/local)."""
    path = Path(path)
    if path.name in ("site-packages", "dist-packages") or (path / "nvidia").is_dir():
        return [str(path)]
    found = []
    for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages", "local/lib/python3*/dist-packages"):
        found += sorted(str(p) for p in path.glob(pattern))
    return found


def run_host_check(ctx: Context, search: Iterable[Path] = (), *, burn: float = 0.0,
                   timeout: Optional[float] = None) -> VerifyReport:
    sites = [s for p in search for s in site_dirs_of(p)]
    if timeout is None:
        timeout = BASE_TIMEOUT + burn * 1.5
    with tempfile.TemporaryDirectory(prefix="tfgpu-hostcheck-") as tmp:
        progress = Path(tmp) / "progress"
        plan: CheckPlanJson = {"site_dirs": sites}
        rows = kernel_rows(ctx)
        if rows is not None:
            plan["kernels"] = rows
        argv = [sys.executable, str(CHECK_SCRIPT), "--plan-json", json.dumps(plan),
                "--root", str(ctx.root), "--layers", HOST_LAYERS, "--progress-file", str(progress)]
        if burn:
            argv += ["--sgemm-burn", f"{burn:g}"]
        with sigterm_as_interrupt():
            done = ctx.runner.run(argv, desc="GPU check on the host", env=dict(ctx.environ), timeout=timeout)
        progress_text = progress.read_text(errors="replace") if progress.is_file() else ""
    report = parse_check_output(done, timeout, "", progress_text)
    return replace(report, mode="host", when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   raw={"argv": list(done.argv), "returncode": done.returncode})


def found_no_gpu(report: VerifyReport) -> bool:
    """Layer 0 ran and found no NVIDIA GPU (not: the check crashed before saying)."""
    lay0 = report.layer("hardware")
    return lay0 is not None and lay0.status == "fail" and report.crashed is None
