"""scripts/gpu-check.sh: --pack fits the GPU machine's 64 MiB, --offline runs with no network at all."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check.sh"
LIMIT = 64 * 1024 * 1024


def _no_network_namespace() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _no_network_namespace(), reason="needs `unshare -n` (root or CAP_SYS_ADMIN)")
def test_pack_then_offline_in_a_namespace_without_network(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    done = subprocess.run([str(SCRIPT), "--pack", str(pack)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    size = sum(f.stat().st_size for f in pack.rglob("*") if f.is_file())
    assert size <= LIMIT, f"the pack is {size} bytes"
    wheels = {w.name.split("-")[0].lower() for w in (pack / "wheels").glob("*.whl")}
    assert {"tfgpu_install", "pyyaml", "rich", "nvidia_ml_py", "uv", "tomli"} <= wheels
    assert not any(w.startswith(("tensorflow", "nvidia_cu")) for w in wheels)
    # Inside a network namespace with no interfaces up: what the borrowed GPU machine looks like.
    links = subprocess.run(["unshare", "-n", "cat", "/proc/net/dev"], capture_output=True, text=True).stdout
    assert [ln.split(":")[0].strip() for ln in links.splitlines()[2:]] == ["lo"]
    out_dir = tmp_path / "out"
    run = subprocess.run(["unshare", "-n", str(pack / "gpu-check.sh"), "--offline", str(pack)],
                         capture_output=True, text=True, env={"PATH": "/usr/local/bin:/usr/bin:/bin",
                                                              "HOME": str(tmp_path), "OUT": str(out_dir),
                                                              "TFGPU_CHECK_DIR": str(tmp_path / "work")})
    assert run.returncode == 3, run.stdout + run.stderr[-3000:]
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("FAIL: no NVIDIA GPU found") and last.endswith("(exit 3)")
    summary = json.loads((out_dir / "gpu-check-summary.json").read_text())
    assert summary["result"] == "NO_GPU" and summary["exit_code"] == 3
    assert "no NVIDIA GPU" in summary["message"]
    by_name = {s["name"]: s for s in summary["stages"]}
    assert by_name["install"]["status"] == "pass"  # from the pack alone
    assert by_name["host"]["status"] == "no_gpu" and by_name["host"]["result"]["layers"][0]["status"] == "fail"
    assert by_name["burn"] == {"name": "burn", "seconds": 0, "log": None, "status": "skip", "why": "no NVIDIA GPU"}


def test_offline_without_a_pack_is_a_usage_error(tmp_path: Path) -> None:
    run = subprocess.run([str(SCRIPT), "--offline", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2 and "make it with --pack DIR" in run.stderr
