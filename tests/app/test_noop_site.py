"""The no-op answer stats the site-packages directories its stamp listed instead of listing them
again (issue #44 item 3: the walk was ~160 ms of a ~230 ms no-op on a full TF env). What a listing saw,
the stat of the listed directories sees: each change below, anywhere in the tree, changes the digest;
the control (nothing changed) keeps it. The broken version this catches: a digest over the top
directories only, or over a list that misses directories created after the stamp's parent."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import pytest

from tfgpu_install.app.noop import _site_digest, site_dirs


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    (sp / "pkg" / "sub" / "deep").mkdir(parents=True)
    (sp / "pkg" / "sub" / "deep" / "m.py").write_text("x = 1\n")
    (sp / "other").mkdir()
    return env, sp


def _rename(p: Path) -> None:
    p.rename(p.with_name("renamed"))


def _replace(sp: Path) -> None:
    new = sp / "pkg" / "new.tmp"
    new.write_text("y = 2\n")
    os.replace(new, sp / "pkg" / "sub" / "deep" / "m.py")


CHANGES: dict[str, Callable[[Path], None]] = {
    "a file added in the deepest directory": lambda sp: (sp / "pkg" / "sub" / "deep" / "n.py").write_text(""),
    "a file removed": lambda sp: (sp / "pkg" / "sub" / "deep" / "m.py").unlink(),
    "a file replaced (rename over it)": _replace,
    "a directory added in the middle": lambda sp: (sp / "pkg" / "sub" / "planted").mkdir(),
    "a directory renamed": lambda sp: _rename(sp / "pkg" / "sub" / "deep"),
    "a package directory added at the top": lambda sp: (sp / "evil").mkdir(),
}


@pytest.mark.parametrize("kind", list(CHANGES))
def test_every_change_the_listing_saw_changes_the_digest(tmp_path: Path, kind: str) -> None:
    env, sp = _tree(tmp_path)
    dirs = site_dirs(env)
    assert sorted(os.path.relpath(d, sp) for d in dirs) == [".", "other", "pkg", "pkg/sub", "pkg/sub/deep"]
    before = _site_digest(dirs)
    time.sleep(0.02)  # past the filesystem's timestamp tick
    assert _site_digest(dirs) == before  # control: nothing changed, the same answer
    CHANGES[kind](sp)
    assert _site_digest(dirs) != before, kind
