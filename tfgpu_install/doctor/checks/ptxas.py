"""Machine check: the ptxas XLA will use knows these GPUs."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.env_layers import check_ptxas

CHECK = MachineCheck(
    name="ptxas", order=140, host=False,
    what="the ptxas XLA will use knows these GPUs",
    fix="put a new enough ptxas first on PATH (nvidia-cuda-nvcc wheel)",
    run=check_ptxas,
)
