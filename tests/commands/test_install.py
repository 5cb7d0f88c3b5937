"""The install command end to end, as a real subprocess: a real venv, real uv installs from a
local index served over loopback HTTP, the real verify on the CPU (--allow-cpu), a real
ldconfig against a temp cache, then a no-op re-run, status and rollback.

The fake TensorFlow computes with the real numpy wheel (tests/support/install_kit.py), so
verify's TensorFlow layer runs for real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.faults import fault_env, wait_stopped
from tests.support.install_kit import TOOL_CACHE, cli_env, run_cli
from tests.support.promised import absent
from tfgpu_install.files import tree_digest

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"
pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")


def _etc(tmp_env: dict[str, str]) -> Path:
    """The temp root's /etc with an ld.so.conf and a cache built as a system would have it."""
    etc = Path(tmp_env["TFGPU_ROOT"]) / "etc"
    (etc / "ld.so.conf.d").mkdir(parents=True, exist_ok=True)
    (etc / "ld.so.conf").write_text(f"include {etc}/ld.so.conf.d/*.conf\n")
    subprocess.run([LDCONFIG, "-C", str(etc / "ld.so.cache"), "-f", str(etc / "ld.so.conf")], check=True)
    return etc


def _machine(tmp_path: Path) -> dict[str, dict[str, str]]:
    """Everything an install may touch outside the state dir: home, the temp root, the data dir."""
    return {name: tree_digest(tmp_path / name) for name in ("home", "root", "data")}


def test_install_noop_status_rollback(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    etc = _etc(tmp_env)
    rc = Path(tmp_env["HOME"]) / ".bashrc"
    rc.write_text("export EDITOR=vi\n")
    pristine = _machine(tmp_path)
    env_dir = tmp_path / "data" / "tf-env"
    env = cli_env(tmp_env, knowledge, index.url)
    args = ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir),
            "--shell-rc", str(rc), "--system-ldconfig", "--json"]

    first = run_cli(args, env)
    assert first.returncode == 0, first.stderr + first.stdout
    doc = json.loads(first.stdout)
    assert doc["changed"] is True and doc["gpu_verified"] is False
    applied = [s["id"] for s in doc["steps"] if s["status"] == "applied"]
    assert applied == ["env.create", "packages.install", "activation.write", "shell-rc.write",
                       "ldconfig.system", "verify.run", "snapshot.record"]

    # TF imports in the env through the launcher, with no activation and an empty environment,
    # and its build info is the plan's.
    out = subprocess.run(
        ["/usr/bin/env", "-i", str(env_dir / "bin" / "tfgpu-run"), "python", "-c",
         "import tensorflow as tf, ctypes; b = tf.sysconfig.get_build_info();"
         "ctypes.CDLL('libcudnn.so.9'); print(tf.__version__, b['cuda_version'], b['cudnn_version'])"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    choice = doc["resolution"]["choice"]
    assert out == [choice["tensorflow"], choice["cuda"], choice["cudnn"].split(".")[0]]
    # The system loader knows the env's libraries (real ldconfig, temp cache).
    listing = subprocess.run([LDCONFIG, "-p", "-C", str(etc / "ld.so.cache")], capture_output=True, text=True).stdout
    assert str(env_dir) in listing and "libcudnn.so.9" in listing
    assert str(env_dir / "bin" / "activate") in rc.read_text()
    snaps = list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("snapshots/*.yaml"))
    assert len(snaps) == 1 and "gpu_verified: false" in snaps[0].read_text()

    # A re-run: nothing downloaded, nothing changed, not even the journal.
    before, journal = _machine(tmp_path), list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("envs/*/journal.jsonl"))[0]
    jtext, requests = journal.read_text(), len(index.requests)
    again = run_cli(args, env)
    assert again.returncode == 0, again.stderr
    doc2 = json.loads(again.stdout)
    assert doc2["changed"] is False
    assert {s["status"] for s in doc2["steps"]} <= {"done", "unchanged"}
    assert _machine(tmp_path) == before and journal.read_text() == jtext and len(index.requests) == requests

    status = run_cli(["status", "--env", str(env_dir), "--json"], env)
    sdoc = json.loads(status.stdout)
    assert sdoc["complete"] is True and sdoc["verification"]["ok"] is True
    assert sdoc["verification"]["gpu_verified"] is False
    assert "tensorflow" in sdoc["verification"]["layers_passed"]  # what a fleet row shows beside "CPU only"
    # the stack verification checked (what `fleet status` shows)
    assert (sdoc["verification"]["tensorflow"], sdoc["verification"]["cuda"]) == (choice["tensorflow"], choice["cuda"])

    back = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env)
    assert back.returncode == 0, back.stderr
    assert [s["id"] for s in json.loads(back.stdout)["undone"]] == list(reversed(applied))
    assert not env_dir.exists()
    assert _machine(tmp_path) == pristine  # rc, ld.so.conf.d, the ld cache: byte for byte
    assert list(Path(tmp_env["TFGPU_STATE_DIR"]).glob("snapshots/*.yaml")) == []
    nothing = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env)
    assert nothing.returncode == 0 and json.loads(nothing.stdout)["changed"] is False


def test_dry_run_runs_no_mutating_command_and_writes_nothing(
    tmp_path: Path,
    tmp_env: dict[str, str],
    index: Any,
    knowledge: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In-process, with a runner that records every command it is asked to run."""
    from tfgpu_install.cli import main
    from tfgpu_install.runner import SubprocessRunner

    calls: list[tuple[tuple[str, ...], bool]] = []

    class Recording(SubprocessRunner):
        def run(self, argv: Any, **kw: Any) -> Any:  # type: ignore[override]
            calls.append((tuple(map(str, argv)), bool(kw.get("mutating"))))
            return super().run(argv, **kw)

    import tfgpu_install.context as context_mod

    env = cli_env(tmp_env, knowledge, index.url)
    before = tree_digest(tmp_path)
    real_build = context_mod.build_context

    def build(environ: Any = None, runner: Any = None, debug: bool = False) -> Any:
        return real_build(environ, runner=Recording(path=env["PATH"]), debug=debug)

    monkeypatch.setattr(context_mod, "build_context", build)
    code = main(["--profile", "stable", "--allow-cpu", "--dry-run", "--python", sys.executable,
                 "--env", str(tmp_path / "data" / "e"), "--json"], environ=env)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["dry_run"] is True
    assert [s["status"] for s in doc["steps"]][:2] == ["pending", "pending"]
    assert [c for c, mutating in calls if mutating] == []
    # Only the tool's own cache may change (TOOL_CACHE: kept for a fast start).
    after = tree_digest(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("cache")} == {
        k: v for k, v in before.items() if not k.startswith("cache")}
    assert all(k.startswith(TOOL_CACHE) for k in after.keys() - before.keys())


def test_concurrent_install_is_refused_with_the_pid(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    import signal

    env = cli_env(tmp_env, knowledge, index.url)
    args = ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable,
            "--env", str(tmp_path / "data" / "e")]
    first = subprocess.Popen([sys.executable, "-m", "tfgpu_install", *args],
                             env=fault_env(env, stop_at="activation.write:middle"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_stopped(first, "the first install at activation.write:middle")
        second = run_cli(args, env)
        assert second.returncode == 10, second.stderr  # ExitCode.LOCKED
        assert f"PID {first.pid}" in second.stderr and "--wait" in second.stderr
        os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            os.kill(first.pid, signal.SIGCONT)
            first.kill()
    third = run_cli(args + ["--json"], env)
    assert third.returncode == 0 and json.loads(third.stdout)["changed"] is False


def test_conda_backend_named_env_with_a_stand_in_conda(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """conda cannot be installed here: tests/support/fake_conda.py lays out prefixes as conda does."""
    from tests.support.fake_conda import read_log, write_fake_conda

    conda = write_fake_conda(tmp_path / "condabin", root=tmp_path / "miniforge")
    env = cli_env(tmp_env, knowledge, index.url, PATH=f"{conda.parent}:{tmp_env['PATH']}")
    args = ["--profile", "stable", "--allow-cpu", "-y", "--name", "tf", "--json"]  # --name implies conda
    done = run_cli(args, env)
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    prefix = Path(doc["env"])
    assert prefix == tmp_path / "miniforge" / "envs" / "tf"
    assert any(a[:2] == ["create", "-y"] and "-n" in a for a in read_log(conda))
    act = prefix / "etc/conda/activate.d/tfgpu-install.sh"
    assert "nvidia/cudnn/lib" in act.read_text()
    venv_activate = prefix / "bin" / "activate"  # the stand-in's prefix is a venv inside: untouched
    assert not venv_activate.exists() or ">>> tfgpu-install" not in venv_activate.read_text()
    again = run_cli(args, env)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False
    back = run_cli(["rollback", "-y", "--env", str(prefix)], env)
    assert back.returncode == 0, back.stderr
    assert not prefix.exists()
    assert any(a[:1] in (["remove"], ["env"]) for a in read_log(conda))


def test_rollback_to_a_known_good_snapshot(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """Install, then add --shell-rc in a second run; rollback --to the first snapshot undoes only that."""
    env = cli_env(tmp_env, knowledge, index.url)
    env_dir = tmp_path / "data" / "e"
    rc = Path(tmp_env["HOME"]) / ".zshrc"
    rc.write_text("setopt autocd\n")
    base = ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir), "--json"]
    first = json.loads(run_cli(base, env).stdout)
    assert first["changed"] is True
    snaps = sorted(Path(tmp_env["TFGPU_STATE_DIR"]).glob("snapshots/*.yaml"))
    assert len(snaps) == 1
    second = run_cli(base + ["--shell-rc", str(rc)], env)
    assert second.returncode == 0, second.stderr
    assert ">>> tfgpu-install" in rc.read_text()

    back = run_cli(["rollback", "-y", "--env", str(env_dir), "--to", snaps[0].stem, "--json"], env)
    assert back.returncode == 0, back.stderr + back.stdout
    undone = [s["id"] for s in json.loads(back.stdout)["undone"]]
    assert "shell-rc.write" in undone and "env.create" not in undone
    assert rc.read_text() == "setopt autocd\n"
    assert (env_dir / "bin" / "tfgpu-run").exists()
    assert snaps[0].exists()

    unknown = run_cli(["rollback", "-y", "--env", str(env_dir), "--to", "no-such-snapshot"], env)
    assert unknown.returncode == 5 and "snapshot" in unknown.stderr
    assert run_cli(["rollback", "-y", "--env", str(env_dir)], env).returncode == 0
    assert not env_dir.exists()


def test_status_of_an_env_never_installed(tmp_path: Path, tmp_env: dict[str, str], knowledge: Path) -> None:
    out = run_cli(["status", "--env", str(tmp_path / "nothing"), "--json"], dict(tmp_env, PYTHONPATH=str(Path.cwd())))
    doc = json.loads(out.stdout)
    # "no such env" is one rule for every command: exit 6, error env-not-found (docs/reference/exit-codes.md)
    assert out.returncode == 6 and doc["error"] == "env-not-found" and "nothing" in doc["message"]
    plain = tmp_path / "plain"
    import venv

    venv.create(plain, with_pip=False)  # an env, but not one this tool installed
    out = run_cli(["status", "--env", str(plain), "--json"], dict(tmp_env, PYTHONPATH=str(Path.cwd())))
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["installed"] is False and doc["steps"] == []
    none = run_cli(["rollback", "-y", "--json"], dict(tmp_env, PYTHONPATH=str(Path.cwd())))
    assert none.returncode == 6 and "--env" in json.loads(none.stdout)["hint"]


def test_existing_env_gets_a_rollback_point_first(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """Installing into an env that already holds something records what it held (a
    `rollback-point` snapshot) before the first change; a new env needs none."""
    import venv

    from tfgpu_install.snapshot import model as S

    env_dir = tmp_path / "data" / "existing"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    env = cli_env(tmp_env, knowledge, index.url)
    args = ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir), "--json"]
    done = run_cli(args, env)
    assert done.returncode == 0, done.stderr + done.stdout
    stored = S.scan(Path(tmp_env["TFGPU_STATE_DIR"])).snapshots
    points = [s for _, s in stored if s.kind == "rollback-point"]
    assert len(points) == 1
    assert points[0].env.path == str(env_dir) and points[0].packages == ()  # it held no packages
    assert [s.kind for _, s in stored].count("known-good") == 1


def test_a_second_env_shares_the_first_ones_bytecode(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """uv links the same cached files into both envs; the first one's verification compiled
    numpy, and the second env gets those .pyc files as links (no compile, no disk of its own)."""
    env = cli_env(tmp_env, knowledge, index.url)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's shell: the env's Python writes its bytecode
    envs = [tmp_path / "data" / name for name in ("first", "second")]
    for env_dir in envs:
        done = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable,
                        "--env", str(env_dir), "--json"], env)
        assert done.returncode == 0, done.stderr + done.stdout
    tag = sys.implementation.cache_tag
    first, second = (next(d.glob(f"lib/python*/site-packages/numpy/__pycache__/__init__.{tag}.pyc")) for d in envs)
    if os.stat(first.parent.parent / "__init__.py").st_ino != os.stat(second.parent.parent / "__init__.py").st_ino:
        pytest.skip("uv copied instead of linking (its cache is on another filesystem)")
    assert os.stat(first).st_ino == os.stat(second).st_ino  # linked, and still valid after the verification
    shared = [p for p in second.parent.parent.rglob(f"*.{tag}.pyc") if os.stat(p).st_nlink > 1]
    assert len(shared) > 20
    back = run_cli(["rollback", "-y", "--env", str(envs[1]), "--json"], env)
    assert back.returncode == 0 and not envs[1].exists()
    assert first.is_file() and os.stat(first).st_nlink == 1  # the first env's own file, untouched
