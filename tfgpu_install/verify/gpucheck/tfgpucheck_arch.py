"""Which of a TensorFlow build's kernels run on a GPU: the one coverage rule (stdlib only, pure).

Used by the GPU check inside the target env (imported by name from check.py's directory) and by
the resolver (tfgpu_install.resolver.checks imports it by its package path), so both give the same
answer for the same GPU and build.

The rules, from NVIDIA's CUDA C Programming Guide ("Binary Compatibility", "Application
Compatibility") and TensorFlow's build config (.bazelrc / configure.py: `TF_CUDA_COMPUTE_CAPABILITIES`
entries `sm_XY` embed SASS for X.Y; `compute_XY` embed PTX *and* SASS for X.Y):
  - SASS for X.Y runs on compute capability X.Z with Z >= Y (same major, equal or higher minor);
  - PTX for X.Y is JIT-compiled by the driver for any compute capability >= X.Y;
  - arch-specific code (`sm_90a`, `sm_100a`, `sm_120a`, and `compute_90a` PTX) uses features of that
    one architecture and runs only on exactly X.Y: never on a later minor, nor JIT-compiled upwards.
    Family-specific `sm_100f` follows the plain SASS rule within its major.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

_ARCH = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")


def cc_key(cc: str) -> tuple[int, ...]:
    """'8.6' -> (8, 6); '9.0a' -> (9, 0); junk -> ()."""
    out: list[int] = []
    for piece in str(cc).strip().split(".")[:2]:
        m = re.match(r"\d+", piece)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def arch_cc(digits: str, suffix: str = "") -> str:
    """'86' -> '8.6', '100' -> '10.0', ('90', 'a') -> '9.0a' (the last digit is the minor; an
    arch-specific 'a' is kept, since it changes where the code runs)."""
    return f"{int(digits[:-1])}.{digits[-1]}" + ("a" if suffix == "a" else "")


def exact_only(cc: str) -> bool:
    """'9.0a': arch-specific code, which runs on compute capability 9.0 and nothing else."""
    return str(cc).strip().endswith("a")


def split_archs(archs: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """TF's cuda_compute_capabilities (['sm_80', 'compute_90']) -> (sass ccs, ptx ccs).

    `compute_XY` gives both SASS and PTX for X.Y (TF's build config); an arch-specific `sm_90a`
    is SASS for 9.0 only, kept as '9.0a'. Entries that are not arch names are ignored.
    """
    sass: list[str] = []
    ptx: list[str] = []
    for arch in archs:
        m = _ARCH.match(str(arch).strip().lower())
        if not m or len(m.group(2)) < 2:
            continue
        cc = arch_cc(m.group(2), m.group(3))
        if cc not in sass:
            sass.append(cc)
        if m.group(1) == "compute" and cc not in ptx:
            ptx.append(cc)
    return tuple(sass), tuple(ptx)


def runs_on(arch: str, key: tuple[int, ...], same_major: bool) -> bool:
    """Whether code built for `arch` ('8.0', '9.0a') runs on compute capability `key` ((9, 0))."""
    have = cc_key(arch)
    if len(have) != 2:
        return False
    if exact_only(arch):
        return have == key[:2]
    return have <= key and (not same_major or have[:1] == key[:1])


def coverage(cc: str, sass: Iterable[str], ptx: Iterable[str]) -> tuple[str, Optional[str]]:
    """How a build runs on compute capability `cc`: ("sass", "8.0"), ("ptx", "9.0") or ("none", None).

    SASS of the same major at or below the GPU's minor wins (the highest such); else the highest
    PTX at or below the GPU; else nothing runs.
    """
    key = cc_key(cc)
    if len(key) < 2:
        return "none", None
    native = [s for s in sass if runs_on(s, key, same_major=True)]
    if native:
        return "sass", max(native, key=cc_key)
    jit = [p for p in ptx if runs_on(p, key, same_major=False)]
    if jit:
        return "ptx", max(jit, key=cc_key)
    return "none", None
