"""Known failures the GPU check names when it sees them (stdlib only, pure; runs inside the env).

The rows are profiles/kernels.yaml's (the resolver's and the doctor's, through knowledge/gpu_rules.py).
The host passes them in the check's plan (`plan["kernels"]`, verify/host.py); the check run by hand or
from the offline pack has no knowledge files, so it falls back on the copy below, the same rows in the
same shape, which tests/verify/test_known_failures.py holds to kernels.yaml.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # the sibling as mypy sees it; inside the env it is imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import CheckPlan, FailureRow, FloorRow

FLOORS: tuple[FloorRow, ...] = (
    {"library": "cudnn", "since": "9.11", "min_cc": "7.5", "last": "9.10.2.21",
     "source": "NVIDIA cuDNN support matrix: v9.11.0 lists compute capability 7.5 and newer, v9.10.x still 5.0, "
               "6.0, 6.1 and 7.0 (https://docs.nvidia.com/deeplearning/cudnn/backend/v9.11.0/reference/"
               "support-matrix.html)"},
    {"library": "cuda", "since": "13.0", "min_cc": "7.5", "last": "",
     "source": "CUDA 13.0 release notes, Deprecated Architectures: Maxwell, Pascal and Volta (compute capability "
               "< 7.5) removed (https://docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/"
               "index.html#deprecated-architectures)"},
)
KNOWN_FAILURES: tuple[FailureRow, ...] = (
    {"id": "blackwell-ptx-jit", "tensorflow": "<2.22", "cc_min": "12.0", "cc_max": "12.0", "unless_sass": True,
     "inferred": False,
     "text": "TensorFlow <= 2.21 has no SASS for compute capability 12.0 and its PTX path fails there: "
             "CUDA_ERROR_INVALID_PTX at cuModuleLoadData, and XLA aborts with 'PTX version 8.5 does not support "
             "target sm_120'",
     "runs_instead": ["a newer release whose own fat binary carries SASS for the GPU (`tfgpu-install knowledge "
                      "update`)", "NVIDIA's NGC TensorFlow container", "TensorFlow built from source for sm_120"],
     "sources": ["https://github.com/tensorflow/tensorflow/issues/101746",
                 "https://github.com/tensorflow/tensorflow/issues/111958"]},
    {"id": "blackwell-ptx-jit-12-1", "tensorflow": "<2.22", "cc_min": "12.1", "cc_max": "12.1", "unless_sass": True,
     "inferred": True,
     "text": "TensorFlow <= 2.21 has no SASS for compute capability 12.1 and emits PTX ISA 8.5, which predates "
             "sm_121: the same failure as on 12.0 (inferred)",
     "runs_instead": ["a newer release whose own fat binary carries SASS for the GPU",
                      "TensorFlow built from source for sm_121"],
     "sources": ["https://github.com/tensorflow/tensorflow/issues/111958"]},
    {"id": "blackwell-datacenter-ptx-jit", "tensorflow": "<2.22", "cc_min": "10.0", "cc_max": "10.3",
     "unless_sass": True, "inferred": True,
     "text": "TensorFlow <= 2.21 has no SASS for compute capability 10.x and emits PTX ISA 8.5, which predates "
             "sm_100: the cause of the 12.0 failures holds here too (inferred)",
     "runs_instead": ["a newer release whose own fat binary carries SASS for the GPU", "NVIDIA's NGC TensorFlow "
                      "container", "TensorFlow built from source for sm_100"],
     "sources": ["https://github.com/tensorflow/tensorflow/issues/111958"]},
)
PTX_FAILURE_MARKS = ("CUDA_ERROR_INVALID_PTX", "cudaErrorInvalidPtx", "does not support target",
                     "CUDA_ERROR_UNSUPPORTED_PTX_VERSION")


def key(version: Optional[str]) -> tuple[int, ...]:
    """'9.10.2.21' -> (9, 10, 2, 21); '2.22.0rc0' -> (2, 22, 0); junk -> ()."""
    out = []
    for part in str(version or "").split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def rows(plan: Optional[CheckPlan]) -> tuple[tuple[FloorRow, ...], tuple[FailureRow, ...]]:
    """(floors, known failures): the plan's (from kernels.yaml) when the host gave them, else the copy here
    (the plan is JSON from the host: each part is taken only when it has the shape)."""
    given = plan.get("kernels") if plan else None
    if isinstance(given, dict) and isinstance(given.get("floors"), list) and isinstance(given.get("known_failures"),
                                                                                       list):
        return (tuple(r for r in given["floors"] if isinstance(r, dict)),
                tuple(r for r in given["known_failures"] if isinstance(r, dict)))
    return FLOORS, KNOWN_FAILURES


def floor_hits(library: str, version: Optional[str], ccs: list[str],
               plan: Optional[CheckPlan] = None) -> list[FloorRow]:
    """The floor in force for `library` `version` (the newest row at or below it) when it leaves out any of
    these compute capabilities: [row + "gpus"], else []."""
    if not key(version):
        return []
    floors = [r for r in rows(plan)[0] if r.get("library") == library and key(r.get("since")) <= key(version)]
    if not floors:
        return []
    row = max(floors, key=lambda r: key(r.get("since")))
    below = sorted({c for c in ccs if key(c) and key(c) < key(row.get("min_cc"))}, key=key)
    return [{**row, "gpus": below}] if below else []


def _in_spec(spec: str, version: str) -> bool:
    """A PEP 440 specifier of plain comparisons ("<2.22", ">=2.16,<2.22"), pre-releases included; any
    other form is not matched (unknown is never a hit)."""
    v = key(version)
    for clause in (c.strip() for c in str(spec).split(",") if c.strip()):
        m = re.fullmatch(r"(<=|>=|==|<|>)\s*([\d.]+)", clause)
        if not m or not v:
            return False
        want = key(m.group(2))
        ok = {"<": v < want, "<=": v <= want, ">": v > want, ">=": v >= want, "==": v[:len(want)] == want}
        if not ok[m.group(1)]:
            return False
    return True


def ceiling_hits(tensorflow: Optional[str], ccs: list[str], plan: Optional[CheckPlan] = None
                 ) -> list[FailureRow]:
    """The known failures of TensorFlow `tensorflow` on these compute capabilities: [row + "gpus"]."""
    if not tensorflow:
        return []
    out: list[FailureRow] = []
    for row in rows(plan)[1]:
        gpus = sorted({c for c in ccs if key(row.get("cc_min")) <= key(c) <= key(row.get("cc_max"))}, key=key)
        if gpus and _in_spec(str(row.get("tensorflow", "")), tensorflow):
            out.append({**row, "gpus": gpus})
    return out


def ptx_failure_seen(text: str) -> bool:
    """A log or error showing the Blackwell-ceiling failure (INVALID_PTX, "PTX version ... does not support
    target")."""
    return any(mark in text for mark in PTX_FAILURE_MARKS)


def floor_words(row: FloorRow, version: str) -> str:
    what = {"cudnn": "cuDNN", "cuda": "CUDA"}.get(str(row.get("library")), str(row.get("library")))
    last = f"; {row['last']} is the last with them: pin it" if row.get("last") else ""
    return (f"{what} >= {row.get('since')} has no kernels for compute capability < {row.get('min_cc')} and this GPU "
            f"is {', '.join(row['gpus'])} with {what} {version}{last} (`tfgpu-install plan` picks one for this GPU; "
            f"source: {row.get('source')})")


def failure_words(row: FailureRow, tensorflow: str) -> str:
    instead = "; ".join(str(x) for x in row.get("runs_instead") or [])
    how = "inferred, same cause" if row.get("inferred") else "reported"
    return (f"known failure {row.get('id')} ({how}) for TensorFlow {tensorflow} on compute capability "
            f"{', '.join(row['gpus'])}: {row.get('text')}" + (f"; what runs there: {instead}" if instead else "")
            + f" (sources: {', '.join(str(s) for s in row.get('sources') or [])})")
