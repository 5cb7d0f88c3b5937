"""A local package index of small, real wheels the tests build, served over loopback HTTP.

Real pip and uv install from it exactly as from PyPI (PEP 503 simple index, PEP 427 wheels
with METADATA/WHEEL/RECORD), so the install steps are tested end to end without
downloading gigabytes. The CUDA wheels hold gcc-built shared libraries with real SONAMEs
at the paths the real nvidia-* wheels use (nvidia/<pkg>/lib/libX.so.N).

API (import from tests.support.wheelhouse):

    WheelSpec(name, version, files={"pkg/__init__.py": b"..."}, requires=("numpy>=1.23",),
              extras={"and-cuda": ("nvidia-cudnn-cu12==9.1.0.70",)}, libs={"nvidia/x/lib/libx.so.1": "libx.so.1"})
    build_wheel(spec, dest_dir) -> Path                  one .whl
    build_shared_lib(path, soname, symbols=("f",)) -> Path   gcc -shared -Wl,-soname (needs gcc)
    default_specs() -> list[WheelSpec]                   the catalogue below
    build_wheelhouse(dest_dir, specs=None) -> Wheelhouse # wheels + a static simple/ index
    Wheelhouse.dir        find-links directory (pip/uv: --no-index --find-links DIR)
    Wheelhouse.serve() -> IndexServer (context manager; .url = "http://127.0.0.1:PORT/simple",
                          .requests = paths fetched, for "a no-op re-run downloads nothing")

Pytest fixtures (session-scoped, built once per session even when imported into many modules;
import them into a test module: `from tests.support.wheelhouse import wheelhouse, package_index`):
    wheelhouse      -> Wheelhouse
    package_index   -> IndexServer serving it (started once, stopped at session end)

Catalogue (default_specs): all pure-Python except the nvidia-* libraries.
    tensorflow 2.99.0   Requires numpy>=1.23.5, protobuf>=3.20.3, absl-py; extra and-cuda pins
                        the three nvidia wheels below. tf.sysconfig.get_build_info() answers
                        cuda_version "12.3", cudnn_version "9", is_cuda_build True;
                        tf.config.list_physical_devices("GPU") -> [] ; tf.__version__.
    tensorflow 2.98.0   same shape, build info cuda "12.2", cudnn "8" (an "older" TF for upgrades)
    numpy 1.26.4, numpy 2.0.0, protobuf 4.25.9, protobuf 5.0.0, absl-py 2.1.0 (fakes)
    nvidia-cuda-runtime-cu12 12.3.101   nvidia/cuda_runtime/lib/libcudart.so.12
    nvidia-cublas-cu12 12.3.4.1         nvidia/cublas/lib/libcublas.so.12, libcublasLt.so.12
    nvidia-cudnn-cu12 9.1.0.70          nvidia/cudnn/lib/libcudnn.so.9 (requires nvidia-cublas-cu12)
    nvidia-cudnn-cu12 8.9.7.29          nvidia/cudnn/lib/libcudnn.so.8
    STABLE_PINS / STABLE_CONSTRAINTS / STABLE_REQUIREMENTS: a plan that fits this catalogue.
    tensorflow 2.97.0 (CU11_TF) + the nvidia-*-cu11 wheels at CU11_PINS (cu11_specs): TF 2.5-2.13's shape
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import os
import re
import shutil
import subprocess
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence

if TYPE_CHECKING:
    import pytest

try:
    from pytest import fixture
except ImportError:  # scripts/bench.py --quick builds its index from here without the test extras

    def fixture(*_args: Any, **_kwargs: Any) -> Callable[[Any], Any]:  # type: ignore[no-redef]
        return lambda fn: fn

TF_VERSION = "2.99.0"
STABLE_PINS = {
    "nvidia-cublas-cu12": "12.3.4.1",
    "nvidia-cuda-runtime-cu12": "12.3.101",
    "nvidia-cudnn-cu12": "9.1.0.70",
}
STABLE_CONSTRAINTS = {"numpy": ">=1.23.5,<2.0", "protobuf": ">=3.20.3,<5"}
STABLE_REQUIREMENTS = (
    [f"tensorflow=={TF_VERSION}"]
    + [f"{n}=={v}" for n, v in sorted(STABLE_PINS.items())]
    + [f"{n}{s}" for n, s in sorted(STABLE_CONSTRAINTS.items())]
)


@dataclass(frozen=True)
class WheelSpec:
    name: str
    version: str
    files: Mapping[str, bytes] = field(default_factory=dict)
    requires: Sequence[str] = ()
    extras: Mapping[str, Sequence[str]] = field(default_factory=dict)
    libs: Mapping[str, str] = field(default_factory=dict)  # path in wheel -> SONAME (built with gcc)
    summary: str = "a test stand-in built by tests/support/wheelhouse.py"
    platform: str = "any"  # the wheel's platform tag, e.g. manylinux_2_34_x86_64 (installers then check glibc)

    @property
    def dist_name(self) -> str:
        return re.sub(r"[-_.]+", "_", self.name)

    @property
    def filename(self) -> str:
        return f"{self.dist_name}-{self.version}-py3-none-{self.platform}.whl"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_shared_lib(path: Path, soname: str, symbols: Sequence[str] = ()) -> Path:
    """A real ELF shared library with DT_SONAME `soname`, built with gcc."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(symbols) or [re.sub(r"\W", "_", soname.split(".so")[0]) + "_stub"]
    src = "".join(f"int {n}(void) {{ return {i + 1}; }}\n" for i, n in enumerate(names))
    with tempfile.TemporaryDirectory() as tmp:
        c = Path(tmp) / "lib.c"
        c.write_text(src)
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O0", f"-Wl,-soname,{soname}", "-o", str(path), str(c)],
            check=True,
            capture_output=True,
        )
    return path


def build_wheel(spec: WheelSpec, dest_dir: Path, lib_cache: Optional[Path] = None) -> Path:
    """Write spec as a PEP 427 wheel into dest_dir; returns its path."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = dict(spec.files)
    for rel, soname in spec.libs.items():
        cache = lib_cache or dest_dir / ".libs"
        built = cache / f"{spec.dist_name}-{spec.version}" / rel
        if not built.exists():
            build_shared_lib(built, soname)
        files[rel] = built.read_bytes()
    info = f"{spec.dist_name}-{spec.version}.dist-info"
    meta = [
        "Metadata-Version: 2.1",
        f"Name: {spec.name}",
        f"Version: {spec.version}",
        f"Summary: {spec.summary}",
        "Requires-Python: >=3.8",
    ]
    meta += [f"Requires-Dist: {r}" for r in spec.requires]
    for extra, reqs in spec.extras.items():
        meta.append(f"Provides-Extra: {extra}")
        meta += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    files[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: tfgpu-tests\nRoot-Is-Purelib: true\n"
                              f"Tag: py3-none-{spec.platform}\n").encode()
    tops = sorted({p.split("/")[0] for p in files if "/" in p and not p.startswith(info)})
    files[f"{info}/top_level.txt"] = ("\n".join(tops) + "\n").encode()
    record = [f"{p},{_record_hash(d)},{len(d)}" for p, d in sorted(files.items())]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = dest_dir / spec.filename
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for p, d in sorted(files.items()):
            zi = zipfile.ZipInfo(p, date_time=(2024, 1, 1, 0, 0, 0))
            zi.external_attr = (0o755 if p.endswith(".so") or ".so." in p else 0o644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, d)
    os.replace(tmp, out)
    return out


def _fake_tf(version: str, cuda: str, cudnn: str) -> dict[str, bytes]:
    init = f'''"""A stand-in for TensorFlow built by the tests: same entry points, no kernels."""
__version__ = "{version}"
from . import config, sysconfig  # noqa: E402,F401
'''
    sysconfig = f'''"""tf.sysconfig stand-in: build info as the real wheel reports it."""
import collections


def get_build_info():
    return collections.OrderedDict(
        cpu_compiler="/usr/bin/gcc",
        cuda_compute_capabilities=["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"],
        cuda_version="{cuda}",
        cudnn_version="{cudnn}",
        is_cuda_build=True,
        is_rocm_build=False,
        is_tensorrt_build=False,
    )


def get_lib():
    import os
    return os.path.dirname(__file__)
'''
    config = '''"""tf.config stand-in: no GPU here."""


class PhysicalDevice:
    def __init__(self, name, device_type):
        self.name, self.device_type = name, device_type

    def __repr__(self):
        return f"PhysicalDevice(name={self.name!r}, device_type={self.device_type!r})"


def list_physical_devices(device_type=None):
    devices = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
    return [d for d in devices if device_type in (None, d.device_type)]
'''
    return {
        "tensorflow/__init__.py": init.encode(),
        "tensorflow/sysconfig.py": sysconfig.encode(),
        "tensorflow/config.py": config.encode(),
    }


def _fake_module(name: str, version: str) -> dict[str, bytes]:
    return {f"{name}/__init__.py": f'__version__ = "{version}"\n'.encode()}


def default_specs() -> list[WheelSpec]:
    and_cuda = tuple(f"{n}=={v}" for n, v in sorted(STABLE_PINS.items()))
    tf_requires = ("numpy>=1.23.5", "protobuf>=3.20.3", "absl-py>=1.0.0",
                   'fake-windows-only>=1; sys_platform == "win32"')
    return [
        WheelSpec("tensorflow", TF_VERSION, _fake_tf(TF_VERSION, "12.3", "9"), tf_requires, {"and-cuda": and_cuda}),
        WheelSpec("tensorflow", "2.98.0", _fake_tf("2.98.0", "12.2", "8"), tf_requires),
        WheelSpec("numpy", "1.26.4", _fake_module("numpy", "1.26.4")),
        WheelSpec("numpy", "2.0.0", _fake_module("numpy", "2.0.0")),
        WheelSpec("protobuf", "4.25.9", {"google/protobuf/__init__.py": b'__version__ = "4.25.9"\n'}),
        WheelSpec("protobuf", "5.0.0", {"google/protobuf/__init__.py": b'__version__ = "5.0.0"\n'}),
        WheelSpec("absl-py", "2.1.0", _fake_module("absl", "2.1.0")),
        WheelSpec(
            "nvidia-cuda-runtime-cu12", "12.3.101",
            {"nvidia/__init__.py": b"", "nvidia/cuda_runtime/__init__.py": b""},
            libs={"nvidia/cuda_runtime/lib/libcudart.so.12": "libcudart.so.12"},
        ),
        WheelSpec(
            "nvidia-cublas-cu12", "12.3.4.1",
            {"nvidia/__init__.py": b"", "nvidia/cublas/__init__.py": b""},
            libs={
                "nvidia/cublas/lib/libcublas.so.12": "libcublas.so.12",
                "nvidia/cublas/lib/libcublasLt.so.12": "libcublasLt.so.12",
            },
        ),
        WheelSpec(
            "nvidia-cudnn-cu12", "9.1.0.70",
            {"nvidia/__init__.py": b"", "nvidia/cudnn/__init__.py": b""},
            requires=("nvidia-cublas-cu12",),
            libs={"nvidia/cudnn/lib/libcudnn.so.9": "libcudnn.so.9"},
        ),
        WheelSpec(
            "nvidia-cudnn-cu12", "8.9.7.29",
            {"nvidia/__init__.py": b"", "nvidia/cudnn/__init__.py": b""},
            requires=("nvidia-cublas-cu12",),
            libs={"nvidia/cudnn/lib/libcudnn.so.8": "libcudnn.so.8"},
        ),
        *cu11_specs(),
    ]


# TF 2.5-2.13's CUDA user space: the nvidia-*-cu11 wheels at the versions matrix.yaml pins, each
# with the sonames the real wheels ship (read from them with tfgpu_install/fetch/elf.py). CU11_TF is a
# fake TensorFlow built for CUDA 11.2 / cuDNN 8 with no and-cuda extra, as TF 2.11 is.
CU11_TF = "2.97.0"
CU11_PINS = {
    "nvidia-cublas-cu11": "11.11.3.6",
    "nvidia-cuda-cupti-cu11": "11.8.87",
    "nvidia-cuda-nvrtc-cu11": "11.8.89",
    "nvidia-cuda-runtime-cu11": "11.8.89",
    "nvidia-cudnn-cu11": "8.9.6.50",
    "nvidia-cufft-cu11": "10.9.0.58",
    "nvidia-curand-cu11": "10.3.0.86",
    "nvidia-cusolver-cu11": "11.4.1.48",
    "nvidia-cusparse-cu11": "11.7.5.86",
}
_CU11_LIBS = {  # wheel -> (nvidia/<dir>, sonames)
    "nvidia-cublas-cu11": ("cublas", ("libcublas.so.11", "libcublasLt.so.11")),
    "nvidia-cuda-cupti-cu11": ("cuda_cupti", ("libcupti.so.11.8",)),
    "nvidia-cuda-nvrtc-cu11": ("cuda_nvrtc", ("libnvrtc.so.11.2", "libnvrtc-builtins.so.11.8")),
    "nvidia-cuda-runtime-cu11": ("cuda_runtime", ("libcudart.so.11.0",)),
    "nvidia-cudnn-cu11": ("cudnn", ("libcudnn.so.8",)),
    "nvidia-cufft-cu11": ("cufft", ("libcufft.so.10",)),
    "nvidia-curand-cu11": ("curand", ("libcurand.so.10",)),
    "nvidia-cusolver-cu11": ("cusolver", ("libcusolver.so.11",)),
    "nvidia-cusparse-cu11": ("cusparse", ("libcusparse.so.11",)),
}
_CU11_REQUIRES = {"nvidia-cudnn-cu11": ("nvidia-cublas-cu11", "nvidia-cuda-nvrtc-cu11"),
                  "nvidia-cusolver-cu11": ("nvidia-cublas-cu11",)}  # as the real wheels' METADATA says


def cu11_specs() -> list[WheelSpec]:
    tf_requires = ("numpy>=1.22", "protobuf>=3.20.3", "absl-py>=1.0.0")
    specs = [WheelSpec("tensorflow", CU11_TF, _fake_tf(CU11_TF, "11.2", "8"), tf_requires)]
    for name, version in sorted(CU11_PINS.items()):
        sub, sonames = _CU11_LIBS[name]
        specs.append(WheelSpec(
            name, version, {"nvidia/__init__.py": b"", f"nvidia/{sub}/__init__.py": b""},
            requires=_CU11_REQUIRES.get(name, ()),
            libs={f"nvidia/{sub}/lib/{so}": so for so in sonames},
        ))
    return specs


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Wheelhouse:
    dir: Path  # the wheels (a --find-links directory)
    root: Path  # what the server serves: simple/ and files/
    wheels: list[Path]

    def serve(self) -> "IndexServer":
        return IndexServer(self.root)

    def wheel(self, name: str, version: str) -> Path:
        for w in self.wheels:
            if w.name.startswith(f"{re.sub(r'[-_.]+', '_', name)}-{version}-"):
                return w
        raise KeyError(f"{name} {version} not in the wheelhouse")

    def sha256(self, name: str, version: str) -> str:
        return "sha256:" + hashlib.sha256(self.wheel(name, version).read_bytes()).hexdigest()


def build_wheelhouse(dest: Path, specs: Optional[Sequence[WheelSpec]] = None) -> Wheelhouse:
    """Build the wheels into dest/wheels and a static PEP 503 index into dest/index."""
    wheels_dir = dest / "wheels"
    wheels = [build_wheel(s, wheels_dir, lib_cache=dest / "libs") for s in (specs or default_specs())]
    root = write_simple_index(dest / "index", wheels)
    return Wheelhouse(dir=wheels_dir, root=root, wheels=wheels)


def write_simple_index(root: Path, wheels: Sequence[Path]) -> Path:
    """A static PEP 503 index of these wheels: root/files/ and root/simple/<project>/."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    by_project: dict[str, list[Path]] = {}
    for w in wheels:
        shutil.copy2(w, files / w.name)
        by_project.setdefault(_normalize(w.name.split("-")[0]), []).append(w)
    simple = root / "simple"
    simple.mkdir(exist_ok=True)
    links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(by_project))
    (simple / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    for project, ws in by_project.items():
        d = simple / project
        d.mkdir(exist_ok=True)
        anchors = "".join(
            f'<a href="../../files/{html.escape(w.name)}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}"'
            f' data-requires-python="&gt;=3.8">{html.escape(w.name)}</a>\n'
            for w in sorted(ws)
        )
        (d / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{anchors}</body></html>\n")
    return root


class _QuietHandler(SimpleHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        super().do_GET()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[str]


class IndexServer:
    """Serves a Wheelhouse root on 127.0.0.1:<random port> from a thread."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._server = _Server(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
        self._server.requests = []
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The simple index URL (for --index-url / PIP_INDEX_URL / UV_INDEX_URL)."""
        return f"http://127.0.0.1:{self.port}/simple"

    @property
    def requests(self) -> list[str]:
        return self._server.requests

    def start(self) -> "IndexServer":
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> "IndexServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# Built once per session even when several test modules import the fixtures (each import
# creates its own fixture definition, which would otherwise build its own copy).
_SESSION: dict[str, object] = {}


@fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Wheelhouse:
    if "wheelhouse" not in _SESSION:
        _SESSION["wheelhouse"] = build_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))
    return _SESSION["wheelhouse"]  # type: ignore[return-value]


@fixture(scope="session")
def package_index(wheelhouse: Wheelhouse) -> Iterator[IndexServer]:
    server = _SESSION.get("server")
    if server is None:
        server = wheelhouse.serve().start()
        _SESSION["server"] = server
        import atexit

        atexit.register(server.stop)  # type: ignore[union-attr]
    yield server  # type: ignore[misc]


@contextlib.contextmanager
def served(wheelhouse: Wheelhouse) -> Iterator[IndexServer]:
    """A private server for one test (e.g. to count its requests from zero)."""
    with wheelhouse.serve() as srv:
        yield srv
