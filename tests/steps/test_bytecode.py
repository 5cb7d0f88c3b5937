"""Bytecode shared between envs: a donor's .pyc is linked only for the very same source file,
Python accepts it as is (no recompile, the code's file name is the new env's), and nothing is
created outside the env or through a link."""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path

from tfgpu_install.context import Context
from tfgpu_install.steps.bytecode import donor_envs, donor_for, link_from, survey

TAG = sys.implementation.cache_tag  # e.g. cpython-311
PYC = f"mod.{TAG}.pyc"


def share_bytecode(site_packages: Path, donor: Path, tag: str) -> int:
    """What packages.install does: survey the donor (beside uv), then link."""
    return link_from(site_packages, survey(donor, tag))


def _two_envs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A 'uv cache' file hard-linked into two envs' site-packages; the first one compiled."""
    cache = tmp_path / "uv-cache" / "pkg"
    cache.mkdir(parents=True)
    (cache / "mod.py").write_text("def where():\n    import inspect\n    return inspect.getsourcefile(where)\n"
                                  "CODE_FILE = where.__code__.co_filename\n")
    (cache / "__init__.py").write_text("")
    sps = []
    for name in ("first", "second"):
        sp = tmp_path / name / "lib" / "python3.x" / "site-packages" / "pkg"
        sp.mkdir(parents=True)
        for f in ("mod.py", "__init__.py"):
            os.link(cache / f, sp / f)
        sps.append(sp.parent)
    for f in ("mod.py", "__init__.py"):
        src = sps[0] / "pkg" / f
        py_compile.compile(str(src), cfile=str(sps[0] / "pkg" / "__pycache__" / f"{f[:-3]}.{TAG}.pyc"), doraise=True)
    return sps[0], sps[1], cache


def test_the_same_source_gets_the_donors_pyc_and_python_takes_it_as_is(tmp_path: Path) -> None:
    first, second, _ = _two_envs(tmp_path)
    assert share_bytecode(second, first, TAG) == 2
    ours, theirs = second / "pkg" / "__pycache__" / PYC, first / "pkg" / "__pycache__" / PYC
    assert os.stat(ours).st_ino == os.stat(theirs).st_ino
    out = subprocess.run([sys.executable, "-c", "import pkg.mod as m, json; print(json.dumps([m.CODE_FILE, "
                                                "m.__cached__]))"],
                         env={**os.environ, "PYTHONPATH": str(second)}, capture_output=True, text=True, check=True)
    code_file, cached = json.loads(out.stdout)
    assert code_file == str(second / "pkg" / "mod.py")  # Python names the new env's source
    assert cached == str(ours)
    assert os.stat(ours).st_ino == os.stat(theirs).st_ino  # accepted, not rewritten
    assert share_bytecode(second, first, TAG) == 0  # idempotent: nothing replaced


def test_a_different_source_or_another_interpreter_gets_nothing(tmp_path: Path) -> None:
    first, second, _ = _two_envs(tmp_path)
    mod = second / "pkg" / "mod.py"
    text = mod.read_text()
    mod.unlink()
    mod.write_text(text)  # same bytes, another file (pip copies; another version): not the donor's
    assert share_bytecode(second, first, TAG) == 1  # only __init__.py is the same file
    assert not (second / "pkg" / "__pycache__" / PYC).exists()
    assert share_bytecode(second, first, "cpython-20") == 0


def test_links_in_the_new_env_are_never_followed(tmp_path: Path) -> None:
    first, second, _ = _two_envs(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    # the new env's package dir is a symlink to a dir outside it, holding the very same file
    os.link(second / "pkg" / "mod.py", outside / "mod.py")
    os.rename(second / "pkg", tmp_path / "moved")
    os.symlink(outside, second / "pkg")
    assert share_bytecode(second, first, TAG) == 0
    assert sorted(os.listdir(outside)) == ["mod.py"]
    # a __pycache__ that is a symlink is not written through either
    os.unlink(second / "pkg")
    os.rename(tmp_path / "moved", second / "pkg")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, second / "pkg" / "__pycache__")
    assert share_bytecode(second, first, TAG) == 0
    assert os.listdir(elsewhere) == []


def test_donors_are_this_tools_other_envs_newest_first(ctx: Context, tmp_path: Path) -> None:
    envs = []
    for i in range(4):
        env = tmp_path / f"env{i}"
        env.mkdir()
        journal = ctx.state_dir / "envs" / f"env{i}-x" / "journal.jsonl"
        journal.parent.mkdir(parents=True)
        journal.write_text(json.dumps({"event": "run", "env": str(env)}) + "\n")
        os.utime(journal, (1000 + i, 1000 + i))
        envs.append(env)
    torn = ctx.state_dir / "envs" / "torn" / "journal.jsonl"
    torn.parent.mkdir(parents=True)
    torn.write_text('{"event": "ru')
    assert donor_envs(ctx, envs[3], limit=2) == [envs[2], envs[1]]
    assert donor_envs(ctx, tmp_path / "new", limit=9) == [envs[3], envs[2], envs[1], envs[0]]
    assert donor_for(ctx, tmp_path / "new", "3.11") is None  # not an env yet: nothing to do
    assert donor_for(ctx, envs[0], "not a version") is None


def test_a_pyc_this_user_does_not_own_or_others_may_write_is_not_linked(tmp_path: Path) -> None:
    first, second, _ = _two_envs(tmp_path)
    theirs = first / "pkg" / "__pycache__" / PYC
    theirs.chmod(0o666)
    assert share_bytecode(second, first, TAG) == 1  # __init__'s only
    assert not (second / "pkg" / "__pycache__" / PYC).exists()
    theirs.chmod(0o644)
    if os.getuid() == 0:
        os.chown(theirs, 65534, 65534)
        assert share_bytecode(second, first, TAG) == 0
        assert not (second / "pkg" / "__pycache__" / PYC).exists()


def test_a_donor_pyc_that_is_a_symlink_is_not_linked_even_when_swapped_in_after_the_survey(tmp_path: Path) -> None:
    first, second, _ = _two_envs(tmp_path)
    theirs = first / "pkg" / "__pycache__" / PYC
    planted = tmp_path / "planted.pyc"
    planted.write_bytes(theirs.read_bytes())  # this user's own file, outside any env
    surveyed = survey(first, TAG)  # the survey saw a plain file...
    theirs.unlink()
    theirs.symlink_to(planted)  # ...and a link stands there when the files are linked
    assert link_from(second, surveyed) == 1  # __init__'s only
    ours = second / "pkg" / "__pycache__" / PYC
    assert not os.path.lexists(ours)  # nothing left behind: neither the link nor a file
    assert sorted(os.listdir(second / "pkg" / "__pycache__")) == [f"__init__.{TAG}.pyc"]
