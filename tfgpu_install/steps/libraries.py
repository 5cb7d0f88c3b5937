"""Step libraries.check: the CUDA and cuDNN libraries are where TensorFlow will look.

With the PyPI nvidia-* wheels, TF finds its GPU libraries in <site-packages>/nvidia/<pkg>/lib
(through its RPATH, and through the LD_LIBRARY_PATH the activation step writes). This step
confirms each library TF dlopens is there under the soname the loader will ask for, with
the major version the plan needs (libcudart.so.12, libcudnn.so.9 ...). The soname is read
from the file itself (tfgpu_install/elf.py), so a wrong-major file renamed into place, or a
truncated download, is caught here and not as a cryptic dlopen failure at first use.

Then each library is loaded by soname in the env's own Python with the wheels' lib dirs on
LD_LIBRARY_PATH (as activation and bin/tfgpu-run set them; TF < 2.14 finds nvidia/*/lib no
other way), so a missing dependency (cuSOLVER needs cuBLAS) shows here, not at first use.

Read-only: apply() only re-checks and names what is missing (nothing to undo).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.env.target import TargetEnv
from tfgpu_install.errors import StepFailed
from tfgpu_install.fetch.elf import read_elf, read_soname
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.steps.base import Step, UndoRecord


@dataclass(frozen=True)
class ExpectedLib:
    package: str  # PyPI wheel that ships it: "nvidia-cudnn-cu12"
    subdir: str  # nvidia/<subdir>/lib
    soname: str  # "libcudnn.so.9"


# wheel (without the -cuXX suffix) -> (nvidia/<subdir>, library base names, soname major per CUDA major).
# Majors are the sonames the wheels ship (checked against the real wheels' ELF headers).
_WHEELS: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
    "nvidia-cuda-runtime": ("cuda_runtime", ("libcudart",), {"12": "12", "11": "11.0"}),
    "nvidia-cublas": ("cublas", ("libcublas", "libcublasLt"), {"12": "12", "11": "11"}),
    "nvidia-cufft": ("cufft", ("libcufft",), {"12": "11", "11": "10"}),
    "nvidia-curand": ("curand", ("libcurand",), {"12": "10", "11": "10"}),
    "nvidia-cusolver": ("cusolver", ("libcusolver",), {"12": "11", "11": "11"}),
    "nvidia-cusparse": ("cusparse", ("libcusparse",), {"12": "12", "11": "11"}),
    "nvidia-cuda-cupti": ("cuda_cupti", ("libcupti",), {"12": "12", "11": "11.8"}),
    "nvidia-cuda-nvrtc": ("cuda_nvrtc", ("libnvrtc",), {"12": "12", "11": "11.2"}),
    "nvidia-nvjitlink": ("nvjitlink", ("libnvJitLink",), {"12": "12"}),
    "nvidia-nccl": ("nccl", ("libnccl",), {"12": "2", "11": "2"}),
    # TF 2.22's and-cuda extra adds it (nvidia_nvshmem_cu12-3.2.5: nvidia/nvshmem/lib/libnvshmem_host.so.3,
    # SONAME libnvshmem_host.so.3; its bootstrap/transport plugins are dlopened on demand and not checked)
    "nvidia-nvshmem": ("nvshmem", ("libnvshmem_host",), {"12": "3"}),
}
# and-cuda wheels that carry no library TF loads from nvidia/*/lib (ptxas, headers)
_NO_LIBS = ("nvidia-cuda-nvcc", "nvidia-cuda-cccl")
# TF cannot use the GPU without these, whatever the pins say.
_CORE = ("nvidia-cuda-runtime", "nvidia-cublas", "nvidia-cudnn")


def _base_name(package: str) -> Optional[str]:
    """"nvidia-cudnn-cu12" -> "nvidia-cudnn"; None for a package that is not a CUDA wheel."""
    name = package.lower().replace("_", "-")
    if not name.startswith("nvidia-"):
        return None
    head, _, tail = name.rpartition("-")
    return head if tail.startswith("cu") and tail[2:].isdigit() else name


def expected_libraries(cuda: str, cudnn: Optional[str], pins: Optional[dict[str, str]] = None) -> list[ExpectedLib]:
    """The libraries a plan needs: the core three always, plus one per pinned nvidia-* wheel
    we know. cuda "12.3" -> CUDA major 12; cudnn "9.1" (or the cudnn pin) -> libcudnn.so.9."""
    major = cuda.split(".")[0]
    suffix = f"-cu{major}"
    wanted = list(_CORE)
    for pkg in sorted(pins or {}):
        base = _base_name(pkg)
        if base and base not in wanted and (base in _WHEELS or base == "nvidia-cudnn"):
            wanted.append(base)
    libs: list[ExpectedLib] = []
    for base in wanted:
        if base == "nvidia-cudnn":
            ver = cudnn or next((v for p, v in (pins or {}).items() if _base_name(p) == "nvidia-cudnn"), None)
            if ver is None:
                continue
            libs.append(ExpectedLib(base + suffix, "cudnn", f"libcudnn.so.{ver.split('.')[0]}"))
            continue
        subdir, names, majors = _WHEELS[base]
        if major not in majors:
            continue  # this wheel does not exist for this CUDA major
        libs += [ExpectedLib(base + suffix, subdir, f"{n}.so.{majors[major]}") for n in names]
    return libs


def unknown_wheels(pins: Optional[dict[str, str]]) -> list[str]:
    """Pinned nvidia-* wheels the table above does not know (a new and-cuda package, like nvshmem was):
    their libraries are found from the installed wheel's own RECORD (`discovered_libraries`)."""
    out = []
    for pkg in sorted(pins or {}):
        base = _base_name(pkg)
        if base and base not in _WHEELS and base != "nvidia-cudnn" and base not in _NO_LIBS:
            out.append(pkg)
    return out


def discovered_libraries(env: TargetEnv, package: str) -> tuple[list[ExpectedLib], Optional[str]]:
    """The libraries an installed wheel's RECORD lists as nvidia/<dir>/lib/lib*.so*, by the SONAME each file
    carries (what the loader asks for), and a problem when the wheel is not installed or its RECORD is
    unreadable. A file without a SONAME is a plugin loaded by path, not checked."""
    import csv
    import io

    sp = env.site_packages()
    want = package.lower().replace("-", "_")
    info = next((d for d in sorted(sp.glob("*.dist-info"))
                 if d.name.lower().split("-", 1)[0].replace("-", "_") == want), None)
    if info is None:
        return [], f"{package} is not installed in {sp} (no {want}-*.dist-info)"
    try:
        text = (info / "RECORD").read_text(encoding="utf-8", errors="replace")[: 4 << 20]
    except OSError as exc:
        return [], f"{info / 'RECORD'} is unreadable ({exc.strerror})"
    libs = []
    for row in csv.reader(io.StringIO(text)):
        parts = Path(row[0]).parts if row else ()
        if len(parts) == 4 and parts[0] == "nvidia" and parts[2] == "lib" and parts[3].startswith("lib") \
                and ".so" in parts[3]:
            soname = read_soname(sp / row[0])
            if soname is not None:
                libs.append(ExpectedLib(package, parts[1], soname))
            elif not (sp / row[0]).exists():
                libs.append(ExpectedLib(package, parts[1], parts[3]))  # missing: reported by name
    return libs, None


def nvidia_lib_dirs(env: TargetEnv) -> list[Path]:
    """Every <site-packages>/nvidia/*/lib holding a shared library, sorted (for LD_LIBRARY_PATH)."""
    sp = env.site_packages()
    return [d for d in sorted(sp.glob("nvidia/*/lib")) if d.is_dir() and any(d.glob("*.so*"))]


def tf_search_dirs(env: TargetEnv) -> Optional[list[Path]]:
    """The directories TensorFlow's own shared libraries search when they dlopen CUDA (the
    DT_RUNPATH of tensorflow/libtensorflow_framework.so.2 and libtensorflow_cc.so.2, $ORIGIN
    expanded), or None when the env's TF ships no such library (old or CPU-only builds, test
    stand-ins). Real TF >= 2.15 lists $ORIGIN/../nvidia/<pkg>/lib there for most wheels."""
    dirs: list[Path] = []
    known = False
    for lib in sorted(env.site_packages().glob("tensorflow/libtensorflow_*.so*")):
        info = read_elf(lib)
        if info is None:
            continue
        known = True
        origin = str(lib.parent)
        dirs += [Path(os.path.normpath(e.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)))
                 for e in info.runpath]
    return list(dict.fromkeys(dirs)) if known else None


# Loads each soname by name, the way TensorFlow's dso loader does, in the env's own Python with
# the wheels' lib dirs on LD_LIBRARY_PATH (what activation and bin/tfgpu-run set). RTLD_GLOBAL so a
# library's own dependencies (cuSOLVER -> cuBLAS) resolve as they will in TF. Prints one JSON map
# soname -> dlerror for those that failed.
_LOAD_SCRIPT = """
import ctypes, json, sys
failed = {}
for name in sys.argv[1:]:
    try:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        failed[name] = str(exc)
print(json.dumps(failed))
"""


def load_failures(ctx: Context, env: TargetEnv, sonames: list[str],
                  lib_dirs: Optional[list[Path]] = None) -> dict[str, str]:
    """soname -> why it did not load, for each of `sonames` that the env's Python cannot dlopen
    with the wheels' lib dirs on LD_LIBRARY_PATH ({} when all load). Read-only: a child process."""
    if not sonames:
        return {}
    import json

    dirs = [str(d) for d in (nvidia_lib_dirs(env) if lib_dirs is None else lib_dirs)]
    child = dict(ctx.environ)
    inherited = [p for p in child.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    child["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + inherited)
    # -I -S: the standard library is all it needs; no site (.pth files) and no PYTHON* variables
    res = ctx.runner.run([str(env.python), "-I", "-S", "-c", _LOAD_SCRIPT, *sonames], desc="load the CUDA libraries",
                         env=child, timeout=120)
    try:
        doc = json.loads(res.stdout.strip().splitlines()[-1]) if res.ok and res.stdout.strip() else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        said = (res.stderr or res.stdout).strip()[-300:] or res.returncode
        return {sonames[0]: f"the load check did not run: {said}"}
    return {str(k): str(v) for k, v in doc.items()}


@dataclass(frozen=True)
class LibFinding:
    lib: ExpectedLib
    path: Path
    problem: Optional[str]  # None when in place

    def to_json(self) -> JSONObject:
        return {"package": self.lib.package, "soname": self.lib.soname, "path": str(self.path), "problem": self.problem}


def find_problems(env: TargetEnv, libs: list[ExpectedLib]) -> list[LibFinding]:
    out: list[LibFinding] = []
    sp = env.site_packages()
    for lib in libs:
        where = sp / "nvidia" / lib.subdir / "lib"
        path = where / lib.soname
        problem: Optional[str] = None
        if not path.exists():
            others = sorted(p.name for p in where.glob(lib.soname.split(".so")[0] + ".so*")) if where.is_dir() else []
            problem = f"{lib.soname} is missing from {where}" + (
                f" (found {', '.join(others)}: another major version)" if others else ""
            )
        else:
            soname = read_soname(path)
            if soname is None:
                problem = f"{path} is not a readable shared library (truncated or corrupt?)"
            elif soname != lib.soname:
                problem = f"{path} has soname {soname}, the loader will ask for {lib.soname}"
        out.append(LibFinding(lib, path, problem))
    return out


class CheckLibraries(Step):
    id = "libraries.check"

    def __init__(self, env: TargetEnv, cuda: str, cudnn: Optional[str], pins: Optional[dict[str, str]] = None) -> None:
        self.env = env
        self.cuda = cuda
        self.cudnn = cudnn
        self.libs = expected_libraries(cuda, cudnn, pins)
        self.unknown = unknown_wheels(pins)  # their libraries: from the installed wheel's RECORD

    def describe(self) -> str:
        cudnn = f", cuDNN {self.cudnn}" if self.cudnn else ""
        more = f" (and those of {', '.join(self.unknown)}, by their RECORD)" if self.unknown else ""
        return (f"confirm CUDA {self.cuda}{cudnn} libraries{more} in "
                f"{self.env.path}/lib/python*/site-packages/nvidia/*/lib")

    def findings(self) -> list[LibFinding]:
        libs, missing = list(self.libs), []
        for pkg in self.unknown:
            found, problem = discovered_libraries(self.env, pkg)
            libs += found
            if problem is not None:
                where = self.env.site_packages() / "nvidia"
                missing.append(LibFinding(ExpectedLib(pkg, "?", pkg), where, problem))
        return find_problems(self.env, libs) + missing

    def check(self, ctx: Context) -> bool:
        # Honest, so one child process: a library in place that does not load is not done
        # (unless these very files already loaded here: steps/load_memo.py).
        found = self.findings()
        if any(f.problem is not None for f in found):
            return False
        return self._loads(ctx, [f.lib.soname for f in found]) == {}

    def _loads(self, ctx: Context, sonames: list[str]) -> dict[str, str]:
        """load_failures(), answered from the memo when the same files loaded before."""
        from tfgpu_install.steps.load_memo import known_to_load, load_key, remember_load

        dirs = nvidia_lib_dirs(self.env)
        key = load_key(self.env.site_packages(), dirs, self.env.python, sonames, ctx.environ)
        if known_to_load(ctx.cache_dir, key):
            return {}
        failed = load_failures(ctx, self.env, sonames, dirs)
        if not failed:
            remember_load(ctx.cache_dir, key)
        return failed

    def apply(self, ctx: Context) -> UndoRecord:
        bad = [f for f in self.findings() if f.problem]
        if bad:
            first = bad[0]
            more = f" (and {len(bad) - 1} more: {', '.join(f.lib.soname for f in bad[1:])})" if len(bad) > 1 else ""
            raise StepFailed(
                f"{first.problem}; TensorFlow loads it from there{more}",
                hint=f"reinstall the wheel (`uv pip install --python {self.env.python} --reinstall "
                f"{first.lib.package}`), or `tfgpu-install rollback` and run the install again",
                ref="library-missing",
            )
        found = self.findings()
        failed = self._loads(ctx, [f.lib.soname for f in found])
        if failed:
            soname, why = next(iter(failed.items()))
            raise StepFailed(
                f"{soname} is in place but does not load: {why}" + (
                    f" (and {len(failed) - 1} more: {', '.join(list(failed)[1:])})" if len(failed) > 1 else ""),
                hint=f"a library it needs is missing or of another major; reinstall the pinned wheels "
                "(`tfgpu-install rollback` and run the install again), or run `tfgpu-install doctor --env "
                f"{self.env.path}`",
                ref="library-missing",
            )
        search = tf_search_dirs(self.env)
        # Not a failure: the activation step's LD_LIBRARY_PATH and tfgpu-run cover these dirs.
        # Recorded so verify/doctor can say why TF needs activation in this env.
        outside = sorted({str(f.path.parent) for f in found if search is not None and f.path.parent not in search})
        return {
            "libraries": [str(f.path) for f in found],
            "loaded": [f.lib.soname for f in found],
            "tf_runpath_known": search is not None,
            "outside_tf_runpath": outside,
        }

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        return None  # read-only step
