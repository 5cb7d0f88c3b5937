"""Commands the tool prints for pasting, quoted for the user's own shell ($SHELL): each hostile word
comes back exactly from real bash, zsh, dash, fish and tcsh, and the "activate with" line of a real
install, pasted into the shell it was printed for, activates the env and runs nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.promised import require_tool
from tfgpu_install.guard.shellquote import activate_command, command, quote, shell_of

SHELLS = {"bash": ("sh", ["bash", "--norc", "-c"]), "zsh": ("sh", ["zsh", "-f", "-c"]),
          "dash": ("sh", ["dash", "-c"]), "fish": ("fish", ["fish", "--no-config", "-c"]),
          "tcsh": ("csh", ["tcsh", "-f", "-c"])}
WORDS = ["plain/path-1.0", "two words", "it's", 'a "dq"', "back\\slash", "tick`touch PWNED`", "$(touch PWNED)",
         "a;touch PWNED", "x & touch PWNED", "p|q", "(sub)", "glob*?[a]", "~user", "semi!bang", "{a,b}", "#hash", ""]


def _home(tmp_path: Path) -> str:
    """A home for the shell (fish writes ~/.config there), beside what the test looks at."""
    (tmp_path / "home").mkdir(exist_ok=True)
    return str(tmp_path / "home")


def _shell(name: str) -> tuple[str, list[str]]:
    require_tool(name, "the quoted command is run in that shell")
    return SHELLS[name]


@pytest.mark.parametrize("name", sorted(SHELLS))
def test_each_word_comes_back_exactly(tmp_path: Path, name: str) -> None:
    kind, argv = _shell(name)
    for word in WORDS:
        line = command(kind, "printf", "%s\\n", word)
        out = subprocess.run([*argv, line], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                             env={"PATH": "/usr/bin:/bin", "HOME": _home(tmp_path)})
        assert out.stdout == word + "\n", (name, word, line, out.stderr)
    assert not (tmp_path / "PWNED").exists()


def test_safe_words_stay_bare_and_the_shell_comes_from_SHELL() -> None:
    assert command("fish", "tfgpu-install", "verify", "--env", "/home/u/envs/tf-2.17") == \
        "tfgpu-install verify --env /home/u/envs/tf-2.17"
    assert quote("a b", "sh") == "'a b'"
    assert [shell_of({"SHELL": s}) for s in ("/usr/bin/fish", "/bin/tcsh", "/bin/csh", "/bin/zsh", "")] == \
        ["fish", "csh", "csh", "sh", "sh"]


HOSTILE_ENV = "tf env's (x) & y|z>w #1"


@pytest.mark.parametrize("name", sorted(SHELLS))
def test_the_activate_command_activates_a_real_venv_at_a_hostile_path(tmp_path: Path, name: str) -> None:
    kind, argv = _shell(name)
    env = tmp_path / HOSTILE_ENV
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, capture_output=True)
    line = activate_command(kind, str(env)) + "; " + command(kind, "printf", "%s\\n") + ' "$VIRTUAL_ENV"'
    out = subprocess.run([*argv, line], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin", "HOME": _home(tmp_path)})
    assert out.stdout.splitlines()[-1:] == [str(env)], (line, out.stdout, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([HOSTILE_ENV, "home"])  # nothing else ran
