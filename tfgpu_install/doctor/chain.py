"""The machine walk, bottom-up: driver -> toolkit -> libraries/cuDNN -> env -> import -> devices ->
compute capability. It runs the machine checks registered in doctor/checks/ (one file each) in their
order, stops at the first broken layer (everything above it would fail for that reason) and collects the
warnings met on the way.

Files are read through ctx.sys_path (the root prefix: tests plant broken layouts in a temp root);
commands go through ctx.runner (tests replay recorded nvidia-smi outputs).
"""

from __future__ import annotations

from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.doctor.checks import registered
from tfgpu_install.doctor.checks.env_read import load_env
from tfgpu_install.doctor.env_layers import check_env, check_env_packages, check_import
from tfgpu_install.doctor.gpuknowledge import KernelRows
from tfgpu_install.doctor.rules import RuleSet
from tfgpu_install.doctor.system_layers import gather_host
from tfgpu_install.doctor.verify_layers import LayerVerdict, first_failed, verify_layers
from tfgpu_install.doctor.walkstate import ABSENT, BROKEN, OK, SKIP, WARN, ChainReport, Check, Walk

__all__ = ["walk", "ChainReport", "Check", "OK", "WARN", "BROKEN", "ABSENT", "SKIP"]

# ------------------------------------------------------------------ the walk


def walk(ctx: Context, rules: RuleSet, env: Optional[str] = None,
         kernels: Optional[KernelRows] = None) -> ChainReport:
    w = Walk(ctx=ctx, rules=rules, env=env, kernels=kernels)
    gather_host(w)
    broken = None
    host_broken = False  # the walk broke below the env's own checks (driver, toolkit, CPU, libraries)
    for check in registered():
        for c in check.run(w):
            if c is None:
                continue
            w.checks.append(c)
            if c.status in (BROKEN, ABSENT):
                broken, host_broken = c, c.status == BROKEN and check.host
                break
        if broken is not None:
            break
    layers: tuple[LayerVerdict, ...] = ()
    if env is not None:
        broken, layers = _follow_verify(w, broken, broken if host_broken else None)
    return ChainReport(tuple(w.checks), broken if broken and broken.status == BROKEN else None,
                       no_gpu=bool(broken and broken.status == ABSENT), wsl=w.wsl, container=w.container,
                       layers=layers)


def _follow_verify(w: Walk, broken: Optional[Check],
                   host: Optional[Check]) -> tuple[Optional[Check], tuple[LayerVerdict, ...]]:
    """The layers of `verify --env` (verify_layers.py), with or without a GPU; the first that
    fails is the diagnosis, unless the walk stopped on the host below the env (that comes first).
    No GPU or driver here: the env's own layers (its libraries, `import tensorflow`) are still
    examined, as `verify --env` does on the CPU (a missing numpy is a cause with or without a GPU)."""
    before_env = host is None and w.env_files is None  # no GPU: the walk stopped before the env
    if before_env:
        load_env(w)

    def import_checks() -> list[Check]:
        if before_env:  # the env and `import tensorflow`; the device list needs a GPU
            w.checks.extend(c for step in (check_env, check_env_packages, check_import) for c in step(w)
                            if c.layer == "import")
        return [c for c in w.checks if c.layer == "import"]

    layers = verify_layers(w, import_checks, stopped=host)
    failed = first_failed(layers)
    if host is not None or failed is None:
        return broken, layers
    cause = failed.as_check()
    if cause not in w.checks:
        w.checks.append(cause)
    return cause, layers
