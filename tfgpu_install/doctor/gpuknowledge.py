"""The architecture floor and ceiling of profiles/kernels.yaml, applied by the doctor (issue 40): which
library releases have no kernels for a GPU (cuDNN >= 9.11 below compute capability 7.5) and which
TensorFlow releases are known to fail on one (<= 2.21 on Blackwell). The rows are the knowledge's,
looked up through knowledge/gpu_rules.py, the same look-ups the resolver uses: no second copy here.

A log gives the facts it prints (compute capability, the cuDNN TensorFlow loaded, its version); the machine
walk gives nvidia-smi's compute capability and the env's wheels. A row is named only when the facts it
needs are in hand; a fact not seen is not assumed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from tfgpu_install.knowledge.gpu_rules import failure_text, floor_text, known_failure, lacks_kernels
from tfgpu_install.knowledge.model import FloorRow, KnownFailure, version_key


@dataclass(frozen=True)
class KernelRows:
    floors: tuple[FloorRow, ...] = ()
    failures: tuple[KnownFailure, ...] = ()


@dataclass(frozen=True)
class GpuFacts:
    ccs: tuple[str, ...] = ()  # compute capabilities seen ("6.1", "12.0")
    cudnn: Optional[str] = None  # the cuDNN loaded ("9.11.0")
    tensorflow: Optional[str] = None  # "2.20.0"
    sass: Optional[tuple[str, ...]] = None  # the build's SASS archs ("sm_80"), when known


@dataclass(frozen=True)
class Named:
    """A kernels.yaml row that explains a finding: the words, the fix, where it comes from."""

    cause: str
    fix: str
    source: str
    ref: str  # "profiles/kernels.yaml:12 (blackwell-ptx-jit)"


_CC = (
    re.compile(r"[Cc]ompute [Cc]apability:?\s*(\d{1,2}\.\d)\b"),
    re.compile(r"computeCapability:\s*(\d{1,2}\.\d)\b"),
    re.compile(r"\bmajor: (\d{1,2}) minor: (\d)\b"),
    re.compile(r"\btarget '?sm_(\d{1,2})(\d)a?\b"),
    re.compile(r"CUDA capability sm_(\d{1,2})(\d)a?\b"),
)
_CUDNN_INT = re.compile(r"Loaded cuDNN version (\d{4,6})\b")
_CUDNN_DOTTED = re.compile(r"(?:nvidia-cudnn-cu\d+[=-]=?|\bcuDNN(?: version)?:? v?)(\d+\.\d+(?:\.\d+)*)")
_TF = re.compile(r"(?i)\b(?:tensorflow(?:[-_](?:gpu|cpu))?(?:\s+version)?[\s:=-]+v?|\bTF\s)(\d+\.\d+(?:\.\d+)?[\w.]*)")


def read_facts(text: str) -> GpuFacts:
    """The GPU facts a log prints (pure; unknown stays None)."""
    ccs: list[str] = []
    for pat in _CC:
        for m in pat.finditer(text):
            cc = f"{m.group(1)}.{m.group(2)}" if m.lastindex == 2 else m.group(1)
            if cc not in ccs:
                ccs.append(cc)
    cudnn = None
    loaded = _CUDNN_INT.search(text)
    if loaded:
        n = int(loaded.group(1))  # cuDNN 9: major*10000 + minor*100 + patch; cuDNN 8 and older: major*1000 + ...
        cudnn = f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 90000 else f"{n // 1000}.{n // 100 % 10}.{n % 100}"
    elif (d := _CUDNN_DOTTED.search(text)) is not None:
        cudnn = d.group(1)
    t = _TF.search(text)
    return GpuFacts(tuple(ccs), cudnn, t.group(1) if t else None)


# The findings a row can explain: the cuDNN floor behind a cuDNN failure, the release ceiling behind a kernel
# that does not load or compile.
FLOOR_SYMPTOMS = frozenset({"cudnn-arch-mismatch", "cudnn-init-failed", "no-kernel-image"})
CEILING_SYMPTOMS = frozenset({"kernel-load-failed", "ptx-isa-too-old-for-gpu", "no-kernel-image",
                              "ptx-jit-compute-capability"})


def name_floor(rows: KernelRows, facts: GpuFacts) -> Optional[Named]:
    for cc in facts.ccs:
        row = lacks_kernels(rows.floors, "cudnn", facts.cudnn, cc)
        if row is not None:
            pin = f"pin {row.wheel}" if row.wheel else f"pin cuDNN {row.last or 'older than ' + row.since}"
            return Named(
                f"cuDNN {facts.cudnn} has no kernels for this GPU (compute capability {cc}): {floor_text(row)}.",
                f"Keep TensorFlow and {pin} in the env (inside TensorFlow's and-cuda range; `tfgpu-install plan` "
                "does this for such a GPU), or run on a GPU of compute capability >= " + row.min_cc + ".",
                _url(row.source), f"profiles/kernels.yaml:{row.line} (cudnn floor {row.since})")
    return None


def name_ceiling(rows: KernelRows, facts: GpuFacts) -> Optional[Named]:
    has_sass = facts.sass is not None and any(_sm(cc) in facts.sass for cc in facts.ccs)
    for cc in facts.ccs:
        if facts.tensorflow:
            row = known_failure(rows.failures, facts.tensorflow, cc, has_sass)
            lead = f"TensorFlow {facts.tensorflow} on compute capability {cc}"
        else:  # the release is not in the text: name the rows that hold for this GPU, as rows, not as a verdict
            row = next((r for r in rows.failures if version_key(r.cc_min) <= version_key(cc) <= version_key(r.cc_max)),
                       None)
            lead = f"compute capability {cc} (TensorFlow {row.tensorflow} is known to fail there; the log does " \
                   "not say which release ran)" if row is not None else ""
        if row is not None:
            instead = "; ".join(row.runs_instead) or "`tfgpu-install plan` names what runs there"
            return Named(f"{lead}: {failure_text(row)}.", f"What runs there instead: {instead}.",
                         row.sources[0] if row.sources else "", f"profiles/kernels.yaml:{row.line} ({row.id})")
    return None


def explain(rule_id: str, rows: KernelRows, facts: GpuFacts) -> Optional[Named]:
    """The row behind a finding of `rule_id`, when the facts name one."""
    found = name_floor(rows, facts) if rule_id in FLOOR_SYMPTOMS else None
    if found is None and rule_id in CEILING_SYMPTOMS:
        found = name_ceiling(rows, facts)
    return found


def _sm(cc: str) -> str:
    major, minor = cc.split(".")[:2]
    return f"sm_{major}{minor}"


def _url(text: str) -> str:
    m = re.search(r"https?://[^\s,;)]+", text)
    return m.group(0) if m else text
