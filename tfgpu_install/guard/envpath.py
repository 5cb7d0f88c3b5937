"""One policy for env paths, checked before anything runs.

An env path ends up in LD_LIBRARY_PATH and PATH (split by the loader and the shells on ':',
and by ld.so on ';' too; ld.so expands '$ORIGIN'-style tokens), in /etc/ld.so.conf.d (one
directory per line), and in activation blocks that bash/zsh/sh, fish and tcsh/csh read with
their own quoting. Characters none of that can carry are refused with BAD_INPUT (exit 5)
naming the character: NUL, newline and every other control character, ':', ';', '$', and
'!' (csh/tcsh history expansion works even inside quotes). The env's own activate scripts are
venv's and uv's, which the user sources: a backslash ('x\\y': fish reads it as an escape in both,
and the env never activates), a double quote or a backquote (venv pastes the path unquoted: every
shell breaks on them) are refused too (tests/guard/test_envpath.py sources real ones in five
shells). Single quotes and spaces are fine: each shell's block quotes them its own way
(steps/activation.py, tfgpu_install/guard/shellquote.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from tfgpu_install.errors import BadInputError

MAX_PATH = 4000  # PATH_MAX (4096) less room for what the tool adds below the env
MAX_COMPONENT = 200  # NAME_MAX (255) less the "-<12 hex>" suffixes of state dir / conf names

_WHY = {
    ":": "the loader and the shells split LD_LIBRARY_PATH and PATH on ':'",
    ";": "the loader splits LD_LIBRARY_PATH on ';' too",
    "$": "the loader expands $ORIGIN-style tokens in LD_LIBRARY_PATH",
    "!": "csh/tcsh run history expansion on '!' even inside quotes",
    "\\": "fish reads it as an escape in venv's and uv's activate.fish: the env would never activate",
    '"': "venv writes the path into its activate scripts unquoted: no shell could activate the env",
    "`": "venv writes the path into its activate scripts unquoted: a shell would run what follows it",
}


def _name(ch: str) -> str:
    names = {"\x00": "a NUL byte", "\n": "a newline", "\r": "a carriage return", "\t": "a tab"}
    return names.get(ch, f"'{ch}'" if ch.isprintable() else f"the control character \\x{ord(ch):02x}")


def env_path_problem(path: str) -> Optional[str]:
    """None when `path` is a usable env path; else what is wrong with it (one sentence)."""
    for ch in path:
        if ord(ch) < 0x20 or ord(ch) == 0x7F or 0x80 <= ord(ch) <= 0x9F:
            return f"it contains {_name(ch)}: no loader or shell file can carry it"
        if ch in _WHY:
            return f"it contains {_name(ch)}: {_WHY[ch]}"
    try:
        size = len(os.fsencode(path))
    except UnicodeError:
        return "it is not valid text in this locale"
    if size > MAX_PATH:
        return f"it is {size} bytes long ({MAX_PATH} at most)"
    for part in path.split("/"):
        if len(os.fsencode(part)) > MAX_COMPONENT:
            return f"the name {part[:40]!r}... is {len(os.fsencode(part))} bytes long ({MAX_COMPONENT} at most)"
    return None


def check_env_path(path: "str | os.PathLike[str]") -> Path:
    """`path` as given, or BAD_INPUT (exit 5) naming the character or length that is refused."""
    text = os.fspath(path)
    problem = env_path_problem(text)
    if problem is not None:
        from tfgpu_install.guard.names import printable

        raise BadInputError(f"the env path {printable(text[:200])!r} cannot be used: {problem}",
                            "choose an env path of letters, digits, spaces, '/', '.', '-', '_'", ref="bad-env-path")
    return Path(text)


def env_path_arg(value: str) -> str:
    """argparse type for --env: an empty path is a usage error; the policy's refusal is exit 5."""
    import argparse

    if not value.strip():
        raise argparse.ArgumentTypeError("an empty path was given")
    check_env_path(os.path.abspath(os.path.expanduser(value)))
    return value


def default_env_under(base: Path, name: str, versions: Iterable[str]) -> Path:
    """<base>/<name> for a default env named from version numbers: every version must be
    PEP 440 and the result must be a direct child of base (BAD_INPUT otherwise)."""
    from tfgpu_install.guard.names import is_version, printable

    bad = [v for v in versions if not is_version(str(v))]
    target = base / name
    if bad or "/" in name or name in ("", ".", "..") or target.parent != base:
        shown = printable(str(bad[0] if bad else name)[:80])
        raise BadInputError(f"cannot name a default env from {shown!r}: not a version number",
                            "pass --env PATH to say where the env goes, or use an untouched snapshot",
                            ref="bad-snapshot")
    return check_env_path(target)


def real_env_path(env: Path) -> Path:
    """The env's real path: what the env lock is keyed by, so a symlinked parent and '//path'
    meet the same lock. Resolved as far as it exists (realpath follows every link on the way
    and keeps the rest as written); nothing is created, so a dry run or a refusal leaves no
    directory behind."""
    return Path(os.path.realpath(env))
