"""Machine check: CUDA_VISIBLE_DEVICES names GPUs that exist."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.system_layers import check_visible_devices

CHECK = MachineCheck(
    name="visible-devices", order=80, host=True,
    what="CUDA_VISIBLE_DEVICES names GPUs that exist",
    fix="unset it, or name GPUs from `nvidia-smi -L`",
    run=lambda w: [check_visible_devices(w)],
)
