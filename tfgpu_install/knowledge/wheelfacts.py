"""What one TensorFlow wheel says about itself, read with HTTP range requests (a few MB of a ~600 MB
file: zipfile needs only the central directory and the members it reads), and the row of matrix.yaml
it makes. Shared by `tfgpu-install knowledge update` and scripts/gather_knowledge.py.

Where each fact comes from, in order (the row's `sources` says which, per fact):
- CUDA: build_info.py's cuda_version; else (TF 2.22+, whose build_info.py names no CUDA) the and-cuda
  extra's nvidia-cuda-runtime (else -nvcc) pin.
- cuDNN: the and-cuda extra's nvidia-cudnn pin; else build_info.py's cudnn_version.
- SASS/PTX: build_info.py's cuda_compute_capabilities; else the fat-binary headers of the wheel's own
  shared libraries (knowledge/fatbin.py), smallest library first, until one carries GPU code.
A wheel whose GPU facts cannot be established this way gets no row (the caller lists it as skipped with
the reason); nothing is guessed.

Every read is bounded (RangeFile.LIMIT bytes in all, members up to MEMBER_LIMIT); nothing in the
wheel's text is evaluated (build_info.py is read with ast.literal_eval only).
"""

from __future__ import annotations

import ast
import io
import re
import zipfile
from typing import TYPE_CHECKING, Any, Optional, TypedDict, Union

if TYPE_CHECKING:
    import requests

WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<ver>[^-]+)-(?P<py>cp\d+)-(?P<abi>[^-]+)-(?P<plat>.+)\.whl$")
FINAL_RE = re.compile(r"^2\.\d+\.\d+(\.post\d+)?$")
PRE_RE = re.compile(r"^2\.\d+\.\d+(a|b|rc)\d+$")  # 2.22.0rc0: learned only with `knowledge update --pre`
MEMBER_LIMIT = 1 << 20  # METADATA and build_info.py are a few KB


class RangeError(Exception):
    """The server would not serve a byte range, or the wheel is not what its index said."""


class DeadlineExceeded(Exception):
    """The overall deadline of a `knowledge update` passed (a server that drips bytes never times out)."""


class Deadline:
    """One clock for every read of a run: a per-read timeout does not stop an index that sends one byte
    every few milliseconds for hours."""

    def __init__(self, seconds: float) -> None:
        import time

        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        import time

        return self.end - time.monotonic()

    def check(self, what: str) -> None:
        if self.left() <= 0:
            raise DeadlineExceeded(f"the deadline ({self.seconds:g} s, --timeout) passed while {what}")

    def timeout(self, cap: float) -> float:
        """A per-request timeout that never reaches past the deadline."""
        return max(0.5, min(cap, self.left()))


def read_body(raw: Any, limit: int, deadline: Optional[Deadline], what: str) -> bytes:
    """At most limit + 1 bytes of a streamed response, checking the deadline between reads (read1 returns
    what has arrived, so a dripping server is noticed within one read timeout)."""
    read1 = getattr(raw, "read1", None)
    out = bytearray()
    while len(out) <= limit:
        if deadline is not None:
            deadline.check(what)
        want = min(1 << 16, limit + 1 - len(out))
        chunk = read1(want, decode_content=True) if read1 is not None else raw.read(min(want, 4096),
                                                                                    decode_content=True)
        if not chunk:
            break
        out += chunk
    return bytes(out)

class RangeFile(io.RawIOBase):
    """A seekable read-only file over HTTP `Range: bytes=a-b` requests, cached in blocks."""

    BLOCK = 256 << 10
    # never more than this from one wheel: its central directory (3 MB for 2.22's 25,000 members), two
    # small members, and the shared libraries read for their fat binaries (~10 MB, smallest first)
    LIMIT = 32 << 20

    def __init__(self, session: "requests.Session", url: str, size: int, timeout: float = 60,
                 deadline: Optional[Deadline] = None) -> None:
        self.session, self.url, self.size, self.pos, self.timeout = session, url, size, 0, timeout
        self.deadline = deadline
        self.cache: dict[int, bytes] = {}
        self.fetched = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, off: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + off)
        return self.pos

    def _block(self, i: int) -> bytes:
        if i in self.cache:
            return self.cache[i]
        start = i * self.BLOCK
        end = min(self.size, start + self.BLOCK) - 1
        if self.fetched + (end - start + 1) > self.LIMIT:
            raise RangeError(f"{self.url}: more than {self.LIMIT >> 20} MiB needed to read its metadata")
        timeout = self.deadline.timeout(self.timeout) if self.deadline else self.timeout
        r = self.session.get(self.url, headers={"Range": f"bytes={start}-{end}"}, timeout=timeout, stream=True)
        try:
            if r.status_code != 206:
                raise RangeError(f"{self.url}: the server answered {r.status_code} to a range request (206 expected)")
            data = read_body(r.raw, end - start + 1, self.deadline, f"reading {self.url}")
        finally:
            r.close()
        if len(data) != end - start + 1:
            raise RangeError(f"{self.url}: asked for {end - start + 1} bytes at {start}, got {len(data)}")
        self.fetched += len(data)
        self.cache[i] = data
        return data

    def read(self, n: Optional[int] = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = max(0, min(n, self.size - self.pos))
        out = bytearray()
        while n > 0:
            i, o = divmod(self.pos, self.BLOCK)
            b = self._block(i)[o : o + n]
            if not b:
                break
            out += b
            self.pos += len(b)
            n -= len(b)
        return bytes(out)

    def readinto(self, b: Any) -> int:
        d = self.read(len(b))
        b[: len(d)] = d
        return len(d)


BuildInfo = dict[str, object]  # build_info.py's names -> the literal values it assigns (any literal)


class FatbinScan(TypedDict, total=False):
    """What scan_fatbins found: the first library's lists, or why none was read."""

    library: str
    containers: int
    sass: list[str]
    ptx: list[str]
    uneven: bool
    error: str


class WheelFacts(TypedDict, total=False):
    requires_dist: list[str]
    requires_python: Optional[str]
    build_info: BuildInfo
    fatbin: FatbinScan  # only when build_info.py names no compute capabilities


# One wheel of the index's PEP 691 file list (the fields read here), with WHEEL_RE's groups added.
IndexFile = TypedDict("IndexFile", {"filename": str, "url": str, "size": int, "yanked": Union[bool, str],
                                    "upload-time": str, "name": str, "ver": str, "py": str, "abi": str,
                                    "plat": str}, total=False)


class LearnedRow(TypedDict, total=False):
    """A matrix.yaml row learned from the index (learned_row; knowledge/learned.py's schema checks it)."""

    tensorflow: str
    package: str
    released: str
    pythons: list[str]
    cuda: Optional[str]
    cudnn: Optional[str]
    sass: list[str]
    ptx: list[str]
    manylinux: str
    min_glibc: str
    cuda_from: str
    extra: Optional[str]
    pins_kind: str
    pins: dict[str, str]
    extra_requires: dict[str, str]
    constraints: dict[str, str]
    defects: list[str]
    build_info: dict[str, str]
    source: str
    sources: dict[str, str]
    unconfirmed: list[str]
    notes: str
    first_seen: str


def parse_build_info(text: str) -> BuildInfo:
    """build_info.py has had three shapes: an OrderedDict literal (2.3+), module-level assignments
    (2.0-2.2), and a plain dict. The literal values it assigns; nothing is executed."""
    out: BuildInfo = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return out
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        val = node.value
        if isinstance(val, ast.Call) and val.args:  # OrderedDict([...])
            val = val.args[0]
        try:
            lit = ast.literal_eval(val)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
        if isinstance(lit, list) and all(isinstance(x, tuple) and len(x) == 2 for x in lit):
            out.update(dict(lit))
        elif isinstance(lit, dict):
            out.update(lit)
        else:
            out[node.targets[0].id] = lit
    return out


def _member(z: zipfile.ZipFile, name: str) -> str:
    info = z.getinfo(name)
    if info.file_size > MEMBER_LIMIT:
        raise RangeError(f"{name} is {info.file_size} bytes (a wheel's is a few KB)")
    with z.open(info) as fh:
        return fh.read(MEMBER_LIMIT + 1)[:MEMBER_LIMIT].decode("utf-8", "replace")


def read_wheel(fh: io.RawIOBase) -> WheelFacts:
    """METADATA's Requires-Dist / Requires-Python and build_info.py's values of one wheel file; when
    build_info.py names no compute capabilities, what the wheel's fat binaries carry ("fatbin")."""
    try:
        z = zipfile.ZipFile(fh)
        names = z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise RangeError(f"not a readable wheel: {exc}") from exc
    meta_name = next((n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
    if meta_name is None:
        raise RangeError("the wheel has no .dist-info/METADATA")
    headers = _member(z, meta_name).split("\n\n", 1)[0]
    bi_names = [n for n in names if n.endswith("python/platform/build_info.py")]
    build_info = parse_build_info(_member(z, bi_names[0])) if bi_names else {}
    requires = [ln.split(":", 1)[1].strip() for ln in headers.splitlines() if ln.startswith("Requires-Dist:")]
    req_py = next((ln.split(":", 1)[1].strip() for ln in headers.splitlines() if ln.startswith("Requires-Python:")),
                  None)
    out: WheelFacts = {"requires_dist": requires, "requires_python": req_py, "build_info": build_info}
    if not _archs(build_info.get("cuda_compute_capabilities"))[0] and build_info.get("is_cuda_build") is not False:
        out["fatbin"] = scan_fatbins(z, fh)
    return out


class _Slice(io.RawIOBase):
    """A stored (uncompressed) zip member as a seekable file: reads go straight to the wheel's ranges."""

    def __init__(self, fh: io.RawIOBase, start: int, size: int) -> None:
        self.fh, self.start, self.size, self.pos = fh, start, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, off: int, whence: int = 0) -> int:
        self.pos = max(0, {0: 0, 1: self.pos, 2: self.size}[whence] + off)
        return self.pos

    def read(self, n: Optional[int] = -1) -> bytes:
        n = self.size - self.pos if n is None or n < 0 else min(n, self.size - self.pos)
        if n <= 0:
            return b""
        self.fh.seek(self.start + self.pos)
        data = self.fh.read(n)
        self.pos += len(data)
        return data


def _open_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, fh: io.RawIOBase) -> Any:
    """A seekable view of one member: a stored one by offset (only what is read is fetched), a deflated
    one through zipfile (seeking forward inflates what lies between; ranges already read are cached)."""
    if info.compress_type == zipfile.ZIP_STORED:
        import struct

        fh.seek(info.header_offset)
        local = fh.read(30)
        if len(local) != 30 or local[:4] != b"PK\x03\x04":
            raise RangeError(f"{info.filename}: no local file header")
        name_len, extra_len = struct.unpack_from("<HH", local, 26)
        return _Slice(fh, info.header_offset + 30 + name_len + extra_len, info.file_size)
    return z.open(info)


def scan_fatbins(z: zipfile.ZipFile, fh: io.RawIOBase) -> FatbinScan:
    """The SASS/PTX lists of the first of the wheel's shared libraries (smallest first) that carries CUDA
    fat binaries: {"library", "containers", "sass", "ptx", "uneven", "read"}; {"error": why} when none does
    within the read limit. The architectures are a build setting, alike in every library of a release."""
    from tfgpu_install.knowledge.fatbin import FatbinError, read_fatbins

    libs = sorted((i for i in z.infolist() if ".so" in i.filename.rsplit("/", 1)[-1] and not i.is_dir()),
                  key=lambda i: (i.compress_size, i.filename))
    read = 0
    for info in libs:
        try:
            facts = read_fatbins(_open_member(z, info, fh), info.file_size)
        except RangeError as exc:  # the read limit: the larger libraries were not read
            return {"error": f"no library carrying CUDA fat binaries among the {read} smallest of {len(libs)} "
                             f"shared libraries read ({exc})"}
        except (FatbinError, zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
            read += 1
            continue  # not an ELF this reader understands: not where the GPU code is
        read += 1
        if facts is not None and facts.containers and (facts.sass or facts.ptx):
            return {"library": info.filename, "containers": facts.containers, "sass": list(facts.sass),
                    "ptx": list(facts.ptx), "uneven": facts.uneven}
    return {"error": f"none of the wheel's {len(libs)} shared libraries carries CUDA fat binaries"}


def spec_of(req: str) -> tuple[str, str, str]:
    """'numpy (<2.0,>=1.16.0)' / 'numpy <2.0.0,>=1.23.5 ; python_version <= "3.11"' -> (name, specifier, marker)."""
    body, _, marker = req.partition(";")
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*\(?([^)]*)\)?\s*$", body)
    if not m:
        return body.strip(), "", marker.strip()
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", ""), marker.strip()


MANYLINUX_GLIBC = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}


def min_glibc(platform: str) -> Optional[str]:
    """The glibc a wheel's platform tag needs (PEP 600 manylinux_X_Y; the legacy aliases)."""
    found = None
    for tag in platform.split("."):
        m = re.match(r"manylinux_(\d+)_(\d+)_x86_64$", tag)
        if m:
            found = f"{m.group(1)}.{m.group(2)}"
        elif tag.replace("_x86_64", "") in MANYLINUX_GLIBC:
            found = found or MANYLINUX_GLIBC[tag.replace("_x86_64", "")]
    return found


def _cc(arch: str) -> Optional[str]:
    m = re.fullmatch(r"(?:sm|compute)_(\d+)(\d)[a-z]?", arch)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _archs(caps: object) -> tuple[list[str], list[str]]:
    if isinstance(caps, str):
        caps = [c.strip() for c in caps.split(",")]
    if not isinstance(caps, list):
        return [], []
    key = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    sass = sorted({c for c in (_cc(str(a)) for a in caps) if c}, key=key)
    ptx = sorted({c for c in (_cc(str(a)) for a in caps if str(a).startswith("compute_")) if c}, key=key)
    return sass, ptx


def _major_minor(v: object) -> Optional[str]:
    m = re.match(r"^(\d+)\.(\d+)", str(v or ""))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _pins(extra: dict[str, str]) -> tuple[dict[str, str], str]:
    nvidia = {n: s for n, s in extra.items() if n.startswith("nvidia-")}
    if nvidia and all(s.startswith("==") for s in nvidia.values()):
        return {n: s[2:] for n, s in nvidia.items()}, "exact"
    low = {n: m.group(1) for n, s in nvidia.items() if (m := re.search(r">=([\d.]+)", s))}
    return (low, "tested") if low and len(low) == len(nvidia) else ({}, "none")


def _constraints(requires: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for req in requires:
        n, spec, marker = spec_of(req)
        if n in ("numpy", "protobuf") and "extra" not in marker and n not in out and spec:
            out[n] = spec
    return out


def _sources(cuda_src: str, cudnn_src: str, arch_src: str, plat: str) -> dict[str, str]:
    return {
        "cuda": cuda_src, "cudnn": cudnn_src, "sass": arch_src, "ptx": arch_src,
        "pins": "METADATA Requires-Dist (extra == 'and-cuda')", "constraints": "METADATA Requires-Dist",
        "pythons": "cpXY tags of the Linux x86_64 wheels in the index",
        "released": "earliest upload-time of those wheels in the index",
        "min_glibc": f"wheel tag {plat}",
    }


_CUDA_PINS = ("nvidia-cuda-runtime-cu", "nvidia-cuda-nvcc-cu")


def _cuda(bi: BuildInfo, extra: dict[str, str]) -> tuple[Optional[str], str]:
    """The build's CUDA major.minor and where it came from: build_info.py, else the and-cuda extra's CUDA
    runtime (or nvcc) wheel, whose version is the CUDA version it carries."""
    cuda = _major_minor(bi.get("cuda_version"))
    if cuda:
        return cuda, f"build_info.py cuda_version {bi.get('cuda_version')!r}"
    for prefix in _CUDA_PINS:
        for name, spec in sorted(extra.items()):
            low = re.search(r"(?:>=|==|~=)\s*(\d+\.\d+[\d.]*)", spec)
            if name.startswith(prefix) and low:
                return (_major_minor(low.group(1)),
                        f"and-cuda pin {name}{spec} (METADATA Requires-Dist; build_info.py names no CUDA)")
    return None, "build_info.py names no CUDA version and the and-cuda extra pins no CUDA runtime wheel"


def _arch_facts(bi: BuildInfo, fatbin: Optional[FatbinScan]) -> tuple[list[str], list[str], str]:
    """SASS and PTX lists and their source: build_info.py, else the wheel's fat binaries."""
    sass, ptx = _archs(bi.get("cuda_compute_capabilities"))
    if sass or ptx:
        caps = bi.get("cuda_compute_capabilities")
        return sass, ptx, f"build_info.py cuda_compute_capabilities {caps!r} (compute_XY = PTX and SASS for XY)"
    if fatbin and "library" in fatbin:
        n = fatbin["containers"]
        alike = "; not alike: the lists are what every one carries" if fatbin.get("uneven") else ", all alike"
        return (list(fatbin["sass"]), list(fatbin["ptx"]),
                f"fat-binary headers of {fatbin['library']} in the wheel ({n} fat binar{'y' if n == 1 else 'ies'}"
                f"{alike}; read by HTTP range requests; build_info.py names no compute capabilities)")
    why = (fatbin or {}).get("error") or "build_info.py names no compute capabilities"
    return [], [], why


def _pythons(files: list[IndexFile]) -> list[str]:
    # "cp312" -> "3.12"; an odd tag gives an odd value that the schema then refuses, naming the row
    return sorted({f"{f['py'][2]}.{f['py'][3:]}" for f in files},
                  key=lambda v: tuple(int(x) if x.isdigit() else -1 for x in v.split(".")))


def _raw_build_info(bi: BuildInfo) -> dict[str, str]:
    keep = ("cuda_version", "cudnn_version", "cuda_compute_capabilities", "is_cuda_build")
    return {k: ",".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in bi.items() if k in keep}


def learned_row(version: str, files: list[IndexFile], wheel: WheelFacts, index_url: str,
                wheel_file: IndexFile, today: str) -> LearnedRow:
    """A matrix.yaml row for a release read from the index, marked learned: every value names where it
    came from; what the wheel cannot tell (known defects) is listed unconfirmed."""
    bi = wheel["build_info"]
    extra = {n: s for n, s, mk in (spec_of(r) for r in wheel["requires_dist"]) if "and-cuda" in mk}
    pins, pins_kind = _pins(extra)
    cudnn_name, cudnn_pin = next(((n, v) for n, v in pins.items() if n.startswith("nvidia-cudnn")), ("", None))
    cuda, cuda_src = _cuda(bi, extra)
    cudnn_src = (f"and-cuda pin {cudnn_name}{extra.get(cudnn_name, '')} (METADATA Requires-Dist)" if cudnn_pin
                 else f"build_info.py cudnn_version {bi.get('cudnn_version')!r}")
    sass, ptx, arch_src = _arch_facts(bi, wheel.get("fatbin"))
    plat = wheel_file["plat"]
    return {
        "tensorflow": version, "package": "tensorflow",
        "released": min(str(f.get("upload-time") or today) for f in files)[:10],
        "pythons": _pythons(files),
        "cuda": cuda,
        "cudnn": _major_minor(cudnn_pin) or _major_minor(bi.get("cudnn_version")),
        "sass": sass, "ptx": ptx, "manylinux": plat, "min_glibc": min_glibc(plat) or "",
        "cuda_from": "pip" if extra else "system", "extra": "and-cuda" if extra else None,
        "pins_kind": pins_kind, "pins": pins, "extra_requires": extra,
        "constraints": _constraints(wheel["requires_dist"]),
        "defects": [],
        "build_info": _raw_build_info(bi),
        "source": f"wheel:{wheel_file['filename']} from {index_url} (learned {today})",
        "sources": _sources(cuda_src, cudnn_src, arch_src, plat),
        "unconfirmed": ["defects"],
        "notes": (f"learned, not curated{' (a pre-release)' if PRE_RE.match(version) else ''}: read from {index_url} "
                  f"on {today} by `tfgpu-install knowledge update`"),
    }
