"""Quoting a word for each shell the tool writes to, with that shell's own rules.

bash/zsh/sh: POSIX single quotes (shlex.quote). fish: single quotes in which only `\\` and `'`
are special (written `\\\\` and `\\'`); POSIX's `'\\''` would end fish's quote early. csh/tcsh:
single quotes, `'` as `'\\''`; a newline or `!` cannot be carried (history expansion works
inside quotes), which the env-path policy (tfgpu_install/guard/envpath.py) refuses before anything runs.

Commands the tool prints for the user to paste (`command`, `activate_command`) are quoted for the
user's own shell, read from $SHELL (fish, csh/tcsh, else POSIX: bash, zsh, dash, ksh); a word of
only safe characters is left bare, which reads the same in all of them.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Mapping, Protocol, Union


class _HasEnviron(Protocol):
    """The Context, seen only for its environment ($SHELL): guard sits below the context."""

    @property
    def environ(self) -> Mapping[str, str]: ...


Where = Union[_HasEnviron, Mapping[str, str], str]

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


_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")  # the same word, unquoted, in sh, fish and csh


def shell_of(environ: Mapping[str, str]) -> str:
    """"fish", "csh" or "sh": the kind of the user's login shell ($SHELL; sh when unknown)."""
    name = os.path.basename(environ.get("SHELL") or "")
    if name == "fish":
        return "fish"
    if name in ("csh", "tcsh"):
        return "csh"
    return "sh"


def quote(word: str, kind: str = "sh") -> str:
    """`word` as one word of that kind of shell."""
    if _SAFE.fullmatch(word):
        return word
    if kind == "fish":
        return fish(word)
    if kind == "csh":
        if "\n" in word:
            return sh(word)  # csh cannot carry a newline in a word at all; the tool refuses such env paths
        # '!' is history expansion even inside quotes: a backslash outside them makes it literal.
        return "\\!".join(csh(part) for part in word.split("!"))
    return sh(word)


def _kind(where: Where) -> str:
    if isinstance(where, str):
        return where
    return shell_of(where if isinstance(where, Mapping) else where.environ)


def command(where: Where, *words: str) -> str:
    """A command line to paste into the user's shell, each word quoted for it. `where`: the
    Context (its environ's $SHELL), an environ, or a shell kind ("sh", "fish", "csh")."""
    kind = _kind(where)
    return " ".join(quote(w, kind) for w in words)


def activate_command(where: Where, env: str, backend: str = "venv") -> str:
    """How to activate `env` in the user's shell: conda's own command for a conda env, else the
    activate script that venv/uv wrote for that shell."""
    kind = _kind(where)
    if backend == "conda":
        return command(kind, "conda", "activate", env)
    if kind == "fish":
        return command(kind, "source", os.path.join(env, "bin", "activate.fish"))
    if kind == "csh":
        return command(kind, "source", os.path.join(env, "bin", "activate.csh"))
    return command(kind, ".", os.path.join(env, "bin", "activate"))


def prepend(where: Where, var: str, value: str) -> str:
    """Put `value` first on a ':'-list variable (PATH, LD_LIBRARY_PATH), in the user's shell."""
    kind = _kind(where)
    if kind == "fish":
        if var == "PATH":  # fish's PATH is a list
            return f"set -gx PATH {quote(value, kind)} $PATH"
        return f'set -gx {var} {quote(value, kind)}":${var}"'
    if kind == "csh":
        return f'setenv {var} {quote(value, kind)}":${var}"'
    return f"export {var}={quote(value, kind)}:${var}"
