"""The one real end-to-end test: the README's main command against the real registry.

`tfgpu-install --profile stable --allow-cpu -y --env <tmp>` installs TensorFlow and the
pinned CUDA/cuDNN wheels from PyPI (~3 GB download, ~6 GB installed; uv's cache in its
default place makes repeats cheap, so HOME stays the real one), TensorFlow is imported in
the env and its build info compared with the plan, a second run changes nothing, and
`rollback` takes it all away again.

Slow (minutes cold): marked `slow`; `TFGPU_SKIP_SLOW=1 scripts/test` leaves it out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from installer.fsutil import tree_digest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get("TFGPU_SKIP_SLOW")), reason="TFGPU_SKIP_SLOW is set"),
]


def _cli(args: list[str], environ: dict[str, str], timeout: float = 3600) -> tuple[int, Any, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "installer", *args, "--json"],
        env=environ, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
    try:
        data = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        data = None
    return proc.returncode, data, proc.stdout + proc.stderr


def test_stable_profile_from_the_registry_then_rollback(tmp_path: Path) -> None:
    parent = tmp_path / "envs"
    parent.mkdir()
    (parent / "unrelated.txt").write_text("left alone\n")
    env = parent / "tf-stable"
    environ = {
        **os.environ,
        "TFGPU_STATE_DIR": str(tmp_path / "state"),
        "TFGPU_CACHE_DIR": str(tmp_path / "cache"),
        "TFGPU_DATA_DIR": str(tmp_path / "data"),
    }
    environ.pop("VIRTUAL_ENV", None)
    before = tree_digest(parent)

    rc, data, out = _cli(["--profile", "stable", "--allow-cpu", "-y", "--env", str(env)], environ)
    assert rc == 0, out[-4000:]
    assert data is not None, out[-4000:]
    choice = data["resolution"]["choice"]
    assert data["changed"] is True
    assert data["gpu_verified"] is False  # --allow-cpu: verified on the CPU, and recorded so
    ids = [s["id"] for s in data["steps"]]
    assert ids[:3] == ["env.create", "packages.install", "libraries.check"]
    assert all(s["status"] in ("applied", "done") for s in data["steps"]), data["steps"]

    # TensorFlow imports in the env, through the launcher that sets the library path itself.
    probe = (
        "import json, tensorflow as tf; "
        "print(json.dumps({'version': tf.__version__, 'build': dict(tf.sysconfig.get_build_info())}, default=str))"
    )
    proc = subprocess.run([str(env / "bin" / "tfgpu-run"), "python", "-c", probe],
                          capture_output=True, text=True, timeout=600, env={k: v for k, v in environ.items()})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["version"] == choice["tensorflow"]
    build = got["build"]
    assert build["is_cuda_build"] is True or str(build["is_cuda_build"]) == "True"
    assert str(build["cuda_version"]).startswith(choice["cuda"]), build
    assert str(build["cudnn_version"]).split(".")[0] == choice["cudnn"].split(".")[0], build

    # The libraries TF will look for are there, with the sonames the plan wants.
    from installer.steps.env import TargetEnv
    from installer.steps.libraries import CheckLibraries

    libs = CheckLibraries(TargetEnv.at(env), choice["cuda"], choice["cudnn"], choice["pins"])
    assert [f.problem for f in libs.findings() if f.problem] == []

    # A second run is a no-op.
    rc, again, out = _cli(["--profile", "stable", "--allow-cpu", "-y", "--env", str(env)], environ)
    assert rc == 0, out[-4000:]
    assert again["changed"] is False and all(s["status"] in ("done", "unchanged") for s in again["steps"])

    # Rollback: the env is gone and the directory it lived in is as it was.
    rc, undone, out = _cli(["rollback", "--env", str(env)], environ, timeout=1200)
    assert rc == 0, out[-4000:]
    assert not env.exists()
    assert tree_digest(parent) == before
