"""Machine check: GPU memory held by other processes (nvidia-smi --query-compute-apps)."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.system_layers import check_gpu_memory

CHECK = MachineCheck(
    name="gpu-memory", order=30, host=True,
    what="GPU memory held by other processes (nvidia-smi --query-compute-apps)",
    fix="stop the leftover process, or enable memory growth",
    run=lambda w: [check_gpu_memory(w)],
)
