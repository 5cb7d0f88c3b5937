"""`completion SHELL`: the shell's completion script, argcomplete's own, registered for tfgpu-install.

The script only wires the shell to the tool: on each TAB it runs `tfgpu-install` again, and the answers
come from the parser itself (tfgpu_install/completion.py)."""

from __future__ import annotations

from dataclasses import dataclass

PROG = "tfgpu-install"
SHELLS = ("bash", "fish", "zsh")


@dataclass(frozen=True)
class Script:
    """The completion script for one shell (commands/completion.py prints it)."""

    shell: str
    text: str


def script(shell: str) -> Script:
    from argcomplete.shell_integration import shellcode  # only this command needs it

    return Script(shell, str(shellcode([PROG], shell=shell)))
