"""Broken machines for `doctor`, planted in a temp root: toolkits, stale and dangling libraries
(real gcc-built ELF files with real SONAMEs), /proc files, and replayed nvidia-smi outputs
recorded from public reports (tests/fixtures/shared/nvidia-smi)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import yaml

from tfgpu_install.context import Context, build_context
from tfgpu_install.doctor.envcheck import PROBE_SCRIPT
from tfgpu_install.runner import Completed, ReplayRunner, SubprocessRunner
from tfgpu_install.steps.libraries import _LOAD_SCRIPT

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def recorded_smi(case_id: str, kind: str = "shared/nvidia-smi") -> str:
    """A recorded nvidia-smi output, without the shell prompt lines the reporter pasted."""
    doc = yaml.safe_load((FIXTURES / kind / f"{case_id}.yaml").read_text())
    lines = [ln for ln in doc["verbatim"].splitlines()
             if not ln.lstrip().startswith(("$", ">", "#")) and "@" not in ln[:40]]
    return "\n".join(lines) + "\n"


def build_so(dest: Path, soname: str, filename: Optional[str] = None) -> Path:
    """A tiny real shared object with DT_SONAME = soname, written as dest/filename."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / (filename or soname)
    src = dest / f".{out.name}.c"
    src.write_text(f"int tfgpu_stub_{abs(hash(soname)) % 100000}(void) {{ return 0; }}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
                   check=True, capture_output=True)
    src.unlink()
    return out


def plant(root: Path, rel: str, text: str = "") -> Path:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def plant_toolkit(root: Path, version: str, full: Optional[str] = None) -> Path:
    """/usr/local/cuda-X.Y with bin/nvcc, lib64/libcudart.so.<major> (real ELF) and version.json."""
    tk = root / "usr/local" / f"cuda-{version}"
    (tk / "bin").mkdir(parents=True, exist_ok=True)
    nvcc = tk / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release %s'\n" % version)
    nvcc.chmod(0o755)
    major = version.split(".")[0]
    build_so(tk / "lib64", f"libcudart.so.{major}", f"libcudart.so.{full or version + '.0'}")
    os.symlink(f"libcudart.so.{full or version + '.0'}", tk / "lib64" / f"libcudart.so.{major}")
    (tk / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "%s"}}' % (full or version + ".0"))
    return tk


def plant_driver_ok(root: Path) -> None:
    """What a machine with a loaded NVIDIA driver shows: /proc (no nouveau) and the driver's libcuda."""
    plant(root, "/proc/modules", "nvidia_uvm 1437696 0 - Live 0x0\nnvidia 56487936 2 nvidia_uvm, Live 0x0\n")
    plant(root, "/proc/version", "Linux version 6.5.0-35-generic (buildd@lcy02) #35-Ubuntu SMP\n")
    plant(root, "/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  545.29.06\n")
    lib = root / "usr/lib/x86_64-linux-gnu"
    if not (lib / "libcuda.so.545.29.06").exists():
        build_so(lib, "libcuda.so.1", "libcuda.so.545.29.06")
        os.symlink("libcuda.so.545.29.06", lib / "libcuda.so.1")


QUERY = ("/usr/bin/nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id,driver_version,compute_cap,memory.total",
         "--format=csv,noheader,nounits")


class _EnvReplay(ReplayRunner):
    """The replay runner, except that the env's own library load check (its Python dlopening the
    CUDA libraries, whatever sonames the env asks for) runs for real, like the env's probe."""

    def __init__(self, python: str) -> None:
        super().__init__()
        self.python = python

    def run(self, argv, **kw):  # type: ignore[no-untyped-def, override]
        key = tuple(str(a) for a in argv)
        if key[:5] == (self.python, "-I", "-S", "-c", _LOAD_SCRIPT) and key not in self.responses:
            self.responses[key] = lambda k: SubprocessRunner().run(k, env=kw.get("env"), timeout=120)
        pip_check = key == (self.python, "-m", "pip", "check") or key[1:] == ("pip", "check", "--python", self.python)
        if pip_check and key not in self.responses:  # doctor --env runs the env's pip check: for real
            self.responses[key] = lambda k: SubprocessRunner().run(k, timeout=120)
        return super().run(argv, **kw)


def replay(smi_text: Optional[str], apps: str = "", query: str = "",
           extra: Optional[dict[tuple[str, ...], Completed]] = None, python: Optional[str] = None) -> ReplayRunner:
    """nvidia-smi answers from a recording; the env's python (if given) runs for real."""
    r = ReplayRunner() if python is None else _EnvReplay(python)
    if smi_text is not None:
        r.add(["/usr/bin/nvidia-smi"], stdout=smi_text, returncode=0 if "NVIDIA-SMI has failed" not in smi_text
              and "Failed to initialize NVML" not in smi_text else 9)
        r.add(["/usr/bin/nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
              stdout=apps)
        r.add(list(QUERY), stdout=query)
        r.executables["nvidia-smi"] = "/usr/bin/nvidia-smi"
    if python is not None:
        real = SubprocessRunner()
        r.responses[(python, "-c", PROBE_SCRIPT)] = lambda key: real.run(key, timeout=120)
        launcher = str(Path(python).parent / "tfgpu-run")
        r.responses[(launcher, python, "-c", PROBE_SCRIPT)] = lambda key: real.run(key, timeout=120)
    for k, v in (extra or {}).items():
        r.responses[k] = v
    return r


def make_ctx(tmp_env: dict[str, str], runner: ReplayRunner, **env: str) -> Context:
    environ = dict(tmp_env)
    environ.update(env)
    return build_context(environ, runner=runner)


def fake_tf_env(path: Path, version: str = "2.17.1", gpus: int = 1, cudnn: str = "8.9.7.29",
                archs: str = "sm_60,sm_70,sm_80,sm_89,compute_90", activation: bool = True,
                import_error: Optional[str] = None, stderr: str = "", launcher_env: Optional[str] = None) -> Path:
    """A real venv holding a stand-in `tensorflow` package (the real one is 600 MB; the slow suite
    uses it) with the metadata doctor reads, and nvidia wheels' lib dirs with real ELF libraries."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = next((path / "lib").glob("python3*/site-packages"))
    tf = site / "tensorflow"
    tf.mkdir()
    body = [f"import sys\nsys.stderr.write({stderr!r})"]
    if import_error:
        body.append(f"raise ImportError({import_error!r})")
    body.append(f"__version__ = {version!r}")
    body.append("class _SC:\n    @staticmethod\n    def get_build_info():\n"
                f"        return {{'cuda_version': '12.3', 'cudnn_version': '{cudnn.split('.')[0]}', "
                f"'cuda_compute_capabilities': {archs.split(',')!r}}}\nsysconfig = _SC()")
    body.append("class _D:\n    def __init__(self, n): self.name = n\n"
                f"class _C:\n    @staticmethod\n    def list_physical_devices(kind=None):\n"
                f"        import os\n        n = int(os.environ.get('FAKE_TF_GPUS', {gpus}))\n"
                "        return [_D('/physical_device:GPU:%d' % i) for i in range(n)]\nconfig = _C()")
    (tf / "__init__.py").write_text("\n".join(body) + "\n")
    (site / f"tensorflow-{version}.dist-info").mkdir()
    (site / f"nvidia_cudnn_cu12-{cudnn}.dist-info").mkdir()
    major = cudnn.split(".")[0]
    build_so(site / "nvidia" / "cudnn" / "lib", f"libcudnn.so.{major}")
    build_so(site / "nvidia" / "cuda_runtime" / "lib", "libcudart.so.12")
    if launcher_env is not None:  # like the activation step's bin/tfgpu-run: set variables, run the command
        launcher = path / "bin" / "tfgpu-run"
        launcher.write_text(f"#!/bin/sh\nexport {launcher_env}\nexec \"$@\"\n")
        launcher.chmod(0o755)
    if activation:
        with open(path / "bin" / "activate", "a") as fh:
            fh.write("\n# >>> tfgpu-install >>>\nexport LD_LIBRARY_PATH=...\n# <<< tfgpu-install <<<\n")
    return path


def have_gcc() -> bool:
    return shutil.which("gcc") is not None
