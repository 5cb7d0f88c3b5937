"""The no-op answer stats the site-packages directories its stamp listed instead of listing them
again (issue #44 item 3: the walk was ~160 ms of a ~230 ms no-op on a full TF env). What a listing saw,
the stat of the listed directories sees: each change below, anywhere in the tree, changes the digest;
the control (nothing changed) keeps it. The broken version this catches: a digest over the top
directories only, or over a list that misses directories created after the stamp's parent."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tfgpu_install.app.noop import _files_digest, _site_digest, recorded, site_dirs


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


# --- the recorded files: what install's check of the installed files sees, the no-op sees -----------


def _dist_env(tmp_path: Path) -> tuple[Path, Path]:
    """An env with one distribution whose RECORD lists a module, a nested one, a shared library
    (with its sha256, which the full path compares) and a script outside site-packages."""
    import base64
    import hashlib

    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    di = sp / "pkg-1.0.dist-info"
    (sp / "pkg" / "sub").mkdir(parents=True)
    di.mkdir()
    (env / "bin").mkdir()
    files = {"pkg/a.py": b"a = 1\n", "pkg/sub/b.py": b"b = 2\n", "pkg/_x.so": b"\x7fELF-not-really\n",
             "../../../bin/pkg-tool": b"#!/bin/sh\n"}
    rows = []
    for rel, data in files.items():
        (sp / rel).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\n")
    (di / "RECORD").write_text("\n".join(rows) + "\npkg-1.0.dist-info/METADATA,,\npkg-1.0.dist-info/RECORD,,\n")
    return env, sp


def _in_place(path: Path, data: bytes) -> None:
    with open(path, "r+b") as fh:  # the same inode, its directory untouched
        fh.truncate(0)
        fh.write(data)


def _replace_a(sp: Path) -> None:
    new = sp / "pkg" / "new.tmp"
    new.write_text("a = 22\n")
    os.replace(new, sp / "pkg" / "a.py")


def _plant(sp: Path) -> None:
    (sp / "pkg" / "sub" / "planted.py").write_text("x = 1\n")


FILE_CHANGES: dict[str, Callable[[Path], None]] = {
    "a module appended to in place": lambda sp: _in_place(sp / "pkg" / "a.py", b"a = 1\nb = 2\n"),
    "a nested module truncated in place": lambda sp: _in_place(sp / "pkg" / "sub" / "b.py", b""),
    "a shared library rewritten in place, same size": lambda sp: _in_place(sp / "pkg" / "_x.so",
                                                                           b"\x7fELF-patched!!!\n"),
    "a script outside site-packages edited in place": lambda sp: _in_place(sp / "../../../bin/pkg-tool",
                                                                           b"#!/bin/bash\n"),
    "a module removed": lambda sp: (sp / "pkg" / "a.py").unlink(),
    "a module replaced (rename over it)": _replace_a,
    "a file added beside the package's modules": _plant,
}


def _seen(env: Path, dirs: list[str], files: list[list[Any]]) -> tuple[str, str]:
    """What the answer compares of site-packages: its directories' mtimes and the recorded files' stat."""
    return _site_digest(dirs), _files_digest(env, files)


@pytest.mark.parametrize("kind", list(FILE_CHANGES))
def test_what_the_full_paths_file_check_notices_the_noop_notices(tmp_path: Path, kind: str) -> None:
    """Each change here makes install's check of the installed files call the distribution damaged
    (the full path reinstalls it); the no-op's stamp then must not answer. The bug this catches: a
    file edited in place changes no directory's mtime, and the stamp only stat()ed directories (a
    no-op said "nothing to do" over a numpy whose version.py had grown, which the full path
    reinstalled)."""
    from tfgpu_install.env.integrity import check_installed

    env, sp = _dist_env(tmp_path)
    dirs, files = site_dirs(env), recorded(env)
    assert sorted(name for _, names in files for name in names) == sorted(
        ["a.py", "b.py", "_x.so", "pkg-tool", "METADATA", "RECORD"])
    assert check_installed(env).clean
    before = _seen(env, dirs, files)
    time.sleep(0.02)  # past the filesystem's timestamp tick
    assert _seen(env, dirs, files) == before  # control: nothing changed, the same answer
    FILE_CHANGES[kind](sp)
    assert not check_installed(env).clean, f"the full path's check does not see {kind}: not a case for this test"
    assert _seen(env, dirs, files) != before, kind
