"""`check` verifies installed files like `rpm -V`, and an install re-run never blesses a damaged env.

A real env (the real install CLI, uv, the local wheelhouse) is damaged in each way the issue lists.
Files are never edited in place (uv hard-links them from its cache): they are moved away,
replaced by a new file, or removed. For each: `check` exits 11 naming the damage; the install
re-run either repairs it exactly (bytes equal to the original) and `check` is clean, or fails and
`check` still says 11."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    needs_gcc,
    served_index,
    source_env,
)
from tfgpu_install.env.integrity import check_installed, remember_installed
from tfgpu_install.errors import ExitCode

pytestmark = needs_gcc


def _sp(env: Path) -> Path:
    return sorted(env.glob("lib/python3*/site-packages"))[-1]


def _tree(root: Path) -> dict[str, str]:
    """sha256 of every regular file under root (bytecode caches aside)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _replace(path: Path, data: bytes) -> None:
    """A new file at path (a new inode: the hard-linked original in uv's cache is untouched)."""
    tmp = path.with_name(path.name + ".tfgpu-test")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _install(p: Provisioned, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    return cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(p.env)],
               p.environ, capsys)


def _check(p: Provisioned, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, Any]:
    return cli(["check", "--env", str(p.env), *extra], p.environ, capsys)


def _named(doc: dict[str, Any]) -> str:
    """Everything `check --json` says is wrong, as one string to look a name up in."""
    parts = [str(v) for k, v in doc.items() if isinstance(v, list)]
    parts.append(str(doc.get("installed_files", {}).get("damaged", [])))
    return "\n".join(parts)


def _move_lib(env: Path) -> str:
    lib = next(_sp(env).glob("nvidia/cudnn/lib/libcudnn.so.9"))
    shutil.move(str(lib), str(env.parent / "moved-away.so"))
    return "libcudnn.so.9"


def _empty_lib(env: Path) -> str:
    lib = next(_sp(env).glob("nvidia/cublas/lib/*.so*"))
    _replace(lib, b"")
    return lib.name


def _drop_dist_info(env: Path) -> str:
    d = next(_sp(env).glob("absl_py-*.dist-info"))
    shutil.rmtree(d)
    return "absl"


def _edit_source(env: Path) -> str:
    src = _sp(env) / "tensorflow" / "config.py"
    _replace(src, src.read_bytes() + b"\nraise SystemExit('swapped')\n")
    return "tensorflow/config.py"


def _drop_package_dir(env: Path) -> str:
    shutil.rmtree(_sp(env) / "absl")
    return "absl/"


def _edit_activation(env: Path) -> str:
    act = env / "bin" / "activate"
    _replace(act, act.read_bytes().replace(b"export LD_LIBRARY_PATH", b"export LD_LIBRARY_PATH  # edited", 1))
    return "bin/activate"


def _drop_launcher(env: Path) -> str:
    (env / "bin" / "tfgpu-run").unlink()
    return "bin/tfgpu-run"


DAMAGE: dict[str, Callable[[Path], str]] = {
    "library moved away": _move_lib,
    "library replaced by an empty file": _empty_lib,
    "dist-info removed": _drop_dist_info,
    "source file edited": _edit_source,
    "whole package directory removed": _drop_package_dir,
    "activation block edited": _edit_activation,
    "launcher removed": _drop_launcher,
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_found_and_the_rerun_repairs_it_or_fails(
    kind: str, source_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    env = source_env.env
    code, doc = _check(source_env, capsys)
    assert code == 0 and doc["clean"] is True and doc["installed_files"]["files"] > 50, doc
    before = _tree(env)
    assert "bin/tfgpu-run" in before and any("libcudnn.so.9" in k for k in before)

    name = DAMAGE[kind](env)
    code, doc = _check(source_env, capsys)
    assert code == ExitCode.DRIFT == 11 and doc["clean"] is False, doc
    assert name in _named(doc), (kind, doc)

    code, out = _install(source_env, capsys)
    after_code, after = _check(source_env, capsys)
    if code == 0:  # repaired: the very bytes of before, and check says so
        assert _tree(env) == before, kind
        assert after_code == 0 and after["clean"] is True, (kind, after)
    else:  # or refused, and the damage is still reported
        assert after_code == 11, (kind, out, after)
        pytest.fail(f"{kind}: the re-run did not repair the env: {out}")


def test_check_full_hashes_every_file_and_default_catches_same_size_only_for_libraries(
    source_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    env = source_env.env
    src = _sp(env) / "absl" / "__init__.py"
    original = src.read_bytes()
    swapped = original[:-1] + (b"#" if original[-1:] != b"#" else b"!")
    assert len(swapped) == len(original) and swapped != original
    _replace(src, swapped)
    try:
        code, doc = _check(source_env, capsys)
        assert code == 0, doc  # sizes only for sources: documented, `--full` is the deep look
        libs_only = doc["installed_files"]["hashed"]
        code, doc = _check(source_env, capsys, "--full")
        assert code == 11 and "absl/__init__.py (sha256 differs" in _named(doc), doc
        assert doc["installed_files"]["full"] is True and doc["installed_files"]["hashed"] > libs_only > 0
    finally:
        _replace(src, original)
    assert _check(source_env, capsys, "--full")[0] == 0


def test_an_added_file_in_a_package_dir_is_reported(
    source_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = _sp(source_env.env) / "tensorflow" / "planted.py"
    extra.write_text("x = 1\n")
    try:
        code, doc = _check(source_env, capsys)
        damaged = doc["installed_files"]["damaged"]
        assert code == 11 and [d["name"] for d in damaged] == ["tensorflow"], doc
        assert damaged[0]["added"] == [str(extra.relative_to(source_env.env))]
    finally:
        extra.unlink()


def test_a_record_row_leaving_the_env_is_reported_not_opened(tmp_path: Path) -> None:
    env = tmp_path / "env"
    di = env / "lib" / "python3.11" / "site-packages" / "evil-1.0.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n\n")
    outside = tmp_path / "secret.so"
    outside.write_bytes(b"x" * 10)
    (di / "RECORD").write_text("../../../../secret.so,sha256=AAAA,10\n/etc/passwd,,\nevil-1.0.dist-info/RECORD,,\n")
    found = check_installed(env)
    assert not found.clean and found.hashed == 0
    assert [p.name for p in found.problems] == ["evil"]
    assert found.problems[0].changed == ("../../../../secret.so (outside the env: not checked)",
                                         "/etc/passwd (outside the env: not checked)")


def test_conda_meta_paths_are_checked(tmp_path: Path) -> None:
    import json

    env = tmp_path / "prefix"
    (env / "conda-meta").mkdir(parents=True)
    (env / "lib").mkdir()
    good = b"\x7fELF library bytes"
    (env / "lib" / "libfoo.so.1").write_bytes(good)
    (env / "lib" / "gone.txt").write_bytes(b"")
    doc = {"name": "foo", "version": "1.0", "paths_data": {"paths": [
        {"_path": "lib/libfoo.so.1", "path_type": "hardlink", "sha256": hashlib.sha256(good).hexdigest(),
         "size_in_bytes": len(good)},
        {"_path": "lib/missing.so", "path_type": "hardlink", "sha256": "0" * 64, "size_in_bytes": 1},
        {"_path": "bin/script", "path_type": "hardlink", "prefix_placeholder": "/opt/anaconda1anaconda2",
         "file_mode": "text", "sha256": "0" * 64, "size_in_bytes": 99},
    ]}}
    (env / "bin").mkdir()
    (env / "bin" / "script").write_text("#!/prefix/bin/python\n")  # rewritten at link time: presence only
    (env / "conda-meta" / "foo-1.0-0.json").write_text(json.dumps(doc))
    found = check_installed(env)
    assert [(p.name, p.missing, p.changed) for p in found.problems] == [("conda:foo", ("lib/missing.so",), ())]
    _replace(env / "lib" / "libfoo.so.1", b"\x7fELF library bytez")
    found = check_installed(env)
    assert found.problems[0].changed == ("lib/libfoo.so.1 (sha256 differs from the record)",)


def test_the_hash_cache_never_hides_a_replaced_file(tmp_path: Path) -> None:
    """Remembered hashes are keyed by inode and ctime: a replacement with the same size and a
    copied-back mtime is hashed again."""
    import base64

    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    di = sp / "lib-1.0.dist-info"
    (sp / "lib").mkdir(parents=True)
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: lib\nVersion: 1.0\n\n")
    data = b"\x7fELF" + b"a" * 100
    so = sp / "lib" / "libx.so"
    so.write_bytes(data)
    b64 = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    (di / "RECORD").write_text(f"lib/libx.so,sha256={b64},{len(data)}\nlib-1.0.dist-info/RECORD,,\n"
                               "lib-1.0.dist-info/METADATA,,\n")
    cache = tmp_path / "hashes.json"
    assert remember_installed(env, cache) == 1  # what an install leaves: the RECORD's digest, by identity
    assert check_installed(env, cache=cache).clean and cache.is_file()
    st = so.stat()
    _replace(so, b"\x7fELF" + b"b" * 100)
    os.utime(so, ns=(st.st_atime_ns, st.st_mtime_ns))
    found = check_installed(env, cache=cache)
    assert found.problems[0].changed == ("lib/python3.11/site-packages/lib/libx.so (sha256 differs from the record)",)


def test_the_tools_own_rc_block_is_checked_against_what_was_written(
    source_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shell rc block written by the install, edited afterwards: `check` names the step that
    wrote it (exit 11); the install re-run writes it back and `check` is clean."""
    rc = source_env.tmp / "home-bashrc"
    rc.write_text("# mine\n")
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env",
                     str(source_env.env), "--shell-rc", str(rc)], source_env.environ, capsys)
    assert code == 0, doc
    written = rc.read_bytes()
    assert b">>> tfgpu-install" in written
    assert _check(source_env, capsys)[0] == 0
    _replace(rc, written.replace(b"[ -f ", b"[ -e ", 1))
    assert rc.read_bytes() != written
    code, doc = _check(source_env, capsys)
    assert code == 11 and [o.split(":")[0] for o in doc["own_files_changed"]] == ["shell-rc.write"], doc
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env",
                     str(source_env.env), "--shell-rc", str(rc)], source_env.environ, capsys)
    assert code == 0 and rc.read_bytes() == written, doc
    assert _check(source_env, capsys)[0] == 0


def test_a_hostile_file_name_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    di = sp / "pkg-1.0.dist-info"
    (sp / "pkg").mkdir(parents=True)
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\n")
    (di / "RECORD").write_text("pkg/__init__.py,,\npkg-1.0.dist-info/METADATA,,\npkg-1.0.dist-info/RECORD,,\n")
    (sp / "pkg" / "__init__.py").write_text("")
    (sp / "pkg" / "evil\x1b[2J.py").write_text("")
    found = check_installed(env)
    assert found.problems[0].added == ("lib/python3.11/site-packages/pkg/evil\x1b[2J.py",)
    (line,) = found.lines()
    assert "\x1b" not in line and "evil\\x1b[2J.py" in line


def _small_env(tmp_path: Path) -> tuple[Path, Path]:
    """An env with one distribution: pkg/a.py, pkg/sub/b.py, listed in its RECORD."""
    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    di = sp / "pkg-1.0.dist-info"
    (sp / "pkg" / "sub").mkdir(parents=True)
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\n")
    (sp / "pkg" / "a.py").write_text("a = 1\n")
    (sp / "pkg" / "sub" / "b.py").write_text("b = 2\n")
    (di / "RECORD").write_text("pkg/a.py,,6\npkg/sub/b.py,,6\npkg-1.0.dist-info/METADATA,,\n"
                               "pkg-1.0.dist-info/RECORD,,\n")
    # Older than 2 s: what changed more recently is not remembered (it may change again within the
    # same timestamp tick without its identity changing).
    time.sleep(2.1)
    return env, sp


def test_remembered_records_and_directories_never_hide_an_added_file(tmp_path: Path) -> None:
    """A second check takes parsed RECORDs and clean directories back by identity: a file added in a
    directory (nested under an unchanged one too) changes that directory's identity and is found."""
    from tfgpu_install.env.integrity import HashCache

    env, sp = _small_env(tmp_path)
    cache = tmp_path / "hashes.json"
    assert check_installed(env, cache=cache).clean
    memo = HashCache(cache)
    assert len(memo.records_old) == 1 and len(memo.dirs_old) == 2  # pkg and pkg/sub, both clean
    assert os.stat(cache).st_mode & 0o077 == 0
    assert check_installed(env, cache=cache).clean  # all taken back
    (sp / "pkg" / "sub" / "planted.py").write_text("x = 1\n")  # pkg itself unchanged
    found = check_installed(env, cache=cache)
    assert found.problems[0].added == ("lib/python3.11/site-packages/pkg/sub/planted.py",)
    assert check_installed(env, cache=cache).problems[0].added == found.problems[0].added  # a dirty dir: listed again
    (sp / "pkg" / "sub" / "planted.py").unlink()
    assert check_installed(env, cache=cache).clean


def test_a_record_that_changed_is_read_again_and_its_dropped_row_is_an_added_file(tmp_path: Path) -> None:
    env, sp = _small_env(tmp_path)
    cache = tmp_path / "hashes.json"
    assert check_installed(env, cache=cache).clean
    record = sp / "pkg-1.0.dist-info" / "RECORD"
    _replace(record, record.read_bytes().replace(b"pkg/sub/b.py,,6\n", b""))
    found = check_installed(env, cache=cache)
    assert found.problems[0].added == ("lib/python3.11/site-packages/pkg/sub/b.py",)


def test_what_changed_in_the_last_seconds_is_not_remembered(tmp_path: Path) -> None:
    from tfgpu_install.env.integrity import HashCache

    env, sp = _small_env(tmp_path)
    (sp / "pkg" / "sub" / "c.py").write_text("")  # pkg/sub changed just now
    cache = tmp_path / "hashes.json"
    check_installed(env, cache=cache)
    assert set(HashCache(cache).dirs_old) == {"lib/python3.11/site-packages/pkg"}


def test_full_takes_nothing_back_and_a_cache_another_user_could_write_is_not_believed(tmp_path: Path) -> None:
    from tfgpu_install.env.integrity import HashCache

    env, sp = _small_env(tmp_path)
    cache = tmp_path / "hashes.json"
    assert check_installed(env, cache=cache).clean
    (sp / "pkg" / "sub" / "planted.py").write_text("x = 1\n")
    assert check_installed(env, full=True, cache=cache).problems[0].added  # --full lists every directory
    cache.chmod(0o666)
    memo = HashCache(cache)
    assert (memo.old, memo.records_old, memo.dirs_old) == ({}, {}, {})


def _hashed_env(tmp_path: Path) -> tuple[Path, Path]:
    """An env with one distribution whose RECORD gives each file's sha256 and size."""
    import base64

    env = tmp_path / "env"
    sp = env / "lib" / "python3.11" / "site-packages"
    di = sp / "pkg-1.0.dist-info"
    (sp / "pkg").mkdir(parents=True)
    di.mkdir()
    rows = []
    for rel, data in (("pkg/a.py", b"a = 1\n"), ("pkg/libz.so.1", b"\x7fELF" + b"z" * 64),
                      ("pkg-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\n")):
        (sp / rel).write_bytes(data)
        b64 = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={b64},{len(data)}")
    (di / "RECORD").write_text("\n".join(rows) + "\npkg-1.0.dist-info/RECORD,,\n")
    return env, sp


def test_what_the_install_wrote_from_checked_wheels_is_trusted_only_by_its_own_closing_check(tmp_path: Path) -> None:
    """remember_installed lists what an install wrote from hash-checked wheels; the restore's
    closing check (full, trusted_since its start) reads none of it, but reads a file replaced since,
    and trusts nothing of an install older than itself or of a wheel nobody checked."""
    from tfgpu_install.env.integrity import written_since

    since = time.time_ns() - 50_000_000
    env, sp = _hashed_env(tmp_path)
    cache, listed = tmp_path / "hashes.json", tmp_path / "written.json"
    remember_installed(env, cache, since_ns=since, verified={"pkg"}, written=listed)
    trusted = written_since(listed, since)
    assert len(trusted) == 3
    found = check_installed(env, full=True, cache=cache, trusted=trusted)
    assert found.clean and found.hashed == 3 and found.read_files == 0 and found.read_bytes == 0
    assert written_since(listed, time.time_ns()) == {}  # a later restore: this install is not its own
    found = check_installed(env, full=True, cache=cache)
    assert found.clean and found.read_files == 3  # --full itself trusts nothing
    _replace(sp / "pkg" / "a.py", b"a = 2\n")  # same size, after the install
    found = check_installed(env, full=True, cache=cache, trusted=trusted)
    assert found.read_files == 1 and found.problems[0].changed == (
        "lib/python3.11/site-packages/pkg/a.py (sha256 differs from the record)",)
    # control: no hash checked by the installer, nothing listed
    remember_installed(env, cache, since_ns=since, verified=(), written=listed)
    assert written_since(listed, since) == {}


def test_a_file_older_than_the_install_is_not_taken_from_the_record(tmp_path: Path) -> None:
    """A file the installer did not write in this run (its ctime is older) is not listed, even in a
    distribution installed from a checked wheel: it is read."""
    from tfgpu_install.env.integrity import HashCache, written_since

    env, sp = _hashed_env(tmp_path)
    time.sleep(0.1)
    since = time.time_ns()
    record = sp / "pkg-1.0.dist-info" / "RECORD"
    _replace(record, record.read_bytes())  # the RECORD rewritten now, the files not
    cache, listed = tmp_path / "hashes.json", tmp_path / "written.json"
    assert remember_installed(env, cache, since_ns=since, verified={"pkg"}, written=listed) == 0
    assert written_since(listed, since) == {} and HashCache(cache).old == {}


def test_the_record_is_believed_only_as_the_build_the_snapshot_recorded(tmp_path: Path) -> None:
    from tfgpu_install.env.integrity import builds

    env, _ = _hashed_env(tmp_path)
    ((name, (version, content)),) = builds(env).items()
    assert (name, version) == ("pkg", "1.0") and content.startswith("sha256:")
    same = check_installed(env, expected={"pkg": ("1.0", content)})
    assert same.clean and same.builds_checked == 1 and same.builds_unknown == ()
    other = check_installed(env, expected={"pkg": ("1.0", "sha256:" + "0" * 64)})
    assert [(p.name, p.other_build) for p in other.problems] == [("pkg", True)] and other.names() == ["pkg"]
    assert "another build" in other.lines()[0]
    for expected in (None, {}, {"pkg": ("1.1", "sha256:" + "0" * 64)}):  # not described: unknown, not checked
        found = check_installed(env, expected=expected)
        assert found.clean and found.builds_checked == 0 and found.builds_unknown == ("pkg",)
