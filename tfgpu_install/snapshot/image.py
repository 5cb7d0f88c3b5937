"""A container image from a snapshot: the build context (`snapshot image SNAP -o DIR`) and the
image's own facts (paths, environment, the verify command). Pure: text and data, no I/O.

In the image the snapshot's wheels are installed offline from the bundle, hash-checked
(`pip install --no-index --require-hashes`) into /opt/tfgpu/site (PYTHONPATH), so the base
image's own Python runs them; LD_LIBRARY_PATH names the nvidia-* wheels' lib dirs there, as
the activation does on a host; the command and HEALTHCHECK run tfgpu-install's layered GPU
check (verify/gpucheck, stdlib only) against the snapshot's plan.

Every value that reaches the Dockerfile is checked against a strict pattern first: a
snapshot is untrusted input, and a version string must not become a Dockerfile line."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from tfgpu_install.errors import BadInputError, UsageError
from tfgpu_install.snapshot.model import Snapshot

ROOT = "/opt/tfgpu"
SITE = f"{ROOT}/site"
BUNDLE = f"{ROOT}/bundle"
CHECK = f"{ROOT}/gpucheck/check.py"
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+_-]{0,40}$")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,200}(:[A-Za-z0-9._-]{1,128})?(@sha256:[0-9a-f]{64})?$")


@dataclass(frozen=True)
class ImageSpec:
    python: str  # "3.11": the base image's Python must be this minor
    base: str  # the FROM image
    base_is_default: bool
    lib_dirs: tuple[str, ...]  # absolute, in the image
    check_plan: dict[str, Any]  # gpucheck's --plan-json
    cuda_from_system: bool
    tensorflow: str

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": SITE, "LD_LIBRARY_PATH": ":".join(self.lib_dirs), "PYTHONDONTWRITEBYTECODE": "1"}

    def verify_argv(self) -> list[str]:
        return ["python3", CHECK, "--plan-json", json.dumps(self.check_plan, sort_keys=True)]


def _field(value: Any, what: str, pattern: re.Pattern[str] = _VERSION) -> Optional[str]:
    if value is None or value == "":
        return None
    text = str(value)
    if not pattern.match(text):
        raise BadInputError(f"snapshot: {what} {text[:60]!r} is not a version", "export the snapshot again",
                            ref="bad-snapshot")
    return text


def default_base(python: str, cuda: Optional[str], cudnn: Optional[str], cuda_from_system: bool) -> str:
    """The official slim Python of the snapshot's minor; where the snapshot's CUDA comes from
    the system (TF <= 2.13, no CUDA wheels), NVIDIA's CUDA runtime image for its CUDA and cuDNN
    (X.Y.0-cudnnN-runtime-ubuntu22.04, 20.04 for CUDA 11.x: the tag scheme NVIDIA publishes; a
    combination it does not publish needs --base)."""
    if cuda_from_system and cuda and cudnn:
        major = cuda.split(".")[0]
        distro = "ubuntu20.04" if major == "11" else "ubuntu22.04"
        return f"nvidia/cuda:{'.'.join(cuda.split('.')[:2])}.0-cudnn{cudnn.split('.')[0]}-runtime-{distro}"
    return f"python:{python}-slim"


def image_lib_dirs(lib_dirs: list[str]) -> tuple[str, ...]:
    """The snapshot's env-relative library dirs (lib/python3.X/site-packages/nvidia/...) as paths
    under SITE; dirs outside site-packages (a placed cuDNN) are not in the image."""
    out = []
    for d in lib_dirs:
        head, sep, tail = d.partition("site-packages/")
        if sep and tail and re.fullmatch(r"[A-Za-z0-9._/+-]+", tail):
            out.append(f"{SITE}/{tail}")
    return tuple(out)


def spec_for(snap: Snapshot, base: Optional[str] = None) -> ImageSpec:
    from tfgpu_install.snapshot.contract import choice_of
    from tfgpu_install.snapshot.exports import library_dirs

    c = choice_of(snap)
    python = _field(".".join((c.python or snap.env.python or "").split(".")[:2]), "python", _PYTHON)
    if python is None:
        raise BadInputError(f"snapshot {snap.id} does not say which Python its env used", "export the snapshot again",
                            ref="bad-snapshot")
    tf = _field(c.tensorflow, "tensorflow") or "?"
    cuda = _field(c.cuda, "cuda")
    cudnn = _field(c.cudnn, "cudnn")
    cudnn_pin = next((_field(v, k) for k, v in sorted(c.pins.items()) if k.startswith("nvidia-cudnn-")), None)
    system = (c.cuda_from or "pip") == "system"
    if base is not None and not IMAGE_REF.match(base):
        raise UsageError(f"--base {base[:80]!r} is not an image reference", "e.g. --base python:3.11-slim")
    libs = image_lib_dirs(library_dirs(snap))
    plan: dict[str, Any] = {"cuda": cuda, "cudnn": cudnn_pin or cudnn, "tensorflow": tf, "lib_dirs": [],
                            "cpu_only": False}
    return ImageSpec(python=python, base=base or default_base(python, cuda, cudnn, system),
                     base_is_default=base is None, lib_dirs=libs, check_plan=plan, cuda_from_system=system,
                     tensorflow=tf)


def dockerfile(spec: ImageSpec, snapshot_id: str) -> str:
    pip = (f"python3 -m pip install --no-index --require-hashes --no-deps --only-binary=:all: "
           f"--find-links {BUNDLE}/wheels --target {SITE} -r {BUNDLE}/requirements.txt")
    lines = [
        f"# tfgpu-install: TensorFlow {spec.tensorflow} from snapshot {re.sub(r'[^A-Za-z0-9._-]', '_', snapshot_id)}",
        "# build: podman build -t tf-snapshot DIR   (or docker build / buildah bud)",
        "# run:   podman run --rm --device nvidia.com/gpu=all tf-snapshot   (docker: --gpus all)",
        f"ARG BASE={spec.base}",
        "FROM ${BASE}",
    ]
    if spec.cuda_from_system:
        lines.append(f"# NVIDIA's CUDA images carry no Python: this needs python{spec.python} from the distribution")
        lines.append(f"RUN apt-get update && apt-get install -y --no-install-recommends python{spec.python} "
                     f"python3-pip && rm -rf /var/lib/apt/lists/*")
    lines += [
        f"COPY bundle {BUNDLE}",
        f"COPY gpucheck {ROOT}/gpucheck",
        "# offline and hash-checked: only the snapshot's wheels, each against its sha256",
        f'RUN python3 -c "import sys; v = sys.version_info; assert (v.major, v.minor) == '
        f'({spec.python.replace(".", ", ")}), sys.version" && {pip}',
    ]
    for key, value in spec.env().items():
        lines.append(f"ENV {key}={value}")
    argv = json.dumps(spec.verify_argv())
    lines += [
        f"HEALTHCHECK --interval=10m --timeout=5m --start-period=1m CMD {argv}",
        f"CMD {argv}",
    ]
    return "\n".join(lines) + "\n"
