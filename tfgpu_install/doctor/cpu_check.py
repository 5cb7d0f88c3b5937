"""The CPU layer of the machine walk: TensorFlow's x86-64 pip wheels are compiled for AVX.

On a CPU without it (older Celeron/Pentium/Atom, a VM that hides AVX) `import tensorflow` dies with
"Illegal instruction (core dumped)" and no Python traceback, so the walk checks /proc/cpuinfo before
the import layer and names the cause itself.
"""

from __future__ import annotations

from typing import Optional

from tfgpu_install.doctor.walkstate import BROKEN, OK, Check, Walk

# TensorFlow's install page: "Starting with TensorFlow 1.6, binaries use AVX instructions which may not
# run on older CPUs" (https://www.tensorflow.org/install/pip#hardware_requirements).
REQUIRED_X86 = ("avx",)
NOTED_X86 = ("avx2", "fma")  # used when present (TF's cpu_feature_guard names them); not required


def parse_cpu_flags(cpuinfo: str) -> Optional[frozenset[str]]:
    """The x86 feature flags of the first processor in /proc/cpuinfo; None when there are none
    (aarch64 prints "Features", and TF's aarch64 wheels need no AVX)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(value.split())
    return None


def check_cpu_features(w: Walk) -> Optional[Check]:
    text = w.read("/proc/cpuinfo")
    flags = parse_cpu_flags(text or "")
    if flags is None:
        return None
    missing = [f for f in REQUIRED_X86 if f not in flags]
    have = ", ".join(f for f in REQUIRED_X86 + NOTED_X86 if f in flags) or "none of avx, avx2, fma"
    if not missing:
        return Check("import", "CPU features", OK, f"/proc/cpuinfo: {have}")
    rule = w.rules.by_id("illegal-instruction-avx")
    return Check("import", "CPU features", BROKEN,
                 f"/proc/cpuinfo lists no {', '.join(missing).upper()} (flags seen: {have})",
                 "This CPU has no AVX, and TensorFlow's pip wheels are built for it: `import tensorflow` dies with "
                 "'Illegal instruction (core dumped)'.", rule.fix, rule=rule.id)
