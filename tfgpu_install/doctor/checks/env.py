"""Machine check: the env is a Python environment with a tfgpu-install activation block."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.env_layers import check_env

CHECK = MachineCheck(
    name="env", order=90, host=False,
    what="the env is a Python environment with a tfgpu-install activation block",
    fix="install into it again (writes the activation)",
    run=check_env,
)
