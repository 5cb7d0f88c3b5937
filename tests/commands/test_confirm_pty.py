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
    # the wheels' size, asked of the loopback index (its PEP 503 page: the files' Content-Length), less
    # what uv's cache holds (the session's cache: some or all of them)
    flat = " ".join(out.split())  # the terminal folds long lines
    assert "download: " in flat and "wheel(s)" in flat and "on disk (estimate:" in flat, out
    assert "download: unknown" not in out
    assert "cancelled: nothing was changed" in out
    assert not target.exists()


def test_a_dry_run_states_the_download_and_json_asks_no_index(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """With a cold uv cache every wheel is a download; once an install has filled the cache, another env's
    dry run says nothing is to download and no new space beyond links (#43 item 4: a warm cache's
    confirmation said "download: 2.3 GiB ... ~4.7 GiB on disk" while 77 MiB were fetched)."""
    env = cli_env(tmp_env, knowledge, index.url, UV_CACHE_DIR=str(tmp_path / "fresh-uv-cache"))

    def dry(name: str, *more: str) -> "subprocess.CompletedProcess[str]":
        argv = [sys.executable, "-m", "tfgpu_install", "--profile", "stable", "--allow-cpu", "--python",
                sys.executable, "--env", str(tmp_path / "data" / name), "--dry-run", *more]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        return done

    seen = len(index.requests)
    cold = dry("first").stdout
    assert "download: " in cold and "wheel(s) not in uv's cache" in cold and "in it already" not in cold, cold
    assert len(index.requests) > seen  # the sizes came from the index, now
    seen = len(index.requests)
    assert "download" not in dry("first", "--json").stdout and len(index.requests) == seen
    installed = subprocess.run([sys.executable, "-m", "tfgpu_install", "--profile", "stable", "--allow-cpu",
                                "--python", sys.executable, "--env", str(tmp_path / "data" / "first"), "-y"],
                               capture_output=True, text=True, env=env, timeout=600)
    assert installed.returncode == 0, installed.stderr
    warm = dry("second").stdout
    assert "download: none (all " in warm and "wheel(s) are in uv's cache); ~0 B more on disk" in warm, warm
    assert not (tmp_path / "data" / "second").exists()
