"""Dry runs and plans list every package they add, change or remove, with versions; a re-install that
changes a package the user put in the env says so (#43 items 6, 7). Real envs from the local wheelhouse,
real uv: `add six --dry-run` prints six with its version and changes nothing; an install's dry run into a
new env lists TensorFlow and everything it pulls in; after the user installs protobuf 5 (outside
TensorFlow's <5), the install's dry run says it will move it back and the -y run says it did."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any, Iterator

import pytest

from tests.support.install_kit import computing_wheelhouse, run_cli
from tests.support.restore_kit import Provisioned, base_environ, cli, freeze, needs_gcc
from tests.support.wheelhouse import WheelSpec
from tfgpu_install.cli import main

pytestmark = needs_gcc

SIX = WheelSpec("six", "1.17.0", {"six.py": b'__version__ = "1.17.0"\n'})


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wh: Any = computing_wheelhouse(tmp_path_factory.mktemp("wheelhouse-plan"), extra_specs=[SIX])
    with wh.serve() as srv:
        yield srv


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, index: Any) -> Provisioned:
    tmp = tmp_path_factory.mktemp("plan")
    environ = base_environ(tmp, index.url)
    env = tmp / "data" / "tf"
    code = main(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env), "--json"],
                environ=environ)
    assert code == 0
    return Provisioned(env, environ, index.url, tmp)


def test_add_dry_run_prints_the_package_with_its_version(
    installed: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    before = freeze(installed.env)
    shown = run_cli(["add", "six", "--dry-run", "--env", str(installed.env)], installed.environ)
    assert shown.returncode == 0, shown.stderr
    assert "packages: 1 to add" in shown.stdout and re.search(r"\+\s+six\s+-\s+1\.17\.0", shown.stdout), shown.stdout
    code, doc = cli(["add", "six", "--dry-run", "--env", str(installed.env)], installed.environ, capsys)
    assert code == 0 and doc["packages"]["added"] == ["six==1.17.0"] and doc["packages"]["changed"] == []
    assert freeze(installed.env) == before  # a dry run


def test_an_install_dry_run_lists_everything_a_new_env_gets(
    installed: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    new = installed.tmp / "data" / "never-made"
    code, doc = cli(["--profile", "stable", "--allow-cpu", "--python", sys.executable, "--env", str(new),
                     "--dry-run"], installed.environ, capsys)
    assert code == 0 and not new.exists()
    added = doc["packages"]["added"]
    assert {"tensorflow==2.99.0", "numpy==1.26.4", "nvidia-cudnn-cu12==9.1.0.70", "absl-py==2.1.0"} <= set(added)
    assert doc["packages"]["changed"] == doc["packages"]["removed"] == []


def test_a_reinstall_says_which_of_the_envs_packages_it_changes(
    installed: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    def users_protobuf() -> None:  # the user's own pip install moves protobuf out of TensorFlow's range (<5)
        subprocess.run([sys.executable, "-m", "uv", "pip", "install", "-q", "--python",
                        str(installed.env / "bin/python"), "--index-url", installed.index_url, "protobuf==5.0.0"],
                       check=True, capture_output=True)

    users_protobuf()
    args = ["--profile", "stable", "--allow-cpu", "--python", sys.executable, "--env", str(installed.env)]
    before = run_cli([*args, "--dry-run"], installed.environ)
    assert before.returncode == 0, before.stderr
    assert "this changes packages the env has now" in before.stdout and "protobuf: 5.0.0 -> 4.25.9" in before.stdout
    assert re.search(r"~\s+protobuf\s+5\.0\.0\s+4\.25\.9", before.stdout), before.stdout
    done = run_cli([*args, "-y"], installed.environ)  # nobody is asked: it says so after
    assert done.returncode == 0, done.stderr
    assert "changed packages the env had" in done.stdout and "protobuf: 5.0.0 -> 4.25.9" in done.stdout
    assert "protobuf==4.25.9" in freeze(installed.env)
    users_protobuf()
    code, doc = cli([*args, "-y"], installed.environ, capsys)
    assert code == 0 and doc["changed"] is True, doc
    assert doc["packages"]["changed"] == [{"name": "protobuf", "from": "5.0.0", "to": "4.25.9"}]
    again = run_cli([*args, "-y"], installed.environ)  # a no-op now: nothing changed, nothing to say
    assert again.returncode == 0 and "changed packages the env had" not in again.stdout
