"""tfgpu_install.fetch.archive: real archives, hostile ones refused with nothing written outside staging."""

from __future__ import annotations

import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support.cudnn_archive import archive_name, build_archive, tar_bytes
from tfgpu_install.errors import ExitCode
from tfgpu_install.fetch.archive import ArchiveError, UnsafeArchive, extract, extract_into
from tfgpu_install.files import tree_digest


@pytest.fixture(params=["data-filter", "own-checks-only"], autouse=True)
def filter_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs twice: with tarfile's data filter, and as on a Python without it,
    so behaviour is the same on every supported version."""
    if request.param == "own-checks-only":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return str(request.param)


def _reg(name: str) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), b"payload\n"


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def _dev(name: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3  # /dev/null's numbers
    return info, None


@pytest.mark.parametrize("fmt", ["tar.xz", "tar.gz", "zip"])
def test_nvidia_layout_extracts_and_places(tmp_path: Path, fmt: str) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70", fmt=fmt)
    dest = tmp_path / "env" / "lib" / "cudnn-9.1.0"
    extract_into(arc, dest)
    lib = dest / "lib"
    assert (dest / "include" / "cudnn_version.h").is_file()
    assert os.readlink(lib / "libcudnn.so") == "libcudnn.so.9"
    assert os.readlink(lib / "libcudnn.so.9") == "libcudnn.so.9.1.0"
    assert (lib / "libcudnn.so.9.1.0").read_bytes()[:4] == b"\x7fELF"
    # No staging dir left beside the result.
    assert sorted(p.name for p in dest.parent.iterdir()) == ["cudnn-9.1.0"]


def test_refuses_to_merge_into_a_non_empty_dir(tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "mine").write_text("keep")
    with pytest.raises(ArchiveError):
        extract_into(arc, dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "d"]
    assert (dest / "mine").read_text() == "keep"


def test_truncated_archive_is_one_clear_error(tmp_path: Path) -> None:
    full = build_archive(tmp_path / "b1", "9.1.0.70")
    arc = build_archive(tmp_path / "b2", "9.1.0.70", truncate=full.stat().st_size // 2)
    with pytest.raises(ArchiveError) as ei:
        extract_into(arc, tmp_path / "out" / "cudnn")
    assert ei.value.code == ExitCode.BAD_INPUT
    assert "truncated" in ei.value.message and ei.value.hint
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_not_an_archive(tmp_path: Path) -> None:
    bogus = tmp_path / "x.tar.xz"
    bogus.write_text("hello")
    with pytest.raises(ArchiveError):
        extract_into(bogus, tmp_path / "out" / "c")
    with pytest.raises(ArchiveError):
        extract_into(tmp_path / "missing.tar.xz", tmp_path / "out" / "c")


HOSTILE = {
    "dotdot": [_reg("top/ok.txt"), _reg("top/../../escaped.txt")],
    "absolute": [_reg("/tmp/tfgpu-absolute-escape.txt")],
    "symlink-to-etc": [_link("top/etc", "/etc"), _reg("top/ok.txt")],
    "symlink-relative-escape": [_link("top/up", "../../.."), _reg("top/ok.txt")],
    "write-through-symlink": [_link("top/sub", "."), _reg("top/sub/x.txt")],
    "hardlink-escape": [_link("top/passwd", "/etc/passwd", tarfile.LNKTYPE)],
    "hardlink-dotdot": [_link("top/h", "../outside.txt", tarfile.LNKTYPE)],
    "char-device": [_dev("top/null", tarfile.CHRTYPE)],
    "block-device": [_dev("top/sda", tarfile.BLKTYPE)],
    "fifo": [_dev("top/pipe", tarfile.FIFOTYPE)],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tar_is_refused_and_nothing_is_written(tmp_path: Path, case: str) -> None:
    arc = tmp_path / "in" / f"{case}.tar.gz"
    arc.parent.mkdir()
    arc.write_bytes(tar_bytes(HOSTILE[case]))
    box = tmp_path / "box"
    staging_parent = box / "a" / "b"
    staging_parent.mkdir(parents=True)
    before = tree_digest(tmp_path)
    with pytest.raises(UnsafeArchive) as ei:
        extract(arc, staging_parent)
    assert ei.value.code == ExitCode.BAD_INPUT and ei.value.hint
    assert ei.value.message.startswith(f"refusing to extract {case}.tar.gz: member")
    assert tree_digest(tmp_path) == before  # staging removed, nothing anywhere else
    assert not Path("/tmp/tfgpu-absolute-escape.txt").exists()


def test_hardlink_to_a_member_inside_is_fine(tmp_path: Path) -> None:
    arc = tmp_path / "ok.tar"
    arc.write_bytes(tar_bytes([_reg("top/a.txt"), _link("top/b.txt", "top/a.txt", tarfile.LNKTYPE)], "w"))
    staging = extract(arc, tmp_path / "s")
    assert (staging / "top" / "b.txt").read_bytes() == b"payload\n"


def test_setuid_bits_are_dropped(tmp_path: Path) -> None:
    info, data = _reg("top/tool")
    info.mode = 0o4777
    arc = tmp_path / "m.tar"
    arc.write_bytes(tar_bytes([(info, data)], "w"))
    staging = extract(arc, tmp_path / "s")
    mode = (staging / "top" / "tool").stat().st_mode & 0o7777
    assert not mode & 0o6000 and not mode & 0o022


@pytest.mark.parametrize(
    "name,target",
    [("../zip-escape.txt", None), ("/abs.txt", None), ("top/l", "/etc/passwd"), ("top/l", "../../x")],
)
def test_hostile_zip_is_refused(tmp_path: Path, name: str, target: str) -> None:
    arc = tmp_path / "in" / "h.zip"
    arc.parent.mkdir()
    with zipfile.ZipFile(arc, "w") as zf:
        info = zipfile.ZipInfo(name)
        if target is not None:
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target)
        else:
            zf.writestr(info, b"x")
    before = tree_digest(tmp_path)
    with pytest.raises(UnsafeArchive):
        extract(arc, tmp_path / "s")
    assert tree_digest(tmp_path) == before  # refused from the headers: not even the staging parent
    assert not (tmp_path / "s").exists()


def test_archive_name_helper() -> None:
    assert archive_name("9.1.0.70") == "cudnn-linux-x86_64-9.1.0.70_cuda12-archive"
