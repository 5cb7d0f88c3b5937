"""Machine check: the NVIDIA driver answers: nvidia-smi, nouveau, a library/module mismatch, WSL2's Windows
driver, containers."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.system_layers import check_driver

CHECK = MachineCheck(
    name="driver", order=10, host=True,
    what="the NVIDIA driver answers: nvidia-smi, nouveau, a library/module mismatch, WSL2's Windows driver, containers",
    fix="install or repair the driver for this kernel and reboot; in a container `--gpus all`",
    run=lambda w: [check_driver(w)],
)
