"""What the resolver returns: plain data, JSON-able (the `plan --json` contract)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from tfgpu_install.guard.jsondoc import JSONObject, JSONValue, objects, texts


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

    def to_json(self) -> JSONObject:
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


def resolution_from_json(data: Mapping[str, JSONValue]) -> Resolution:
    """What to_json() wrote (a journaled plan's), typed; ValueError for a field of another type,
    KeyError or TypeError for one a Choice or Rejection cannot do without."""
    raw = data.get("choice")
    return Resolution(
        profile=str(data.get("profile", "")),
        choice=_choice(raw) if isinstance(raw, dict) else None,
        reasons=tuple(texts(data, "reasons")),
        rejected=tuple(Rejection(_text(r, "tensorflow"), tuple(texts(r, "reasons")))
                       for r in objects(data, "rejected")),
        options=tuple(texts(data, "options")),
        remedies=tuple(texts(data, "remedies")),
        warnings=tuple(texts(data, "warnings")),
        cpu_only=bool(data.get("cpu_only")),
    )


def _choice(raw: Mapping[str, JSONValue]) -> Choice:
    """A Choice from its JSON: every field it has must have its type; one without a default must be there
    (KeyError), the others take their defaults."""

    def maybe(key: str, required: bool = False) -> Optional[str]:
        return None if (raw[key] if required else raw.get(key)) is None else _text(raw, key)

    return Choice(
        tensorflow=_text(raw, "tensorflow"), cuda=maybe("cuda", True), cudnn=maybe("cudnn", True),
        python=_text(raw, "python"), jit_only=bool(raw["jit_only"]),
        package=_text(raw, "package") if "package" in raw else "tensorflow", python_path=maybe("python_path"),
        cuda_from=_text(raw, "cuda_from") if "cuda_from" in raw else "pip",
        pins=_text_map(raw.get("pins", {}), "pins"), constraints=_text_map(raw.get("constraints", {}), "constraints"),
        visible_devices=maybe("visible_devices"),
        hashes={k: _texts(v, f"hashes[{k}]") for k, v in _mapping(raw.get("hashes", {}), "hashes").items()},
        sonames=_texts(raw.get("sonames", []), "sonames"),
    )


def _text(doc: Mapping[str, JSONValue], key: str) -> str:
    value = doc[key]
    if not isinstance(value, str):
        raise ValueError(f"{key}: {type(value).__name__}, not a string")
    return value


def _mapping(value: JSONValue, what: str) -> Mapping[str, JSONValue]:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: {type(value).__name__}, not an object")
    return value


def _text_map(value: JSONValue, what: str) -> dict[str, str]:
    return {k: _text(_mapping(value, what), k) for k in _mapping(value, what)}


def _texts(value: JSONValue, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what}: not a list of strings")
    return [str(v) for v in value]
