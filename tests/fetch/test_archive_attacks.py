"""Hostile archives against tfgpu_install.fetch.archive (issue 17, item 1).

Each attack is extracted next to a sentinel tree (a fake $HOME with .bashrc beside the env the
archive is unpacked into). The invariant: an archive never creates, changes or removes anything
outside its staging/target dir — bytes, modes, mtimes and link targets of everything else are
the same afterwards — and a refused one is one BadInputError (exit 5) with a hint. Every test
runs twice: with tarfile's data filter present and as on a Python without it (3.9.16, ...)."""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Optional, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.fetch import archive as archive_mod
from tfgpu_install.fetch.archive import ArchiveError, UnsafeArchive, check_archive_input, extract, extract_into

# An abstract member: (kind, name, payload). kind: f(ile) d(ir) l(symlink) h(ardlink)
# c(har device) b(lock device) p (fifo); payload: the bytes of a file, the target of a link.
Member = tuple[str, str, Union[bytes, str, None]]


@pytest.fixture(params=["data-filter", "no-data-filter"], autouse=True)
def filter_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "no-data-filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return str(request.param)


# --- building archives ---------------------------------------------------------------------


def tar_archive(path: Path, members: list[Member], mode: str = "w:gz") -> Path:
    types = {"c": tarfile.CHRTYPE, "b": tarfile.BLKTYPE, "p": tarfile.FIFOTYPE,
             "l": tarfile.SYMTYPE, "h": tarfile.LNKTYPE, "d": tarfile.DIRTYPE}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:  # type: ignore[call-overload]
        for kind, name, payload in members:
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if kind == "f":
                data = payload if isinstance(payload, bytes) else b"payload\n"
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
                continue
            info.type = types[kind]
            info.mode = 0o755 if kind == "d" else 0o644
            if kind in "lh":
                info.linkname = str(payload)
            if kind in "cb":
                info.devmajor, info.devminor = 1, 3
            tf.addfile(info)
    path.write_bytes(buf.getvalue())
    return path


def zip_archive(path: Path, members: list[Member]) -> Path:
    modes = {"f": 0o100644, "d": 0o040755, "l": 0o120777, "c": 0o020644, "b": 0o060644, "p": 0o010644}
    with zipfile.ZipFile(path, "w") as zf:
        for kind, name, payload in members:
            if kind == "h":
                continue  # zip has no hard links
            info = zipfile.ZipInfo(name + ("/" if kind == "d" and not name.endswith("/") else ""))
            info.external_attr = modes[kind] << 16
            data = payload if isinstance(payload, bytes) else (str(payload).encode() if kind == "l" else b"payload\n")
            zf.writestr(info, b"" if kind == "d" else data)
    return path


def build(path_stem: Path, fmt: str, members: list[Member]) -> Path:
    path = path_stem.with_name(f"{path_stem.name}.{fmt}")
    if fmt == "zip":
        return zip_archive(path, members)
    return tar_archive(path, members, {"tar": "w", "tar.gz": "w:gz", "tar.xz": "w:xz"}[fmt])


# --- the sentinel --------------------------------------------------------------------------


class Sentinel:
    """<base>/home/{.bashrc,.profile,notes/todo.txt} and the env <base>/home/env/lib, where the
    staging dir goes. `state()` is every path under <base> except `inside` (staging/target)."""

    def __init__(self, base: Path) -> None:
        self.base = Path(os.path.realpath(base))
        self.home = self.base / "home"
        self.lib = self.home / "env" / "lib"
        self.lib.mkdir(parents=True)
        (self.home / "notes").mkdir()
        (self.home / ".bashrc").write_bytes(b"# the user's own rc\nexport KEEP=1\n")
        (self.home / ".profile").write_bytes(b". ~/.bashrc\n")
        (self.home / "notes" / "todo.txt").write_bytes(b"todo\n")
        (self.base / "arcs").mkdir()
        os.utime(self.home / ".bashrc", ns=(1_600_000_000_000_000_000,) * 2)

    def state(self, inside: Optional[Path] = None) -> dict[str, tuple[object, ...]]:
        out: dict[str, tuple[object, ...]] = {}
        for dirpath, dirnames, filenames in os.walk(self.base):
            here = Path(dirpath)
            if inside is not None and (here == inside or inside in here.parents):
                continue
            for name in dirnames + filenames:
                p = here / name
                if inside is not None and p == inside:
                    continue
                st_ = p.lstat()
                if stat.S_ISLNK(st_.st_mode):
                    out[str(p)] = ("link", os.readlink(p))
                elif stat.S_ISREG(st_.st_mode):
                    out[str(p)] = ("file", p.read_bytes(), st_.st_mode, st_.st_mtime_ns, st_.st_nlink)
                else:
                    out[str(p)] = ("dir" if stat.S_ISDIR(st_.st_mode) else "other", st_.st_mode)
        return out


@pytest.fixture
def box(tmp_path: Path) -> Sentinel:
    return Sentinel(tmp_path)


def assert_refused(box: Sentinel, arc: Path, *words: str) -> UnsafeArchive:
    before = box.state()
    with pytest.raises(ArchiveError) as ei:
        extract(arc, box.lib)
    err = ei.value
    assert isinstance(err, BadInputError) and err.code == ExitCode.BAD_INPUT
    assert err.message.startswith(f"refusing to extract {arc.name}") and err.hint
    for word in words:
        assert word in err.message
    assert box.state() == before  # nothing outside, and the staging dir is gone too
    assert isinstance(err, UnsafeArchive)
    return err


def climbing_chain(levels: int) -> list[Member]:
    """Symlinks that each look inside the tree by name but climb one real directory more
    than the one before (`x/y/lN -> ../../x/y/l<N-1>/..`), then a link through the last one
    to ../.bashrc, then a FILE member with that link's name (opened for writing, it would
    follow the link)."""
    members: list[Member] = [("d", "x/y", None), ("l", "x/y/l1", "../..")]
    for n in range(2, levels + 2):
        members.append(("l", f"x/y/l{n}", f"../../x/y/l{n - 1}/.."))
    last = f"x/y/l{levels + 1}"
    members.append(("l", "x/y/evil", f"../../{last}/.bashrc"))
    members.append(("f", "x/y/evil", b"echo owned\n"))
    return members


# --- the attacks ---------------------------------------------------------------------------

FORMATS = ["zip", "tar", "tar.gz", "tar.xz"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_symlink_chain_climbing_out_then_a_file_with_the_link_name(box: Sentinel, fmt: str) -> None:
    # staging = home/env/lib/.tfgpu-staging-*: three real directories below home.
    arc = build(box.base / "arcs" / "chain", fmt, climbing_chain(3))
    assert_refused(box, arc, "symlink")
    assert (box.home / ".bashrc").read_bytes() == b"# the user's own rc\nexport KEEP=1\n"


@pytest.mark.parametrize("fmt", FORMATS)
def test_chain_planted_after_the_link_that_uses_it(box: Sentinel, fmt: str) -> None:
    """Checked at its creation a link may look fine (`a -> s/..` while s does not exist yet);
    `s -> .` made later turns it into a way out. Refused whatever the order."""
    members: list[Member] = [("l", "top/a", "s/../../.bashrc"), ("l", "top/s", "."), ("f", "top/a", b"owned\n")]
    assert_refused(box, build(box.base / "arcs" / "late", fmt, members))


HOSTILE: dict[str, list[Member]] = {
    "symlink-then-file-through-it": [("l", "top/sub", "."), ("f", "top/sub/x.txt", b"x")],
    "symlink-escape-then-file-through-it": [("l", "top/up", "../../../.."), ("f", "top/up/.bashrc", b"x")],
    "symlink-absolute": [("l", "top/rc", "/etc/passwd")],
    "symlink-absolute-home": [("l", "top/rc", "/tmp")],
    "dotdot-name": [("f", "top/ok.txt", b"ok"), ("f", "top/../../../../.bashrc", b"owned")],
    "absolute-name": [("f", "/tmp/tfgpu-attack-absolute.txt", b"owned")],
    "hardlink-outside": [("h", "top/h", "../../../../.bashrc")],
    "hardlink-absolute": [("h", "top/h", "/etc/passwd")],
    "hardlink-to-missing": [("h", "top/h", "top/nothing")],
    "hardlink-to-a-symlink": [("l", "top/s", "f"), ("f", "top/f", b"x"), ("h", "top/h", "top/s")],
    "char-device": [("c", "top/null", None)],
    "block-device": [("b", "top/sda", None)],
    "fifo": [("p", "top/pipe", None)],
    "file-over-dir": [("f", "top/d/x", b"x"), ("f", "top/d", b"y")],
    "dir-through-file": [("f", "top/f", b"x"), ("f", "top/f/x", b"y")],
}


@pytest.mark.parametrize("case,fmt", [
    (case, fmt) for case in sorted(HOSTILE) for fmt in ("tar", "tar.xz", "zip")
    if not (fmt == "zip" and any(kind == "h" for kind, _, _ in HOSTILE[case]))  # zip has no hard links
])
def test_hostile_member_is_refused(box: Sentinel, case: str, fmt: str) -> None:
    members = HOSTILE[case]
    assert_refused(box, build(box.base / "arcs" / case, fmt, members))
    assert not Path("/tmp/tfgpu-attack-absolute.txt").exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicate_members_replace_never_write_through(box: Sentinel, fmt: str) -> None:
    """A member that exists is replaced (unlink + create): a file member named like an earlier
    (inside) symlink replaces the link; the link's target keeps its bytes."""
    members: list[Member] = [
        ("f", "top/target.txt", b"original\n"),
        ("l", "top/alias", "target.txt"),
        ("f", "top/alias", b"replacement\n"),
        ("f", "top/dup.txt", b"first\n"),
        ("f", "top/dup.txt", b"second\n"),
        ("f", "top/becomes-link", b"file\n"),
        ("l", "top/becomes-link", "target.txt"),
    ]
    arc = build(box.base / "arcs" / "dups", fmt, members)
    before = box.state()
    staging = extract(arc, box.lib)
    top = staging / "top"
    assert (top / "target.txt").read_bytes() == b"original\n"
    assert not (top / "alias").is_symlink() and (top / "alias").read_bytes() == b"replacement\n"
    assert (top / "dup.txt").read_bytes() == b"second\n"
    assert os.readlink(top / "becomes-link") == "target.txt"
    assert box.state(inside=staging) == before


def test_links_inside_the_tree_still_work(box: Sentinel) -> None:
    members: list[Member] = [
        ("d", "top/lib", None),
        ("f", "top/lib/libx.so.9.1.0", b"\x7fELF"),
        ("l", "top/lib/libx.so.9", "libx.so.9.1.0"),
        ("l", "top/lib/libx.so", "libx.so.9"),
        ("l", "top/lib64", "lib"),
        ("l", "top/include/up", "../lib/libx.so"),
        ("h", "top/lib/libx-copy.so", "top/lib/libx.so.9.1.0"),
    ]
    staging = extract(build(box.base / "arcs" / "ok", "tar.xz", members), box.lib)
    assert (staging / "top" / "lib64" / "libx.so").read_bytes() == b"\x7fELF"
    assert (staging / "top" / "include" / "up").read_bytes() == b"\x7fELF"
    assert (staging / "top" / "lib" / "libx-copy.so").read_bytes() == b"\x7fELF"


def test_zip_members_without_type_bits_are_files(box: Sentinel) -> None:
    """Windows tools write no Unix mode; Python's writestr(name, ...) writes a bare 0o600."""
    arc = box.base / "arcs" / "plain.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("top/a.txt", b"a")
        info = zipfile.ZipInfo("top/b.txt")
        info.create_system = 0  # MS-DOS: external_attr holds no Unix mode
        zf.writestr(info, b"b")
    staging = extract(arc, box.lib)
    assert (staging / "top" / "a.txt").read_bytes() == b"a" and (staging / "top" / "b.txt").read_bytes() == b"b"


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_link_leaving_the_top_folder_is_refused_at_placing(box: Sentinel, fmt: str) -> None:
    """Inside the staging dir but outside the archive's top folder: once the top folder is
    renamed into place, `../sibling` would point beside the target."""
    members: list[Member] = [("f", "top/lib/libx.so", b"x"), ("l", "top/lib/out", "../../sibling")]
    arc = build(box.base / "arcs" / "sibling", fmt, members)
    before = box.state()
    with pytest.raises(UnsafeArchive) as ei:
        extract_into(arc, box.lib / "cudnn-9")
    assert "out" in ei.value.message and ei.value.code == ExitCode.BAD_INPUT
    assert box.state() == before


# --- limits --------------------------------------------------------------------------------


def _deflate_zeros(prefix: bytes, zeros: int, chunk: int = 1 << 20) -> tuple[bytes, int]:
    """Raw deflate of prefix + `zeros` zero bytes, built without compressing every chunk
    (after a full flush each chunk of zeros compresses to the same bytes); (data, crc32)."""
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = co.compress(prefix) + co.flush(zlib.Z_FULL_FLUSH)
    block = bytes(chunk)
    first = co.compress(block) + co.flush(zlib.Z_FULL_FLUSH)
    same = co.compress(block) + co.flush(zlib.Z_FULL_FLUSH)
    n, rest = divmod(zeros, chunk)
    tail = co.compress(bytes(rest)) + co.flush()
    crc = zlib.crc32(prefix)
    for _ in range(n):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(bytes(rest), crc)
    return head + first + same * (n - 1) + tail, crc


def zip_bomb(path: Path, size: int, declared: Optional[int] = None) -> Path:
    """A valid zip holding one `size`-byte file of zeros, ~1/1000 of that on disk; with
    `declared`, its headers lie and say that many bytes."""
    data, crc = _deflate_zeros(b"", size)
    name = b"top/lib/libcudnn.so.9.1.0"
    usize = size if declared is None else declared
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), usize, len(name), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, 0, 8, 0, 0x21, crc, len(data), usize,
                          len(name), 0, 0, 0, 0, 0o100644 << 16, 0)
    cd_offset = len(local) + len(name) + len(data)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + len(name), cd_offset, 0)
    path.write_bytes(local + name + data + central + name + end)
    return path


def tar_gz_bomb(path: Path, size: int) -> Path:
    info = tarfile.TarInfo("top/lib/libcudnn.so.9.1.0")
    info.size = size
    header = info.tobuf(tarfile.GNU_FORMAT)
    # Member data, its padding to 512, two zero end blocks, padding to the 10240 record.
    body = size + (-size % 512) + 1024
    zeros = body + (-(len(header) + body) % tarfile.RECORDSIZE)
    data, crc = _deflate_zeros(header, zeros)
    trailer = struct.pack("<II", crc, (len(header) + zeros) & 0xFFFFFFFF)
    gz = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + data + trailer
    path.write_bytes(gz)
    return path


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_compression_bomb_is_refused_before_writing(box: Sentinel, fmt: str) -> None:
    arc = box.base / "arcs" / f"bomb.{fmt}"
    (zip_bomb if fmt == "zip" else tar_gz_bomb)(arc, 2 << 30)  # 2 GiB of zeros
    assert arc.stat().st_size < 3 << 20
    if fmt == "zip":
        with zipfile.ZipFile(arc) as zf:  # a real, valid archive (the first MiB reads back)
            with zf.open(zf.infolist()[0]) as fh:
                assert fh.read(1 << 20) == bytes(1 << 20)
    err = assert_refused(box, arc)
    assert "compression ratio" in err.message and "GiB" in err.message


def test_bomb_whose_headers_lie_writes_no_more_than_they_say(box: Sentinel) -> None:
    """Headers saying 1 MiB (passes every limit) over 256 MiB of zeros: never more than the
    header's bytes reach the disk; the archive is refused (exit 5), nothing kept."""
    arc = zip_bomb(box.base / "arcs" / "liar.zip", 256 << 20, declared=1 << 20)
    before = box.state()
    with pytest.raises(ArchiveError) as ei:
        extract(arc, box.lib)
    assert ei.value.code == ExitCode.BAD_INPUT and ei.value.hint
    assert box.state() == before


def test_total_size_limit(box: Sentinel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive_mod, "MAX_TOTAL_BYTES", 1 << 20)
    members: list[Member] = [("f", f"top/part{i}", os.urandom(300_000)) for i in range(4)]
    err = assert_refused(box, build(box.base / "arcs" / "big", "tar.xz", members))
    assert "MiB" in err.message and "uncompressed" in err.message


def test_member_count_limit(box: Sentinel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive_mod, "MAX_MEMBERS", 50)
    members: list[Member] = [("f", f"top/f{i}", b"x") for i in range(51)]
    for fmt in ("zip", "tar.gz"):
        err = assert_refused(box, build(box.base / "arcs" / f"many-{fmt}", fmt, members))
        assert "more than 50 members" in err.message


def test_limits_pass_a_real_cudnn_sized_archive() -> None:
    """cuDNN 9.8's x86_64 archive: 923,946,888 bytes (tests/fixtures/cudnn/redistrib_9.8.0.json)
    and about 1 GB unpacked; xz on shared libraries compresses a few times, not a hundred."""
    assert archive_mod.MAX_TOTAL_BYTES >= 4 * 1_000_000_000
    assert archive_mod.MAX_RATIO >= 20
    assert archive_mod.MAX_MEMBERS >= 10_000


# --- input checks before anything runs -----------------------------------------------------


def test_check_archive_input(tmp_path: Path) -> None:
    good = zip_archive(tmp_path / "ok.zip", [("f", "top/a", b"x")])
    check_archive_input(good)
    tgz = tar_archive(tmp_path / "ok.tgz", [("f", "top/a", b"x")])
    check_archive_input(tgz)
    txz = tar_archive(tmp_path / "ok.txz", [("f", "top/a", b"x")], "w:xz")
    check_archive_input(txz)
    plain = tar_archive(tmp_path / "ok.tar", [("f", "top/a", b"x")], "w")
    check_archive_input(plain)
    (tmp_path / "notes.txt").write_text("not an archive\n")
    (tmp_path / "dir.tar.xz").mkdir()
    cases = {
        tmp_path / "missing.tar.xz": "not found",
        tmp_path / "dir.tar.xz": "not a file",
        tmp_path / "notes.txt": "not a .tar.xz",
    }
    for path, words in cases.items():
        with pytest.raises(ArchiveError) as ei:
            check_archive_input(path)
        assert words in ei.value.message and ei.value.hint and ei.value.code == ExitCode.BAD_INPUT


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_check_archive_input_unreadable(tmp_path: Path) -> None:
    arc = zip_archive(tmp_path / "ok.zip", [("f", "top/a", b"x")])
    arc.chmod(0)
    with pytest.raises(ArchiveError) as ei:
        check_archive_input(arc)
    assert "cannot read" in ei.value.message and ei.value.code == ExitCode.BAD_INPUT


# --- generated archives --------------------------------------------------------------------

_PART = st.sampled_from(["a", "b", "lnk", "..", ".", "", ".bashrc", "home", "x" * 120])
_NAME = st.lists(_PART, min_size=1, max_size=5).map("/".join) | st.sampled_from(["/abs", "/tmp/x", "a/../.."])
_TARGET = _NAME | st.sampled_from(["../../..", "/etc/passwd", "..", ".", "a/../../..", "lnk/../.."])
_MEMBER = st.tuples(st.sampled_from("fffdllh"), _NAME, _TARGET)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.lists(_MEMBER, min_size=1, max_size=10), fmt=st.sampled_from(["tar", "zip"]))
def test_generated_archives_never_touch_anything_outside(raw: list[tuple[str, str, str]], fmt: str) -> None:
    members: list[Member] = [(k, n, (b"data" if k == "f" else (t if k in "lh" else None))) for k, n, t in raw]
    with tempfile.TemporaryDirectory() as tmp:
        box = Sentinel(Path(tmp))
        try:
            arc = build(box.base / "arcs" / "gen", fmt, members)
        except (ValueError, OSError, IndexError):
            return  # tarfile/zipfile cannot write this member (an empty zip name): nothing to test
        before = box.state()
        try:
            staging = extract(arc, box.lib)
        except ArchiveError as err:
            assert err.code == ExitCode.BAD_INPUT and err.hint
            assert box.state() == before
            return
        assert box.state(inside=staging) == before
        for dirpath, dirnames, filenames in os.walk(staging):
            for name in dirnames + filenames:
                real = os.path.realpath(os.path.join(dirpath, name))
                assert real == str(staging) or real.startswith(str(staging) + os.sep), (name, real)
