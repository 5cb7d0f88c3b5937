"""scripts/gpu-check.sh: --pack fits the GPU machine's 64 MiB, --offline runs with no network at all."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.promised import skip_or_fail

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check.sh"
LIMIT = 64 * 1024 * 1024


def _no_network_namespace() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.e2e  # builds the pack (a venv of real wheels) and runs it in a namespace without network
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


# ---- issue 25 (defects 1, 4, 7, 15): the offline run on the lent machine -----------------------------
# scripts/test fetches tests/support/real-wheels.txt (x86_64, pinned and hashed) here.
WHEELS = Path(os.environ.get("TFGPU_WHEELS_CACHE", Path(__file__).resolve().parents[1] / ".cache/test-wheels"))


def test_help_prints_the_usage_only() -> None:
    done = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: gpu-check.sh")
    assert "set -uo" not in done.stdout and "PYEOF" not in done.stdout and len(done.stdout.splitlines()) < 10


def test_a_pack_for_another_architecture_is_refused_with_the_fix(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    (pack / "wheels").mkdir(parents=True)
    other = "aarch64" if platform.machine() != "aarch64" else "x86_64"
    (pack / "ARCH").write_text(other + "\n")
    done = subprocess.run([str(SCRIPT), "--offline", str(pack)], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                               "TFGPU_CHECK_DIR": str(tmp_path / "w")})
    assert done.returncode == 2
    assert f"this pack holds wheels for {other}; this machine is {platform.machine()}" in done.stderr
    assert "--pack DIR" in done.stderr


def _fake_python(tmp_path: Path, venv_action: str) -> Path:
    """A python3 stand-in: `-m venv` does `venv_action`; anything else is the real interpreter."""
    fake = tmp_path / "fakepy" / "python3"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/bash\nif [ "$1 $2" = "-m venv" ]; then {venv_action}; fi\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    return fake


def test_sigterm_mid_run_is_fail_130_with_the_stage_interrupted(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    (pack / "wheels").mkdir(parents=True)
    started = tmp_path / "venv-started"
    py = _fake_python(tmp_path, f"touch {started}; sleep 60; exit 1")
    out = tmp_path / "out"
    run = subprocess.Popen([str(SCRIPT), "--offline", str(pack)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True,
                           env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHON": str(py), "OUT": str(out),
                                "TFGPU_CHECK_DIR": str(tmp_path / "work")})
    try:
        for _ in range(300):  # until the install stage is running (bounded: 30 s)
            if started.exists():
                break
            time.sleep(0.1)
        assert started.exists(), "the install stage never started"
        run.send_signal(signal.SIGTERM)
        stdout, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 130, stdout
    summary = json.loads((out / "gpu-check-summary.json").read_text())
    assert summary["result"] == "FAIL" and summary["exit_code"] == 130
    by_name = {s["name"]: s for s in summary["stages"]}
    assert by_name["install"]["status"] == "interrupted"
    assert by_name["interrupted"]["missing_stages"] == ["probe", "host", "burn", "visible-none", "visible-uuid",
                                                         "visible-pci-order", "tensorflow"]
    assert stdout.strip().splitlines()[-1].startswith("FAIL: stage(s) install, interrupted failed (exit 130)")
    assert "PASS" not in stdout


def test_without_ensurepip_the_packs_uv_makes_the_venv(tmp_path: Path) -> None:
    uv = sorted(WHEELS.glob(f"uv-*{platform.machine()}*.whl"))
    if not uv:
        why = f"no uv wheel for {platform.machine()} in {WHEELS} (scripts/test fetches tests/support/real-wheels.txt)"
        if platform.machine() != "x86_64":
            pytest.skip(why)  # the pinned wheels are x86_64 ones
        skip_or_fail(why)
    pack = tmp_path / "pack"
    (pack / "wheels").mkdir(parents=True)
    shutil.copy(uv[-1], pack / "wheels")
    msg = "The virtual environment was not created successfully because ensurepip is not available."
    py = _fake_python(tmp_path, f"echo '{msg}' >&2; exit 1")
    work = tmp_path / "work"
    subprocess.run([str(SCRIPT), "--offline", str(pack)], capture_output=True, text=True, timeout=300,
                   env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHON": str(py),
                        "TFGPU_CHECK_DIR": str(work)})
    log = (work / "install.log").read_text()
    assert "ensurepip is not available" in log and "using the pack's uv" in log
    cfg = (work / "tool" / "pyvenv.cfg").read_text()
    assert "uv = " in cfg  # made by uv venv
    # The pack holds no tfgpu-install wheel here, so uv's offline install is what fails, by name.
    assert "tfgpu-install" in log


def test_a_symlinked_venv_on_path_is_searched_as_itself(tmp_path: Path) -> None:
    """A venv's bin/python3 links to its base interpreter: resolved, it reports the base's site dirs."""
    venv = tmp_path / "app" / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert (venv / "bin" / "python3").is_symlink()
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "tensorflow").mkdir()
    (site / "tensorflow" / "__init__.py").write_text("")
    done = subprocess.run([str(SCRIPT), "--find-envs"], capture_output=True, text=True, timeout=300,
                          env={"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(tmp_path), "VIRTUAL_ENV": str(venv)})
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    mine = [r for r in rows if r[1] == str(site)]
    assert mine and mine[0][2] == "yes" and mine[0][3] == str(venv), done.stdout
    assert mine[0][0].startswith(str(venv))


SUMMARY = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check_summary.py"
EVERY = "install probe host burn visible-none visible-uuid visible-pci-order tensorflow"


def _summarise(tmp_path: Path, rows: list[str], interrupted: str = "") -> tuple[subprocess.CompletedProcess[str], dict]:
    (tmp_path / "stages.tsv").write_text("".join(r + "\n" for r in rows))
    out = tmp_path / "summary.json"
    done = subprocess.run([sys.executable, str(SUMMARY), "summary", str(out), "present", str(tmp_path), interrupted,
                           EVERY], capture_output=True, text=True)
    return done, json.loads(out.read_text())


def _passed(*names: str) -> list[str]:
    return [f"{n}\t0\t1\t\t" for n in names]


def test_no_tensorflow_env_is_pass_host_only_not_pass(tmp_path: Path) -> None:
    """Issue 25 defect 13: a run that checked no TensorFlow says so, with its own result value."""
    rows = _passed("install", "probe", "host", "burn", "visible-none", "visible-uuid", "visible-pci-order")
    done, doc = _summarise(tmp_path, rows + ["tensorflow\tskip\t0\t\tno Python env here can import tensorflow"])
    assert done.returncode == 0 and doc["result"] == "PASS_HOST_ONLY"
    assert done.stdout.splitlines()[-1] == ("PASS (host layers only; TensorFlow not checked: no Python env here can "
                                            "import it)")
    done, doc = _summarise(tmp_path, rows + _passed("tensorflow"))
    assert done.returncode == 0 and doc["result"] == "PASS"


def test_an_expected_stage_that_never_ran_is_a_failure(tmp_path: Path) -> None:
    done, doc = _summarise(tmp_path, _passed("install", "probe", "host"))
    assert done.returncode == 9 and doc["result"] == "FAIL"
    assert doc["missing_stages"] == ["burn", "visible-none", "visible-uuid", "visible-pci-order", "tensorflow"]
    assert "not run: burn" in done.stdout


@pytest.mark.parametrize("uuid", ["GPU-8c5e1f7a-0d1e-4a43-9e58-2b9d4e1f0c11",
                                  "MIG-5a1b2c3d-0d1e-4a43-9e58-2b9d4e1f0c11"])
def test_visible_uuid_is_taken_from_the_host_stage(tmp_path: Path, uuid: str) -> None:
    """Issue 25 defect 14: no nvidia-smi needed; on MIG the instance's MIG- UUID (its parent's GPU- UUID
    would select the whole GPU, which CUDA refuses while MIG is on)."""
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"extras": {"visible_devices": {"mapping": [{"cuda": 0, "uuid": uuid}]}}}))
    done = subprocess.run([sys.executable, str(SUMMARY), "uuid", str(host)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == uuid


# ---- issue 41 defect 8: scripts/device-check.sh returns everything in <= 6 files ---------------------------
DEVICE_CHECK = Path(__file__).resolve().parents[1] / "scripts" / "device-check.sh"
SIX = {"device-check.txt", "truth.json", "gpu-check-summary.json", "health.html", "compare.json", "logs.tar.gz"}


def test_device_check_writes_at_most_six_files_with_the_logs_in_one_archive(tmp_path: Path) -> None:
    """Before: ~21 files (stage logs and JSON copied one by one); the lent machine returns 8 at most.
    Here: a pack without the tool's wheel, so the install stage fails fast; no torch, no nvcc."""
    import tarfile

    pack = tmp_path / "pack"
    (pack / "wheels").mkdir(parents=True)
    shutil.copy(SCRIPT, pack / "gpu-check.sh")
    shutil.copy(SUMMARY, pack / "gpu_check_summary.py")
    out = tmp_path / "out"
    done = subprocess.run([str(DEVICE_CHECK), str(pack)], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(out),
                               "DEVICE_CHECK_BUDGET": "60", "DEVICE_CHECK_BURN": "5"})
    assert done.returncode == 9, done.stdout + done.stderr
    files = {p.name for p in out.iterdir()}
    assert files <= SIX and len(files) >= 5 and all(p.is_file() for p in out.iterdir()), files
    assert json.loads((out / "gpu-check-summary.json").read_text())["failed_stages"] == ["install"]
    assert json.loads((out / "truth.json").read_text())["error"] == "no Python with torch found"
    assert json.loads((out / "compare.json").read_text())["result"] == "FAIL"
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert "logs/gpu-check.out" in names and "logs/install.log" in names and "logs/nvcc.log" in names
    assert "device-check: done in" in (out / "device-check.txt").read_text()


def test_the_comparison_reads_every_value_against_the_ground_truth(tmp_path: Path) -> None:
    sys.path.insert(0, str(SUMMARY.parent))
    import gpu_check_summary as summary_mod

    truth = {"cudnn": 92400, "fp32_gflops_8192": 51000.0,
             "gpus": [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "memory_mib": 143771,
                       "uuid": "GPU-8c5e1f7a-0d1e-4a43-9e58-2b9d4e1f0c11"}],
             "nvcc_program": {"driver_cuda": 13000, "gpus": [{"pci": "0000:19:00.0", "l2_bytes": 62914560,
                                                               "total_mib": 143771, "free_mib": 142000}]}}
    host = {"layers": [
        {"name": "driver", "measured": {"driver_cuda": "13.0", "devices": [
            {"name": "NVIDIA H200", "compute_capability": "9.0", "memory_mib": 143771, "pci": "0000:19:00.0",
             "uuid": "8c5e1f7a-0d1e-4a43-9e58-2b9d4e1f0c11"}]}},
        {"name": "cuda-runtime", "measured": {"devices": [{"index": 0, "total_mib": 143771, "free_mib": 141000}]}},
        {"name": "cudnn", "measured": {"cudnn": "9.24.0"}}]}
    burn = {"layers": [{"name": "benchmark", "measured": {"burns": [
        {"n": 8192, "l2_bytes": 62914560, "gpu_gflops": 49800.0, "duty_cycle": 0.99, "heat": {"text": "71 C"}}]}}]}
    rows = summary_mod.compare_rows(truth, {"stages": [{"name": "host", "result": host},
                                                       {"name": "burn", "result": burn}]})
    states = {r["value"]: r["state"] for r in rows}
    assert states["gpu0.uuid (PyTorch)"] == "same" and states["gpu0.l2_bytes (nvcc program)"] == "same"
    assert states["driver CUDA version (nvcc program)"] == "same" and states["cudnn major.minor (PyTorch)"] == "same"
    assert states["gpu0.free_mib (nvcc program, +-5%)"] == "same"
    ratio = next(r for r in rows if r["state"] == "ratio")
    assert ratio["ratio"] == round(49800 / 51000, 3)
    truth["gpus"][0]["memory_mib"] = 81559  # an H100's: the check must say it differs
    rows = summary_mod.compare_rows(truth, {"stages": [{"name": "host", "result": host}]})
    assert {r["value"]: r["state"] for r in rows}["gpu0.memory_mib (PyTorch)"] == "differs"
