"""Machine check: do the env's cuDNN and TensorFlow have kernels for this machine's GPUs, by the rows of
profiles/kernels.yaml (the architecture floor of a library release, the known failures of a TensorFlow
release range). nvidia-smi gives each GPU's compute capability; the env's wheels give the versions.

Fix: pin the last cuDNN with kernels for the GPU (the floor row's wheel), or a TensorFlow that runs on it
(the known-failure row's `runs_instead`)."""

from __future__ import annotations

from tfgpu_install.doctor.gpuknowledge import GpuFacts, name_ceiling, name_floor
from tfgpu_install.doctor.walkstate import BROKEN, Check, Walk

NAME = "GPU kernels (kernels.yaml)"


def check_gpu_kernels(w: Walk) -> list[Check]:
    e, rows = w.env_files, w.kernels
    if e is None or not e.exists or rows is None:
        return []
    ccs = tuple(sorted({g.compute_capability for g in w.gpus if g.compute_capability}))
    if not ccs:
        return []  # no compute capability read: nothing to look up (never assumed)
    cudnn = next((v for n, v in e.nvidia_dists.items() if n.startswith("nvidia-cudnn-")), None)
    tf = (w.probe.tf_version if w.probe is not None else None) or e.tf_version
    archs = w.probe.build.get("cuda_compute_capabilities") if w.probe is not None else None
    sass = tuple(str(a) for a in archs) if isinstance(archs, (list, tuple)) else None
    out = []
    floor = name_floor(rows, GpuFacts(ccs, cudnn, tf)) if cudnn else None
    if floor is not None:
        out.append(Check("cudnn", NAME, BROKEN, f"the env's cuDNN {cudnn} has no kernels for compute capability "
                         f"{', '.join(ccs)}", floor.cause, floor.fix, evidence=(floor.ref,)))
    ceiling = name_ceiling(rows, GpuFacts(ccs, cudnn, tf, sass)) if tf else None
    if ceiling is not None:
        out.append(Check("execution", NAME, BROKEN, f"TensorFlow {tf} is known to fail on compute capability "
                         f"{', '.join(ccs)}", ceiling.cause, ceiling.fix, evidence=(ceiling.ref,)))
    return out
