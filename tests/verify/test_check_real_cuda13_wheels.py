"""The check against NVIDIA's real CUDA 13 runtime and cuDNN 9 libraries from PyPI (no GPU needed for
the calls used here), and the stubs held to the same behaviour.

The wheels are large (nvidia-cudnn-cu13 ~500 MB): scripts/test fetches them, pinned and hashed
(tests/support/real-wheels.txt), into $TFGPU_WHEELS_CACHE (default .cache/test-wheels). Without them
these tests skip, except under CI (which promises the registry): there they fail.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.promised import skip_or_fail
from tests.support.stublibs import CUDNN9_SUBLIBS, StubLibs, layer, run_check

CACHE = Path(os.environ.get("TFGPU_WHEELS_CACHE", Path(__file__).resolve().parents[2] / ".cache/test-wheels"))
WANTED = {"nvidia_cudnn_cu13-": ("nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/lib/libcudnn_graph.so.9",
                                  "nvidia/cudnn/lib/libcudnn_ops.so.9", "nvidia/cudnn/lib/libcudnn_cnn.so.9"),
          "nvidia_cuda_runtime-13": ("nvidia/cu13/lib/libcudart.so.13",)}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libcudnn.so.9 + libcudnn_graph.so.9 and libcudart.so.13, unpacked from the cached wheels."""
    if platform.machine() != "x86_64":
        pytest.skip("the pinned wheels (tests/support/real-wheels.txt) are x86_64 ones")
    out = CACHE / "unpacked"
    for prefix, members in WANTED.items():
        wheels = sorted(CACHE.glob(prefix + "*.whl"))
        if not wheels:
            skip_or_fail(f"no {prefix}*.whl in {CACHE} (scripts/test fetches tests/support/real-wheels.txt)")
        if all((out / m).is_file() for m in members):
            continue
        with zipfile.ZipFile(wheels[-1]) as zf:
            for m in members:
                zf.extract(m, out)
    return out


def _call(lib: Path, body: str) -> subprocess.CompletedProcess[str]:
    code = f"import ctypes, json\nlib = ctypes.CDLL({str(lib)!r})\n{body}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_real_cudnn_9_aborts_without_its_graph_library_and_so_does_the_stub(real: Path, stubs: StubLibs,
                                                                             tmp_path: Path) -> None:
    for src in (real / "nvidia/cudnn/lib", stubs.env):
        alone = tmp_path / src.name / "libcudnn.so.9"
        alone.parent.mkdir(parents=True)
        shutil.copy(src / "libcudnn.so.9", alone)
        done = _call(alone, "lib.cudnnGetVersion()")
        assert done.returncode == -6, (src, done.stderr)  # SIGABRT
        assert "Cannot load symbol cudnnGetVersion" in done.stderr


def test_real_cudnn_9_statuses_and_versions_match_the_stubs(real: Path, stubs: StubLibs) -> None:
    body = """
for fn in ("cudnnGetVersion", "cudnnGetCudartVersion", "cudnnGetMaxDeviceVersion"):
    getattr(lib, fn).restype = ctypes.c_size_t
lib.cudnnGetErrorString.restype = ctypes.c_char_p
h = ctypes.c_void_p()
print(json.dumps({"names": {c: lib.cudnnGetErrorString(c).decode() for c in (1001, 2000, 4000, 5003, 4242, 1)},
                  "max_sm": lib.cudnnGetMaxDeviceVersion(), "cudart": lib.cudnnGetCudartVersion()}))
"""
    got = {}
    for name, lib in (("real", real / "nvidia/cudnn/lib/libcudnn.so.9"), ("stub", stubs.cudnn_cu13 / "libcudnn.so.9")):
        done = _call(lib, body)
        assert done.returncode == 0, done.stderr
        got[name] = json.loads(done.stdout)
    assert got["real"]["names"] == got["stub"]["names"]
    assert got["real"]["names"]["4242"] == "CUDNN_UNKNOWN_STATUS"
    assert got["real"]["max_sm"] >= 1200 and got["real"]["cudart"] // 1000 == 13  # SM as major*100 + minor*10


def test_the_check_on_the_real_cuda_13_runtime_and_cudnn_9(real: Path, stubs: StubLibs, tmp_path: Path) -> None:
    """No driver here: the real libraries answer what they can; the other sub-libraries are stand-ins
    (cuDNN loads them only for work, which cannot start without a GPU)."""
    libdir = tmp_path / "nvidia/cudnn/lib"
    libdir.mkdir(parents=True)
    for so in ("libcudnn.so.9", "libcudnn_graph.so.9"):
        os.symlink(real / "nvidia/cudnn/lib" / so, libdir / so)
    for so in CUDNN9_SUBLIBS[1:]:
        shutil.copy(stubs.env / so, libdir / so)
    plan = {"cuda": "13.0", "cudnn": "9", "lib_dirs": [str(libdir), str(real / "nvidia/cu13/lib")]}
    doc = run_check(["--root", str(tmp_path), "--layers", "cuda-runtime,cudnn", "--keep-going",
                     "--plan-json", json.dumps(plan)], {})
    rt, dnn = layer(doc, "cuda-runtime"), layer(doc, "cudnn")
    assert rt["measured"]["runtime_cuda"].startswith("13.")
    assert rt["status"] == "fail" and rt["error"]["code"] in (35, 100)  # no driver / no device
    assert dnn["measured"]["cudnn"].startswith("9.") and "libcudnn_graph.so.9" in dnn["measured"]["sublibraries"]
    assert dnn["measured"]["cudnn_max_device_sm"] >= 1200
    assert dnn["status"] == "fail" and "cudnnCreate failed: CUDNN_STATUS_NOT_INITIALIZED (1001)" in dnn["summary"]


def test_the_check_names_the_missing_graph_library_of_the_real_cudnn(real: Path, tmp_path: Path) -> None:
    libdir = tmp_path / "cudnn"
    libdir.mkdir()
    os.symlink(real / "nvidia/cudnn/lib/libcudnn.so.9", libdir / "libcudnn.so.9")
    plan = {"cudnn": "9", "lib_dirs": [str(libdir)]}
    doc = run_check(["--root", str(tmp_path), "--layers", "cudnn", "--plan-json", json.dumps(plan)], {})
    assert "libcudnn_graph.so.9: missing" in layer(doc, "cudnn")["summary"]


# The legacy convolution API as the check calls it (tfgpucheck_cudnn.py), with good and bad arguments.
DESCRIPTORS = """
t, f, f2, c = (ctypes.c_void_p() for _ in range(4))
out = {}
def st(name, *args):
    out.setdefault(name, []).append(getattr(lib, name)(*args))
st("cudnnCreateTensorDescriptor", ctypes.byref(t))
for args in ((0, 0, 2, 8, 12, 12), (0, 0, 0, 8, 12, 12), (0, 0, 2, -8, 12, 12), (0, 99, 2, 8, 12, 12),
             (7, 0, 2, 8, 12, 12), (0, 0, 2, 8, 12, 12)):
    st("cudnnSetTensor4dDescriptor", t, *args)
st("cudnnSetTensor4dDescriptor", None, 0, 0, 2, 8, 12, 12)
st("cudnnCreateFilterDescriptor", ctypes.byref(f))
for args in ((0, 0, 16, 8, 3, 3), (0, 0, 0, 8, 3, 3), (0, 0, 16, 8, 3, 3)):
    st("cudnnSetFilter4dDescriptor", f, *args)
st("cudnnCreateFilterDescriptor", ctypes.byref(f2))
st("cudnnSetFilter4dDescriptor", f2, 0, 0, 16, 4, 3, 3)
st("cudnnCreateConvolutionDescriptor", ctypes.byref(c))
for args in ((1, 1, 1, 1, 1, 1, 1, 0), (-1, 1, 1, 1, 1, 1, 1, 0), (1, 1, 0, 1, 1, 1, 1, 0), (1, 1, 1, 1, 1, 1, 5, 0),
             (1, 1, 1, 1, 1, 1, 1, 0)):
    st("cudnnSetConvolution2dDescriptor", c, *args)
for math in (1, 9, 3):
    st("cudnnSetConvolutionMathType", c, math)
dims = [ctypes.c_int() for _ in range(4)]
for fd in (f, f2):
    st("cudnnGetConvolution2dForwardOutputDim", c, t, fd, *[ctypes.byref(d) for d in dims])
    out.setdefault("dims", []).append([d.value for d in dims])
n = ctypes.c_int(-1)
st("cudnnGetConvolutionForwardAlgorithmMaxCount", None, ctypes.byref(n))
h = ctypes.c_void_p()
st("cudnnCreate", ctypes.byref(h))
for name, d in (("Tensor", t), ("Filter", f), ("Filter", f2), ("Convolution", c)):
    st(f"cudnnDestroy{name}Descriptor", d)
print(json.dumps(out))
"""


def test_the_stub_answers_the_convolution_api_as_real_cudnn_9_does(real: Path, stubs: StubLibs) -> None:
    """Every descriptor call of the check's convolution, with good and bad arguments, gives the real
    library's status (no GPU here: the handle fails in both, NOT_INITIALIZED)."""
    got = {}
    for name, lib in (("real", real / "nvidia/cudnn/lib/libcudnn.so.9"), ("stub", stubs.cudnn_cu13 / "libcudnn.so.9")):
        done = subprocess.run([sys.executable, "-c", f"import ctypes, json\nlib = ctypes.CDLL({str(lib)!r})\n"
                               + DESCRIPTORS], capture_output=True, text=True, env={"CUDA_VISIBLE_DEVICES": ""})
        assert done.returncode == 0, done.stderr
        got[name] = json.loads(done.stdout)
    assert got["real"] == got["stub"]
    assert got["real"]["cudnnSetTensor4dDescriptor"] == [0, 2000, 2000, 2000, 2000, 0, 2000]
    assert got["real"]["dims"] == [[2, 16, 12, 12], [0, 0, 0, 0]] and got["real"]["cudnnCreate"] == [1001]
