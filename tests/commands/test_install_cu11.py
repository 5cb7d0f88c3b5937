"""TF 2.5-2.13's CUDA user space from the nvidia-*-cu11 wheels, end to end and fast: the real CLI
installs a profile whose release has the shape of TF 2.11 (CUDA 11.2 build, cuDNN 8.1, no and-cuda
extra, matrix.yaml pins_kind: wheels with sha256 pins) from the local wheelhouse's gcc-built
stand-ins; every library TF dlopens then loads through `bin/tfgpu-run` from an empty environment,
and rollback removes it all. tests/commands/test_install_cu11_real.py does the same against PyPI.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.install_kit import MATRIX, cli_env, run_cli, write_knowledge
from tests.support.promised import absent
from tests.support.wheelhouse import CU11_PINS, CU11_TF

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")

# What TF 2.5-2.13 dlopen (matrix.yaml `sonames` of those rows).
TF_SONAMES = ["libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcufft.so.10", "libcurand.so.10",
              "libcusolver.so.11", "libcusparse.so.11", "libcudnn.so.8"]


def _cu11_matrix(index: Any, hashes: dict[str, str]) -> str:
    """The test release in TF 2.11's shape, hashes of the served wheels as matrix.yaml records PyPI's."""
    pins = "".join(f'      {n}: "{v}"\n' for n, v in sorted(CU11_PINS.items()))
    pin_hashes = "".join(f'      {n}: "{h}"\n' for n, h in sorted(hashes.items()))
    return MATRIX.split("  - tensorflow:")[0] + f"""\
  - tensorflow: "{CU11_TF}"
    package: tensorflow
    released: "2023-07-05"
    pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]
    cuda: "11.2"
    cudnn: "8.1"
    sass: ["3.5", "5.0", "6.0", "7.0", "7.5", "8.0"]
    ptx: ["8.0"]
    manylinux: manylinux_2_17_x86_64
    min_glibc: "2.17"
    cuda_from: pip
    pins_kind: wheels
    pins:
{pins}    pin_hashes:
{pin_hashes}    sonames: {json.dumps(TF_SONAMES)}
    constraints:
      numpy: ">=1.22,<2.0"
      protobuf: ">=3.20.3,<5"
    source: "tests/support/wheelhouse.py cu11_specs (TF 2.11's shape)"
"""


def _served_hashes(index: Any) -> dict[str, str]:
    files = Path(index.root) / "files"
    out = {}
    for name, version in CU11_PINS.items():
        wheel = next(files.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        out[name] = "sha256:" + hashlib.sha256(wheel.read_bytes()).hexdigest()
    return out


def _load_through_launcher(env_dir: Path, sonames: list[str]) -> "subprocess.CompletedProcess[str]":
    code = ("import ctypes, sys\nfor so in sys.argv[1:]:\n    ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL)\n"
            "print('loaded', len(sys.argv) - 1)")
    return subprocess.run(["/usr/bin/env", "-i", str(env_dir / "bin" / "tfgpu-run"), "python", "-c", code, *sonames],
                          capture_output=True, text=True, timeout=120)


def test_cu11_wheels_install_load_through_tfgpu_run_and_roll_back(
    tmp_path: Path, tmp_env: dict[str, str], index: Any
) -> None:
    knowledge = tmp_path / "knowledge"
    write_knowledge(knowledge, _cu11_matrix(index, _served_hashes(index)))
    env_dir = tmp_path / "data" / "tf211-shape"
    env = cli_env(tmp_env, knowledge, index.url)
    args = ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir), "--json"]

    plan = run_cli(["plan", "--profile", "stable", "--assume-driver", "470.82.01", "--assume-gpu", "Tesla K80",
                    "--json"], env)
    assert plan.returncode == 0, plan.stderr + plan.stdout
    pdoc = json.loads(plan.stdout)
    assert pdoc["choice"]["tensorflow"] == CU11_TF and pdoc["choice"]["pins"] == CU11_PINS
    said = " ".join(pdoc["reasons"])
    assert "nvidia-*-cu11 wheels" in said and "minor-version compatibility" in said  # 470 is CUDA 11.4
    assert "libraries.check" in [s["id"] for s in pdoc["steps"]]

    first = run_cli(args, env)
    assert first.returncode == 0, first.stderr + first.stdout
    doc = json.loads(first.stdout)
    choice = doc["resolution"]["choice"]
    assert choice["pins"] == CU11_PINS and set(choice["hashes"]) == set(CU11_PINS)

    # Every library TF 2.11 dlopens loads by soname through the launcher, from an empty environment.
    out = _load_through_launcher(env_dir, TF_SONAMES)
    assert out.returncode == 0 and out.stdout.strip() == f"loaded {len(TF_SONAMES)}", out.stderr
    # Without the launcher (no LD_LIBRARY_PATH) they do not: TF < 2.14 needs it.
    bare = subprocess.run(["/usr/bin/env", "-i", str(env_dir / "bin" / "python"), "-c",
                           "import ctypes; ctypes.CDLL('libcusolver.so.11')"], capture_output=True, text=True)
    assert bare.returncode != 0 and "libcusolver.so.11" in bare.stderr

    back = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env)
    assert back.returncode == 0, back.stderr + back.stdout
    assert not env_dir.exists()


def test_a_cu11_wheel_whose_hash_differs_from_the_pin_is_refused(
    tmp_path: Path, tmp_env: dict[str, str], index: Any
) -> None:
    """The recorded sha256 is checked by the installer: a served wheel that differs is not installed."""
    hashes = _served_hashes(index)
    hashes["nvidia-cusolver-cu11"] = "sha256:" + "0" * 64
    knowledge = tmp_path / "knowledge"
    write_knowledge(knowledge, _cu11_matrix(index, hashes))
    env_dir = tmp_path / "data" / "tampered"
    env = cli_env(tmp_env, knowledge, index.url)
    done = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir),
                    "--json"], env)
    assert done.returncode == 7, done.stderr + done.stdout  # STEP_FAILED: resume or roll back
    assert "nvidia-cusolver-cu11" in done.stdout + done.stderr
    assert not list(env_dir.glob("lib/python*/site-packages/nvidia/cusolver"))
