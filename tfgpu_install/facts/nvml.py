"""NVML through nvidia-ml-py, in a spawned interpreter with a timeout.

A wedged driver can hang nvmlInit() forever (conda probes the same way for the same
reason), so the query runs as `python -c SCRIPT` through the Runner; the child prints
one JSON document and the parent only parses text.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Optional

from tfgpu_install.facts.gpu import cuda_from_int, is_version
from tfgpu_install.runner import Runner

TIMEOUT_S = 10.0

# Runs in the child. Only the standard library and pynvml; every call guarded, since old
# drivers lack newer entry points (compute capability needs R418+, MIG mode R450+).
SCRIPT = r"""
import json, sys
def s(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
out = {"ok": False}
try:
    import ctypes
    ctypes.CDLL("libnvidia-ml.so.1")  # what pynvml loads: without it, no need to import pynvml
except OSError:
    print(json.dumps({"ok": False, "stage": "init", "error": "NVML Shared Library Not Found"}))
    sys.exit(0)
try:
    import pynvml
except Exception as e:
    print(json.dumps({"ok": False, "stage": "import", "error": type(e).__name__ + ": " + str(e)}))
    sys.exit(0)
try:
    pynvml.nvmlInit()
except Exception as e:
    print(json.dumps({"ok": False, "stage": "init", "error": str(e) or type(e).__name__}))
    sys.exit(0)
try:
    out["driver_version"] = s(pynvml.nvmlSystemGetDriverVersion())
    try:
        out["cuda_driver_version"] = int(pynvml.nvmlSystemGetCudaDriverVersion())
    except Exception as e:
        out["cuda_error"] = str(e)
    gpus = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        g = {"index": i}
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
        except Exception as e:
            g["error"] = str(e); gpus.append(g); continue
        for key, fn in (("name", "nvmlDeviceGetName"), ("uuid", "nvmlDeviceGetUUID")):
            try:
                g[key] = s(getattr(pynvml, fn)(h))
            except Exception:
                pass
        try:
            g["pci_bus_id"] = s(pynvml.nvmlDeviceGetPciInfo(h).busId)
        except Exception:
            pass
        try:
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            g["compute_capability"] = "%d.%d" % (major, minor)
        except Exception:
            pass
        try:
            g["memory_mib"] = int(pynvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024)
        except Exception:
            pass
        try:
            g["mig"] = bool(pynvml.nvmlDeviceGetMigMode(h)[0])
        except Exception:
            pass
        gpus.append(g)
    out["gpus"] = gpus
    out["ok"] = True
except Exception as e:
    out["stage"] = "query"
    out["error"] = str(e) or type(e).__name__
finally:
    try:
        pynvml.nvmlShutdown()
    except Exception:
        pass
print(json.dumps(out))
"""


@dataclass(frozen=True)
class NvmlGpu:
    index: int
    name: Optional[str]
    uuid: Optional[str]
    pci_bus_id: Optional[str]
    compute_capability: Optional[str]
    memory_mib: Optional[int]
    mig: bool = False


@dataclass(frozen=True)
class NvmlReading:
    ok: bool
    driver_version: Optional[str] = None
    max_cuda: Optional[str] = None
    gpus: tuple[NvmlGpu, ...] = ()
    error: Optional[str] = None  # why NVML gave nothing ("NVML Shared Library Not Found")


def nvml_argv(python: Optional[str] = None) -> tuple[str, ...]:
    """The command that runs the probe: this interpreter has nvidia-ml-py (a dependency).
    Without `site` (-S: a third of a bare start in a venv full of .pth files), pynvml's own
    directory put on sys.path instead."""
    if python is None:
        where = _pynvml_dir()
        if where is not None:
            return (sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {where!r})\n" + SCRIPT)
    return (python or sys.executable, "-c", SCRIPT)


def _pynvml_dir() -> Optional[str]:
    from importlib.util import find_spec

    try:
        spec = find_spec("pynvml")
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return os.path.dirname(origin) if origin and origin.endswith(".py") else None


def _opt_str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) and v else None


def parse_nvml_output(text: str) -> NvmlReading:
    """The child's JSON line -> NvmlReading. Never raises."""
    line = next((ln for ln in reversed(text.strip().splitlines()) if ln.startswith("{")), "")
    try:
        doc = json.loads(line)
    except ValueError:
        return NvmlReading(ok=False, error=f"unreadable NVML probe output: {text.strip()[:200]!r}")
    if not isinstance(doc, dict):
        return NvmlReading(ok=False, error="unreadable NVML probe output")
    if not doc.get("ok"):
        err = str(doc.get("error") or "NVML failed")
        stage = doc.get("stage")
        return NvmlReading(ok=False, error=f"{stage}: {err}" if stage == "import" else err)
    gpus = []
    raw_gpus = doc.get("gpus")
    for g in raw_gpus if isinstance(raw_gpus, list) else []:
        if not isinstance(g, dict) or not isinstance(g.get("index"), int) or isinstance(g.get("index"), bool):
            continue
        mem = g.get("memory_mib")
        cc = _opt_str(g.get("compute_capability"))
        gpus.append(
            NvmlGpu(
                index=g["index"],
                name=_opt_str(g.get("name")),
                uuid=_opt_str(g.get("uuid")),
                pci_bus_id=_opt_str(g.get("pci_bus_id")),
                compute_capability=cc,
                memory_mib=mem if isinstance(mem, int) and not isinstance(mem, bool) else None,
                mig=bool(g.get("mig", False)),
            )
        )
    drv = _opt_str(doc.get("driver_version"))
    return NvmlReading(
        ok=True,
        driver_version=drv if is_version(drv) else None,
        max_cuda=cuda_from_int(doc.get("cuda_driver_version")),
        gpus=tuple(gpus),
    )


def query_nvml(runner: Runner, python: Optional[str] = None, timeout: float = TIMEOUT_S) -> NvmlReading:
    """Run the NVML probe in a child process. A hang or crash becomes an error reading."""
    from tfgpu_install.errors import RunnerError

    try:
        done = runner.run(nvml_argv(python), desc="NVML probe", timeout=timeout)
    except RunnerError as exc:
        return NvmlReading(ok=False, error=str(exc))
    if done.returncode != 0 and not done.stdout.strip():
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return NvmlReading(ok=False, error=f"NVML probe failed ({tail})")
    return parse_nvml_output(done.stdout)
