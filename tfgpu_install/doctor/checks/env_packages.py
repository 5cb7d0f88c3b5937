"""Machine check: the env's packages against its known-good snapshot (check's drift) and against each other (pip
check)."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.env_layers import check_env_packages

CHECK = MachineCheck(
    name="env-packages", order=100, host=False,
    what="the env's packages against its known-good snapshot (check's drift) and against each other (pip check)",
    fix="restore the known-good snapshot, or install the versions the requirements name",
    run=check_env_packages,
)
