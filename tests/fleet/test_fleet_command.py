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


def python_without_ansible(tmp_path: Path) -> str:
    """This Python, run from a bin/ that holds no ansible-playbook (the tool looks beside its Python first),
    with the test venv's packages on its path."""
    import site
    import sysconfig

    bin_dir = tmp_path / "bare" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    (tmp_path / "bare" / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).resolve().parent}\n")
    paths = [sysconfig.get_paths()["purelib"], *site.getsitepackages(), str(Path(__file__).resolve().parents[2])]
    (tmp_path / "bare" / "paths").write_text(":".join(paths))
    return str(bin_dir / "python3")


def run_cli_json(python: str, args: list[str], environ: dict[str, str], tmp_path: Path) -> tuple[int, dict]:
    import subprocess

    env = {**environ, "PYTHONPATH": (tmp_path / "bare" / "paths").read_text()}
    done = subprocess.run([python, "-m", "tfgpu_install", *args, "--json"], capture_output=True, text=True,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)
    return done.returncode, json.loads(done.stdout)


def test_without_ansible_it_says_how_to_get_it(tmp_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("node1\n")
    env = {**tmp_env, "PATH": str(tmp_path / "empty-bin")}
    python = python_without_ansible(tmp_path)
    code, doc = run_cli_json(python, ["fleet", "install", "-i", str(tmp_path / "hosts")], env, tmp_path)
    assert code == 6
    assert doc["message"].startswith("ansible-playbook is not installed")
    assert "[fleet]" in doc["hint"]
    # #43: an honest fix (no PyPI project that does not exist): ansible-core into this tool's own Python.
    assert f"{python} -m pip install 'ansible-core" in doc["hint"] and "pip install 'tfgpu-install[" not in doc["hint"]


def test_ansible_beside_the_running_python_is_found_without_path(tmp_env: dict[str, str], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """#43: the [fleet] extra inside a pipx / uv tool venv is never on PATH; it is beside the tool's Python."""
    pytest.importorskip("ansible")
    assert (Path(sys.executable).parent / "ansible-playbook").is_file()
    env = {**tmp_env, "PATH": str(tmp_path / "empty-bin"), "ANSIBLE_HOME": str(tmp_path / "ansible-home")}
    code, doc = run_json(["fleet", "status", "-i", str(tmp_path / "nope.ini")], env, capsys)
    assert (code, doc["error"]) == (5, "bad-input")  # got as far as reading the inventory


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


@pytest.mark.parametrize("args, words", [
    (["--serve-index", "0.0.0.0"], "would listen on every interface"),
    (["--serve-index", ":0"], "would listen on every interface"),
    (["--serve-index", "[::]:8080"], "would listen on every interface"),
    (["--serve-index", "10.0.0.1:99999"], "not a number from 0 to 65535"),
    (["--serve-index", "pypi.org"], "is not an IP address"),
    (["--serve-index", "10.0.0.1:-1"], "not a number from 0 to 65535"),
])
def test_the_index_address_is_checked_before_anything_runs(tmp_env: dict[str, str], args: list[str], words: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """#39: 0.0.0.0 and :0 were accepted (every interface, nodes told http://0.0.0.0:P/); port 99999 exited 1."""
    code, doc = run_json(["fleet", "install", "-i", "hosts", *args], tmp_env, capsys)
    assert code == 2 and doc["error"] in ("usage", "serve-index") and words in doc["message"], doc
    assert not (Path(tmp_env["TFGPU_STATE_DIR"]) / "fleet").exists()


def test_a_wildcard_is_taken_when_asked(tmp_env: dict[str, str], tmp_path: Path) -> None:
    """The control: with --serve-index-any the address passes (the run then stops at the missing ansible)."""
    (tmp_path / "hosts").write_text("node1\n")
    env = {**tmp_env, "PATH": str(tmp_path / "empty-bin")}
    code, doc = run_cli_json(python_without_ansible(tmp_path), ["fleet", "status", "-i", str(tmp_path / "hosts"),
                             "--serve-index", "0.0.0.0:0", "--serve-index-any"], env, tmp_path)
    assert (code, doc["error"]) == (6, "environment")


@pytest.mark.parametrize("args", [["restore", "-i", "hosts", ""], ["status", "-i", ""],
                                  ["install", "-i", "hosts", "--wheel", ""], ["install", "-i", "hosts",
                                                                             "--snapshot", " "]])
def test_an_empty_file_argument_is_a_usage_error(tmp_env: dict[str, str], args: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """#39: `fleet restore -i INV ''` exited 1 (internal error)."""
    code, doc = run_json(["fleet", *args], tmp_env, capsys)
    assert (code, doc["error"]) == (2, "usage") and "empty file name" in doc["message"]


def test_an_interrupted_run_shows_the_hosts_so_far_and_exits_130() -> None:
    """Ctrl-C mid-run (app/fleet.py returns the report so far, interrupted): every row that arrived, marked
    interrupted, exit 130; the same rows without the mark when the run was not cut off."""
    from tfgpu_install.app.fleet import FleetRun
    from tfgpu_install.commands.fleet import render
    from tfgpu_install.errors import ExitCode
    from tfgpu_install.fleet.results import host_result
    from tfgpu_install.fleet.run import FleetReport

    report = FleetReport("ansible-playbook 2.19", "status", [host_result("n1", {"result": {"changed": False}})], 0,
                         "/dev/null")
    cut = render(FleetRun(report, interrupted=True))
    assert cut.exit_code == ExitCode.INTERRUPTED
    assert cut.data["interrupted"] is True and [h["name"] for h in cut.data["hosts"]] == ["n1"]
    whole = render(FleetRun(report, interrupted=False))
    assert "interrupted" not in whole.data and whole.exit_code != ExitCode.INTERRUPTED
    assert whole.blocks == cut.blocks
