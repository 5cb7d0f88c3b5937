"""Releases learned from the package index: the overlay file in the user's state dir, how it is
trusted, and how it joins the curated tables.

The overlay is matrix.yaml's format (validated by the same schema), written by
`tfgpu-install knowledge update`; each row says "learned, not curated" with its source and date.
It is believed only when this user owns it, no one else may write it, it is a regular file of at
most MAX_BYTES, and it parses strictly; otherwise it is refused with one message and the fix.
A learned release never replaces a curated row of the same version.
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from tfgpu_install.dirs import writable_only_by_me
from tfgpu_install.errors import BadInputError
from tfgpu_install.guard.shellquote import command
from tfgpu_install.knowledge.model import Knowledge, Release, release_key

if TYPE_CHECKING:
    from tfgpu_install.knowledge.wheelfacts import LearnedRow

FILE_NAME = "learned.yaml"
MAX_BYTES = 1 << 20
LEARNED_NOTE = "learned, not curated"


def overlay_path(state_dir: Path) -> Path:
    return Path(state_dir) / "knowledge" / FILE_NAME


def _refuse(path: Path, why: str) -> BadInputError:
    return BadInputError(
        f"{path}: learned knowledge refused: {why}",
        hint=f"remove it (`{command('sh', 'rm', str(path))}`) and run `tfgpu-install knowledge update` again",
        ref="learned-knowledge",
    )


def read_overlay(path: Path) -> tuple[Release, ...]:
    """The learned releases in `path` (none when there is no file). Raises BadInputError when the file
    is not one this user alone can have written, is too large, or is not a valid matrix."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise _refuse(path, f"cannot open it ({exc.strerror}; a symlink is never followed)") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "not a regular file")
        if not writable_only_by_me(st):
            raise _refuse(path, "not owned by this user, or writable by others")
        if st.st_size > MAX_BYTES:
            raise _refuse(path, f"{st.st_size} bytes (at most {MAX_BYTES})")
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise _refuse(path, f"more than {MAX_BYTES} bytes")
    return _parse(path, data)


def _parse(path: Path, data: bytes) -> tuple[Release, ...]:
    import tempfile

    from tfgpu_install.knowledge.schema import parse_matrix

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(path, "not UTF-8 text") from exc
    # parse_matrix reads a path: hand it a private copy of exactly the bytes checked above.
    with tempfile.TemporaryDirectory(prefix="tfgpu-learned-") as tmp:
        copy = Path(tmp) / FILE_NAME
        copy.write_text(text, encoding="utf-8")
        try:
            releases = parse_matrix(copy, str(path))
        except BadInputError as exc:
            raise _refuse(path, exc.message) from exc
    for r in releases:
        if LEARNED_NOTE not in (r.notes or ""):
            raise _refuse(path, f"release {r.tensorflow} is not marked {LEARNED_NOTE!r}")
    return tuple(replace(r, learned=True) for r in releases)


def merge(knowledge: Knowledge, learned: tuple[Release, ...]) -> Knowledge:
    """The curated tables plus the learned releases they do not have (curated rows win), newest first."""
    have = {r.tensorflow for r in knowledge.releases}
    extra = [r for r in learned if r.tensorflow not in have]
    if not extra:
        return knowledge
    releases = sorted((*knowledge.releases, *extra), key=lambda r: release_key(r.tensorflow), reverse=True)
    return replace(knowledge, releases=tuple(releases))


def with_learned(knowledge: Knowledge, state_dir: Path) -> Knowledge:
    return merge(knowledge, read_overlay(overlay_path(state_dir)))


def render_overlay(rows: list[LearnedRow], index_url: str, today: str) -> str:
    """The overlay file's text: matrix.yaml's format, with a header saying where it came from."""
    import json

    head = (f"# {LEARNED_NOTE}: TensorFlow releases read from {index_url} on {today} by\n"
            "# `tfgpu-install knowledge update` (METADATA and build_info.py of one Linux x86_64 wheel each).\n"
            "# Not reviewed by anyone: profiles decide whether such a release may be chosen.\n")
    # JSON is YAML: every string quoted, nothing a YAML reader could take for another type.
    body = json.dumps({"format": 1, "releases": rows}, indent=1, sort_keys=False)
    return head + body + "\n"


def validated_text(rows: list[LearnedRow], index_url: str, today: str) -> str:
    """The overlay's text for `rows`, checked exactly as read_overlay will read it back (BadInputError
    naming the row when it would be refused): nothing is written that the next run would refuse."""
    text = render_overlay(rows, index_url, today)
    _parse(Path(FILE_NAME), text.encode("utf-8"))
    return text


def learned_versions(knowledge: Knowledge) -> tuple[str, ...]:
    return tuple(r.tensorflow for r in knowledge.releases if getattr(r, "learned", False))


def newest_curated(knowledge: Knowledge) -> Optional[str]:
    cur = [r.tensorflow for r in knowledge.releases if not getattr(r, "learned", False)]
    return max(cur, key=release_key) if cur else None
