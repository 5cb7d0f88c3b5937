"""`tfgpu-install fleet` bad input: one clear error, a documented exit code, nothing half-done."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tfgpu_install.cli import main


def run_json(args: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main([*args, "--json"], environ=environ)
    return code, json.loads(capsys.readouterr().out)


def test_without_ansible_it_says_how_to_get_it(tmp_env: dict[str, str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "hosts").write_text("node1\n")
    env = {**tmp_env, "PATH": str(tmp_path / "empty-bin")}
    code, doc = run_json(["fleet", "install", "-i", str(tmp_path / "hosts")], env, capsys)
    assert code == 6
    assert doc["message"].startswith("ansible-playbook is not installed")
    assert "[fleet]" in doc["hint"]


def test_a_missing_inventory_is_bad_input(tmp_env: dict[str, str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ansible")
    env = {**tmp_env, "PATH": f"{Path(sys.executable).parent}:{tmp_env['PATH']}",
           "ANSIBLE_HOME": str(tmp_path / "ansible-home")}
    code, doc = run_json(["fleet", "status", "-i", str(tmp_path / "nope.ini")], env, capsys)
    assert (code, doc["error"]) == (5, "bad-input")
    assert "nope.ini does not exist" in doc["message"] and "-i" in doc["hint"]


def test_an_inventory_with_no_matching_host_is_bad_input(tmp_env: dict[str, str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ansible")
    (tmp_path / "hosts.ini").write_text("[gpu]\nnode1 ansible_host=10.254.77.11\n")
    env = {**tmp_env, "PATH": f"{Path(sys.executable).parent}:{tmp_env['PATH']}",
           "ANSIBLE_HOME": str(tmp_path / "ansible-home")}
    code, doc = run_json(["fleet", "status", "-i", str(tmp_path / "hosts.ini"), "--limit", "node9"], env, capsys)
    assert (code, doc["error"]) == (5, "bad-input")
    assert "matching --limit node9" in doc["message"]
    assert not (Path(tmp_env["TFGPU_STATE_DIR"]) / "fleet").exists()  # nothing started


@pytest.mark.parametrize("args, words", [
    (["--offline"], "--offline needs a snapshot"),
    (["--same", "--snapshot", "s.yaml"], "--same and --snapshot exclude each other"),
])
def test_contradictory_flags_are_usage_errors(tmp_env: dict[str, str], args: list[str], words: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(["fleet", "install", "-i", "hosts", *args], tmp_env, capsys)
    assert (code, doc["error"]) == (2, "usage") and words in doc["message"]


@pytest.mark.parametrize("args, words", [
    (["--timeout", "nan"], "'nan' is not a number of seconds"),
    (["--host-timeout", "0"], "'0' is not a number of seconds"),
    (["--timeout", "inf"], "'inf' is not a number of seconds"),
    (["--forks", "0"], "'0' is not a whole number"),
    (["--serial", "-2"], "'-2' is not a whole number"),
    (["--max-fail-percentage", "150"], "'150' is not a whole percentage"),
])
def test_bad_numbers_are_usage_errors_before_anything_runs(tmp_env: dict[str, str], args: list[str], words: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(["fleet", "install", "-i", "hosts", *args], tmp_env, capsys)
    assert (code, doc["error"]) == (2, "usage") and words in doc["message"]
    assert not (Path(tmp_env["TFGPU_STATE_DIR"]) / "fleet").exists()
