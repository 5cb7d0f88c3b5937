"""What the resolver returns: plain data, JSON-able (the `plan --json` contract)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional


@dataclass(frozen=True)
class Choice:
    tensorflow: str  # "2.17.1"
    cuda: Optional[str]  # "12.3"
    cudnn: Optional[str]  # "8.9"
    python: str  # "3.11"
    jit_only: bool  # some GPU is served only by PTX (first run JIT-compiles for minutes)
    package: str = "tensorflow"
    python_path: Optional[str] = None  # an interpreter found here; None when conda must provide it
    cuda_from: str = "pip"
    pins: dict[str, str] = field(default_factory=dict)  # exact wheel pins to install
    constraints: dict[str, str] = field(default_factory=dict)  # numpy/protobuf specifiers
    visible_devices: Optional[str] = None  # restrict CUDA_VISIBLE_DEVICES (mixed GPUs)
    hashes: dict[str, list[str]] = field(default_factory=dict)  # pin -> ["sha256:..."] (matrix.yaml pin_hashes)
    sonames: list[str] = field(default_factory=list)  # what TF dlopens, for a release whose CUDA is the system's

    def requirements(self) -> list[str]:
        """pip requirement strings: TF itself, its exact CUDA/cuDNN pins, compatibility constraints."""
        reqs = [f"{self.package}=={self.tensorflow}"]
        reqs += [f"{name}=={ver}" for name, ver in sorted(self.pins.items())]
        reqs += [f"{name}{spec}" for name, spec in sorted(self.constraints.items())]
        return reqs


@dataclass(frozen=True)
class Rejection:
    tensorflow: str
    reasons: tuple[str, ...]
    summary: str = ""  # one short line ("CUDA 12.5 > driver's 12.2; GPU 0 cc 3.7: no kernels") for tables


@dataclass(frozen=True)
class Resolution:
    profile: str
    choice: Optional[Choice]
    reasons: tuple[str, ...]  # why the choice fits, or why nothing fits
    rejected: tuple[Rejection, ...]  # every newer (higher-ranked) candidate and what rejected it
    options: tuple[str, ...] = ()  # offered, never applied silently (minor-version compat, restrict GPUs)
    remedies: tuple[str, ...] = ()  # when choice is None: driver to install, CPU-only TF ...
    warnings: tuple[str, ...] = ()
    cpu_only: bool = False  # resolved for --allow-cpu on a machine without a usable GPU

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "profile": self.profile,
            "choice": asdict(self.choice) if self.choice else None,
            "reasons": list(self.reasons),
            "rejected": [{"tensorflow": r.tensorflow, "reasons": list(r.reasons)} for r in self.rejected],
            "options": list(self.options),
            "remedies": list(self.remedies),
            "warnings": list(self.warnings),
            "cpu_only": self.cpu_only,
        }


def resolution_from_json(data: dict[str, Any]) -> Resolution:
    raw = data.get("choice")
    choice = None
    if isinstance(raw, dict):
        known = {f.name for f in fields(Choice)}
        choice = Choice(**{k: v for k, v in raw.items() if k in known})
    return Resolution(
        profile=str(data.get("profile", "")),
        choice=choice,
        reasons=tuple(data.get("reasons") or ()),
        rejected=tuple(Rejection(r["tensorflow"], tuple(r.get("reasons") or ())) for r in data.get("rejected") or ()),
        options=tuple(data.get("options") or ()),
        remedies=tuple(data.get("remedies") or ()),
        warnings=tuple(data.get("warnings") or ()),
        cpu_only=bool(data.get("cpu_only")),
    )
