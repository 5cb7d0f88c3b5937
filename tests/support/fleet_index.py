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
from typing import Any

from tests.support.install_kit import numpy_backed_tf, real_numpy_wheel
from tests.support.wheelhouse import WheelSpec, build_wheel, default_specs, write_simple_index

REPO = Path(__file__).resolve().parents[2]
# TF 2.98.0's extra in the demo (the default specs give only 2.99.0 one): cuDNN 8 for it.
AND_CUDA_2_98 = ("nvidia-cublas-cu12==12.3.4.1", "nvidia-cuda-runtime-cu12==12.3.101", "nvidia-cudnn-cu12==8.9.7.29")


def build_index(work: Path) -> Path:
    """Build the wheels and write work/index/{simple,files}; return the index root."""
    wheels_dir = work / "wheels"
    built = []
    for s in default_specs():
        if s.name == "numpy":
            continue
        if s.name == "tensorflow":
            cudnn = "9" if s.version == "2.99.0" else "8"
            s = WheelSpec(s.name, s.version, numpy_backed_tf(s.version, "12.3", cudnn), s.requires,
                          s.extras or {"and-cuda": AND_CUDA_2_98})
        built.append(build_wheel(s, wheels_dir, lib_cache=work / "libs"))
    built.append(real_numpy_wheel(wheels_dir))
    # The tool's dependencies (the nodes bootstrap tfgpu-install from this index, nothing else).
    deps = work / "deps"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", str(REPO), "-w",
                    str(deps)], check=True, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    wheels = built + [w for w in deps.glob("*.whl") if not w.name.startswith("tfgpu_install-")]
    return write_simple_index(work / "index", wheels)


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
