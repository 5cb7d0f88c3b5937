#!/usr/bin/env python3
"""A maintainer's check of `knowledge update` against the real index (not CI: it needs the network).

It runs `tfgpu-install knowledge update --pre` against the configured index (--index-url, else
UV_INDEX_URL / PIP_INDEX_URL, else PyPI) into a throw-away state dir, then reads each learned release's
METADATA again, independently of the tool's reader (urllib range requests, zipfile, email.parser,
packaging.requirements), and compares field by field what it learned with what the release says:
the and-cuda pins (the lower bounds of the extra's ranges), CUDA (the nvidia-cuda-runtime pin), cuDNN
(the nvidia-cudnn pin), numpy/protobuf, the Pythons (the cpXY tags of its Linux x86_64 wheels against
Requires-Python). The SASS/PTX lists and where each fact came from are printed as learned.

    python scripts/check_learned.py                      # every release newer than the tables
    python scripts/check_learned.py --only 2.22.0rc0     # the report for one release

Exit 0 when every compared field matches, 1 when one does not, 2 when nothing was learned.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
PEP691 = "application/vnd.pypi.simple.v1+json"


class Ranges(io.RawIOBase):
    """A seekable file over HTTP range requests (urllib; no code shared with the tool's reader)."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos, self.fetched = url, size, 0, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, off: int, whence: int = 0) -> int:
        self.pos = {0: 0, 1: self.pos, 2: self.size}[whence] + off
        return self.pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{self.pos + n - 1}"})
        with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310 (the index the user configured)
            data = r.read(n)
        b[: len(data)] = data
        self.pos += len(data)
        self.fetched += len(data)
        return len(data)


def index_files(index: str) -> list[dict[str, Any]]:
    req = urllib.request.Request(index.rstrip("/") + "/tensorflow/", headers={"Accept": PEP691})
    with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310
        return list(json.loads(r.read())["files"])


def metadata(url: str, size: int) -> Any:
    z = zipfile.ZipFile(io.BufferedReader(Ranges(url, size), buffer_size=1 << 16))
    name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
    return HeaderParser().parsestr(z.read(name).decode("utf-8"))


def expected(meta: Any, files: list[dict[str, Any]], version: str) -> dict[str, Any]:
    """What the release's own METADATA and file list say, as the learned row should."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    extra: dict[str, str] = {}
    plain: dict[str, str] = {}
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        marker = str(req.marker or "")
        if "and-cuda" in marker:
            extra[req.name.lower().replace("_", "-")] = str(req.specifier)
        elif not marker and req.name in ("numpy", "protobuf"):
            plain[req.name] = str(req.specifier)
    pins = {n: next(s.version for s in SpecifierSet(spec) if s.operator in (">=", "==")) for n, spec in extra.items()}
    mm = lambda v: ".".join(v.split(".")[:2])  # noqa: E731
    runtime = next((v for n, v in pins.items() if n.startswith("nvidia-cuda-runtime-")), None)
    cudnn = next((v for n, v in pins.items() if n.startswith("nvidia-cudnn-")), None)
    requires = SpecifierSet(meta.get("Requires-Python") or "")
    tags = sorted({f["filename"].split("-")[2] for f in files
                   if f["filename"].startswith(f"tensorflow-{version}-") and "manylinux" in f["filename"]
                   and f["filename"].endswith("x86_64.whl")}, key=lambda t: int(t[3:]))
    pythons = [f"{t[2]}.{t[3:]}" for t in tags]
    return {"pins": pins, "cuda": mm(runtime) if runtime else None, "cudnn": mm(cudnn) if cudnn else None,
            "constraints": plain, "pythons": pythons,
            "pythons_allowed": all(requires.contains(p + ".0") for p in pythons), "extra_requires": extra}


def learn(index: str) -> tuple[Path, dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="tfgpu-check-learned-"))
    env = {**os.environ, "HOME": str(tmp), "TFGPU_STATE_DIR": str(tmp / "state"), "TFGPU_CACHE_DIR": str(tmp / "cache"),
           "TFGPU_DATA_DIR": str(tmp / "data"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "tfgpu_install", "knowledge", "update", "--pre", "--index-url", index,
                          "--timeout", "900", "--json"], env=env, capture_output=True, text=True, timeout=1000)
    if out.returncode != 0:
        print(out.stdout, out.stderr, file=sys.stderr)
    return tmp / "state" / "knowledge" / "learned.yaml", json.loads(out.stdout)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-url", default=os.environ.get("UV_INDEX_URL") or os.environ.get("PIP_INDEX_URL")
                    or "https://pypi.org/simple/")
    ap.add_argument("--only", metavar="VERSION", help="report this learned release only")
    args = ap.parse_args(argv)
    overlay, report = learn(args.index_url)
    print(f"knowledge update --pre against {args.index_url}: status {report['status']}")
    for line in report.get("skipped") or []:
        print(f"  skipped  {line}")
    if not overlay.exists():
        print("nothing learned")
        return 2
    text = overlay.read_text()
    rows = json.loads(text[text.index("{"):])["releases"]
    files = index_files(args.index_url)
    ok = True
    for row in rows:
        v = row["tensorflow"]
        if args.only and v != args.only:
            continue
        wheel = row["source"].split()[0].removeprefix("wheel:")
        f = next(f for f in files if f["filename"] == wheel)
        ranges_url = f["url"] if f["url"].startswith("http") else urllib.request.urljoin(
            args.index_url.rstrip("/") + "/tensorflow/", f["url"])
        want = expected(metadata(ranges_url, f["size"]), files, v)
        print(f"\nTF {v} (learned from {wheel}; first seen {row.get('first_seen')})")
        print(f"  {'field':<14} {'learned':<44} {'the release says (METADATA, file list)':<44} ok")
        checks = [("cuda", row["cuda"], want["cuda"]), ("cudnn", row["cudnn"], want["cudnn"]),
                  ("pythons", row["pythons"], want["pythons"]),
                  ("constraints", row["constraints"], want["constraints"]),
                  ("extra_requires", row["extra_requires"], want["extra_requires"])]
        checks += [(f"pin {n}", row["pins"].get(n), p) for n, p in sorted(want["pins"].items())]
        for field, got, says in checks:
            same = got == says
            ok &= same
            print(f"  {field:<14} {json.dumps(got):<44} {json.dumps(says):<44} {'yes' if same else 'NO'}")
        ok &= want["pythons_allowed"]
        print(f"  Requires-Python allows every cpXY tag: {'yes' if want['pythons_allowed'] else 'NO'}")
        print(f"  sass {row['sass']}  ptx {row['ptx']}")
        for field in ("cuda", "cudnn", "sass"):
            print(f"  source of {field}: {row['sources'].get(field)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
