"""One trust rule for every file the tool reads back from its own state, cache and data dirs
(journal, env registry, knowledge cache, memo files, downloads): the file and every directory
from it up to the tool's dir are owned by this user and writable by no one else. A journal that
another user can write would let them choose what `rollback` deletes; a cache file, which pins
an install uses. Anything else is refused (ENVIRONMENT, exit 6) with what to fix; never followed.

dirs.writable_only_by_me is the rule for one stat result (kept code, shared bytecode use it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

from tfgpu_install.dirs import writable_only_by_me
from tfgpu_install.errors import EnvironmentProblem


def problem(path: Path, root: Path) -> Optional[str]:
    """None when `path` (if it exists) and the dirs from it up to `root` pass the rule; else why not.
    A missing file is no problem (nothing to believe); a symlink is judged by its own owner; a
    dir writable by this user's private group (umask 002) is still only this user's."""
    path = Path(os.path.abspath(path))
    root = Path(os.path.abspath(root))
    if not os.path.lexists(path):
        return None  # nothing there to believe
    chain = [path]
    if path != root and root in path.parents:
        here = path.parent
        while True:
            chain.append(here)
            if here == root:
                break
            here = here.parent
    for item in chain:
        try:
            st = os.lstat(item)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"{item} cannot be examined ({exc.strerror or exc})"
        if st.st_uid != os.getuid():
            return f"{item} is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
        if not writable_only_by_me(st) and not stat.S_ISLNK(st.st_mode) and not _private_group_write(st):
            kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
            return f"the {kind} {item} is writable by {'others' if st.st_mode & 0o002 else 'its group'} " \
                   f"(mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _private_group_write(st: os.stat_result) -> bool:
    """Group-writable, but the group is this user's own private group (named as the user, no
    other members): what a umask of 002 gives on Debian/Ubuntu, and no one else can write."""
    if st.st_mode & 0o002 or st.st_gid != os.getgid():
        return False
    import grp
    import pwd

    try:
        group = grp.getgrgid(st.st_gid)
        user = pwd.getpwuid(os.getuid())
    except KeyError:
        return False
    return group.gr_name == user.pw_name and not [m for m in group.gr_mem if m != user.pw_name]


def require(path: Path, root: Path, what: str) -> None:
    """ENVIRONMENT (exit 6) unless `path` passes the rule (see problem())."""
    why = problem(path, root)
    if why is not None:
        raise EnvironmentProblem(
            f"refusing to read {what} {path}: {why}; another user could have written it",
            f"check it, then make it yours and private (chown -R $(id -u) {root}; chmod -R go-w {root}), "
            "or move it away",
            ref="untrusted-file",
        )
