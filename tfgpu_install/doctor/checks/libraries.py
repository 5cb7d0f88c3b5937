"""Machine check: the CUDA and cuDNN libraries on the loader path: stale majors, dangling links, older copies first."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.system_layers import check_libraries

CHECK = MachineCheck(
    name="libraries", order=70, host=True,
    what="the CUDA and cuDNN libraries on the loader path: stale majors, dangling links, older copies first",
    fix="remove the stale copy or fix LD_LIBRARY_PATH",
    run=check_libraries,
)
