"""Restore refuses a host that does not meet the snapshot's contract, with every reason, before
anything is written (exit 12); an older format still restores (with a warning about hashes)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    freeze,
    needs_gcc,
    served_index,
    source_env,
)
from tests.support.snapshot_doc import make
from tfgpu_install.errors import ExitCode
from tfgpu_install.facts.model import Driver, Facts, Gpu, Host, PythonInterp
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot.contract import check_host, choice_of

pytestmark = needs_gcc


@pytest.fixture(scope="module")
def gpu_snapshot(source_env: Provisioned, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The provisioned env's export, as if it had been verified on a GPU (not cpu-only)."""
    from tfgpu_install.cli import main

    out = tmp_path_factory.mktemp("gpu-snap") / "snap.yaml"
    assert main(["snapshot", "export", "--env", str(source_env.env), "-o", str(out), "--json"],
                environ=source_env.environ) == 0
    doc = yaml.safe_load(out.read_text())
    doc["resolution"]["cpu_only"] = False
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


CASES = {
    "driver": (["--assume-driver", "450.80.02", "--assume-gpu", "NVIDIA A100-SXM4-40GB"],
               ["driver 450.80.02 supports CUDA <= 11.0", "built for CUDA 12.3", "driver >= 545.23.06"]),
    "gpu-arch": (["--assume-driver", "550.54.14", "--assume-gpu", "Tesla K80"],
                 ["Tesla K80 (compute capability 3.7)", "no kernels"]),
    "glibc": (["--assume-driver", "550.54.14", "--assume-gpu", "8.0", "--assume-glibc", "2.17"],
              ["glibc 2.17", "older than the 2.27"]),
    "python": (["--assume-driver", "550.54.14", "--assume-gpu", "8.0", "--assume-python", "3.8"],
               ["no Python 3.11 interpreter here (found: 3.8)"]),
    "no-gpu": (["--assume-driver", "550.54.14"], ["no NVIDIA GPU found here", "--allow-cpu"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_incompatible_host_is_refused_with_reasons(
    case: str, source_env: Provisioned, gpu_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags, words = CASES[case]
    target = tmp_path / "restored"
    code, err = cli(["snapshot", "restore", str(gpu_snapshot), "--env", str(target), "-y", *flags],
                    source_env.environ, capsys)
    assert code == ExitCode.INCOMPATIBLE_HOST == 12, err
    assert err["error"] == "incompatible-host" and err["hint"]
    for w in words:
        assert w in err["message"]
    assert not target.exists()
    assert not list((source_env.tmp / "state").glob(f"envs/*{target.name}*/journal*"))


def test_dry_run_checks_the_host_and_writes_nothing(
    source_env: Provisioned, gpu_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "restored"
    code, doc = cli(["snapshot", "restore", str(gpu_snapshot), "--env", str(target), "--dry-run",
                     "--assume-driver", "550.54.14", "--assume-gpu", "NVIDIA H100 80GB HBM3"],
                    source_env.environ, capsys)
    assert code == 0, doc
    assert doc["dry_run"] is True and doc["gpu"] is True
    assert [s["status"] for s in doc["steps"]][:3] == ["pending", "pending", "pending"]
    assert any("driver 550.54.14 supports CUDA 12.4 >= 12.3" in c for c in doc["checked"])
    assert any("PTX JIT" in w for w in doc["warnings"])  # cc 9.0: only PTX in the test release
    assert not target.exists()


def test_all_reasons_at_once(source_env: Provisioned, gpu_snapshot: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    code, err = cli(["snapshot", "restore", str(gpu_snapshot), "--env", str(tmp_path / "x"), "-y",
                     "--assume-driver", "450.80.02", "--assume-gpu", "Tesla K80", "--assume-glibc", "2.17",
                     "--assume-python", "3.8"], source_env.environ, capsys)
    assert code == 12
    assert err["message"].count("\n  - ") == 4


def test_format_1_snapshot_restores_with_a_warning(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The minimal record older installs wrote: name==version pins, no hashes, no host."""
    stored = [s for _, s in S.scan(Path(source_env.environ["TFGPU_STATE_DIR"])).snapshots
              if s.env.path == str(source_env.env) and s.kind == "known-good"]
    good = stored[-1]
    v1 = {"format": 1, "kind": "known-good", "created": good.created, "env": {"path": str(source_env.env)},
          "resolution": good.resolution.to_json(), "packages": [p.requirement() for p in good.packages]}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(v1))
    assert S.load(path).format == 1
    target = tmp_path / "restored"
    code, doc = cli(["snapshot", "restore", str(path), "--env", str(target), "--allow-cpu", "-y"],
                    source_env.environ, capsys)
    assert code == 0, doc
    assert any("format-1 snapshot records no hashes" in w for w in doc["warnings"])
    assert freeze(target) == freeze(source_env.env)


# --- the contract check itself (pure) ------------------------------------------------------


def _facts(**kw: Any) -> Facts:
    base: dict[str, Any] = dict(
        driver=Driver("550.54.14", "12.4", "nvidia-smi"),
        gpus=(Gpu(0, "NVIDIA A100-SXM4-40GB", "8.0", 40960, "nvidia-smi"),),
        host=Host("Ubuntu 22.04", "x86_64", "2.35", False, None, False),
        pythons=(PythonInterp(sys.executable, "3.11.7", "PATH"),),
    )
    base.update(kw)
    return Facts(**base)


def test_contract_without_knowledge_checks_driver_and_python() -> None:
    snap = make()  # CUDA 12.3, Python 3.11, GPU
    assert check_host(snap, _facts(), None).ok
    v = check_host(snap, _facts(driver=Driver("535.104.05", "12.2", "nvidia-smi")), None)
    assert not v.ok and "supports CUDA <= 12.2" in v.refusals[0]
    assert any("not in this tool's knowledge" in w for w in v.warnings)
    v = check_host(snap, _facts(host=Host("x", "aarch64", "2.35", False, None, False)), None)
    assert any("aarch64" in r for r in v.refusals)


def test_contract_conda_provides_python_and_cpu_only_skips_gpu() -> None:
    snap = make(env={"path": "/e", "backend": "conda", "python": "3.12.1"},
                resolution={"choice": {"tensorflow": "2.17.1", "cuda": "12.3", "python": "3.12"}, "cpu_only": True})
    assert choice_of(snap).python == "3.12" and snap.resolution.cpu_only is True
    v = check_host(snap, _facts(gpus=(), driver=Driver(None, None, None, loaded=False)), None, conda_available=True)
    assert v.ok and v.gpu is False
    assert not check_host(snap, _facts(), None, conda_available=False).ok
