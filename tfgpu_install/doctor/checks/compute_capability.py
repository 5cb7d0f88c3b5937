"""Machine check: the build's SASS/PTX covers each GPU's compute capability."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.env_layers import check_compute_capability

CHECK = MachineCheck(
    name="compute-capability", order=130, host=False,
    what="the build's SASS/PTX covers each GPU's compute capability",
    fix="a TensorFlow release built for the GPU",
    run=check_compute_capability,
)
