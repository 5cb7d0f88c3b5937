"""`tfgpu-install completion bash|zsh|fish`: the script is sourced in the real shell and asked what
it completes after a few partial command lines (commands, actions, a command's own flags)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.promised import require_tool
from tfgpu_install.cli import main
from tfgpu_install.completion import Node, bash


def _script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def _shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        require_tool(name, f"the completion script is loaded in {name} (apt-get install {name}; .ci/run installs it)")
    return found


def test_bash_completes_commands_actions_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "c.bash"
    script.write_text(_script("bash", capsys))

    def complete(*words: str) -> list[str]:
        arr = " ".join(f"'{w}'" for w in ("tfgpu-install",) + words)
        prog = f'source {script}; COMP_WORDS=({arr}); COMP_CWORD={len(words)}; _tfgpu_install; ' \
               'printf "%s\\n" "${COMPREPLY[@]}"'
        done = subprocess.run([_shell("bash"), "--norc", "--noprofile", "-c", prog], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("ins") == ["install"]
    assert complete("sn") == ["snapshot"]
    assert set(complete("snapshot", "")) >= {"export", "restore", "list", "show", "diff", "bundle"}
    assert complete("snapshot", "restore", "--off") == ["--offline"]
    assert complete("install", "--prof") == ["--profile"]
    assert complete("install", "--profile", "stable", "--dry") == ["--dry-run"]
    assert complete("completion", "--js") == ["--json"]


def test_zsh_completes_commands_actions_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "c.zsh"
    script.write_text(_script("zsh", capsys))

    def complete(*words: str) -> list[str]:
        arr = " ".join(f"'{w}'" for w in ("tfgpu-install",) + words)
        # outside a completion widget compadd/_files cannot run: shell functions of the same name
        # (found before builtins) print what the script offers
        prog = ("compadd() { local a; for a in ${(P)2}; do [[ $a == ${words[CURRENT]}* ]] && print -r -- $a; done }; "
                f"_files() {{ :; }}; autoload -Uz compinit && compinit -u -D; source {script}; "
                f"words=({arr}); CURRENT={len(words) + 1}; _tfgpu_install")
        done = subprocess.run([_shell("zsh"), "-f", "-c", prog], capture_output=True, text=True,
                              env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("ins") == ["install"]
    assert set(complete("snapshot", "")) >= {"export", "restore", "list"}
    assert complete("snapshot", "restore", "--off") == ["--offline"]
    assert complete("install", "--prof") == ["--profile"]


def test_fish_completes_commands_actions_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "tfgpu-install.fish"
    script.write_text(_script("fish", capsys))

    def complete(line: str) -> list[str]:
        prog = f"source {script}; complete -C'{line}'"
        done = subprocess.run([_shell("fish"), "--no-config", "-c", prog], capture_output=True, text=True,
                              env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("tfgpu-install ins") == ["install"]
    assert {"export", "restore", "list"} <= set(complete("tfgpu-install snapshot "))
    assert "install" not in complete("tfgpu-install snapshot ")
    assert complete("tfgpu-install snapshot restore --off") == ["--offline"]
    assert complete("tfgpu-install install --prof") == ["--profile"]


def test_a_word_that_is_not_plain_never_reaches_a_script() -> None:
    with pytest.raises(ValueError):
        bash(Node(subs={"$(touch /tmp/x)": Node()}))
    with pytest.raises(ValueError):
        bash(Node(flags=("--ok", "--a;b")))


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "powershell"]) == 2
    assert "invalid choice" in capsys.readouterr().err
