"""Known failures the GPU check names when it sees them (stdlib only, pure; runs inside the env).

The check runs without the tool's package, so it cannot read the knowledge files (profiles/*.yaml):
this is the minimal copy it needs, each row with its source. tests/verify/test_known_failures.py holds
it to the knowledge rows where those exist, so the resolver, the doctor and the check say one thing.
"""

from __future__ import annotations

from typing import Any, Optional

# The architecture floor: releases that ship no kernels for GPUs below a compute capability.
ARCH_FLOOR: tuple[dict[str, str], ...] = (
    {"library": "cudnn", "from": "9.11", "below_cc": "7.5",
     "what": "cuDNN 9.11 and later ship no kernels for GPUs below compute capability 7.5 (Maxwell, Pascal, Volta)",
     "fix": "pin a cuDNN 9.10 or older (e.g. nvidia-cudnn-cu12==9.10.2.21; `tfgpu-install plan` picks one for "
            "this GPU)",
     "source": "NVIDIA cuDNN 9.11.0 release notes (support for compute capability < 7.5 dropped)"},
    {"library": "cuda", "from": "13.0", "below_cc": "7.5",
     "what": "CUDA 13 dropped Maxwell, Pascal and Volta (compute capability < 7.5)",
     "fix": "use CUDA 12 wheels on this GPU (a TensorFlow release built for CUDA 12)",
     "source": "NVIDIA CUDA Toolkit 13.0 release notes (architectures removed: Maxwell, Pascal, Volta)"},
)
# The architecture ceiling: releases that fail at the first GPU op on newer GPUs.
ARCH_CEILING: tuple[dict[str, str], ...] = (
    {"library": "tensorflow", "up_to": "2.21", "from_cc": "10.0",
     "what": "TensorFlow <= 2.21's wheels carry no Blackwell kernels (SASS up to sm_90, compute_90 PTX of ISA 8.5): "
             "on compute capability 10.x / 12.x the first op fails with CUDA_ERROR_INVALID_PTX or \"PTX version 8.5 "
             "does not support target 'sm_120'\"",
     "fix": "run a release whose build carries this architecture, NVIDIA's TensorFlow container where it serves "
            "this GPU, or a source build for it",
     "source": "tensorflow#101746 (RTX 5080, TF 2.20: CUDA_ERROR_INVALID_PTX), tensorflow#111958 (RTX 5060 Ti: "
               "PTX version 8.5 does not support target sm_120), tensorflow#89272; cc 10.x inferred from the same "
               "PTX ISA"},
)


def _key(version: Optional[str]) -> tuple[int, ...]:
    out = []
    for part in str(version or "").split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def floor_hits(library: str, version: Optional[str], ccs: list[str]) -> list[dict[str, Any]]:
    """The floor rows that `library` `version` hits on these compute capabilities, each with the GPUs."""
    out = []
    for row in ARCH_FLOOR:
        if row["library"] != library or not version or _key(version) < _key(row["from"]):
            continue
        below = sorted({c for c in ccs if _key(c) and _key(c) < _key(row["below_cc"])}, key=_key)
        if below:
            out.append(dict(row, gpus=below))
    return out


def ceiling_hits(library: str, version: Optional[str], ccs: list[str]) -> list[dict[str, Any]]:
    """The ceiling rows that `library` `version` hits on these compute capabilities."""
    out = []
    for row in ARCH_CEILING:
        if row["library"] != library or not version or _key(version)[:2] > _key(row["up_to"]):
            continue
        above = sorted({c for c in ccs if _key(c) and _key(c) >= _key(row["from_cc"])}, key=_key)
        if above:
            out.append(dict(row, gpus=above))
    return out


PTX_FAILURE_MARKS = ("CUDA_ERROR_INVALID_PTX", "cudaErrorInvalidPtx", "does not support target",
                     "CUDA_ERROR_UNSUPPORTED_PTX_VERSION")


def ptx_failure_seen(text: str) -> bool:
    """A log or error message showing the Blackwell-ceiling failure (INVALID_PTX, "PTX version ... does
    not support target")."""
    return any(mark in text for mark in PTX_FAILURE_MARKS)
