#!/usr/bin/env python3
"""Re-derive the TensorFlow release facts in profiles/matrix.yaml from the wheels on PyPI.

How the data in matrix.yaml was obtained (and how to check it again):

1. The PyPI simple index (PEP 691 JSON, the same index pip reads) lists every file of
   `tensorflow` and `tensorflow-gpu` with its upload time.  From the Linux x86_64 wheel
   file names we take the CPython tags (-> supported Pythons) and the manylinux tag
   (-> minimum glibc); the earliest upload time of those wheels is the release date.
2. From one Linux x86_64 wheel per release we read, with HTTP range requests (a few MB
   instead of the ~500 MB wheel; zipfile only needs the central directory and two members):
   - `*.dist-info/METADATA`: Requires-Dist (numpy/protobuf bounds; the `and-cuda` extra's
     nvidia-* pins), Requires-Python;
   - `tensorflow/python/platform/build_info.py`: cuda_version, cudnn_version and
     cuda_compute_capabilities as the build recorded them
   (sm_XY = SASS; compute_XY = PTX *and* SASS for XY, as TensorFlow's .bazelrc comment says).
3. For the releases whose build_info.py lists no architectures (2.0-2.2), `--fatbin` streams the
   wheel's largest shared library (~300-450 MB read, nothing stored) and lists the CUDA fat-binary
   entries it embeds: SASS cubins and PTX, per architecture.  The same scan of 2.3.0, 2.4.0,
   2.11.0, 2.15.1, 2.17.0 and 2.21.0 agreed with their build_info.py (compute_XY -> both).
4. The facts are saved as JSON (scripts/knowledge_facts.json, merged across runs); `--write-matrix`
   turns them into profiles/matrix.yaml, adding what a wheel cannot tell from the curated tables
   below (TensorFlow's tested-build table for cuDNN minor versions, known defects), each with its
   source.  Every value taken from a wheel cites it as `wheel:<file name>`.

Usage:
    python scripts/gather_knowledge.py                          # all releases 2.0.0 .. newest -> facts
    python scripts/gather_knowledge.py --only 2.21.0 --fatbin   # one release, with the fat-binary scan
    python scripts/gather_knowledge.py --write-matrix           # facts -> profiles/matrix.yaml (offline)
    python scripts/gather_knowledge.py --check                  # re-read PyPI, compare with matrix.yaml
    python scripts/gather_knowledge.py --check --offline        # compare the saved facts (a CI test)

Needs network access to pypi.org / files.pythonhosted.org; not part of the CI tests.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, NamedTuple, Optional

ROOT = Path(__file__).resolve().parent.parent
SIMPLE = "https://pypi.org/simple/{name}/"
WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<ver>[^-]+)-(?P<py>cp\d+)-(?P<abi>[^-]+)-(?P<plat>.+)\.whl$"
)
SCAN_FATBIN = False
FINAL_RE = re.compile(r"^2\.\d+\.\d+(\.post\d+)?$")  # finals and post-releases (2.15.0.post1)


class HttpRangeFile(io.RawIOBase):
    """A seekable read-only file over HTTP range requests, cached in 1 MiB blocks."""

    BLOCK = 1 << 20

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0
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
        self.pos = base + off
        return self.pos

    def _block(self, i: int) -> bytes:
        if i not in self.cache:
            start = i * self.BLOCK
            end = min(self.size, start + self.BLOCK) - 1
            req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}"})
            with urllib.request.urlopen(req, timeout=120) as r:
                if r.status != 206:
                    raise RuntimeError(f"{self.url}: server ignored the range request")
                self.cache[i] = r.read()
            self.fetched += end - start + 1
        return self.cache[i]

    def read(self, n: Optional[int] = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = max(0, min(n, self.size - self.pos))
        out = bytearray()
        while n > 0:
            i, o = divmod(self.pos, self.BLOCK)
            b = self._block(i)[o : o + n]
            out += b
            self.pos += len(b)
            n -= len(b)
        return bytes(out)

    def readinto(self, b: Any) -> int:
        d = self.read(len(b))
        b[: len(d)] = d
        return len(d)


FATBIN_MAGIC = 0xBA55ED50  # header of an embedded CUDA fat binary (nvcc/clang output)


def scan_fatbins(fh: Any) -> dict[str, list[int]]:
    """Which GPU code a shared library embeds: every fat binary entry is SASS (kind 2, a cubin
    for one sm_XY) or PTX (kind 1, compute_XY).  Returns {"sass": [35, ...], "ptx": [70, ...]}.
    Reads the (decompressed) library as a stream, 16 MiB at a time."""
    import struct

    magic = struct.pack("<I", FATBIN_MAGIC)
    found: dict[str, set[int]] = {"sass": set(), "ptx": set()}
    buf = b""
    while True:
        chunk = fh.read(16 << 20)
        if not chunk:
            break
        buf += chunk
        pos = 0
        while True:
            i = buf.find(magic, pos)
            if i < 0 or i + 64 > len(buf):
                break
            _ver, hsz, _fsz = struct.unpack_from("<HHQ", buf, i + 4)
            p = i + hsz
            for _ in range(64):  # entries that lie in this buffer are enough to see the arch set
                if p + 32 > len(buf):
                    break
                kind, _flags, ehsz, psz = struct.unpack_from("<HHIQ", buf, p)
                if kind not in (1, 2) or not 32 <= ehsz <= 256:
                    break
                arch = struct.unpack_from("<I", buf, p + 28)[0]
                found["ptx" if kind == 1 else "sass"].add(arch)
                p += ehsz + psz
            pos = i + 4
        buf = buf[-64:]
    return {k: sorted(v) for k, v in found.items()}


class StreamingRangeFile(HttpRangeFile):
    """For reading one large member front to back: bigger blocks, bounded cache."""

    BLOCK = 8 << 20

    def _block(self, i: int) -> bytes:
        if i not in self.cache and len(self.cache) > 4:
            self.cache.clear()
        return super()._block(i)


def read_fatbins(url: str, size: int) -> dict[str, Any]:
    """Scan the largest shared library of a wheel (where the GPU kernels live:
    _pywrap_tensorflow_internal.so up to 2.15, libtensorflow_cc.so.2 after)."""
    z = zipfile.ZipFile(StreamingRangeFile(url, size))
    libs = [i for i in z.infolist() if ".so" in i.filename.rsplit("/", 1)[-1]]
    big = max(libs, key=lambda i: i.file_size)
    with z.open(big) as fh:
        return {"library": big.filename, **scan_fatbins(fh)}


def simple_index(name: str) -> dict[str, Any]:
    req = urllib.request.Request(
        SIMPLE.format(name=name), headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)  # type: ignore[no-any-return]


def parse_build_info(text: str) -> dict[str, Any]:
    """build_info.py's literal values (the package's reader: `tfgpu-install knowledge update` uses it too)."""
    sys.path.insert(0, str(ROOT))
    from tfgpu_install.knowledge.wheelfacts import parse_build_info as parse

    return parse(text)


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x.replace("post", "")) for x in v.split("."))


def read_wheel(url: str, size: int) -> dict[str, Any]:
    f = HttpRangeFile(url, size)
    z = zipfile.ZipFile(f)
    meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    meta = z.read(meta_name).decode("utf-8", "replace")
    bi_names = [n for n in z.namelist() if n.endswith("python/platform/build_info.py")]  # tensorflow_core/ in 2.0-2.1
    build_info: dict[str, Any] = {}
    if bi_names:
        build_info = parse_build_info(z.read(bi_names[0]).decode("utf-8", "replace"))
    headers = meta.split("\n\n", 1)[0]
    requires = [ln.split(":", 1)[1].strip() for ln in headers.splitlines() if ln.startswith("Requires-Dist:")]
    req_py = next(
        (ln.split(":", 1)[1].strip() for ln in headers.splitlines() if ln.startswith("Requires-Python:")),
        None,
    )
    return {"requires_dist": requires, "requires_python": req_py, "build_info": build_info,
            "bytes_fetched": f.fetched}


def gather(only: Optional[set[str]] = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for package in ("tensorflow", "tensorflow-gpu"):
        idx = simple_index(package)
        by_ver: dict[str, list[dict[str, Any]]] = {}
        for f in idx["files"]:
            m = WHEEL_RE.match(f["filename"])
            if not m or not ("linux" in m["plat"] and m["plat"].endswith("x86_64")) or f.get("yanked"):
                continue
            by_ver.setdefault(m["ver"], []).append({**f, **m.groupdict()})
        for ver, files in by_ver.items():
            if not FINAL_RE.match(ver) or (only and ver not in only):
                continue
            # tensorflow 2.0.x on PyPI is CPU-only; its GPU build is tensorflow-gpu.
            # tensorflow-gpu 2.1+ is a duplicate of tensorflow: keep only 2.0.x of it.
            major_minor = tuple(int(x) for x in ver.split(".")[:2])
            if package == "tensorflow" and major_minor == (2, 0):
                continue
            if package == "tensorflow-gpu" and major_minor != (2, 0):
                continue
            pythons = sorted({f"{p[2]}.{p[3:]}" for p in (f["py"] for f in files)},
                             key=lambda v: tuple(int(x) for x in v.split(".")))
            plats = sorted({f["plat"] for f in files})
            newest = max(files, key=lambda f: int(f["py"][2:]))
            print(f"{package} {ver}: reading {newest['filename']}", file=sys.stderr)
            wheel = read_wheel(newest["url"], newest["size"])
            if SCAN_FATBIN:
                wheel["fatbin"] = read_fatbins(newest["url"], newest["size"])
            rows.append({
                "package": package, "version": ver,
                "uploaded": min(f["upload-time"] for f in files)[:10],
                "pythons": pythons, "platforms": plats,
                "wheel": newest["filename"], "wheel_sha256": newest["hashes"].get("sha256"),
                **wheel,
            })
    rows.sort(key=lambda r: version_key(r["version"]))
    return rows


def write_pci_ids(pci_ids: Path, out: Path) -> int:
    """PCI device id -> compute capability, from pci.ids names matched against profiles/gpus.yaml."""
    from tfgpu_install.knowledge.pci_ids import build_table, parse_pci_ids, render_table
    from tfgpu_install.knowledge.schema import parse_gpus

    text = pci_ids.read_text(encoding="utf-8", errors="replace")
    version = re.search(r"^#\s*Version:\s*(\S+)", text, re.M)
    rows = parse_gpus(ROOT / "profiles" / "gpus.yaml", "profiles/gpus.yaml")
    devices = parse_pci_ids(text)
    entries = build_table(devices, rows)
    source = (f"https://pci-ids.ucw.cz/ (pci.ids version {version.group(1) if version else 'unknown'}, "
              f"read from {pci_ids}) for the device names; compute capabilities from profiles/gpus.yaml")
    tmp = out.with_suffix(".tmp")
    tmp.write_text(render_table(entries, source))
    tmp.replace(out)
    by_chip = sum(1 for e in entries if e.how == "chip")
    print(f"{len(devices)} NVIDIA devices in {pci_ids}; {len(entries)} with a compute capability "
          f"({len(entries) - by_chip} by name, {by_chip} by chip) -> {out}", file=sys.stderr)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="only these versions (merged into --out)")
    ap.add_argument("--out", type=Path, default=ROOT / "scripts" / "knowledge_facts.json",
                    help="the facts file (default: scripts/knowledge_facts.json)")
    ap.add_argument("--check", action="store_true", help="re-read PyPI and compare with profiles/matrix.yaml")
    ap.add_argument("--offline", action="store_true",
                    help="with --check: compare the saved facts file instead of re-reading PyPI")
    ap.add_argument("--fatbin", action="store_true",
                    help="also scan the GPU code embedded in the wheel (reads ~300-600 MB per release)")
    ap.add_argument("--write-matrix", action="store_true",
                    help="write profiles/matrix.yaml from the facts file (no network)")
    ap.add_argument("--pci-ids", type=Path, metavar="PCI_IDS",
                    help="write profiles/pci_ids.yaml from this pci.ids file (hwdata: /usr/share/misc/pci.ids)")
    args = ap.parse_args(argv)
    if args.pci_ids:
        return write_pci_ids(args.pci_ids, ROOT / "profiles" / "pci_ids.yaml")
    if args.write_matrix:
        write_matrix(args.out, ROOT / "profiles" / "matrix.yaml")
        return 0
    if args.check and args.offline:
        return check(json.loads(args.out.read_text()))
    global SCAN_FATBIN
    SCAN_FATBIN = args.fatbin
    rows = gather(set(args.only) if args.only else None)
    if args.check:
        return check(rows)
    if args.out.exists():  # merge: keep earlier rows (and their fat-binary scans) not re-read now
        old = {r["version"]: r for r in json.loads(args.out.read_text())}
        for r in rows:
            if "fatbin" not in r and "fatbin" in old.get(r["version"], {}):
                r["fatbin"] = old[r["version"]]["fatbin"]
            old[r["version"]] = r
        rows = sorted(old.values(), key=lambda r: version_key(r["version"]))
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    tmp.replace(args.out)
    print(f"wrote {len(rows)} releases to {args.out}", file=sys.stderr)
    return 0


def check(rows: list[dict[str, Any]]) -> int:
    """Re-derive every row from PyPI and compare with profiles/matrix.yaml (exit 1 on a difference)."""
    sys.path.insert(0, str(ROOT))
    from tfgpu_install.knowledge.load import load_knowledge

    kn = load_knowledge(ROOT / "profiles")
    drift = 0
    fields = ("package", "released", "pythons", "cuda", "cudnn", "manylinux", "min_glibc", "cuda_from",
              "extra", "pins_kind", "pins", "pin_hashes", "sonames", "extra_requires", "constraints")
    for row in rows:
        rel = kn.release(row["version"])
        if rel is None:
            print(f"{row['version']}: missing from matrix.yaml")
            drift += 1
            continue
        derived = release_row(row, None)
        names = fields + (("sass", "ptx") if derived["sass"] else ())
        for key in names:
            have, want = getattr(rel, key), derived.get(key)
            if isinstance(have, tuple):
                have = list(have)
            if want in (None, {}) and have in (None, {}, "none"):
                continue
            if have != want:
                print(f"{row['version']}.{key}: matrix.yaml has {have!r}, the wheel says {want!r}")
                drift += 1
    print(f"checked {len(rows)} releases, {drift} differences")
    return 1 if drift else 0


# --------------------------------------------------------------------------------------------
# Writing profiles/matrix.yaml from the gathered facts (--write-matrix).
# What a wheel cannot tell is curated below, each entry with its source.

TESTED_TABLE = ("https://www.tensorflow.org/install/source#gpu (tested build configurations; "
                "text in github.com/tensorflow/docs site/en/install/source.md)")
BAZELRC = ("https://github.com/tensorflow/tensorflow/blob/0071ad1d1f9e35ead7169c50dbe754ce5c27cae1/.bazelrc "
           "(HERMETIC_CUDA_VERSION=12.5.1, HERMETIC_CUDNN_VERSION=9.3.0)")
# (cuDNN, CUDA) from the tested-build table, per minor line (the table lists x.y.0).
TESTED = {
    "2.0": ("7.4", "10.0"), "2.1": ("7.6", "10.1"), "2.2": ("7.6", "10.1"), "2.3": ("7.6", "10.1"),
    "2.4": ("8.0", "11.0"), "2.5": ("8.1", "11.2"), "2.6": ("8.1", "11.2"), "2.7": ("8.1", "11.2"),
    "2.8": ("8.1", "11.2"), "2.9": ("8.1", "11.2"), "2.10": ("8.1", "11.2"), "2.11": ("8.1", "11.2"),
    "2.12": ("8.6", "11.8"), "2.13": ("8.6", "11.8"), "2.14": ("8.7", "11.8"), "2.15": ("8.9", "12.2"),
    "2.16": ("8.9", "12.3"), "2.17": ("8.9", "12.3"), "2.18": ("9.3", "12.5"),
}
MANYLINUX_GLIBC = {  # PEP 571 / 599 / 600
    "manylinux2010": ("2.12", "PEP 571: manylinux2010 = glibc 2.12"),
    "manylinux2014": ("2.17", "PEP 599: manylinux2014 = glibc 2.17"),
}
# pip install --dry-run --report of the 2.21.0 ranges (python 3.11, manylinux_2_27_x86_64), 2026-12-03
RESOLVED_TODAY = ("re-checked 2026-12-03: nvidia-cudnn-cu12 9.28.0.42, nvidia-cublas-cu12 12.9.3.13, "
                  "nvidia-nccl-cu12 2.32.3")
ISSUE_TRT = "https://github.com/tensorflow/tensorflow/issues/66517"
DEFECTS: dict[str, list[dict[str, Any]]] = {
    "2.14.*": [{
        "id": "trt-pin-no-py311",
        "text": "the and-cuda extra pins tensorrt==8.5.3.1, which has no Python 3.11 wheel on PyPI, "
                "so `pip install tensorflow[and-cuda]` fails on 3.11",
        "source": "https://github.com/tensorflow/tensorflow/issues/61986; re-checked 2026-12-03: "
                  "pip download tensorrt==8.5.3.1 finds cp310 and no cp311 wheel",
        "blocks": False, "pythons": ["3.11"], "path": "pip",
        "fix": "install tensorflow plus this row's pins (nvidia-* only, no tensorrt; TensorRT is optional "
               "for TF), not the extra",
    }],
    "2.15.0": [{
        "id": "trt-pins-uninstallable",
        "text": "the and-cuda extra pins tensorrt-libs==8.6.1 / tensorrt-bindings==8.6.1 / "
                "tensorrt==8.6.1.post1; tensorrt-libs 8.6.1 is not on PyPI, so the extra cannot install",
        "source": f"{ISSUE_TRT}; https://github.com/NVIDIA/TensorRT/issues/2933; re-checked 2026-12-03: "
                  "pip download tensorrt-libs==8.6.1 -> no matching distribution",
        "blocks": True, "path": "pip",
        "fix": "use 2.15.0.post1 or 2.15.1, whose extra drops the TensorRT pins (their METADATA)",
    }],
    "2.16.1": [{
        "id": "pip-cuda-libs-not-found",
        "text": "does not find the CUDA libraries the and-cuda extra installed (nvidia/*/lib in "
                "site-packages): the GPU list is empty",
        "source": "https://github.com/tensorflow/tensorflow/issues/63362",
        "blocks": False, "path": "pip",
        "fix": "the environment's activation sets LD_LIBRARY_PATH to the nvidia/*/lib directories",
    }],
    "2.16.2": [{
        "id": "pip-cuda-libs-not-found",
        "text": "does not find the CUDA libraries the and-cuda extra installed (reported for TF 2.16 "
                "and 2.17.0rc0)",
        "source": "https://github.com/tensorflow/tensorflow/issues/63362 (title: 'TF 2.17.0 RC0 Fails "
                  "to work with GPUs (and TF 2.16 too)')",
        "blocks": False, "path": "pip",
        "fix": "the environment's activation sets LD_LIBRARY_PATH to the nvidia/*/lib directories",
    }],
}
# No Blackwell (compute capability 10.x/12.x) defect per row: which releases fail on which GPU family is
# knowledge of its own, with its public sources (profiles/kernels.yaml known_failures).



# TF 2.5-2.13 have no and-cuda extra: the installer pins the nvidia-*-cu11 wheels itself (CUDA 11.8
# components, the same set TF 2.14's extra pins; the newest nvidia-cudnn-cu11 8.x). Versions from
# `pip index versions`, hashes from `pip install --dry-run --report` (download_info), 2026-12-03.
NUMPY2 = ("extension modules built against NumPy 1.x fail to import under NumPy 2 "
          "(https://numpy.org/doc/stable/numpy_2_0_migration_guide.html, ABI); TensorFlow supports NumPy 2 from 2.18 "
          "(https://github.com/tensorflow/tensorflow/releases/tag/v2.18.0); this TF's METADATA has no upper bound, and "
          "`import tensorflow` 2.11.1 under numpy 2 fails: 'Unable to convert function return value to a Python type' "
          "(tests/commands/test_install_cu11_real.py, 2026-12-03)")
CU11_WHEELS = {
    "nvidia-cublas-cu11": "11.11.3.6",
    "nvidia-cuda-cupti-cu11": "11.8.87",
    "nvidia-cuda-nvrtc-cu11": "11.8.89",
    "nvidia-cuda-runtime-cu11": "11.8.89",
    "nvidia-cudnn-cu11": "8.9.6.50",
    "nvidia-cufft-cu11": "10.9.0.58",
    "nvidia-curand-cu11": "10.3.0.86",
    "nvidia-cusolver-cu11": "11.4.1.48",
    "nvidia-cusparse-cu11": "11.7.5.86"
}
CU11_HASHES = {
    "nvidia-cublas-cu11": "sha256:60252822adea5d0b10cd990a7dc7bedf7435f30ae40083c7a624a85a43225abc",
    "nvidia-cuda-cupti-cu11": "sha256:4191a17913a706b5098681280cd089cd7d8d3df209a6f5cb79384974a96d24f2",
    "nvidia-cuda-nvrtc-cu11": "sha256:a8d02f3cba345be56b1ffc3e74d8f61f02bb758dd31b0f20e12277a5a244f756",
    "nvidia-cuda-runtime-cu11": "sha256:92d04069a987e1fbc9213f8376d265df0f7bb42617d44f5eda1f496acea7f2d1",
    "nvidia-cudnn-cu11": "sha256:319a8f7ca3d65139f1b69998595c7076ae0e4271a325e5dfde50a3ca31f55584",
    "nvidia-cufft-cu11": "sha256:e21037259995243cc370dd63c430d77ae9280bedb68d5b5a18226bfc92e5d748",
    "nvidia-curand-cu11": "sha256:cd4cffbf78bb06580206b4814d5dc696d1161c902aae37b2bba00056832379e6",
    "nvidia-cusolver-cu11": "sha256:ea9fb1ad8c644ca9ed55af13cc39af3b7ba4c3eb5aef18471fe1fe77d94383cb",
    "nvidia-cusparse-cu11": "sha256:8d7cf1628fd8d462b5d2ba6678fae34733a48ecb80495b9c68672ec6a6dde5ef"
}
CU11_SOURCES = {
    "cuda_from": ("no and-cuda extra in METADATA (TF < 2.14 does not find nvidia/*/lib by itself): the installer pins "
                  "the nvidia-*-cu11 wheels and puts their lib dirs on LD_LIBRARY_PATH (activation, bin/tfgpu-run)"),
    "pins": ("CUDA 11.8 components, the newest nvidia-*-cu11 on PyPI (`pip index versions`, 2026-12-03: cudart "
             "11.8.89, "
             "cublas 11.11.3.6, cufft 10.9.0.58, curand 10.3.0.86, cusolver 11.4.1.48, cusparse 11.7.5.86, cupti "
             "11.8.87, "
             "nvrtc 11.8.89; the same set TF 2.14's and-cuda extra pins); the CUDA 11.x build runs on them through "
             "CUDA "
             "minor-version compatibility (11.x on >= 450.80.02); nvidia-cudnn-cu11 8.9.6.50: the newest 8.x, "
             "TensorFlow's rule is same major, equal or higher minor than the build's cuDNN"),
    "pin_hashes": ("pip install --dry-run --report (download_info.archive_info.hashes) against "
                   "https://pypi.org/simple, "
                   "2026-12-03"),
}
# The sonames TF's dso loader asks for, by build CUDA (what any CUDA source must provide).
SRC10_0="TF 2.0 dso_loader log lines 'Successfully opened dynamic library libcudart.so.10.0, libcublas.so.10.0, libcufft.so.10.0, libcurand.so.10.0, libcusolver.so.10.0, libcusparse.so.10.0, libcudnn.so.7' (tensorflow-gpu 2.0 logs quoted in public issue threads)"  # noqa: E501 (a source quoted whole: greppable)
SRC10_1="dso_loader log lines of TF 2.1-2.3 builds: 'Successfully opened dynamic library libcudart.so.10.1, libcublas.so.10, libcufft.so.10, libcurand.so.10, libcusolver.so.10, libcusparse.so.10, libcudnn.so.7' (public issue threads)"  # noqa: E501 (a source quoted whole: greppable)
SRC11_0="https://github.com/tensorflow/tensorflow/issues/49167 and https://github.com/tensorflow/tensorflow/issues/44777 (TF 2.4 dso_loader: libcudart.so.11.0, libcublas.so.11, libcublasLt.so.11 opened; 'Could not load dynamic library libcusolver.so.10' on CUDA 11.1+): no nvidia-*-cu11 wheel ships libcusolver.so.10, so TF 2.4 needs the CUDA 11.0 toolkit (system or conda)"  # noqa: E501 (a source quoted whole: greppable)
SRC11="TF 2.5+ asks for libcusolver.so.11 (https://github.com/kundajelab/chrombpnet/issues/49: CUDA 11.1+ ships libcusolver.so.11, fixed by TensorFlow 2.5.3); the other names as in TF 2.4's dso_loader log (https://github.com/tensorflow/tensorflow/issues/49167); the cu11 wheels' SONAMEs read with tfgpu_install/fetch/elf.py"  # noqa: E501 (a source quoted whole: greppable)
SONAMES = {
 "10.0":(["libcudart.so.10.0", "libcublas.so.10.0", "libcufft.so.10.0", "libcurand.so.10.0",
          "libcusolver.so.10.0", "libcusparse.so.10.0", "libcudnn.so.7"],SRC10_0),
 "10.1":(["libcudart.so.10.1", "libcublas.so.10", "libcufft.so.10", "libcurand.so.10", "libcusolver.so.10",
          "libcusparse.so.10", "libcudnn.so.7"],SRC10_1),
 "11.0":(["libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcufft.so.10", "libcurand.so.10",
          "libcusolver.so.10", "libcusparse.so.11", "libcudnn.so.8"],SRC11_0),
}
SONAMES_11 = (["libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcufft.so.10",
               "libcurand.so.10", "libcusolver.so.11", "libcusparse.so.11", "libcudnn.so.8"],SRC11)


def _spec(req: str) -> tuple[str, str, str]:
    """'numpy (<2.0,>=1.16.0)' -> (name, specifier, marker): the package's reader."""
    sys.path.insert(0, str(ROOT))
    from tfgpu_install.knowledge.wheelfacts import spec_of

    return spec_of(req)


def _line(ver: str) -> str:
    return ".".join(ver.split(".")[:2])


def _cuda_cudnn(line: str, bi: dict[str, Any], extra: list[tuple[str, str, str]]
                ) -> tuple[str, str, dict[str, str]]:
    """(cuda, cudnn, their sources): the tested table where it has the line, else build_info.py and the
    and-cuda cuDNN pin."""
    tested = TESTED.get(line)
    bi_cuda = bi.get("cuda_version") or bi.get("cuda_version_number")
    bi_cudnn = bi.get("cudnn_version") or bi.get("cudnn_version_number")
    if tested:
        cudnn, cuda = tested
        said = f"{TESTED_TABLE}, row tensorflow-{line}.0; build_info.py says cuda {bi_cuda!r}, cudnn {bi_cudnn!r}"
        return cuda, cudnn, {"cuda": said, "cudnn": said}
    extra_specs = {n: s for n, s, _m in extra}
    cudnn_pin = next((s for n, s in extra_specs.items() if n.startswith("nvidia-cudnn")), None)
    cuda = ".".join(str(bi_cuda).split(".")[:2])
    m = re.search(r"(\d+\.\d+)\.\d+", cudnn_pin or "")
    cudnn = m.group(1) if m else str(bi_cudnn)
    return cuda, cudnn, {
        "cuda": f"build_info.py cuda_version {bi_cuda!r}; {BAZELRC}",
        "cudnn": (f"and-cuda pin nvidia-cudnn-cu12{cudnn_pin} (METADATA); build_info.py cudnn "
                  f"{bi_cudnn!r}; {BAZELRC}"),
    }


def _archs(row: dict[str, Any], bi: dict[str, Any], fatbin: Optional[dict[str, Any]]
           ) -> tuple[list[str], list[str], dict[str, str], list[str]]:
    """(sass, ptx, their sources, unconfirmed): build_info.py's list, else the scanned fat binaries, else none."""
    caps = bi.get("cuda_compute_capabilities")
    sources: dict[str, str] = {}
    if isinstance(caps, list):
        # compute_XY embeds PTX *and* SASS for XY (.bazelrc comment; confirmed by the fat binaries of 2.3.0)
        sass = sorted({f"{c[-2]}.{c[-1]}" for c in caps}, key=lambda v: tuple(map(int, v.split("."))))
        ptx = [f"{c[-2]}.{c[-1]}" for c in caps if c.startswith("compute_")]
        sources["sass"] = sources["ptx"] = (
            f"build_info.py cuda_compute_capabilities {caps} (compute_XY = PTX and SASS for XY)")
    elif fatbin:
        sass = [f"{a // 10}.{a % 10}" for a in fatbin["sass"]]
        ptx = [f"{a // 10}.{a % 10}" for a in fatbin["ptx"]]
        sources["sass"] = sources["ptx"] = (
            f"fat binaries embedded in {fatbin['library']} of {row['wheel']} (scan_fatbins)")
    else:
        return [], [], sources, ["sass", "ptx"]
    if fatbin and isinstance(caps, list):
        got = ([f"{a // 10}.{a % 10}" for a in fatbin["sass"]], [f"{a // 10}.{a % 10}" for a in fatbin["ptx"]])
        sources["sass"] += f"; fat-binary scan of {fatbin['library']}: sass {got[0]}, ptx {got[1]}"
    return sass, ptx, sources, []


def _min_glibc(plat: str) -> tuple[str, str]:
    """(glibc X.Y, why) from the wheel's platform tag."""
    glibc = None
    for tag in plat.split("."):
        m = re.match(r"manylinux_(\d+)_(\d+)_x86_64", tag)
        if m:
            glibc = (f"{m.group(1)}.{m.group(2)}", "PEP 600: manylinux_X_Y = glibc X.Y")
        elif tag.replace("_x86_64", "") in MANYLINUX_GLIBC:
            glibc = glibc or MANYLINUX_GLIBC[tag.replace("_x86_64", "")]
    assert glibc, plat
    return glibc


class _Delivery(NamedTuple):
    """How CUDA arrives: pip wheels through the extra, pinned by the installer (cu11), or the system."""

    cuda_from: str
    extra_name: Optional[str]
    pins_kind: str
    pins: dict[str, str]
    extra_requires: dict[str, str]
    sources: dict[str, str]
    notes: list[str]


def _extra_delivery(extra: list[tuple[str, str, str]], bi: dict[str, Any]) -> _Delivery:
    """The and-cuda extra: exact `==` pins, or floating ranges whose lower bounds are the tested versions."""
    bi_cuda = bi.get("cuda_version") or bi.get("cuda_version_number")
    notes: list[str] = []
    # pins: the nvidia-* CUDA/cuDNN wheels only. TensorRT (2.14-2.15.0 pin it) is optional for
    # TensorFlow's GPU support and its pins are the uninstallable part; they stay in extra_requires.
    extra_requires = {n: s for n, s, _m in extra}
    nvidia = {n: s for n, s in extra_requires.items() if n.startswith("nvidia-")}
    if any(not n.startswith("nvidia-") for n in extra_requires):
        notes.append("TensorRT pins of the extra are left out of pins (optional for TF; see extra_requires)")
    if all(s.startswith("==") for s in nvidia.values()):
        pins = {n: s[2:] for n, s in nvidia.items()}
        pins_kind = "exact"
        pins_source = "METADATA Requires-Dist (extra == 'and-cuda'), `==` pins"
    else:
        pins = {n: re.search(r">=([\d.]+)", s).group(1) for n, s in nvidia.items()}  # type: ignore[union-attr]
        pins_kind = "tested"
        pins_source = ("the extra floats (ranges); pins are the ranges' lower bounds: the components of "
                       f"CUDA {bi_cuda} and cuDNN 9.3.0 the build used ({BAZELRC}), the same as "
                       "2.19's `==` pins; NCCL: TF's declared floor")
        notes.append("`pip install tensorflow[and-cuda]` resolves the newest wheels in the ranges "
                     f"({RESOLVED_TODAY}); the installer pins the tested versions instead")
    return _Delivery("pip", "and-cuda", pins_kind, pins, extra_requires, {"pins": pins_source}, notes)


def _delivery(extra: list[tuple[str, str, str]], cuda: str, bi: dict[str, Any]) -> _Delivery:
    if extra:
        return _extra_delivery(extra, bi)
    if cuda and cuda.startswith("11.") and cuda != "11.0":  # 11.0 (TF 2.4): libcusolver.so.10, in no cu11 wheel
        return _Delivery("pip", None, "wheels", dict(CU11_WHEELS), {}, dict(CU11_SOURCES), [])
    return _Delivery("system", None, "none", {}, {}, {
        "cuda_from": "no and-cuda extra in METADATA: CUDA toolkit and cuDNN come from the system or conda"}, [])


def _constraints(row: dict[str, Any], ver: str) -> tuple[dict[str, str], str, list[str]]:
    """(numpy/protobuf constraints from Requires-Dist, their source, notes); numpy <2 for wheels built
    against NumPy 1.x."""
    constraints: dict[str, str] = {}
    notes: list[str] = []
    for req in row["requires_dist"]:
        n, spec, marker = _spec(req)
        if n in ("numpy", "protobuf") and "extra" not in marker and n not in constraints:
            constraints[n] = spec
            if marker:
                notes.append(f"{n}{spec} applies where {marker}; see METADATA for the other Pythons")
    source = "METADATA Requires-Dist"
    np_spec = constraints.get("numpy")
    if np_spec and "<" not in np_spec and "~=" not in np_spec and version_key(ver) < (2, 16):
        # Built against NumPy 1.x: under NumPy 2 `import tensorflow` fails ("Unable to convert function
        # return value to a Python type", seen installing TF 2.11 with numpy>=1.20 -> numpy 2.x).
        constraints["numpy"] = np_spec + ",<2"
        source += f"; numpy <2 added: {NUMPY2}"
    return constraints, source, notes


def _defects(ver: str, line: str) -> list[Any]:
    defects = []
    for key, ds in DEFECTS.items():
        if key == ver or (key.endswith(".*") and line == key[:-2]):
            defects += ds
    return defects


# One row of matrix.yaml read from one wheel's evidence, field by field, top to bottom like the row it
# writes; each phase (CUDA/cuDNN, architectures, platform, how CUDA arrives, constraints) is a helper above.
def release_row(row: dict[str, Any], fatbin: Optional[dict[str, Any]]) -> dict[str, Any]:
    ver, bi = row["version"], row["build_info"]
    line = _line(ver)
    wheel_src = f"wheel:{row['wheel']} (sha256 {row['wheel_sha256'][:16]}...)"
    extra = [(_spec(r)) for r in row["requires_dist"] if "and-cuda" in r]
    cuda, cudnn, sources = _cuda_cudnn(line, bi, extra)
    sass, ptx, arch_sources, unconfirmed = _archs(row, bi, fatbin)
    sources.update(arch_sources)
    plat = row["platforms"][-1]
    glibc = _min_glibc(plat)
    sources["min_glibc"] = f"wheel tag {plat}; {glibc[1]}"
    how = _delivery(extra, cuda, bi)
    sources.update(how.sources)
    sonames, sonames_src = SONAMES.get(cuda or "", SONAMES_11) if (cuda or "").startswith(("10.", "11.")) else ([], "")
    if sonames and how.cuda_from != "pip" or how.pins_kind == "wheels":
        sources["sonames"] = sonames_src
    else:
        sonames = []
    constraints, sources["constraints"], constraint_notes = _constraints(row, ver)
    notes = how.notes + constraint_notes
    sources["pythons"] = "cpXY tags of the Linux x86_64 wheels in the PyPI simple index"
    sources["released"] = "earliest upload-time of those wheels in the PyPI simple index"
    return {
        "tensorflow": ver, "package": row["package"], "released": row["uploaded"],
        "pythons": row["pythons"], "cuda": cuda, "cudnn": cudnn, "sass": sass, "ptx": ptx,
        "manylinux": plat, "min_glibc": glibc[0], "cuda_from": how.cuda_from, "extra": how.extra_name,
        "pins_kind": how.pins_kind, "pins": how.pins,
        "pin_hashes": dict(CU11_HASHES) if how.pins_kind == "wheels" else {}, "sonames": sonames,
        "extra_requires": how.extra_requires,
        "constraints": constraints, "defects": _defects(ver, line),
        "build_info": {k: ",".join(v) if isinstance(v, list) else str(v) for k, v in bi.items() if k in (
            "cuda_version", "cudnn_version", "cuda_version_number", "cudnn_version_number",
            "cuda_compute_capabilities")},
        "source": wheel_src, "sources": sources, "unconfirmed": unconfirmed,
        "notes": " ".join(notes) or None,
    }


MATRIX_HEADER = """\
# TensorFlow releases for Linux x86_64: what each wheel was built with and needs.
# Generated by scripts/gather_knowledge.py --write-matrix from the wheels on PyPI (see that script
# for how every value is read); edit the script's curated tables, not this file, then regenerate.
# Check against PyPI again: python scripts/gather_knowledge.py --check
#
# releases: one row per final release (and post-release) 2.0.0 .. newest; 2.0.x is `tensorflow-gpu`
#   tensorflow   "2.15.1"            package    tensorflow | tensorflow-gpu
#   released     upload date          pythons    from the wheels' cpXY tags
#   cuda/cudnn   build CUDA (major.minor) and cuDNN (tested table; build_info.py; and-cuda pins)
#   sass / ptx   compute capabilities with SASS / with PTX (build_info.py cuda_compute_capabilities:
#                sm_XY = SASS, compute_XY = PTX and SASS; or scanned from the embedded fat binaries)
#   manylinux / min_glibc   the wheel's platform tag and the glibc it needs
#   cuda_from    pip (nvidia-* wheels through `extra`, or pinned by the installer) | system (toolkit + cuDNN, or conda)
#   pins_kind    exact: the extra pins `==` (= pins) | tested: the extra floats; pins = the build's own
#                versions (the ranges' lower bounds) | none
#                | wheels: no extra (TF 2.5-2.13); pins = the installer's nvidia-*-cu11 choice (CU11_WHEELS)
#   pin_hashes   pin -> sha256 of its Linux x86_64 wheel;  sonames: what TF's dso loader dlopens
#   pins / extra_requires / constraints (numpy, protobuf from Requires-Dist)
#   defects      [{id, text, source, blocks, fix, pythons, path}]  blocks: never choose it (on that path)
#   source       the wheel read;  sources: field -> where it came from;  unconfirmed: fields not confirmed
"""


def write_matrix(facts: Path, out: Path) -> None:
    import yaml

    rows = json.loads(facts.read_text())
    newest_first = sorted(rows, key=lambda r: version_key(r["version"]), reverse=True)
    out_rows = [release_row(r, r.get("fatbin")) for r in newest_first]
    for r in out_rows:
        for k in [k for k, v in r.items() if v in (None, [], {}) and k not in ("sass", "ptx", "pins")]:
            del r[k]
    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # the shared defect rows, written out in full
            return True

    def str_rep(dumper: Any, value: str) -> Any:
        # quote every version-like string: YAML would read 3.10 / 9.3 as numbers
        style = '"' if re.match(r"^[\d.]+$", value) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    def list_rep(dumper: Any, value: list[Any]) -> Any:
        flat = all(isinstance(v, str) for v in value)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flat)

    def dict_rep(dumper: Any, value: dict[str, Any]) -> Any:
        flat = all(isinstance(v, str) for v in value.values()) and len(value) <= 1
        return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=flat)

    Dumper.add_representer(str, str_rep)
    Dumper.add_representer(list, list_rep)
    Dumper.add_representer(dict, dict_rep)
    text = yaml.dump({"releases": out_rows}, Dumper=Dumper, sort_keys=False, width=110,
                     default_flow_style=None, allow_unicode=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(MATRIX_HEADER + text)
    tmp.replace(out)
    print(f"wrote {len(out_rows)} releases to {out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
