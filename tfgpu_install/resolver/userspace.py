"""Where a release's CUDA user space comes from, in words for the plan, and the ptxas a GPU needs (pure).

TF 2.5-2.13 have no `and-cuda` extra; the installer pins the nvidia-*-cu11 wheels (CUDA 11.8
components, matrix.yaml pins_kind: wheels). A build for CUDA 11.2 then runs on 11.8 libraries
through CUDA minor-version compatibility, which the plan states with its source.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from tfgpu_install.knowledge.model import PtxasRow, Release, version_key
from tfgpu_install.resolver.checks import Machine, first_clause, major_minor
from tfgpu_install.resolver.hardware import ptxas_knows
from tfgpu_install.resolver.model import Choice

_RUNTIME = "nvidia-cuda-runtime-cu"
_NVCC = "nvidia-cuda-nvcc-cu"


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


def ptxas_upgrade(choice: Choice, m: Machine, rows: Sequence[PtxasRow]) -> tuple[Choice, list[str]]:
    """For a GPU the release covers only by PTX and whose compute capability the pinned ptxas does not
    know (RTX 5090 with TF's nvcc 12.5), pin the oldest nvcc wheel whose ptxas does, and say the risk.
    Returns the choice (unchanged when nothing is needed) and the warnings."""
    name, have = next(((n, v) for n, v in choice.pins.items() if n.startswith(_NVCC)), (None, None))
    if name is None or have is None or not choice.jit_only:
        return choice, []
    major = name[len(_NVCC):]
    wants = [d for d in m.devices if d.cc and ptxas_knows(rows, have, d.cc) is False]
    if not wants:
        return choice, []
    need = max((d.cc or "0" for d in wants), key=version_key)
    fits = [r for r in rows if r.wheel.startswith(f"{_NVCC}{major}==")
            and all(ptxas_knows(rows, r.ptxas, d.cc or "0") for d in wants)]
    gpus = ", ".join(d.label for d in wants)
    if not fits:
        return choice, [f"{gpus}: the pinned ptxas {have} does not know compute capability {need}, and drivers.yaml "
                        f"names no {_NVCC}{major} wheel that does; XLA compilation (jit_compile, some ops) cannot "
                        f"target this GPU"]
    row = min(fits, key=lambda r: version_key(r.ptxas))
    version = row.wheel.split("==", 1)[1]
    pins = {**choice.pins, name: version}
    hashes = ({**choice.hashes, name: [row.sha256]} if row.sha256
              else {k: v for k, v in choice.hashes.items() if k != name})
    text = (f"{gpus}: TF {choice.tensorflow} has only PTX for it and its pinned ptxas ({name} {have}) does not know "
            f"compute capability {need}, so XLA could not compile for it: the plan pins {name}=={version} instead "
            f"(ptxas {row.ptxas} targets up to {row.highest_cc}; {first_clause(row.source)}). Risk: TF "
            f"{choice.tensorflow} was tested with ptxas {have}, not {row.ptxas}; code it compiles needs a driver "
            f"that supports CUDA {row.ptxas}")
    return replace(choice, pins=pins, hashes=hashes), [text]


# Where TensorFlow with GPU support comes from on ARM, when PyPI has no GPU wheel for it.
JETPACK_TF = "https://docs.nvidia.com/deeplearning/frameworks/install-tf-jetson-platform/index.html"
L4T_CONTAINER = "https://catalog.ngc.nvidia.com/orgs/nvidia/containers/l4t-tensorflow"
NGC_TF = "https://catalog.ngc.nvidia.com/orgs/nvidia/containers/tensorflow"


def arm_remedies(m: Machine) -> list[str]:
    """What runs TensorFlow on the GPU of an aarch64 machine that no release in matrix.yaml serves."""
    if m.arch != "aarch64":
        return []
    if m.tegra:
        return [f"this is an NVIDIA Jetson ({m.tegra}): PyPI has no TensorFlow GPU wheel for it; install NVIDIA's "
                f"JetPack build of TensorFlow for your JetPack release (pip from "
                f"https://developer.download.nvidia.com/compute/redist/jp/, {JETPACK_TF}), or run the NGC "
                f"l4t-tensorflow container matching your L4T release ({L4T_CONTAINER})",
                "to install and verify on the CPU only, add --allow-cpu"]
    return [f"aarch64 server: no PyPI TensorFlow release in this profile has a GPU build for aarch64; run NVIDIA's "
            f"NGC TensorFlow container (arm64 images, CUDA and cuDNN inside; {NGC_TF})",
            "to install and verify on the CPU only, add --allow-cpu"]
