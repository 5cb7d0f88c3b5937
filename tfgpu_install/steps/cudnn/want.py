"""What the cuDNN steps share: the cuDNN this install needs (plain data from the
resolution and the options) and where its fetch record lives."""

from __future__ import annotations

import hashlib
import json
import platform as _platform
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Protocol

from tfgpu_install.context import Context
from tfgpu_install.guard.jsondoc import JSONObject

if TYPE_CHECKING:
    from tfgpu_install.resolver.model import Resolution


class CudnnOptions(Protocol):
    """What the cuDNN steps read of an install's options (plan.options.InstallOptions is one;
    the steps sit below the plan and do not import it)."""

    @property
    def env(self) -> Path: ...
    @property
    def cudnn_source(self) -> str: ...
    @property
    def cudnn_mirror(self) -> Optional[str]: ...
    @property
    def cudnn_archive(self) -> Optional[Path]: ...
    @property
    def cudnn_prefix(self) -> Optional[Path]: ...
    @property
    def quarantine_stale(self) -> bool: ...
    @property
    def extra(self) -> Mapping[str, str]: ...


class Want:
    """The cuDNN this install needs, from the resolution and the options (plain data)."""

    def __init__(self, resolution: "Resolution", options: CudnnOptions, env: Path) -> None:
        choice = resolution.choice
        self.env = Path(env)
        self.source = options.cudnn_source
        self.tensorflow = choice.tensorflow if choice else "?"
        self.built_with = choice.cudnn if choice else None  # TF's build cuDNN ("8.9")
        self.cuda_major = choice.cuda.split(".")[0] if choice and choice.cuda else None
        pins = sorted((choice.pins if choice else {}).items())
        pin = next((v for k, v in pins if k.startswith("nvidia-cudnn")), None)
        # The exact version to fetch: an explicit one, else the wheel pin TF was tested with.
        self.version = options.extra.get("cudnn_version") or pin or self.built_with
        self.mirror = options.cudnn_mirror
        self.base_url = options.cudnn_mirror or _redist_url()
        self.archive = Path(options.cudnn_archive).expanduser() if options.cudnn_archive else None
        self.prefix = Path(options.cudnn_prefix).expanduser() if options.cudnn_prefix else None
        self.platform = options.extra.get("cudnn_platform") or _platform_key()

    def key(self) -> str:
        """Changes when the user asks for something else: a stale record is not reused."""
        parts = [self.source, self.base_url, str(self.version), self.platform, str(self.cuda_major), str(self.archive)]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]

    def record_path(self, ctx: Context) -> Path:
        from tfgpu_install.env.state import env_state_dir

        return env_state_dir(ctx, self.env) / "cudnn-fetch.json"

    def record(self, ctx: Context) -> Optional[JSONObject]:
        """The fetch record, if it is for this request and its archive is still there."""
        try:
            rec = json.loads(self.record_path(ctx).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(rec, dict) or rec.get("key") != self.key():
            return None
        if not Path(str(rec.get("archive", ""))).is_file():
            return None
        return rec

    def link(self) -> Optional[Path]:
        return None if self.prefix else self.env / "lib" / "cudnn"

    def dest(self, version: str) -> Path:
        return self.prefix if self.prefix else self.env / "lib" / f"cudnn-{version}"


def check_cudnn_inputs(source: Optional[str], archive: Optional[Path], members: bool = True) -> None:
    """The cuDNN inputs checked before any step changes anything (issue 17): a missing,
    unreadable or foreign --cudnn-archive fails here (exit 5), not after the env and
    TensorFlow were installed; so do hostile members (a '..' name, an absolute path, a link
    out of the tree, a device file), by listing the archive without writing anything."""
    if source == "archive" and archive is not None:
        from tfgpu_install.fetch.archive import check_archive_input, vet

        check_archive_input(Path(archive))
        if members:
            vet(Path(archive).expanduser())


def _redist_url() -> str:
    from tfgpu_install.fetch.cudnn_redist import REDIST_URL

    return REDIST_URL


def _platform_key() -> str:
    from tfgpu_install.fetch.cudnn_redist import platform_key

    return platform_key(_platform.machine())
