"""Machine check: no Linux NVIDIA driver installed inside WSL2 (it shadows the Windows one)."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.system_layers import check_wsl_linux_driver

CHECK = MachineCheck(
    name="wsl-linux-driver", order=20, host=True,
    what="no Linux NVIDIA driver installed inside WSL2 (it shadows the Windows one)",
    fix="remove the Linux driver packages inside WSL",
    run=lambda w: [check_wsl_linux_driver(w)],
)
