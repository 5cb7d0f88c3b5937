"""Bounded reads: /dev/zero and a 2 GB sparse file as inputs fail cleanly (exit 5) under a memory
cap, never run the machine out of memory; every kind has a documented cap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_tmp_env
from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.guard.bounded import LIMITS, read_bytes

CAP = 1 << 30  # address space of the child: far below what reading either input whole takes

CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
from tfgpu_install.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(argv: list[str], tmp_path: Path, stdin: str = "/dev/null") -> subprocess.CompletedProcess[str]:
    env = make_tmp_env(tmp_path)
    with open(stdin, "rb") as fh:
        return subprocess.run([sys.executable, "-c", CHILD.format(cap=CAP), *argv], stdin=fh, capture_output=True,
                              text=True, env=env, cwd=Path(__file__).resolve().parents[2], timeout=300)


@pytest.fixture(scope="module")
def sparse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.yaml"
    with open(path, "wb") as fh:
        fh.truncate(2 << 30)  # 2 GB of holes: no disk used
    return path


@pytest.mark.parametrize("argv, stdin", [
    (["plan", "--from-nvidia-smi", "/dev/zero"], "/dev/null"),
    (["plan", "--from-nvidia-smi", "-"], "/dev/zero"),
    (["doctor", "--log", "/dev/zero"], "/dev/null"),
    (["doctor", "--log", "-"], "/dev/zero"),
])
def test_an_endless_input_is_bad_input_under_a_memory_cap(tmp_path: Path, argv: list[str], stdin: str) -> None:
    done = _run(argv, tmp_path, stdin)
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr[-2000:]
    assert "too large" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("argv", [
    ["snapshot", "show", "{big}"],
    ["snapshot", "restore", "{big}", "--dry-run", "--allow-cpu"],
    ["plan", "--profile", "{big}"],
    ["plan", "--from-nvidia-smi", "{big}"],
    ["doctor", "--log", "{big}"],
    ["doctor", "--rules", "{big}", "--log", "/dev/null"],
])
def test_a_2gb_sparse_file_is_bad_input_under_a_memory_cap(tmp_path: Path, sparse: Path, argv: list[str]) -> None:
    done = _run([a.format(big=sparse) for a in argv], tmp_path)
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr[-2000:]
    assert "too large" in done.stderr and str(2 << 30) in done.stderr, done.stderr[-2000:]


def test_the_cap_is_exact(tmp_path: Path) -> None:
    f = tmp_path / "smi.txt"
    f.write_bytes(b"x" * LIMITS["nvidia-smi output"])
    assert len(read_bytes(str(f), "nvidia-smi output")) == LIMITS["nvidia-smi output"]
    f.write_bytes(b"x" * (LIMITS["nvidia-smi output"] + 1))
    with pytest.raises(BadInputError):
        read_bytes(str(f), "nvidia-smi output")
