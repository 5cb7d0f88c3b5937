"""What the user asked an install for, besides the profile: plain, frozen data (and its JSON form,
which the journal keeps so that rollback can rebuild the same steps)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Optional

from tfgpu_install.guard.jsondoc import JSONObject, JSONValue


@dataclass(frozen=True)
class InstallOptions:
    env: Path  # target environment path
    backend: str = "venv"  # "venv" | "conda"
    name: Optional[str] = None  # conda named env
    python: Optional[str] = None  # interpreter path chosen for the env
    system_ldconfig: bool = False
    shell_rc: Optional[Path] = None
    allow_cpu: bool = False
    # The resolver's own flags as given (--allow-minor-compat, --restrict-gpus, --strict-driver): kept so that
    # a command building on the env (upgrade) resolves as the user asked when it was installed.
    allow_minor_compat: bool = False
    restrict_gpus: bool = False
    strict_driver: bool = False
    cudnn_source: str = "wheel"  # "wheel" | "redist" | "archive"
    cudnn_mirror: Optional[str] = None
    cudnn_archive: Optional[Path] = None
    cudnn_prefix: Optional[Path] = None
    quarantine_stale: bool = False
    index_url: Optional[str] = None  # else PIP_INDEX_URL / UV_INDEX_URL from the environment
    seed_pip: bool = True  # give a uv-made venv its own pip (uv's venvs have none by default); --no-pip: False
    conda_channel: Optional[str] = None  # conda backend: channel for Python and the CUDA packages
    cuda_source: str = "default"  # "default" (wheels / conda packages) | "redist" (NVIDIA's archives)
    cuda_mirror: Optional[str] = None  # a mirror of NVIDIA's cuda/redist tree (with cuda_source redist)
    extra: dict[str, str] = field(default_factory=dict)
    # The user's own requirements (--with, --with-file, `add`), installed with TensorFlow's
    # pins in one resolution (plan/additions.py); kept in the plan and the snapshot.
    with_requirements: tuple[str, ...] = ()
    # The hashes a --with-file line pinned (canonical name -> "sha256:..."): the installed file must
    # have one of them, as pip's --hash demands (the install passes them to uv per requirement).
    with_hashes: dict[str, tuple[str, ...]] = field(default_factory=dict)


def options_to_json(options: InstallOptions) -> JSONObject:
    out: JSONObject = {}
    for f in fields(options):
        value = getattr(options, f.name)
        if f.name == "with_hashes":
            value = {k: list(v) for k, v in value.items()}
        out[f.name] = str(value) if isinstance(value, Path) else value
    return out


def options_from_json(data: Mapping[str, JSONValue]) -> InstallOptions:
    """The options as options_to_json wrote them (a journaled plan's): each field the JSON has, as the
    dataclass's keyword argument (a field it lacks takes its default; without `env`, TypeError)."""
    kwargs: dict[str, Any] = {}  # InstallOptions' keyword arguments, each converted below from its JSON
    for f in fields(InstallOptions):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name in _PATH_FIELDS:
            kwargs[f.name] = Path(str(value)) if value is not None else None
        elif f.name == "with_requirements":
            kwargs[f.name] = tuple(str(v) for v in value or ()) if isinstance(value, (list, tuple)) else ()
        elif f.name == "with_hashes":
            kwargs[f.name] = {str(k): tuple(str(h) for h in v) for k, v in value.items()
                              if isinstance(v, (list, tuple))} if isinstance(value, dict) else {}
        else:
            kwargs[f.name] = value
    return InstallOptions(**kwargs)


_PATH_FIELDS = ("env", "shell_rc", "cudnn_archive", "cudnn_prefix")
