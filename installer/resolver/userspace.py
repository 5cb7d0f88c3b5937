"""Where a release's CUDA user space comes from, in words for the plan (pure).

TF 2.5-2.13 have no `and-cuda` extra; the installer pins the nvidia-*-cu11 wheels (CUDA 11.8
components, matrix.yaml pins_kind: wheels). A build for CUDA 11.2 then runs on 11.8 libraries
through CUDA minor-version compatibility, which the plan states with its source.
"""

from __future__ import annotations

from typing import Optional

from installer.knowledge.model import Release
from installer.resolver.checks import Machine, first_clause, major_minor, version_key

_RUNTIME = "nvidia-cuda-runtime-cu"


def wheel_cuda(release: Release) -> Optional[str]:
    """The CUDA version the pinned runtime wheel carries ("11.8"), or None."""
    pin = next((v for k, v in release.pins.items() if k.startswith(_RUNTIME)), None)
    return major_minor(pin) if pin else None


def wheel_notes(release: Release, m: Machine) -> list[str]:
    """Reasons to add for a `wheels` release on a GPU machine: where its libraries come from, and
    minor-version compatibility when the driver's own CUDA is older than the wheels'."""
    if release.pins_kind != "wheels":
        return []
    have = wheel_cuda(release)
    if have is None:
        return []
    out = [f"TF {release.tensorflow} has no and-cuda extra: the installer pins the nvidia-*-cu{have.split('.')[0]} "
           f"wheels (CUDA {have} components, cuDNN {release.pins.get('nvidia-cudnn-cu11', '?')}) and puts their "
           f"lib dirs on LD_LIBRARY_PATH (activation, bin/tfgpu-run)"]
    if m.max_cuda and version_key(m.max_cuda) < version_key(have):
        mc = m.minor_compat
        floor = f"{mc.cuda_major}.x on >= {mc.min_driver}, {first_clause(mc.source)}" if mc else "11.x on >= 450.80.02"
        out.append(f"driver {m.driver} supports CUDA <= {m.max_cuda}; the CUDA {have} wheels run the CUDA "
                   f"{release.cuda} build through CUDA minor-version compatibility ({floor}); PTX JIT of newer PTX is "
                   f"unavailable in that mode, and TF {release.tensorflow}'s kernels do not need it here")
    return out
