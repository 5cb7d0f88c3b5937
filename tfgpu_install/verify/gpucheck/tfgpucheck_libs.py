"""Finding and loading the CUDA libraries of an env (stdlib + ctypes only; runs inside the target env).

Sonames per CUDA major (11, 12, 13) and cuDNN major (8, 9), the wheel layouts they are installed
in, and the version encodings the libraries report.
"""

from __future__ import annotations

import ctypes
import os
import sysconfig
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the sibling as mypy sees it; at run time it is imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import CheckPlan

# Sonames by major, as the NVIDIA wheels and toolkits ship them (CUDA 11's runtime is .so.11.0).
CUDART = {13: ["libcudart.so.13"], 12: ["libcudart.so.12"], 11: ["libcudart.so.11.0"]}
CUBLAS = {13: ["libcublas.so.13"], 12: ["libcublas.so.12"], 11: ["libcublas.so.11"]}
CUDNN = {9: ["libcudnn.so.9"], 8: ["libcudnn.so.8"]}
# cuDNN 9 loads these at run time from libcudnn.so.9's own directory (names from the
# nvidia-cudnn-cu12 9.3.0.75 and 9.8.0.87 wheels' RECORD); a missing one fails only on first use otherwise.
CUDNN9_SUBLIBS = ("libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9",
                  "libcudnn_engines_runtime_compiled.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9",
                  "libcudnn_adv.so.9")
# Newer cuDNN 9 releases add these; loaded when present, never required.
CUDNN9_OPTIONAL = ("libcudnn_heuristic.so.9", "libcudnn_engines_tensor_ir.so.9", "libcudnn_ext.so.9")


def sonames(base: str, major: Optional[int], table: dict[int, list[str]]) -> list[str]:
    """The planned major's sonames; without a plan every major, newest first, then the bare name."""
    if major in table:
        return table[major]
    return [so for sos in sorted(table.items(), reverse=True) for so in sos[1]] + [base]


def site_dirs() -> list[str]:
    out = []
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p and p not in out:
            out.append(p)
    return out


def search_dirs(plan: CheckPlan, nvidia_pkg: str) -> list[str]:
    """Where an env keeps a library: the plan's placed dirs first, then for this interpreter's site
    dirs and any the plan names (`site_dirs`: other Python envs on the machine) both wheel layouts:
    CUDA 11/12's <site>/nvidia/<pkg>/lib and CUDA 13's <site>/nvidia/cu13/lib (the CUDA 13 wheels,
    nvidia-cuda-runtime / nvidia-cublas 13.x, share one dir; cuDNN stays in nvidia/cudnn/lib)."""
    dirs = [str(d) for d in plan.get("lib_dirs", [])]
    sites = site_dirs() + [str(s) for s in plan.get("site_dirs", []) if str(s) not in site_dirs()]
    layouts = [("nvidia", nvidia_pkg, "lib"), ("nvidia", "cu13", "lib")]
    if major(plan.get("cuda")) == 13:
        layouts.reverse()
    for site in sites:
        dirs += [os.path.join(site, *parts) for parts in layouts if nvidia_pkg != "cudnn" or parts[1] == "cudnn"]
    return dirs


def loaded_path(soname: str) -> Optional[str]:
    """Where the loader really found a library (it may not be where we expected)."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split(None, 5)[-1].strip() if len(line.split(None, 5)) == 6 else ""
                if os.path.basename(path).startswith(soname):
                    return path
    except OSError:
        pass
    return None


def load_library(names: list[str], dirs: list[str]) -> tuple[Optional[Any], str, list[str]]:
    """(lib, path, errors): the first name (in priority order) found in dirs (by absolute path); only
    when no dir holds any of the names, through the loader (the system's copy). An env's own CUDA 12
    runtime beats a machine-wide CUDA 13 one that the loader would find first."""
    errors: list[str] = []
    for so in names:
        for d in dirs:
            path = os.path.join(d, so)
            if os.path.exists(path):
                try:
                    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path, errors
                except OSError as exc:
                    errors.append(str(exc))
    for so in names:
        try:
            lib = ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL)
            return lib, loaded_path(so) or so, errors
        except OSError as exc:
            errors.append(str(exc))
    return None, "", errors


def find_file(names: list[str], dirs: list[str]) -> str:
    """The first of names that exists in dirs (no loading): '' when none."""
    for so in names:
        for d in dirs:
            path = os.path.join(d, so)
            if os.path.exists(path):
                return path
    return ""


def major(version: Optional[str]) -> Optional[int]:
    try:
        return int(str(version).split(".")[0]) if version else None
    except ValueError:
        return None


def cuda_int(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def cudnn_int(v: int) -> str:
    # cuDNN 9 encodes major*10000 + minor*100 + patch; 8 and older major*1000 + minor*100 + patch.
    if v >= 90000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def version_matches(actual: str, expected: str) -> bool:
    """'8.9.7' matches '8.9.7.29' and '8.9': compare the components both name."""
    a, e = actual.split("."), str(expected).split(".")
    n = min(len(a), len(e))
    return n > 0 and a[:n] == e[:n]
