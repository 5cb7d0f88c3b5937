"""Shared objects with a real CUDA fat binary, built here by nvcc for a known list of architectures, and a
TensorFlow-2.22-shaped wheel around one (build_info.py without the CUDA keys, the and-cuda pins of 2.22.0rc0
including nvshmem, a few other libraries without GPU code).

    lib = build_gpu_lib(tmp, ("sm_75", "sm_86", "sm_120"), ptx="compute_120")   # nvcc -c + gcc -shared
    name, data = tf222_wheel("2.22.0", lib)

Tests that need nvcc skip with the reason when it is absent (/usr/local/cuda/bin/nvcc or PATH).
"""

from __future__ import annotations

import io
import os
import subprocess
import zipfile
from pathlib import Path
from typing import Optional, Sequence

KERNEL = """__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
extern "C" int launch_add_one(float* x, int n) { add_one<<<(n + 255) / 256, 256>>>(x, n); return 0; }
"""

# 2.22.0rc0's and-cuda extra as its METADATA has it (read from https://pypi.org/simple/tensorflow/, 2026-12-06)
AND_CUDA_222 = (
    "nvidia-cublas-cu12<13.0,>=12.5.3.2", "nvidia-cuda-cupti-cu12<13.0,>=12.5.82",
    "nvidia-cuda-nvcc-cu12<13.0,>=12.5.82", "nvidia-cuda-nvrtc-cu12<13.0,>=12.5.82",
    "nvidia-cuda-runtime-cu12<13.0,>=12.5.82", "nvidia-cudnn-cu12<10.0,>=9.10.2.21",
    "nvidia-cufft-cu12<12.0,>=11.2.3.61", "nvidia-curand-cu12<11.0,>=10.3.6.82",
    "nvidia-cusolver-cu12<12.0,>=11.6.3.83", "nvidia-cusparse-cu12<13.0,>=12.5.1.3",
    "nvidia-nccl-cu12<3.0,>=2.30.7", "nvidia-nvjitlink-cu12<13.0,>=12.5.82", "nvidia-nvshmem-cu12>=3.2.5",
)
# 2.22.0rc0's build_info.py: no cuda_version, cudnn_version or cuda_compute_capabilities any more
BUILD_INFO_222 = ("import collections\n\nbuild_info = collections.OrderedDict([('is_cuda_build', True), "
                  "('is_rocm_build', False), ('is_tensorrt_build', False)])\n")


def nvcc() -> str:
    from tests.support.promised import require_tool

    return require_tool("nvcc", "the fat-binary tests build their library with it (PATH, /usr/local/cuda/bin/nvcc)",
                        "/usr/local/cuda/bin/nvcc")


def build_gpu_lib(dest: Path, sass: Sequence[str], ptx: Optional[str] = None, *, nvcc_links: bool = False) -> Path:
    """A shared object whose fat binary carries SASS for `sass` (sm_XY) and PTX for `ptx` (compute_XY).
    nvcc_links: let nvcc link it (it adds a second, PTX-less fat binary); else nvcc -c and gcc -shared (one)."""
    tool = nvcc()
    dest.mkdir(parents=True, exist_ok=True)
    src = dest / "kernel.cu"
    src.write_text(KERNEL)
    gencode: list[str] = []
    for sm in sass:
        gencode += ["-gencode", f"arch=compute_{sm[3:]},code={sm}"]
    if ptx:
        gencode += ["-gencode", f"arch={ptx},code={ptx}"]
    out = dest / f"lib{'_'.join(s[3:] for s in sass)}{'_' + ptx[8:] if ptx else ''}{'_l' if nvcc_links else ''}.so"
    if nvcc_links:
        cmd = [tool, "-shared", "-Xcompiler", "-fPIC", "-o", str(out), str(src), *gencode]
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
        return out
    obj = out.with_suffix(".o")
    subprocess.run([tool, "-c", "-Xcompiler", "-fPIC", "-o", str(obj), str(src), *gencode], check=True,
                   capture_output=True, timeout=300)
    subprocess.run(["gcc", "-shared", "-o", str(out), str(obj)], check=True, capture_output=True, timeout=60)
    return out


def plain_lib(dest: Path, name: str = "libplain.so") -> Path:
    """A shared object with no GPU code (gcc only)."""
    dest.mkdir(parents=True, exist_ok=True)
    src = dest / "plain.c"
    src.write_text("int plain_answer(void) { return 42; }\n")
    out = dest / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True, timeout=60)
    return out


def tf222_wheel(version: str, gpu_lib: Optional[Path], plain: Optional[Path] = None, *,
                build_info: str = BUILD_INFO_222, and_cuda: Sequence[str] = AND_CUDA_222, py: str = "cp312",
                stored: bool = False) -> tuple[str, bytes]:
    """A wheel shaped like TF 2.22.0rc0's: METADATA with the and-cuda extra, build_info.py, the GPU library
    as tensorflow/libtensorflow_cc.so.2 (deflated like the real wheel's, or stored), a plain library, and
    700 KB of incompressible filler so its central directory and members lie in different ranges."""
    name = f"tensorflow-{version}-{py}-{py}-manylinux_2_27_x86_64.whl"
    info = f"tensorflow-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", "Name: tensorflow", f"Version: {version}", "Requires-Python: >=3.10",
            "Requires-Dist: numpy>=1.26.0", "Requires-Dist: protobuf<8.0.0,>=6.31.1", "Provides-Extra: and-cuda"]
    meta += [f'Requires-Dist: {req}; extra == "and-cuda"' for req in and_cuda]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("tensorflow/filler.bin", os.urandom(700 << 10))
        z.writestr("tensorflow/python/platform/build_info.py", build_info)
        if plain is not None:
            z.write(plain, "tensorflow/python/_pywrap_plain.so")
        if gpu_lib is not None:
            z.write(gpu_lib, "tensorflow/libtensorflow_cc.so.2",
                    compress_type=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
        z.writestr(f"{info}/METADATA", "\n".join(meta) + "\n\nA 2.22-shaped release built by the tests.\n")
    return name, buf.getvalue()
