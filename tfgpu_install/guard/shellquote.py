"""Quoting a word for each shell the tool writes to, with that shell's own rules.

bash/zsh/sh: POSIX single quotes (shlex.quote). fish: single quotes in which only `\\` and `'`
are special (written `\\\\` and `\\'`); POSIX's `'\\''` would end fish's quote early. csh/tcsh:
single quotes, `'` as `'\\''`; a newline or `!` cannot be carried (history expansion works
inside quotes), which the env-path policy (tfgpu_install/guard/envpath.py) refuses before anything runs.
"""

from __future__ import annotations

import shlex

CSH_RC_NAMES = (".tcshrc", ".cshrc", ".login", ".logout", "csh.cshrc", "csh.login")


def sh(word: str) -> str:
    return shlex.quote(word)


def fish(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"


def csh(word: str) -> str:
    if "\n" in word or "!" in word:
        raise ValueError(f"csh cannot quote {word!r}")
    return "'" + word.replace("'", "'\\''") + "'"


def kind_of_rc(name: str) -> str:
    """"fish", "csh" or "sh": which shell reads a startup file of this name."""
    if name.endswith(".fish"):
        return "fish"
    if name in CSH_RC_NAMES or name.endswith((".csh", ".tcsh")):
        return "csh"
    return "sh"
