"""What every command does alike: destructive commands ask unless -y, empty paths are usage
errors, Ctrl-C under --json still prints one JSON document (exit 130), and the plan says why it
chose its Python."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.faults import fault_env, wait_stopped
from tests.support.install_kit import REPO, cli_env, run_cli
from tests.support.promised import absent
from tests.support.shapes import machine
from tfgpu_install.files import tree_digest
from tfgpu_install.knowledge.load import load_knowledge, load_policy
from tfgpu_install.resolver.resolve import resolve

needs_gcc = pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")


def _install(tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path) -> tuple[Path, dict[str, str]]:
    env_dir = tmp_path / "data" / "tf-env"
    env = cli_env(tmp_env, knowledge, index.url)
    done = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable,
                    "--env", str(env_dir), "--json"], env)
    assert done.returncode == 0, done.stderr + done.stdout
    return env_dir, env


@needs_gcc
def test_rollback_asks_first_and_refuses_without_a_terminal(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env_dir, env = _install(tmp_path, tmp_env, index, knowledge)
    before = tree_digest(env_dir)
    refused = run_cli(["rollback", "--env", str(env_dir), "--json"], env)  # stdin is not a terminal, no -y
    assert refused.returncode == 2, refused.stdout
    doc = json.loads(refused.stdout)
    assert doc["error"] == "confirmation-needed" and "-y" in doc["hint"]
    assert tree_digest(env_dir) == before  # nothing was removed
    done = run_cli(["rollback", "-y", "--env", str(env_dir), "--json"], env)
    assert done.returncode == 0 and not env_dir.exists()


@pytest.mark.parametrize("args", [
    ["install", "--env", "", "-y"],
    ["rollback", "--env", ""],
    ["status", "--env", ""],
    ["snapshot", "export", "-o", ""],
    ["install", "--shell-rc", " ", "-y"],
    ["plan", "--from-nvidia-smi", ""],
])
def test_an_empty_path_is_a_usage_error_not_the_default(args: list[str], tmp_env: dict[str, str]) -> None:
    done = run_cli([*args, "--json"], dict(tmp_env, PYTHONPATH=str(REPO)))
    assert done.returncode == 2, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert "empty path" in doc["message"]


@needs_gcc
def test_ctrl_c_under_json_still_prints_one_json_document(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = fault_env(cli_env(tmp_env, knowledge, index.url), stop_at="packages.install:before")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfgpu_install", "--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable,
         "--env", str(tmp_path / "data" / "tf-env"), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_stopped(proc, "the install at packages.install:before")  # it stopped itself at the step
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C, delivered when it continues
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=1800)  # a hang guard: the rollback runs on a loaded machine
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["error"] == "interrupted" and doc["exit_code"] == 130 and "resume" in doc["hint"]


def test_plan_says_why_it_chose_its_python() -> None:
    kn = load_knowledge()
    facts = machine("550.54.14", (), pythons=("3.11.9", "3.12.4"))
    res = resolve(facts, kn, load_policy("stable", kn), allow_cpu=True)
    assert res.choice is not None and res.choice.python == "3.12"
    why = next(r for r in res.reasons if r.startswith("Python 3.12"))
    assert "the newest of the supported ones here (3.11, 3.12)" in why and "--python X.Y" in why
