"""`tfgpu-install cluster` bad input: one readable error, a documented exit code, nothing submitted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfgpu_install.cli import main


def run_json(args: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main([*args, "--json"], environ=environ)
    return code, json.loads(capsys.readouterr().out)


def test_a_shared_path_that_is_not_a_directory(tmp_env: dict[str, str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(["cluster", "slurm", "--shared", str(tmp_path / "nope")], tmp_env, capsys)
    assert (code, doc["error"]) == (5, "bad-input") and "not a directory" in doc["message"]


def test_without_slurm_it_says_where_to_run(tmp_env: dict[str, str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    env = {**tmp_env, "PATH": str(tmp_path / "empty-bin")}
    shared = tmp_path / "shared"
    shared.mkdir()
    code, doc = run_json(["cluster", "slurm", "--shared", str(shared)], env, capsys)
    assert code == 6 and "sinfo is not installed" in doc["message"] and "login node" in doc["hint"]
    assert list(shared.iterdir()) == []  # nothing written on the shared path


@pytest.mark.parametrize("args, words", [
    (["--job-env", "NOEQUALS"], "is not KEY=VALUE"),
    (["--job-env", "BAD-NAME=x"], "is not KEY=VALUE"),
    (["--wait", "nan"], "not a number of seconds"),
    (["--gpus", "0"], "not a whole number"),
    (["--same", "--snapshot", "s.yaml"], "exclude each other"),
    (["--job-prefix", "'unclosed"], "--job-prefix"),
])
def test_bad_flags_are_usage_errors(tmp_env: dict[str, str], tmp_path: Path, args: list[str], words: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(["cluster", "slurm", "--shared", str(tmp_path), *args], tmp_env, capsys)
    assert (code, doc["error"]) == (2, "usage") and words in doc["message"], doc
