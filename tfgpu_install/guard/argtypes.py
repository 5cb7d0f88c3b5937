"""argparse types that validate a value when the command line is parsed, so a bad value is a
usage error (exit 2) or BAD_INPUT (exit 5) naming the flag's problem before anything runs,
never exit 1 from deep inside: finite numbers in range, index/mirror URLs, writable outputs."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable, Optional

from tfgpu_install.guard.names import index_url_problem, printable

MAX_OUTPUT = 4000  # PATH_MAX less room


def seconds(low: float, high: float) -> Callable[[str], float]:
    """A finite number of seconds in [low, high] ('inf', 'nan', '1e999' are refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{printable(text[:40])!r} is not a number of seconds") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{printable(text[:40])!r}: give a number of seconds from {low:g} to {high:g}")
        return value

    return parse


def url(text: str) -> str:
    """An index or mirror URL the user names: http(s) with a host, no spaces or control characters."""
    problem = index_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{printable(text[:200])!r} is not a usable URL: {problem}")
    return text


def env_name(text: str) -> str:
    """A named conda env (--name): a plain name of at most 100 characters (it becomes a dir
    name under conda's envs dir and is written into activation commands)."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", text):
        raise argparse.ArgumentTypeError(
            f"{printable(text[:60])!r}{'...' if len(text) > 60 else ''}: an env name is 1-100 letters, digits, "
            "'.', '-', '_' (starting with a letter or digit)")
    return text


MAX_PATH = 4095  # PATH_MAX less its NUL
MAX_NAME = 255  # NAME_MAX


def path_problem(text: str) -> Optional[str]:
    """None when `text` can name a file here; else why not: empty, a NUL, not UTF-8 (the tool
    writes paths into JSON and shell files), longer than the kernel takes (ENAMETOOLONG, which
    Path.exists() raises instead of answering)."""
    if not text.strip():
        return "an empty path was given"
    if "\x00" in text:
        return "the path contains a NUL byte"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{printable(text[:60].encode('utf-8', 'backslashreplace').decode())!r} is not valid UTF-8 text"
    full = os.fsencode(os.path.abspath(os.path.expanduser(text)))
    if len(full) > MAX_PATH:
        return f"the path is {len(full)} bytes long ({MAX_PATH} at most)"
    longest = max((len(part) for part in full.split(b"/")), default=0)
    if longest > MAX_NAME:
        return f"a name in the path is {longest} bytes long ({MAX_NAME} at most)"
    return None


def path(text: str) -> str:
    """argparse type for a path the command reads (or an id that may be a file): a usage error
    (exit 2) naming the problem when it cannot be a path, never an internal error later."""
    problem = path_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{printable(text[:60])!r}{'...' if len(text) > 60 else ''}: {problem}"
                                         if text.strip() else problem)
    return text


def output(text: str) -> str:
    """A path the command will write (a file, or a dir it creates): the nearest existing dir
    above it must be a directory this user can create files in, tried with an unnamed temp file
    (so /proc/x, a read-only mount, or a file in the way are refused at parse time)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path was given")
    path = Path(os.path.abspath(os.path.expanduser(text)))
    if len(os.fsencode(str(path))) > MAX_OUTPUT or any(len(os.fsencode(p)) > 255 for p in path.parts):
        raise argparse.ArgumentTypeError(f"{printable(text[:60])!r}...: the path is too long")
    if "\x00" in text:
        raise argparse.ArgumentTypeError("the path contains a NUL byte")
    problem = creatable(path.parent)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"cannot write {printable(text)}: {problem}")
    return text


def creatable(directory: Path) -> Optional[str]:
    """None when `directory` exists and takes new files, or its nearest existing ancestor does
    (so it can be created); else why not. Tried with an unnamed temp file, nothing is left."""
    import tempfile

    here = Path(os.path.abspath(directory))
    while not here.exists() and here != here.parent:
        here = here.parent
    if not here.is_dir():
        return f"{here} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=here):
            pass
    except OSError as exc:
        return f"{here} does not take new files ({exc.strerror or exc})"
    return None


def check_tool_dirs(state: Path, cache: Path, data: Path) -> None:
    """The tool's own dirs can be written (checked before the first change, also in a dry run):
    BAD_INPUT (exit 5) naming the variable that moves the one that cannot."""
    from tfgpu_install.errors import BadInputError

    for var, path in (("TFGPU_STATE_DIR", state), ("TFGPU_CACHE_DIR", cache), ("TFGPU_DATA_DIR", data)):
        problem = creatable(path)
        if problem is not None:
            raise BadInputError(f"the tool's directory {path} cannot be written: {problem}",
                                f"set {var} to a directory you can write (or fix the permissions of {path})",
                                ref="tool-dir-unwritable")
