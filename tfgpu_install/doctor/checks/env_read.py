"""Machine check: reads the env's files and imports TensorFlow in it once, when the host layers below
are fine (the env's checks above use what it read; it finds nothing by itself)."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.envcheck import probe_import, read_env
from tfgpu_install.doctor.envpackages import read_packages
from tfgpu_install.doctor.walkstate import Check, Walk


def load_env(w: Walk) -> list[Check]:
    """Read the env once the driver layer is fine (the import is the slow part: run it once)."""
    if w.env is not None:
        w.env_files = read_env(w.ctx, w.env)
        if w.env_files.exists and w.env_files.python:
            w.probe = probe_import(w.ctx, w.env_files.python, launcher=w.env_files.launcher)
        if w.env_files.exists:  # `check`'s drift and pip check: what changed, what no longer fits
            w.packages = read_packages(w.ctx, w.env, w.env_files.python)
    return []


CHECK = MachineCheck(
    name="env-read", order=60, host=True,
    what="reads the env's files and imports TensorFlow in it once (the checks above it use what it read)",
    fix="none: it finds nothing by itself",
    run=load_env,
)
