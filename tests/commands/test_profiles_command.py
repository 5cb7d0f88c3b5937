"""`tfgpu-install profiles`: in-process and as a real subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode
from tfgpu_install.knowledge.load import profiles_dir


def test_profiles_json(capsys: Any, tmp_env: dict[str, str]) -> None:
    assert main(["profiles", "--json"], environ=tmp_env) == 0
    doc = json.loads(capsys.readouterr().out)
    names = [p["name"] for p in doc["profiles"]]
    assert names == ["stable", "latest", "legacy", "preview"]  # preview: pre-releases (issue #40)
    stable = doc["profiles"][0]
    assert stable["require_patch_release"] is True and stable["builtin"] is True
    assert "settled" in stable["rules"] and stable["source"]
    assert doc["knowledge"]["newest"] == "2.21.0" and doc["knowledge"]["oldest"] == "2.0.0"
    # the validated knowledge was cached under the state's cache dir for the next start
    assert list((Path(tmp_env["TFGPU_CACHE_DIR"]) / "knowledge").glob("*.json"))


def test_profiles_one_line_each(capsys: Any, tmp_env: dict[str, str]) -> None:
    assert main(["profiles"], environ=tmp_env) == 0
    out = capsys.readouterr().out
    for name in ("stable", "latest", "legacy"):
        assert sum(1 for ln in out.splitlines() if f" {name} " in ln) == 1, out


def test_user_policy_file_is_validated(capsys: Any, tmp_env: dict[str, str], tmp_path: Path) -> None:
    good = tmp_path / "team.yaml"
    good.write_text("name: team\ndescription: our range\nprefer: newest\nsource: us\ntensorflow: '<2.16'\n")
    assert main(["profiles", "--json", str(good)], environ=tmp_env) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profiles"][-1]["name"] == "team" and doc["profiles"][-1]["builtin"] is False
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndescription: x\nprefer: newest\nsource: us\nmin_age_days: soon\n")
    assert main(["profiles", "--json", str(bad)], environ=tmp_env) == ExitCode.BAD_INPUT
    err = json.loads(capsys.readouterr().out)
    assert err["error"] == "bad-input" and "bad.yaml:5: min_age_days" in err["message"]


def test_profiles_dir_override(capsys: Any, tmp_env: dict[str, str], tmp_path: Path) -> None:
    d = tmp_path / "site"
    shutil.copytree(profiles_dir(), d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (d / "drivers.yaml").write_text("cuda: [{cuda: 12.2, min_driver: '535.54.03', source: x}]\n")
    env = dict(tmp_env, TFGPU_PROFILES_DIR=str(d))
    assert main(["profiles"], environ=env) == ExitCode.BAD_INPUT
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "drivers.yaml:1: cuda[0].cuda: expected a version string" in err
    assert 'quote it: "12.2"' in err


def test_profiles_subprocess(tmp_env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tfgpu_install", "profiles", "--json"],
        capture_output=True, text=True, env=tmp_env, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert {p["name"] for p in json.loads(out.stdout)["profiles"]} == {"stable", "latest", "legacy", "preview"}


def test_profiles_names_a_format_file_that_exists(capsys: Any, tmp_env: dict[str, str]) -> None:
    """Issue #43: it named `profiles/stable.yaml`, a path a wheel user does not have; now the built-in
    stable policy's own file, wherever the tool is installed."""
    import re

    assert main(["profiles"], environ=tmp_env) == 0
    out = capsys.readouterr().out
    path = re.search(r"format: (\S+stable\.yaml)", " ".join(out.split()))
    assert path is not None and Path(path.group(1)).is_absolute() and Path(path.group(1)).is_file()


@pytest.mark.parametrize("name, close", [("stabel", "stable"), ("latets", "latest"), ("qwerty", None)])
def test_an_unknown_profile_is_a_usage_error_with_the_closest_name(name: str, close: Optional[str], capsys: Any,
                                                                   tmp_env: dict[str, str]) -> None:
    """Issue #43: `--profile stabel` exited 5 (bad input file) instead of 2 (the command line)."""
    assert main(["plan", "--profile", name, "--assume-driver", "535.104.05", "--assume-gpu", "Tesla T4",
                 "--json"], environ=tmp_env) == ExitCode.USAGE
    doc = json.loads(capsys.readouterr().out)
    assert (f"did you mean '{close}'?" in doc["message"]) == bool(close)
