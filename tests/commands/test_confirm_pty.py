"""The confirmation as a user at a terminal sees it (a real pty through util-linux `script`): the plan,
the free space where the env goes, the download size, the question; answering "n" changes nothing."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.install_kit import cli_env
from tests.support.promised import require_tool


def test_the_question_shows_the_free_space_and_no_changes_nothing(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    require_tool("script", "util-linux's script gives the tool a terminal")
    env = {**cli_env(tmp_env, knowledge, index.url), "TERM": "dumb"}
    target = tmp_path / "data" / "asked"
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "tfgpu_install", "--profile", "stable",
                                                "--allow-cpu", "--python", sys.executable, "--env", str(target)])
    done = subprocess.run(["script", "-qfec", command, "/dev/null"], input="n\n", capture_output=True, text=True,
                          env=env, timeout=300)
    out = done.stdout.replace("\r", "")
    assert "Proceed? [y/N]" in out, out
    assert "disk: " in out and " free at " in out
    # the pinned wheels' size, asked of the loopback index (its PEP 503 page: the files' Content-Length)
    assert "download: " in out and "pinned wheel(s)" in out and "on disk (estimate:" in out, out
    assert "download: unknown" not in out
    assert "cancelled: nothing was changed" in out
    assert not target.exists()


def test_a_dry_run_states_the_download_and_json_asks_no_index(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    target = tmp_path / "data" / "dry"
    argv = [sys.executable, "-m", "tfgpu_install", "--profile", "stable", "--allow-cpu", "--python", sys.executable,
            "--env", str(target), "--dry-run"]
    seen = len(index.requests)
    plain = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert plain.returncode == 0, plain.stderr
    assert "download: " in plain.stdout and "pinned wheel(s)" in plain.stdout, plain.stdout
    assert len(index.requests) > seen  # the sizes came from the index, now
    seen = len(index.requests)
    as_json = subprocess.run(argv + ["--json"], capture_output=True, text=True, env=env, timeout=300)
    assert as_json.returncode == 0, as_json.stderr
    assert "download" not in as_json.stdout and len(index.requests) == seen
    assert not target.exists()
