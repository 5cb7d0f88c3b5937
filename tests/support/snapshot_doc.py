"""A valid snapshot document to start tests from."""

from __future__ import annotations

from tfgpu_install.snapshot import model as S


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
    return S.Snapshot(**base)  # type: ignore[arg-type]
