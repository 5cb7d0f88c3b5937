"""Machine check: `import tensorflow` in the env and its device list, classified by profiles/errors.yaml."""

from __future__ import annotations

from tfgpu_install.doctor.checks import MachineCheck
from tfgpu_install.doctor.env_layers import check_import

CHECK = MachineCheck(
    name="import-tensorflow", order=110, host=False,
    what="`import tensorflow` in the env and its device list, classified by profiles/errors.yaml",
    fix="the fix of the rule that matched, or the package that broke the import",
    run=check_import,
)
