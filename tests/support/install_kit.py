"""What an end-to-end install test needs besides the wheelhouse: a knowledge dir whose only
release is the wheelhouse's fake TensorFlow (TFGPU_PROFILES_DIR points the tool at it), and
the process environment for running the real CLI against temp dirs.

    write_knowledge(dest) -> Path           matrix.yaml (TF 2.99.0), drivers/gpus copied from
                                            profiles/, stable/latest/legacy policies
    cli_env(tmp_env, knowledge, index_url)  env vars for `python -m tfgpu_install ...`
    run_cli(args, env) -> CompletedProcess  the CLI as a real subprocess
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

REPO = Path(__file__).resolve().parents[2]

MATRIX = """\
format: 1
releases:
  - tensorflow: "2.99.0"
    package: tensorflow
    released: "2024-01-15"
    pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]
    cuda: "12.3"
    cudnn: "9.1"
    sass: ["6.0", "7.0", "8.0", "8.6", "8.9"]
    ptx: ["9.0"]
    manylinux: manylinux_2_17_x86_64
    min_glibc: "2.17"
    cuda_from: pip
    extra: and-cuda
    pins:
      nvidia-cublas-cu12: "12.3.4.1"
      nvidia-cuda-runtime-cu12: "12.3.101"
      nvidia-cudnn-cu12: "9.1.0.70"
    pins_kind: exact
    constraints:
      numpy: ">=1.23.5,<2.0"
      protobuf: ">=3.20.3,<5"
    source: "tests/support/wheelhouse.py (the fake TensorFlow the tests build)"
"""

POLICY = """\
name: {name}
description: "{name} (test knowledge)"
prefer: newest
source: "tests/support/install_kit.py"
"""


# What the tool keeps in its cache dir for a fast start (paths relative to a tmp_env's base):
# the parsed knowledge tables, the interpreters' versions, the compiled dataclass methods. A run
# that fails may still leave these; nothing else may change.
TOOL_CACHE = ("cache/knowledge", "cache/interpreters.json", "cache/dataclass-code-")


def write_knowledge(dest: Path, matrix: str = MATRIX) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "matrix.yaml").write_text(matrix)
    for name in ("drivers.yaml", "gpus.yaml"):
        shutil.copy(REPO / "profiles" / name, dest / name)
    for name in ("stable", "latest", "legacy"):
        (dest / f"{name}.yaml").write_text(POLICY.format(name=name))
    return dest


def cli_env(tmp_env: Mapping[str, str], knowledge: Path, index_url: str, **extra: str) -> dict[str, str]:
    env = dict(tmp_env)
    env.update(
        TFGPU_PROFILES_DIR=str(knowledge),
        UV_INDEX_URL=index_url,
        PIP_INDEX_URL=index_url,
        # One uv cache for the session: small wheels, but no need to unpack them each test.
        UV_CACHE_DIR=os.environ.get("TFGPU_TEST_UV_CACHE", str(Path(tmp_env["HOME"]).parent.parent / "uv-cache")),
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


def run_cli(args: Sequence[str], env: Mapping[str, str], timeout: float = 300) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-m", "tfgpu_install", *args],
        env=dict(env), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


# --- a wheelhouse whose TensorFlow computes (numpy-backed) so the real verify passes on the CPU ---

_TF_INIT = '''"""A stand-in for TensorFlow built by the tests: the API the verify check calls, computed
with real numpy on the CPU (no GPU kernels, so no GPU is ever listed)."""
import contextlib as _contextlib

import numpy as _np

__version__ = "{version}"
from . import config, distribute, nn, random, sysconfig  # noqa: E402,F401

_DEVICE = ["/job:localhost/replica:0/task:0/device:CPU:0"]


class Tensor:
    def __init__(self, value):
        self._v = _np.asarray(value)
        self.device = _DEVICE[-1]

    def numpy(self):
        return self._v

    def __float__(self):
        return float(self._v)


@_contextlib.contextmanager
def device(name):
    kind = "GPU" if "GPU" in name.upper() else "CPU"
    _DEVICE.append(f"/job:localhost/replica:0/task:0/device:{{kind}}:0" if kind == "CPU" else _DEVICE[0])
    try:
        yield
    finally:
        _DEVICE.pop()


def _v(x):
    return x.numpy() if isinstance(x, Tensor) else _np.asarray(x)


def matmul(a, b):
    return Tensor(_v(a) @ _v(b))


def reduce_sum(x):
    return Tensor(_v(x).sum())


float32 = _np.float32
'''

_TF_MODULES = {
    "config": '''class PhysicalDevice:
    def __init__(self, name, device_type):
        self.name, self.device_type = name, device_type


def list_physical_devices(device_type=None):
    devices = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
    return [d for d in devices if device_type in (None, d.device_type)]


class experimental:
    @staticmethod
    def set_memory_growth(device, enable):
        return None

    @staticmethod
    def get_device_details(device):
        return {{}}

    @staticmethod
    def enable_tensor_float_32_execution(enabled):
        return None
''',
    "nn": '''import numpy as _np


def conv2d(x, w, strides=1, padding="VALID"):
    from . import Tensor, _v
    x, w = _v(x), _v(w)
    n, h, wd, _ = x.shape
    kh, kw, _, co = w.shape
    out = _np.zeros((n, h - kh + 1, wd - kw + 1, co), dtype=_np.float64)
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            out[:, i, j, :] = _np.tensordot(x[:, i:i + kh, j:j + kw, :], w, axes=([1, 2, 3], [0, 1, 2]))
    return Tensor(out.astype(_np.float32))
''',
    "random": '''import numpy as _np


def uniform(shape, dtype=None, seed=None):
    from . import Tensor
    return Tensor(_np.random.default_rng(seed).random(shape).astype(_np.float32))


def stateless_uniform(shape, seed=(0, 0), dtype=None):
    from . import Tensor
    return Tensor(_np.random.default_rng(list(seed)).random(shape).astype(_np.float32))
''',
    "distribute": '''class MirroredStrategy:
    num_replicas_in_sync = 1
''',
    "sysconfig": '''import collections


def get_build_info():
    return collections.OrderedDict(
        cpu_compiler="/usr/bin/gcc",
        cuda_compute_capabilities=["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"],
        cuda_version="{cuda}",
        cudnn_version="{cudnn}",
        is_cuda_build=True,
        is_rocm_build=False,
        is_tensorrt_build=False,
    )
''',
}


def numpy_backed_tf(version: str = "2.99.0", cuda: str = "12.3", cudnn: str = "9") -> dict[str, bytes]:
    files = {"tensorflow/__init__.py": _TF_INIT.format(version=version).encode()}
    for name, text in _TF_MODULES.items():
        files[f"tensorflow/{name}.py"] = text.format(cuda=cuda, cudnn=cudnn).encode()
    return files


def real_numpy_wheel(dest: Path, version: str = "1.26.4") -> Path:
    """The real numpy wheel for this interpreter, from the registry (pip's cache makes repeats free)."""
    found = sorted(dest.glob(f"numpy-{version}-*.whl"))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
             "--no-deps", f"numpy=={version}", "-d", str(dest)],
            check=True, capture_output=True, text=True, timeout=600,
        )
        found = sorted(dest.glob(f"numpy-{version}-*.whl"))
    return found[0]


def computing_wheelhouse(dest: Path, extra_tf: Sequence[tuple[str, str, str]] = (),
                         extra_specs: Sequence[Any] = ()) -> "object":
    """The envpkg wheelhouse with TF 2.99.0 numpy-backed and the real numpy 1.26.4 wheel.
    extra_tf: more numpy-backed TensorFlow versions, (version, build cuda, build cudnn).
    extra_specs: more WheelSpecs (a user's project on top of TF)."""
    import hashlib
    import html

    from tests.support.wheelhouse import CU11_TF, WheelSpec, build_wheelhouse, default_specs

    specs = []
    for s in default_specs():
        if s.name == "numpy":
            continue  # the real one comes from the registry
        if s.name == "tensorflow" and s.version == "2.99.0":
            s = WheelSpec(s.name, s.version, numpy_backed_tf(), s.requires, s.extras)
        if s.name == "tensorflow" and s.version == CU11_TF:  # TF 2.11's shape: CUDA 11.2, cuDNN 8
            s = WheelSpec(s.name, s.version, numpy_backed_tf(CU11_TF, "11.2", "8"), s.requires, s.extras)
        specs.append(s)
    tf_requires = next(s.requires for s in specs if s.name == "tensorflow")
    specs += [WheelSpec("tensorflow", v, numpy_backed_tf(v, cuda, cudnn), tf_requires) for v, cuda, cudnn in extra_tf]
    specs += list(extra_specs)
    wh = build_wheelhouse(dest, specs)
    np_wheel = real_numpy_wheel(dest / "registry")
    shutil.copy2(np_wheel, wh.root / "files" / np_wheel.name)  # type: ignore[attr-defined]
    shutil.copy2(np_wheel, wh.dir / np_wheel.name)  # type: ignore[attr-defined]
    d = wh.root / "simple" / "numpy"  # type: ignore[attr-defined]
    d.mkdir(exist_ok=True)
    digest = hashlib.sha256(np_wheel.read_bytes()).hexdigest()
    (d / "index.html").write_text(
        f'<!DOCTYPE html><html><body>\n<a href="../../files/{html.escape(np_wheel.name)}#sha256={digest}">'
        f"{html.escape(np_wheel.name)}</a>\n</body></html>\n"
    )
    index = wh.root / "simple" / "index.html"  # type: ignore[attr-defined]
    if 'href="numpy/"' not in index.read_text():
        index.write_text(index.read_text().replace("</body>", '<a href="numpy/">numpy</a>\n</body>'))
    wh.wheels.append(wh.dir / np_wheel.name)  # type: ignore[attr-defined]
    return wh
