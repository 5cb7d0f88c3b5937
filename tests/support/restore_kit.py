"""What the snapshot/restore tests share: a served computing wheelhouse (install_kit), a
knowledge dir whose TF needs glibc 2.27 (so `--assume-glibc 2.17` is too old), one real
provisioned env per test module (the real install CLI: real venv, real uv, real verify
on the CPU), and helpers to run the CLI in-process and read what an env holds.

    source_env fixture (module) -> Provisioned(env, environ, index_url, knowledge)
    cli(args, environ, capsys) -> (exit code, JSON document)
    freeze(env) -> `pip freeze --all` of the env (real pip of the test interpreter, --path)
    lib_hashes(env) -> {relative path: sha256} of the env's nvidia/*/lib files
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pytest

from tests.support.install_kit import MATRIX, cli_env, computing_wheelhouse, write_knowledge
from tests.support.promised import absent
from tfgpu_install.cli import main

GLIBC_MATRIX = MATRIX.replace('min_glibc: "2.17"', 'min_glibc: "2.27"').replace(
    "manylinux_2_17_x86_64", "manylinux_2_27_x86_64")

needs_gcc = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")


@dataclass
class Provisioned:
    env: Path  # the provisioned venv
    environ: dict[str, str]  # process environment for the CLI (temp state dirs, index, knowledge)
    index_url: str
    tmp: Path


def cli(args: Sequence[str], environ: Mapping[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    """The CLI in-process (cli.main) with --json; returns (exit code, parsed stdout)."""
    capsys.readouterr()
    code = main([*args, "--json"], environ=dict(environ))
    out = capsys.readouterr().out
    try:
        doc = json.loads(out) if out.strip() else {}
    except ValueError:
        doc = {"raw": out}
    return code, doc


def freeze(env: Path) -> list[str]:
    """`pip freeze --all` of the env's site-packages (the env itself may have no pip)."""
    sp = sorted(env.glob("lib/python3*/site-packages"))[-1]
    out = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--disable-pip-version-check",
                          "--path", str(sp)], capture_output=True, text=True, check=True)
    return sorted(line for line in out.stdout.splitlines() if line.strip())


def lib_hashes(env: Path) -> dict[str, str]:
    out = {}
    for p in sorted(env.glob("lib/python3*/site-packages/nvidia/*/lib/*")):
        if p.is_file():
            out[str(p.relative_to(env))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def served_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wh = computing_wheelhouse(tmp_path_factory.mktemp("computing-wheelhouse"))
    with wh.serve() as srv:  # type: ignore[attr-defined]
        yield srv


def base_environ(tmp: Path, index_url: str) -> dict[str, str]:
    from tests.conftest import make_tmp_env

    tmp_env = make_tmp_env(tmp)
    return cli_env(tmp_env, write_knowledge(tmp / "knowledge", GLIBC_MATRIX), index_url)


@pytest.fixture(scope="module")
def source_env(tmp_path_factory: pytest.TempPathFactory, served_index: Any) -> Provisioned:
    """A small TF env installed by the real install command (known-good snapshot recorded)."""
    tmp = tmp_path_factory.mktemp("provisioned")
    environ = base_environ(tmp, served_index.url)
    # A driver on record (no GPU here): `check` can then see it "upgraded".
    environ["TFGPU_OVERRIDE_DRIVER"] = "535.104.05"
    env = tmp / "data" / "src-env"
    code = main(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env),
                 "--json"], environ=environ)
    assert code == 0, f"provisioning the source env failed with exit {code}"
    return Provisioned(env, environ, served_index.url, tmp)


def assert_restores_exactly(env: Path, environ: Mapping[str, str], work: Path, timeout: float = 3600) -> None:
    """Export `env` (hashes looked up on the configured index), restore it into work/restored
    through the CLI as a subprocess, and check `pip freeze --all` and every nvidia library's
    sha256 are identical; then roll the restored copy back. For the real-registry e2e test
    ("a snapshot of the real stable env restores it exactly")."""
    import os

    def run(*args: str) -> Any:
        proc = subprocess.run([sys.executable, "-m", "tfgpu_install", *args, "--json"], env=dict(environ),
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        return json.loads(proc.stdout)

    work.mkdir(parents=True, exist_ok=True)
    snap = work / "snapshot.yaml"
    run("snapshot", "export", "--env", str(env), "-o", str(snap))
    target = work / "restored"
    doc = run("snapshot", "restore", str(snap), "--env", str(target), "--allow-cpu", "-y")
    assert doc["identical"] is True, doc["drift"]
    assert freeze(target) == freeze(env)
    assert lib_hashes(target) == lib_hashes(env) != {}
    run("rollback", "-y", "--env", str(target))
    assert not os.path.exists(target)
