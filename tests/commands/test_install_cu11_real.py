"""TF 2.12 and TF 2.11 for real (issue 11, item 1): `--allow-cpu` installs of profiles pinned to each,
from the real registry (TensorFlow and the pinned nvidia-*-cu11 wheels, hash-checked: ~2.5 GB of
downloads shared through uv's cache, so the second install re-downloads only TensorFlow), then every
CUDA library those builds dlopen loads through `bin/tfgpu-run` from inside the env, and rollback
removes it all.

Marked slow. TFGPU_SKIP_SLOW=1 / `-m "not slow"` leaves it out; CI runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.install_kit import REPO, run_cli
from tests.support.registry import registry_cli_env
from tfgpu_install.knowledge.load import load_knowledge

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get("TFGPU_SKIP_SLOW")), reason="TFGPU_SKIP_SLOW set"),
]

POLICY = """\
name: {name}
description: "TF {line} only (issue 11: the CUDA 11 user space from the nvidia-*-cu11 wheels)"
prefer: newest
tensorflow: "=={line}.*"
source: "tests/commands/test_install_cu11_real.py"
"""


@pytest.mark.parametrize("line", ["2.12", "2.11"])
def test_tf_with_the_cu11_wheels_for_real(line: str, tmp_path: Path, tmp_env: dict[str, str]) -> None:
    profile = tmp_path / f"tf{line}.yaml"
    profile.write_text(POLICY.format(name=f"tf{line}", line=line))
    env = registry_cli_env(tmp_env, REPO)
    env_dir = tmp_path / "data" / f"tf{line}"
    release = next(r for r in load_knowledge().releases if r.tensorflow.startswith(line + "."))
    # The tool picks a Python the release supports (TF 2.11: <= 3.10) among those here, pyenv's too.
    pyenv = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    if Path(pyenv).is_dir():
        env["PYENV_ROOT"] = pyenv
    plan = run_cli(["plan", "--profile", str(profile), "--allow-cpu", "--json"], env, timeout=600)
    if plan.returncode != 0 or json.loads(plan.stdout)["choice"] is None:
        pytest.skip(f"no Python {'/'.join(release.pythons)} on this machine for TF {release.tensorflow}")

    done = run_cli(["--profile", str(profile), "--allow-cpu", "-y", "--env", str(env_dir), "--json"], env,
                   timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    choice = json.loads(done.stdout)["resolution"]["choice"]
    assert choice["tensorflow"] == release.tensorflow and choice["pins"] == release.pins
    assert choice["pins"]["nvidia-cudnn-cu11"].startswith("8.")

    code = ("import ctypes, json, sys\nok = []\nfor so in sys.argv[1:]:\n"
            "    ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL); ok.append(so)\nprint(json.dumps(ok))")
    out = subprocess.run(["/usr/bin/env", "-i", f"HOME={tmp_env['HOME']}", str(env_dir / "bin" / "tfgpu-run"),
                          "python", "-c", code, *release.sonames], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(loaded) >= {"libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcufft.so.10",
                           "libcurand.so.10", "libcusolver.so.11", "libcusparse.so.11", "libcudnn.so.8"}

    back = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env, timeout=600)
    assert back.returncode == 0, back.stderr[-2000:] + back.stdout[-2000:]
    assert not env_dir.exists()
