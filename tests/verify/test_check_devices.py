"""Issue 18 defects 3 and 4 against the stubs: CUDA's devices matched to nvidia-smi's by NVML UUIDs
and bus ids (right under CUDA_VISIBLE_DEVICES and in containers), and the burn samples the GPU under load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.stublibs import StubLibs, layer, plant_pci, run_check

PLAN = {"cuda": "12.3", "cudnn": "8.9.7.29"}


def _check(root: Path, stubs: StubLibs, *extra: str, **env: str) -> dict[str, Any]:
    args = ["--root", str(root), "--layers", "0,1,2,3,4", "--plan-json",
            json.dumps(dict(PLAN, lib_dirs=[str(stubs.env)])), *extra]
    return run_check(args, {"LD_LIBRARY_PATH": str(stubs.driver), **env})


def _pci(root: Path, *buses: str) -> Path:
    plant_pci(root, [(f"0000:{b}:00.0", "0x10de", "0x030000") for b in buses])
    return root


def _mapping(doc: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(m["cuda"], m["nvidia_smi"], m["matched_by"]) for m in doc["extras"]["visible_devices"]["mapping"]]


def test_visible_devices_1_in_matching_order_needs_no_advice(tmp_path: Path, stubs: StubLibs) -> None:
    doc = _check(_pci(tmp_path, "01", "02"), stubs, STUB_CU_DEVICES="2", CUDA_VISIBLE_DEVICES="1")
    assert _mapping(doc) == [(0, 1, "uuid")]  # CUDA's device 0 is nvidia-smi's GPU 1
    assert "note" not in doc["extras"]["visible_devices"]


def test_a_container_seeing_every_host_gpu_in_sys(tmp_path: Path, stubs: StubLibs) -> None:
    # /sys lists the host's four GPUs; the container was given the last two (nvidia-smi: 0 and 1).
    doc = _check(_pci(tmp_path, "01", "02", "03", "04"), stubs, STUB_CU_DEVICES="2",
                 STUB_CU_PCI="0000:03:00.0,0000:04:00.0")
    assert _mapping(doc) == [(0, 0, "uuid"), (1, 1, "uuid")]
    assert "note" not in doc["extras"]["visible_devices"]


def test_an_index_that_means_another_gpu_to_cuda_is_explained(tmp_path: Path, stubs: StubLibs) -> None:
    # CUDA puts the bus-2 GPU first (fastest first): CUDA_VISIBLE_DEVICES=0 is nvidia-smi's GPU 1.
    doc = _check(_pci(tmp_path, "01", "02"), stubs, STUB_CU_DEVICES="2", STUB_CU_PCI="0000:02:00.0,0000:01:00.0",
                 CUDA_VISIBLE_DEVICES="0")
    note = doc["extras"]["visible_devices"]["note"]
    assert "selected nvidia-smi's GPU 1 (0000:02:00.0)" in note and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in note
    fixed = _check(tmp_path, stubs, STUB_CU_DEVICES="2", STUB_CU_PCI="0000:02:00.0,0000:01:00.0",
                   CUDA_VISIBLE_DEVICES="0", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    assert _mapping(fixed) == [(0, 0, "uuid")] and "note" not in fixed["extras"]["visible_devices"]


def test_gpu_and_mig_uuids_select_and_match(tmp_path: Path, stubs: StubLibs) -> None:
    root = _pci(tmp_path, "01", "02")
    every = _check(root, stubs, STUB_CU_DEVICES="2")["extras"]["visible_devices"]["mapping"]
    by_uuid = _check(root, stubs, STUB_CU_DEVICES="2", CUDA_VISIBLE_DEVICES=every[1]["uuid"])
    assert _mapping(by_uuid) == [(0, 1, "uuid")] and "note" not in by_uuid["extras"]["visible_devices"]
    migs = _check(root, stubs, STUB_CU_DEVICES="2", STUB_MIG="1")["extras"]["visible_devices"]["mapping"]
    assert [m["uuid"][:4] for m in migs] == ["MIG-", "MIG-"]  # cuDeviceGetUuid_v2: the instance's own UUID
    one = _check(root, stubs, STUB_CU_DEVICES="2", STUB_MIG="1", CUDA_VISIBLE_DEVICES=migs[1]["uuid"])
    assert _mapping(one) == [(0, 1, "mig-uuid")]


def test_without_nvml_there_is_no_guess(tmp_path: Path, stubs: StubLibs) -> None:
    doc = _check(_pci(tmp_path, "01", "02"), stubs, STUB_CU_DEVICES="2", STUB_CU_PCI="0000:02:00.0,0000:01:00.0",
                 STUB_NVML_INIT_ERROR="9")
    vis = doc["extras"]["visible_devices"]
    assert [m["nvidia_smi"] for m in vis["mapping"]] == [None, None] and "note" not in vis
    assert "Driver Not Loaded" in vis["nvml_error"]


def _burn(root: Path, stubs: StubLibs, **env: str) -> dict[str, Any]:
    doc = _check(root, stubs, "--sgemm-burn", "1", "--sgemm-burn-size", "32", **env)
    six = layer(doc, 6)
    assert six["status"] == "pass", six
    return dict(six["measured"]["burn"])


def test_burn_samples_the_cuda_device_under_load(tmp_path: Path, stubs: StubLibs) -> None:
    m = _burn(_pci(tmp_path, "01", "02"), stubs, STUB_CU_DEVICES="2", CUDA_VISIBLE_DEVICES="1")
    tele = m["telemetry"]
    assert m["iterations"] > 0 and m["mismatches"] == 0
    assert tele["gpu"]["nvidia_smi"] == 1 and tele["gpu"]["matched_by"] == "uuid"
    assert tele["temp_c"] == {"min": 41, "max": 41}  # the stub's GPU 1 reads 41 C, GPU 0 40 C
    assert tele["power_w"] == {"min": 251.0, "max": 251.0} and tele["util_pct"]["max"] == 97


def test_burn_on_mig_keeps_sampling_without_utilisation(tmp_path: Path, stubs: StubLibs) -> None:
    tele = _burn(_pci(tmp_path, "01"), stubs, STUB_MIG="1")["telemetry"]
    assert tele["unsupported"] == ["util_pct"] and "util_pct" not in tele
    assert tele["temp_c"] == {"min": 40, "max": 40} and tele["failed_reads"] == 0


def test_failed_reads_are_errors_never_zero_degrees(tmp_path: Path, stubs: StubLibs) -> None:
    tele = _burn(_pci(tmp_path, "01"), stubs, STUB_NVML_SAMPLE_ERROR="15")["telemetry"]
    assert tele["failed_reads"] > 0 and "temp_c" not in tele and "(15)" in tele["error"]


# ---- issue 25 defect 10: one GPU NVML cannot open does not lose the others ---------------------------------
def test_one_nvml_handle_failing_keeps_the_mapping_and_telemetry_of_the_rest(tmp_path: Path, stubs: StubLibs) -> None:
    root = _pci(tmp_path, "01", "02")
    doc = _check(root, stubs, STUB_CU_DEVICES="2", STUB_NVML_HANDLE_ERROR="0:4")  # no permission on GPU 0
    vis = doc["extras"]["visible_devices"]
    assert _mapping(doc)[1] == (1, 1, "uuid") and vis["mapping"][0]["nvidia_smi"] is None
    assert vis["nvml_gpu_errors"] == ["nvmlDeviceGetHandleByIndex(0) failed: Insufficient Permissions (4)"]
    assert "nvml_error" not in vis
    tele = _burn(root, stubs, STUB_CU_DEVICES="2", CUDA_VISIBLE_DEVICES="1", STUB_NVML_HANDLE_ERROR="0:15")["telemetry"]
    assert tele["gpu"]["nvidia_smi"] == 1 and tele["temp_c"] == {"min": 41, "max": 41}
    lost = _burn(root, stubs, STUB_CU_DEVICES="2", CUDA_VISIBLE_DEVICES="0", STUB_NVML_HANDLE_ERROR="0:15")["telemetry"]
    assert lost["samples"] == 0 and "GPU is lost (15)" in lost["error"]


# ---- issue 25 defect 2: the burn holds the GPU busy, as gpu-burn does -------------------------------------
def test_the_burn_spends_at_least_95_percent_inside_sgemm(tmp_path: Path, stubs: StubLibs) -> None:
    """Every stub SGEMM takes a known 5 ms (a GPU kernel's time); the host's share of the burn (launches,
    the comparison, the copy back) must stay under 5%: before, copying back and comparing n*n floats in
    Python after every 8 SGEMMs left the GPU idle most of the time."""
    doc = _check(_pci(tmp_path, "01"), stubs, "--sgemm-burn", "2", "--sgemm-burn-size", "512",
                 STUB_CUBLAS_SGEMM_US="5000")
    burn = layer(doc, "benchmark")["measured"]["burn"]
    assert burn["iterations"] >= 100 and burn["checks"] >= 2 and burn["mismatches"] == 0
    assert burn["gpu_seconds"] >= burn["iterations"] * 0.005  # the events time the SGEMMs themselves
    assert burn["duty_cycle"] >= 0.95, burn
    assert "on the GPU" in burn["compared"]


def test_a_card_that_goes_wrong_under_load_is_caught_on_the_device(tmp_path: Path, stubs: StubLibs) -> None:
    """Between batches the product is compared on the GPU with the first one: a flipped bit shows."""
    from tests.support.stublibs import CHECK_SCRIPT

    sys_path = str(CHECK_SCRIPT.parent)
    code = f"""
import ctypes, sys, json
sys.path.insert(0, {sys_path!r})
import tfgpucheck_sgemm as sg
rt = ctypes.CDLL({str(stubs.env / 'libcudart.so.12')!r}, mode=ctypes.RTLD_GLOBAL)
bl = ctypes.CDLL({str(stubs.env / 'libcublas.so.12')!r}, mode=ctypes.RTLD_GLOBAL)
run = sg.Sgemm(rt, bl, 16)
assert run.setup() is None and run.multiply(fetch=False) is None
cmp = sg.DeviceCompare(run)
assert cmp.setup() is None
same = cmp.max_error()[0]
c = (ctypes.c_float * 256)()
rt.cudaMemcpy(c, run.ptrs[2], ctypes.c_size_t(1024), 2)
c[77] += 0.5
rt.cudaMemcpy(run.ptrs[2], c, ctypes.c_size_t(1024), 1)
print(json.dumps([same, cmp.max_error()[0]]))
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [0.0, 0.5]
