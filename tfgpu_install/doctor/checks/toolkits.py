"""Machine check: CUDA toolkits on PATH, LD_LIBRARY_PATH and /usr/local/cuda agree, and none is newer than the
driver."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.system_layers import check_toolkits

CHECK = MachineCheck(
    name="toolkits", order=40, host=True,
    what="CUDA toolkits on PATH, LD_LIBRARY_PATH and /usr/local/cuda agree, and none is newer than the driver",
    fix="keep one toolkit on PATH and LD_LIBRARY_PATH, or none (pip TensorFlow needs none)",
    run=check_toolkits,
)
