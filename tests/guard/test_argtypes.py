"""Every argument value is validated when the command line is parsed: a bad one is exit 2 (or 5)
with the flag named, never exit 1 from deep inside, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_tmp_env
from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode


@pytest.mark.parametrize("argv", [
    ["verify", "--burn", "inf"], ["verify", "--burn", "nan"], ["verify", "--burn", "-1"], ["verify", "--burn", "1e999"],
    ["verify", "--timeout", "nan"],
    ["fleet", "snapshot", "-i", "hosts.ini", "--timeout", "nan"],
    ["fleet", "install", "-i", "hosts.ini", "--timeout", "inf"],
    ["snapshot", "export", "-o", "/proc/x"],
    ["snapshot", "export", "-o", "/proc/self/nope/x.yaml"],
    ["snapshot", "bundle", "some-id", "-o", "/proc/x"],
    ["fleet", "snapshot", "-i", "hosts.ini", "-o", "/proc/x"],
    ["install", "--index-url", "file:///etc/passwd", "--dry-run"],
    ["install", "--index-url", "not a url", "--dry-run"],
    ["install", "--cudnn-mirror", "ftp://mirror/x", "--dry-run"],
    ["install", "--cuda-mirror", "https://", "--dry-run"],
    ["snapshot", "restore", "x.yaml", "--index-url", "http://h:port/", "--dry-run"],
    ["fleet", "install", "-i", "hosts.ini", "--index-url", "gopher://x"],
    ["install", "--backend", "conda", "--name", "n" * 250, "--dry-run"],
    ["install", "--backend", "conda", "--name", "../../x", "--dry-run"],
])
def test_bad_values_are_usage_errors_at_parse_time(tmp_path: Path, argv: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv, environ=make_tmp_env(tmp_path))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert "internal error" not in err and "error [" in err


def test_a_file_in_the_way_of_an_output_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    code = main(["snapshot", "export", "-o", str(tmp_path / "file" / "snap.yaml")], environ=make_tmp_env(tmp_path))
    assert code == ExitCode.USAGE and "not a directory" in capsys.readouterr().err


def test_good_values_parse() -> None:
    from tfgpu_install.cli import build_parser

    args = build_parser("verify").parse_args(["verify", "--burn", "30", "--timeout", "600"])
    assert args.burn == 30.0 and args.timeout == 600.0
    args = build_parser("install").parse_args(["install", "--index-url", "http://127.0.0.1:8080/simple"])
    assert args.index_url == "http://127.0.0.1:8080/simple"


@pytest.mark.parametrize("which", ["TFGPU_STATE_DIR", "TFGPU_DATA_DIR", "TFGPU_CACHE_DIR"])
def test_an_unwritable_tool_dir_is_not_exit_1(tmp_path: Path, which: str, capsys: pytest.CaptureFixture[str]) -> None:
    environ = make_tmp_env(tmp_path)
    environ[which] = "/proc/tfgpu-nope"
    code = main(["install", "--env", str(tmp_path / "env"), "--allow-cpu", "--dry-run"], environ=environ)
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    assert which in err and not (tmp_path / "env").exists()
