"""Machine check: the CPU has the instructions TensorFlow's wheels need (AVX)."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.cpu_check import check_cpu_features

CHECK = MachineCheck(
    name="cpu-features", order=50, host=True,
    what="the CPU has the instructions TensorFlow's wheels need (AVX)",
    fix="another machine, or CPU passthrough in the VM",
    run=lambda w: [check_cpu_features(w)],
)
