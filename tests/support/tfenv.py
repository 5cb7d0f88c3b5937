"""A real venv with TensorFlow and the real NVIDIA wheels, built once per test session.

Import the `tf_env` fixture into a test module (`from tests.support.tfenv import tf_env`).
TFGPU_TEST_TF_ENV=PATH reuses an existing env instead; uv's cache makes a rebuild take seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.promised import skip_or_fail
from tests.support.registry import trusted_env

# The stable profile's pins (TF 2.17.1 built for CUDA 12.3 / cuDNN 8.9), as the install places them.
STABLE_PINS = ("tensorflow==2.17.1", "nvidia-cudnn-cu12==8.9.7.29", "nvidia-cublas-cu12==12.3.4.1",
               "nvidia-cuda-runtime-cu12==12.3.101")
STABLE_PLAN = {"cuda": "12.3", "cudnn": "8.9.7.29", "tensorflow": "2.17.1"}

_BUILT: dict[str, Path] = {}  # one env per session, whichever module asks first


def make_venv(path: Path) -> Path:
    """A bare real venv (uv is fast; stdlib venv otherwise)."""
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        subprocess.run([str(uv), "venv", "-q", "-p", sys.executable, str(path)], check=True)
    else:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


@pytest.fixture(scope="session")
def tf_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("TFGPU_TEST_TF_ENV")
    if given and (Path(given) / "bin" / "python").exists():
        return Path(given)
    if "env" in _BUILT:
        return _BUILT["env"]
    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        skip_or_fail("uv (a dependency of tfgpu-install) is not in the test venv")
    env = make_venv(tmp_path_factory.mktemp("tfenv") / "env")
    proc = subprocess.run([str(uv), "pip", "install", "-q", "-p", str(env / "bin" / "python"), *STABLE_PINS],
                          capture_output=True, text=True, env=trusted_env())
    if proc.returncode != 0:
        skip_or_fail(f"could not install TensorFlow from the registry: {proc.stderr.strip()[-500:]}")
    _BUILT["env"] = env
    return env
