"""The README's first command as a new user runs it: scripts/install on Debian's own
/usr/bin/python3 (externally managed, PEP 668), from a clean environment (`env -i`, an empty
HOME), then the main job against the tests' local index (the fake TensorFlow)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.install_kit import REPO
from tests.support.promised import absent

SYSTEM_PY = Path("/usr/bin/python3")
SCRIPT = REPO / "scripts" / "install"

pytestmark = [
    pytest.mark.e2e,  # scripts/install builds the tool's venv, then a real install
    pytest.mark.skipif(not SYSTEM_PY.exists(), reason="no distribution Python at /usr/bin/python3"),
    pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc"),
]


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", **extra}


def _externally_managed(py: Path) -> bool:
    out = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return (Path(out) / "EXTERNALLY-MANAGED").is_file()


def _checkout_copy(dest: Path) -> Path:
    """The checkout's tracked files, without .git (scripts/install's own walk, not git's list)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in (p for p in out.decode().split("\0") if p and not p.startswith("tests/")):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


def test_install_script_on_a_stock_debian_python_then_the_main_job(
    tmp_path: Path, index: Any, knowledge: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env_dir = tmp_path / "envs" / "tf"
    env = _clean_env(home, PYTHON=str(SYSTEM_PY), TFGPU_PROFILES_DIR=str(knowledge))
    script = _checkout_copy(tmp_path / "checkout") / "scripts" / "install"
    if _externally_managed(SYSTEM_PY):  # the case this script exists for: plain pip is refused
        refused = subprocess.run([str(SYSTEM_PY), "-m", "pip", "install", "--dry-run", "rich"],
                                 env=env, capture_output=True, text=True)
        assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr
    done = subprocess.run(
        ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "sh", str(script), "--",
         "--profile", "stable", "--allow-cpu", "-y", "--index-url", index.url,
         "--python", str(SYSTEM_PY), "--env", str(env_dir), "--json"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    doc = json.loads(done.stdout)
    assert doc["changed"] is True and doc["gpu_verified"] is False and doc["env"] == str(env_dir)
    link = home / ".local" / "bin" / "tfgpu-install"
    tool = home / ".local" / "share" / "tfgpu-install" / "tool"
    assert link.is_symlink() and Path(os.readlink(link)) == tool / "bin" / "tfgpu-install"
    assert "is not on your PATH" in done.stderr  # ~/.local/bin is not in the clean PATH: the user is told
    # #44 item 4: the build ran in a copy: nothing written into the checkout
    assert not [p for p in script.parents[1].rglob("*") if p.name == "build" or p.name.endswith(".egg-info")]
    installed = _installed_module(tool)
    before = installed.stat().st_mtime_ns
    # Run again with nothing changed: pip is not run (the installed files are untouched), the command still
    # works, the env is a no-op.
    again = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), "sh", str(script), "--",
                            "--profile", "stable", "--allow-cpu", "-y", "--index-url", index.url,
                            "--python", str(SYSTEM_PY), "--env", str(env_dir), "--json"],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["changed"] is False
    assert "no file changed): nothing to do" in again.stderr and "installing" not in again.stderr
    assert installed.stat().st_mtime_ns == before
    # A changed file in the checkout: installed again (an upgrade in place), the change is what runs.
    (script.parents[1] / "tfgpu_install" / "report.py").write_text(
        (script.parents[1] / "tfgpu_install" / "report.py").read_text() + "# changed in the checkout\n")
    upgraded = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), "sh", str(script)],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert upgraded.returncode == 0 and "installing tfgpu-install" in upgraded.stderr, upgraded.stderr[-2000:]
    assert _installed_module(tool).read_text().endswith("# changed in the checkout\n")


def _installed_module(tool: Path) -> Path:
    (found,) = tool.glob("lib/python3*/site-packages/tfgpu_install/report.py")
    return found


def test_install_script_explains_a_missing_venv_module(tmp_path: Path) -> None:
    """Ubuntu ships python3 without python3-venv: the script says which package to install (exit 6)."""
    home = tmp_path / "home"
    home.mkdir()
    fake = tmp_path / "python3"  # a Python whose venv module is missing, as on a stock Ubuntu
    fake.write_text(f"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  echo "The virtual environment was not created successfully because ensurepip is not" >&2
  echo "available.  On Debian/Ubuntu systems, you need to install the python3-venv package" >&2
  exit 1
fi
exec {SYSTEM_PY} "$@"
""")
    fake.chmod(0o755)
    done = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in _clean_env(home).items()), "sh", str(SCRIPT),
                           "--python", str(fake)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 6
    assert "apt install python3-venv" in done.stderr and f"python{_minor()}-venv" in done.stderr
    assert not (home / ".local" / "bin").exists()  # nothing half-installed
    assert not list((home / ".local" / "share" / "tfgpu-install").glob("tool*"))


def _minor() -> str:
    return subprocess.run([str(SYSTEM_PY), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_install_script_refuses_unknown_arguments(tmp_path: Path) -> None:
    done = subprocess.run(["sh", str(SCRIPT), "--no-such-flag"], capture_output=True, text=True,
                          env=_clean_env(tmp_path), timeout=60)
    assert done.returncode == 2 and "unknown argument" in done.stderr
