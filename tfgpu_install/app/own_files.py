"""What `self uninstall` may remove from each of the tool's dirs: only what the tool wrote.

Each dir (state, cache, data) is ours whole when it carries the tool's name (the XDG default,
`.../tfgpu-install`) or when every entry in it is one the tool writes (the table below): then
each entry goes and the emptied dir with it. A dir the user pointed the tool at that holds
other things (TFGPU_DATA_DIR=~/.local/share) is never removed: only the entries the tool wrote
there, each recognised by its name and its contents (a generic name such as `downloads` only when
every file in it is one of ours), go. `envs` under the data dir is never removed whole: the envs
in it go through their journals (`--envs`), and it goes only once empty.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Mapping

Check = Callable[[Path], bool]


def _children_match(pattern: str, dirs: bool = False) -> Check:
    rx = re.compile(pattern)

    def check(path: Path) -> bool:
        try:
            names = os.listdir(path)
        except OSError:
            return False
        return all(rx.fullmatch(n) and (not dirs or os.path.isdir(path / n)) for n in names)

    return check


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _last_env(path: Path) -> bool:
    try:
        text = path.read_text(errors="replace") if _is_file(path) and path.stat().st_size < 8192 else ""
    except OSError:
        return False
    return text.count("\n") <= 1 and os.path.isabs(text.strip())


def _tool_venv(path: Path) -> bool:
    """scripts/install's venv: a venv whose bin holds the tool's command."""
    return (path / "pyvenv.cfg").is_file() and (path / "bin" / "tfgpu-install").exists()


_ENV_KEY = r".+-[0-9a-f]{12}"
_HEX = r"[0-9a-f]{16,64}"

# name -> how an entry of that name written by the tool looks (for a dir shared with other things)
OWN: Mapping[str, Mapping[str, Check]] = {
    "state": {
        "last-env": _last_env,
        "envs": _children_match(_ENV_KEY, dirs=True),
        "snapshots": _children_match(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.yaml|\..*\.tmp"),
        "noop": _children_match(r"[0-9a-f]{40}\.json|\..*\.tmp"),
        "quarantine": _children_match(_ENV_KEY, dirs=True),
        "knowledge": _children_match(r"learned\.yaml|\..*\.tmp"),
        "fleet": lambda p: (p / "reported-runs.json").exists() or (p / "results").is_dir(),
    },
    "cache": {
        "downloads": _children_match(rf"{_HEX}(\.part)?|\..*\.tmp"),
        "knowledge": _children_match(r"[0-9a-f]{8}-[0-9]+\.json|\..*\.tmp"),
        "interpreters.json": _is_file,
        "library-loads.json": _is_file,
        "fleet-wheel": _children_match(_HEX, dirs=True),
        "fleet-mirror": lambda p: True,  # the name is the tool's own
        # "keras" (KERAS_HOME during verify) and "rattler" (py-rattler's cache) are names other tools
        # use in a shared cache dir (pixi keeps ~/.cache/rattler): only in a dir that is ours whole.
        "keras": lambda p: False,
        "rattler": lambda p: False,
    },
    "data": {
        "tool": _tool_venv,
        "envs": lambda p: False,  # never whole: its envs go through their journals, then it if empty
    },
}
_TEMP = re.compile(r"\.(.+)\.[^.]*\.tmp")  # atomic_write's leftovers beside a name of ours


def ours_whole(kind: str, directory: Path) -> bool:
    """The dir carries the tool's name, or holds nothing but what the tool writes."""
    if directory.name == "tfgpu-install":
        return True
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    return all(_known(kind, n) for n in names)


def _known(kind: str, name: str) -> bool:
    m = _TEMP.fullmatch(name)
    return name in OWN[kind] or bool(m and m.group(1) in OWN[kind])


def own_entries(kind: str, directory: Path) -> list[Path]:
    """The entries of the dir the tool wrote, each recognised by name and contents; in a dir that
    is ours whole, every entry but the data dir's `envs`."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    whole = ours_whole(kind, directory)
    out = []
    for name in names:
        path = directory / name
        if kind == "data" and name == "envs":
            continue
        if path.is_symlink():
            if whole:
                out.append(path)  # a link is removed itself, never followed
            continue
        m = _TEMP.fullmatch(name)
        if whole or (name in OWN[kind] and OWN[kind][name](path)) or (m and m.group(1) in OWN[kind]):
            out.append(path)
    return out
