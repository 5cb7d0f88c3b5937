"""What a person sees: progress while the install runs and, at the end, what verification found.
In a terminal (a real pty), in a log (plain lines), and nothing extra under --json."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.install_kit import cli_env, run_cli
from tests.support.promised import absent

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def _args(tmp_path: Path) -> list[str]:
    return ["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable,
            "--env", str(tmp_path / "data" / "tf-env")]


def _in_pty(argv: list[str], env: dict[str, str], timeout: float = 300) -> str:
    main, sub = pty.openpty()
    proc = subprocess.Popen(argv, stdin=sub, stdout=sub, stderr=sub, env=dict(env, COLUMNS="160", TERM="xterm"),
                            close_fds=True)
    os.close(sub)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    data = os.read(main, 65536)
                except OSError:  # EIO: the other side closed
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    return ANSI.sub("", b"".join(chunks).decode(errors="replace"))


def test_a_terminal_shows_progress_then_what_verification_found(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    screen = _in_pty([sys.executable, "-m", "tfgpu_install", *_args(tmp_path)], env)
    assert "provisioning: packages.install" in screen  # the live bar named the step as it ran
    assert "installing" in screen and "requirements with" in screen
    tail = screen[screen.index("Verification"):]
    assert "CPU only (--allow-cpu): GPU not checked" in tail
    assert re.search(r"layers passed: tensorflow(;|$)", tail, re.M)  # its name, no number to misread as a count
    assert "done: activate with" in tail


def test_a_log_gets_plain_progress_lines_and_json_gets_none(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    logged = run_cli(_args(tmp_path / "a"), env)
    assert logged.returncode == 0, logged.stderr
    lines = [line for line in logged.stderr.splitlines() if line.startswith("  ... ")]
    assert "  ... provisioning: env.create: " in "\n".join(lines)
    assert any(line.startswith("  ... provisioning: verify.run: ") for line in lines)
    assert "\x1b[" not in logged.stderr  # no bar, no colour codes in a log
    quiet = run_cli([*_args(tmp_path / "b"), "--json"], env)
    assert quiet.returncode == 0 and "  ... " not in quiet.stderr
    assert json.loads(quiet.stdout)["changed"] is True
