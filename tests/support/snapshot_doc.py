"""A valid snapshot document to start tests from."""

from __future__ import annotations

from typing import Any

from tfgpu_install.conda.prefix import CondaRecord
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot.schema import recorded_resolution, verification_of


def env_record(data: dict[str, Any]) -> S.EnvRecord:
    """A test's env block as the typed record (no check: tests build hostile ones on purpose)."""
    conda = data.get("conda_packages")
    return S.EnvRecord(
        path=data.get("path"), backend=data.get("backend"), python=data.get("python"),
        conda_packages=None if conda is None else tuple(
            CondaRecord(r.get("name", ""), r.get("version", ""), r.get("build", ""), r.get("channel", ""),
                        r.get("sha256", "")) for r in conda),
        other=tuple((k, v) for k, v in data.items() if k not in ("path", "backend", "python", "conda_packages")),
        keys=tuple(data),
    )


def make(**kw: object) -> S.Snapshot:
    base = dict(
        id=S.new_id("known-good"),
        kind="known-good",
        created=S.now_iso(),
        env={"path": "/envs/tf", "backend": "venv", "python": "3.11.7"},
        host=S.HostContract(driver="535.104.05", max_cuda="12.2", glibc="2.35", arch="x86_64",
                            gpus=({"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"},)),
        resolution={"tensorflow": "2.17.1", "cuda": "12.3", "cudnn": "8.9", "python": "3.11"},
        packages=(S.Package("numpy", "1.26.4", ("sha256:" + "a" * 64,)), S.Package("six", "1.16.0")),
        files=(S.FileRecord("lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.8", "b" * 64, 10, 5),),
        activation={"bin/activate": "# >>> tfgpu-install >>>\nexport X=1\n# <<< tfgpu-install <<<"},
        verification={"ok": True, "gpu_verified": False},
    )
    base.update(kw)
    if isinstance(base["env"], dict):
        base["env"] = env_record(base["env"])
    if isinstance(base["resolution"], dict):  # typed as the reader types it (not checked: tests build hostile ones)
        base["resolution"] = recorded_resolution(base["resolution"])
    if isinstance(base["verification"], dict):
        base["verification"] = verification_of(base["verification"])
    return S.Snapshot(**base)  # type: ignore[arg-type]
