"""kill -9 of the real CLI at every step boundary and in the middle of every step that acts.

For each kill point: rollback straight after the kill gives back every touched file byte for
byte (home, the temp root's /etc with its ld.so.cache, the data dir); killed again and run
again, the result equals an uninterrupted install; rollback after that is byte-identical too.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.faults import fault_env
from tests.support.install_kit import cli_env, run_cli
from tests.support.promised import absent
from tfgpu_install.files import tree_digest
from tfgpu_install.steps.ldconfig import conf_name
from tfgpu_install.steps.shell_rc import env_block_id

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"
pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")

# The steps that act in an install with --shell-rc and --system-ldconfig (the read-only
# checks never reach apply(), so they have no kill points).
ACTING = ["env.create", "packages.install", "activation.write", "shell-rc.write", "ldconfig.system",
          "verify.run", "snapshot.record"]


def _prepare(base: Path) -> list[str]:
    """A machine under `base`: a user rc and an /etc with its ld cache. Returns the install args."""
    (base / "home" / ".bashrc").write_text("alias ll='ls -l'\n")
    etc = base / "root" / "etc"
    (etc / "ld.so.conf.d").mkdir(parents=True, exist_ok=True)
    (etc / "ld.so.conf").write_text(f"include {etc}/ld.so.conf.d/*.conf\n")
    subprocess.run([LDCONFIG, "-C", str(etc / "ld.so.cache"), "-f", str(etc / "ld.so.conf")], check=True)
    return ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable,
            "--env", str(base / "data" / "tf-env"), "--shell-rc", str(base / "home" / ".bashrc"),
            "--system-ldconfig"]


def _machine(base: Path) -> dict[str, str]:
    """Byte-exact digest of everything an install touches outside the state dir."""
    out: dict[str, str] = {}
    for name in ("home", "root", "data"):
        out.update({f"{name}/{k}": v for k, v in tree_digest(base / name).items()})
    return out


def _normalized(base: Path) -> dict[str, str]:
    """The same, comparable across temp dirs: the base path replaced, byte-code caches and the
    binary ld cache left out (its listing is compared instead)."""
    out: dict[str, str] = {}
    marker = str(base).encode()
    env_id = env_block_id(base / "data" / "tf-env").encode()  # the rc block's id hashes the env's path
    conf = conf_name(base / "data" / "tf-env")  # so does the ld.so.conf.d file's name
    for name in ("home", "root", "data"):
        root = base / name
        for p in sorted(root.rglob("*")):
            rel = f"{name}/{p.relative_to(root)}".replace(conf, "<CONF>")
            if "__pycache__" in rel or rel.endswith("ld.so.cache"):
                continue
            if p.is_symlink():
                out[rel] = "link:" + str(p.readlink()).replace(str(base), "<BASE>")
            elif p.is_file():
                data = p.read_bytes().replace(marker, b"<BASE>").replace(env_id, b"<ENV-ID>")
                if p.name == "RECORD":
                    # Scripts' hashes cover their shebang, i.e. the env's absolute path.
                    data = b"\n".join(ln.split(b",")[0] if b"/bin/" in ln else ln for ln in data.split(b"\n"))
                out[rel] = hashlib.sha256(data).hexdigest()
            else:
                out[rel] = "dir"
    listing = subprocess.run([LDCONFIG, "-p", "-C", str(base / "root/etc/ld.so.cache")],
                             capture_output=True, text=True).stdout
    out["ld.so.cache listing"] = listing.replace(str(base), "<BASE>")
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, index: Any, knowledge: Path) -> dict[str, str]:
    base = tmp_path_factory.mktemp("reference")
    env = _env(base, knowledge, index)
    done = run_cli(_prepare(base), env)
    assert done.returncode == 0, done.stderr
    return _normalized(base)


def _env(base: Path, knowledge: Path, index: Any) -> dict[str, str]:
    dirs = {}
    for name in ("home", "root", "state", "cache", "data"):
        (base / name).mkdir(exist_ok=True)
        dirs[name] = str(base / name)
    import os

    tmp_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": dirs["home"], "TFGPU_ROOT": dirs["root"],
               "TFGPU_STATE_DIR": dirs["state"], "TFGPU_CACHE_DIR": dirs["cache"], "TFGPU_DATA_DIR": dirs["data"]}
    return cli_env(tmp_env, knowledge, index.url, UV_CACHE_DIR=str(base.parent / "uv-cache"))


# ~3 s a point (a real venv, uv from the local index, the real verify): the whole matrix runs in every pass.
POINTS = [pytest.param(step, where, id=f"{step}:{where}") for step in ACTING for where in ("before", "middle", "after")]


@pytest.mark.parametrize(("step", "where"), POINTS)
def test_kill_then_rollback_and_resume(
    step: str, where: str, tmp_path: Path, index: Any, knowledge: Path, reference: dict[str, str]
) -> None:
    env = _env(tmp_path, knowledge, index)
    args = _prepare(tmp_path)
    pristine = _machine(tmp_path)
    kill = fault_env(env, kill_at=f"{step}:{where}")

    killed = run_cli(args, kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr + killed.stdout
    back = run_cli(["rollback", "-y", "--env", str(tmp_path / "data" / "tf-env")], env)
    assert back.returncode == 0, back.stderr
    assert _machine(tmp_path) == pristine

    assert run_cli(args, kill).returncode == -signal.SIGKILL
    resumed = run_cli(args + ["--json"], env)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    assert json.loads(resumed.stdout)["changed"] is True
    assert _normalized(tmp_path) == reference
    assert run_cli(["rollback", "-y", "--env", str(tmp_path / "data" / "tf-env")], env).returncode == 0
    assert _machine(tmp_path) == pristine
