"""The package index fleet-demo serves on its bridge: the install tests' wheelhouse (numpy-backed
fake TensorFlow 2.99.0 and 2.98.0, stand-in nvidia wheels, the real numpy) plus the tool's own
dependencies, as one PEP 503 index, served from a thread on a given address."""

from __future__ import annotations

import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Sequence

from tests.support.install_kit import numpy_backed_tf, real_numpy_wheel
from tests.support.wheelhouse import WheelSpec, build_wheel, default_specs, write_simple_index

REPO = Path(__file__).resolve().parents[2]
# TF 2.98.0's extra in the demo (the default specs give only 2.99.0 one): cuDNN 8 for it.
AND_CUDA_2_98 = ("nvidia-cublas-cu12==12.3.4.1", "nvidia-cuda-runtime-cu12==12.3.101", "nvidia-cudnn-cu12==8.9.7.29")


# TF 2.99.0 in the demo needs glibc 2.34 (as its knowledge row says): a Debian 11 host (glibc 2.31) cannot
# install it, for real, and gets 2.98.0 (manylinux2014).
TF_2_99_PLATFORM = "manylinux_2_34_x86_64"
NUMPY = "1.26.4"


def build_index(work: Path, other_pythons: Sequence[str] = ()) -> Path:
    """Build the wheels and write work/index/{simple,files}; return the index root. other_pythons:
    also the real numpy and the tool's dependencies for these Pythons (hosts whose python3 differs
    from ours: a Debian 11 root has 3.9), from the registry."""
    wheels_dir = work / "wheels"
    built = []
    for s in default_specs():
        if s.name == "numpy":
            continue
        if s.name == "tensorflow":
            cudnn = "9" if s.version == "2.99.0" else "8"
            s = WheelSpec(s.name, s.version, numpy_backed_tf(s.version, "12.3", cudnn), s.requires,
                          s.extras or {"and-cuda": AND_CUDA_2_98},
                          platform=TF_2_99_PLATFORM if s.version == "2.99.0" else "any")
        built.append(build_wheel(s, wheels_dir, lib_cache=work / "libs"))
    built.append(real_numpy_wheel(wheels_dir, NUMPY))
    # The tool's dependencies (the nodes bootstrap tfgpu-install from this index, nothing else).
    deps = work / "deps"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", str(REPO), "-w",
                    str(deps)], check=True, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    tool = next(deps.glob("tfgpu_install-*.whl"))
    for version in other_pythons:
        _download_for(version, [f"numpy=={NUMPY}", str(tool)], deps)
    names = {w.name for w in built}
    wheels = built + [w for w in sorted(deps.glob("*.whl"))
                      if not w.name.startswith("tfgpu_install-") and w.name not in names]
    return write_simple_index(work / "index", wheels)


def _download_for(python: str, requirements: Sequence[str], dest: Path) -> None:
    """Binary wheels for another CPython on x86_64 glibc: uv resolves for that Python (its markers too:
    tomli, typing-extensions below 3.11, which pip's --python-version does not evaluate), pip downloads."""
    uv = Path(sys.executable).with_name("uv")
    wanted = dest.parent / f"wanted-{python}.in"
    pinned = dest.parent / f"pinned-{python}.txt"
    wanted.write_text("".join(f"{r}\n" for r in requirements))
    _run([str(uv), "pip", "compile", "--quiet", "--no-header", "--no-annotate", "--python-version", python,
          "--python-platform", "x86_64-manylinux_2_17", str(wanted), "-o", str(pinned)])
    # The tool itself (named by its path) is not downloaded: the index carries the one built here.
    lines = [ln for ln in pinned.read_text().splitlines()
             if ln.strip() and not ln.startswith(("#", "tfgpu-install", "/"))]
    pinned.write_text("".join(f"{ln}\n" for ln in lines))
    abi = "cp" + python.replace(".", "")
    platforms = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64", "manylinux1_x86_64", "any")
    _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
          "--only-binary=:all:", "--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3",
          "--abi", "none", *(x for pf in platforms for x in ("--platform", pf)), "-d", str(dest), "-r", str(pinned)])


def _run(argv: Sequence[str]) -> None:
    from tests.support.registry import trusted_env

    subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
                   env=trusted_env())


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # uv and pip drop connections they no longer need (a wheel read only for its metadata): not news.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def serve(root: Path, address: str) -> ThreadingHTTPServer:
    """Serve root on address:<free port> from a daemon thread; shutdown() + server_close() stop it."""
    server = _Server((address, 0), partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
