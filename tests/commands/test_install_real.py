"""The one real end-to-end install: the stable profile with --allow-cpu from the real registry
(TensorFlow and the CUDA wheels: ~3 GB download, ~6 GB installed; uv's cache makes repeats
cheap), TensorFlow imported in the env with its build info checked against the plan, a
no-op re-run, then rollback and a check that everything is gone.

Marked slow (minutes). TFGPU_SKIP_SLOW=1 / `-m "not slow"` leaves it out; CI runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.install_kit import REPO, run_cli
from tests.support.registry import registry_cli_env
from tfgpu_install.files import tree_digest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get("TFGPU_SKIP_SLOW")), reason="TFGPU_SKIP_SLOW set"),
]


def _machine(base: Path) -> dict[str, dict[str, str]]:
    # Keras writes keras.json under KERAS_HOME (default ~/.keras) whenever TensorFlow is
    # imported; verify points it into the tool's cache, so home must stay untouched.
    return {n: tree_digest(base / n) for n in ("home", "root", "data")}


def test_stable_profile_on_the_cpu_for_real(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    env = registry_cli_env(tmp_env, REPO)  # the made-up machine gets this one's CA store
    pristine = _machine(tmp_path)
    args = ["--profile", "stable", "--allow-cpu", "-y", "--json"]

    done = run_cli(args, env, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    doc = json.loads(done.stdout)
    choice = doc["resolution"]["choice"]
    env_dir = Path(doc["env"])
    assert doc["gpu_verified"] is False and env_dir.is_dir()

    out = subprocess.run(
        ["/usr/bin/env", "-i", f"HOME={tmp_env['HOME']}", f"KERAS_HOME={tmp_path / 'keras'}",
         str(env_dir / "bin" / "tfgpu-run"), "python", "-c",
         "import json, tensorflow as tf; b = tf.sysconfig.get_build_info();"
         "print(json.dumps({'tf': tf.__version__, 'cuda': b.get('cuda_version'), 'cudnn': b.get('cudnn_version'),"
         " 'cpu': [d.name for d in tf.config.list_physical_devices('CPU')]}))"],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["tf"] == choice["tensorflow"] and info["cpu"]
    assert str(info["cuda"]).startswith(choice["cuda"])
    assert str(info["cudnn"]).split(".")[0] == str(choice["cudnn"]).split(".")[0]

    # The libraries TF will look for are there, with the sonames the plan wants.
    from tfgpu_install.env.target import TargetEnv
    from tfgpu_install.steps.libraries import CheckLibraries

    libs = CheckLibraries(TargetEnv.at(env_dir), choice["cuda"], choice["cudnn"], choice["pins"])
    assert [f.problem for f in libs.findings() if f.problem] == []

    # A snapshot of the real stable env restores it exactly (pip freeze --all, library hashes).
    from tests.support.restore_kit import assert_restores_exactly

    assert_restores_exactly(env_dir, dict(env, PYTHONPATH=str(REPO)), tmp_path / "restore")

    again = run_cli(args, env, timeout=600)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False

    back = run_cli(["rollback", "-y", "--env", str(env_dir)], env, timeout=600)
    assert back.returncode == 0, back.stderr
    assert not env_dir.exists()
    assert _machine(tmp_path) == pristine
    assert list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("snapshots/*.yaml")) == []
