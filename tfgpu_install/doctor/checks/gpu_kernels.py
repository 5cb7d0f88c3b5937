"""Machine check: the env's cuDNN and TensorFlow have kernels for these GPUs (profiles/kernels.yaml floors and
known failures)."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.kernel_check import check_gpu_kernels

CHECK = MachineCheck(
    name="gpu-kernels", order=120, host=False,
    what="the env's cuDNN and TensorFlow have kernels for these GPUs (profiles/kernels.yaml floors and known failures)",
    fix="pin the last cuDNN with kernels for the GPU, or a TensorFlow that runs on it",
    run=check_gpu_kernels,
)
