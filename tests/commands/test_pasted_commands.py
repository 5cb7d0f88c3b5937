"""The commands a real install prints for pasting, quoted for the user's shell ($SHELL): pasted into
that shell, the "activate with" line activates the env at a hostile path and runs nothing else
(the quoting itself, word by word in five real shells: tests/guard/test_shellquote.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.guard.test_shellquote import HOSTILE_ENV, _home, _shell
from tfgpu_install.guard.shellquote import quote


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the wheelhouse's libraries need gcc")
@pytest.mark.parametrize("name", ["bash", "fish", "tcsh"])
def test_the_install_prints_an_activate_line_for_the_users_shell(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path, name: str
) -> None:
    """#38 item 4: `done: activate with \\`. ENV/bin/activate\\`` was pasted unquoted (a path with '&'
    or '(' ran a command or failed). Now it is quoted for $SHELL, and fish/tcsh get their own script."""
    from tests.support.install_kit import cli_env, run_cli

    kind, argv = _shell(name)
    env_dir = tmp_path / "data" / HOSTILE_ENV
    environ = cli_env(tmp_env, knowledge, index.url, SHELL=f"/usr/bin/{name}", COLUMNS="400")
    done = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir)],
                   environ)
    assert done.returncode == 0, done.stderr + done.stdout
    found = re.search(r"activate with `([^`]+)`, or run anything through `([^`]+)`", done.stdout)
    assert found, done.stdout
    activate, run = found.groups()
    line = f"{activate}; {run} python -c " + quote("import sys; print(sys.prefix)", kind)
    out = subprocess.run([*argv, line], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "HOME": _home(tmp_path)})
    assert out.stdout.splitlines()[-1:] == [str(env_dir)], (line, out.stdout, out.stderr)
    assert {"activate.fish": "fish", "activate.csh": "tcsh"}.get(activate.rsplit("/", 1)[-1].strip("'"), "bash") == name
    assert json.loads(run_cli(["envs", "--json"], environ).stdout)["envs"][0]["path"] == str(env_dir)
