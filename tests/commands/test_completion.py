"""`tfgpu-install completion bash|zsh|fish`, in the real shells (#43 item 9): the script (argcomplete's) is
loaded in each shell, which then runs the real `tfgpu-install` (a wrapper around this checkout) to ask
what completes a partial command line, as on a user's TAB. The answers come from the parser itself:
commands, actions, flags, the README's implied install (`tfgpu-install --profile <TAB>`), and values:
profile names, `--tensorflow` release lines from the knowledge tables, the envs this tool made, stored
snapshot ids. The static table it replaced completed none of the values and not the implied form."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.promised import require_tool
from tfgpu_install.cli import main
from tfgpu_install.completion import implied_install

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT_ID = "20261201T000000Z-known-good-1a2b3c"


def _shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        require_tool(name, f"the completion script is loaded in {name} (apt-get install {name}; .ci/run installs it)")
    return str(found)


@pytest.fixture
def machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """A user's environment: `tfgpu-install` on PATH (this checkout), a default env, a stored snapshot."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "tfgpu-install"
    tool.write_text(f"#!/bin/sh\nexec {sys.executable} -m tfgpu_install \"$@\"\n")
    tool.chmod(0o755)
    home, state = tmp_path / "home", tmp_path / "state"
    env = home / "envs" / "tf"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").touch()
    (state / "snapshots").mkdir(parents=True)
    (state / "snapshots" / f"{SNAPSHOT_ID}.yaml").write_text("format: 2\n")
    (state / "last-env").write_text(f"{env}\n")
    environ = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(REPO),
               "TFGPU_STATE_DIR": str(state), "TFGPU_CACHE_DIR": str(tmp_path / "cache"),
               "TFGPU_DATA_DIR": str(tmp_path / "data"), "TERM": "dumb"}
    scripts = {}
    for shell in ("bash", "zsh", "fish"):
        assert main(["completion", shell]) == 0
        scripts[shell] = tmp_path / f"tfgpu-install.{shell}"
        scripts[shell].write_text(capsys.readouterr().out)
    return {"environ": environ, "scripts": scripts, "env": env, "home": home}


def _bash(machine: dict[str, object], line: str) -> list[str]:
    script = machine["scripts"]["bash"]  # type: ignore[index]
    prog = f"""source {script}
COMP_LINE={_sh(line)}; COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
_python_argcomplete tfgpu-install "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    return _run([_shell("bash"), "--norc", "--noprofile", "-c", prog], machine)


def _zsh(machine: dict[str, object], line: str) -> list[str]:
    script = machine["scripts"]["zsh"]  # type: ignore[index]
    # Outside a completion widget zsh's _describe cannot draw: a function of that name (found before the
    # completion system's) prints the values the script hands it ("value:description").
    prog = (f"autoload -Uz compinit is-at-least && compinit -u -D; source {script}; "
            "_describe() { local c; for c in ${(P)2}; do print -r -- ${c%%:*}; done }; "
            f"BUFFER={_sh(line)}; CURSOR=${{#BUFFER}}; words=(${{(z)BUFFER}}); _python_argcomplete")
    return _run([_shell("zsh"), "-f", "-c", prog], machine)


def _fish(machine: dict[str, object], line: str) -> list[str]:
    script = machine["scripts"]["fish"]  # type: ignore[index]
    out = _run([_shell("fish"), "--no-config", "-c", f"source {script}; complete -C {_sh(line)}"], machine)
    return [row.split("\t")[0] for row in out]


def _run(argv: list[str], machine: dict[str, object]) -> list[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env=dict(machine["environ"]))  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


SHELLS = {"bash": _bash, "zsh": _zsh, "fish": _fish}


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_each_shell_completes_from_the_parser_with_values(shell: str, machine: dict[str, object]) -> None:
    ask = SHELLS[shell]
    env = str(machine["env"])
    assert ask(machine, "tfgpu-install ins") == ["install"]
    assert {"export", "restore", "list", "show"} <= set(ask(machine, "tfgpu-install snapshot "))
    assert "--offline" in ask(machine, "tfgpu-install snapshot restore --off")
    # the README's own form: install implied
    assert set(ask(machine, "tfgpu-install --profile ")) >= {"stable", "latest", "legacy"}
    assert ask(machine, "tfgpu-install --prof") == ["--profile"]
    assert ask(machine, "tfgpu-install --profile stable --dry") == ["--dry-run"]
    # values
    assert {"2.17", "2.17.1", "2.17.0"} <= set(ask(machine, "tfgpu-install install --tensorflow 2.17"))
    assert ask(machine, "tfgpu-install snapshot show 2026") == [SNAPSHOT_ID]
    assert ask(machine, "tfgpu-install rollback --to 2026") == [SNAPSHOT_ID]
    assert env in ask(machine, "tfgpu-install status --env ")
    assert env in ask(machine, "tfgpu-install envs remove /")
    assert "~/envs/tf" in ask(machine, "tfgpu-install verify --env ~/")


def test_the_implied_install_is_found_where_it_begins() -> None:
    top, commands = ["-h", "--help", "--json", "--debug", "--version"], ["install", "snapshot", "status"]
    prog = ["tfgpu-install"]
    assert implied_install(prog + ["--profile"], "", top, commands) == prog + ["install", "--profile"]
    assert implied_install(prog + ["--json", "--profile"], "", top, commands) == prog + ["--json", "install",
                                                                                      "--profile"]
    assert implied_install(prog, "--prof", top, commands) == prog + ["install"]
    # controls: a command named, a global flag being typed, nothing yet
    assert implied_install(prog + ["snapshot"], "", top, commands) == prog + ["snapshot"]
    assert implied_install(prog, "--js", top, commands) == prog
    assert implied_install(prog, "", top, commands) == prog
    assert implied_install(prog + ["--help"], "", top, commands) == prog + ["--help"]


def test_the_command_prints_the_script_and_refuses_another_shell(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert "_python_argcomplete" in capsys.readouterr().out
    assert main(["completion", "powershell"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_completion_request_prints_nothing_but_its_answer(tmp_path: Path) -> None:
    """What the shell reads (fd 8) is the answer; stdout and stderr stay empty (no banner, no error)."""
    answer = tmp_path / "answer"
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "_ARGCOMPLETE": "1",
               "COMP_LINE": "tfgpu-install snap", "COMP_POINT": "18", "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
               "TFGPU_STATE_DIR": str(tmp_path / "s"), "TFGPU_CACHE_DIR": str(tmp_path / "c")}
    done = subprocess.run([sys.executable, "-m", "tfgpu_install"], env=environ, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert answer.read_text().split("\013") == ["snapshot "]  # a unique match: the space the shell adds
