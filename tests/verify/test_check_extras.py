"""The check's report extras (pure): mixed precision, CUDA vs nvidia-smi numbering, PTX JIT, MirroredStrategy."""

from __future__ import annotations

import importlib.util

from tfgpu_install.verify.host import CHECK_SCRIPT

# check.py is a script run inside the env, not a module of the package: load it by path.
_spec = importlib.util.spec_from_file_location("tfgpucheck_main", CHECK_SCRIPT)
assert _spec is not None and _spec.loader is not None
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

HW = {"measured": {"gpus": [{"pci": "0000:01:00.0"}, {"pci": "0000:41:00.0"}]}}
# NVML's view (nvidia-smi's numbers, by bus id); CUDA's device 0 is the GPU on bus 0x41.
NVML = {"devices": [{"nvidia_smi": 0, "uuid": "GPU-aaaa", "pci": "0000:01:00.0", "mig_uuids": []},
                    {"nvidia_smi": 1, "uuid": "GPU-bbbb", "pci": "0000:41:00.0", "mig_uuids": []}]}


def _devices(*ccs: str) -> list[dict[str, object]]:
    pcis, uuids = ["0000:41:00.0", "0000:01:00.0"], ["bbbb", "aaaa"]
    return [{"index": i, "name": f"GPU {i}", "compute_capability": cc, "pci": pcis[i], "uuid": uuids[i]}
            for i, cc in enumerate(ccs)]


def test_mixed_gpus_numbering_jit_and_mirrored() -> None:
    state = {"devices": _devices("9.0", "6.1"), "nvml": NVML,
             "tf_measured": {"gpus": ["/physical_device:GPU:0"], "mirrored_replicas": 1,
                             "build": {"cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80", "compute_90"]}}}
    out = check.extras(state, HW, {})
    assert out["mixed_precision"]["eligible"] is False  # the 6.1 card has no Tensor Cores
    assert [(m["cuda"], m["nvidia_smi"], m["matched_by"]) for m in out["visible_devices"]["mapping"]] == [
        (0, 1, "uuid"), (1, 0, "uuid")]
    assert "PCI_BUS_ID" in out["visible_devices"]["note"]
    # CUDA_VISIBLE_DEVICES=1,0 named exactly these GPUs in nvidia-smi's numbers: nothing to advise.
    assert "note" not in check.extras(state, HW, {"CUDA_VISIBLE_DEVICES": "1,0"})["visible_devices"]
    # compute_90 is PTX *and* SASS for 9.0 (TF's build config); sm_60 SASS runs on 6.1 (same major).
    assert out["ptx_jit"]["compute_capabilities"] == []
    assert out["ptx_jit"]["coverage"] == {"9.0": "sass sm_90", "6.1": "sass sm_60"}
    assert out["mirrored_strategy"] == {"replicas": 1, "gpus": 1, "sees_all": True}


def test_only_a_newer_major_is_jit_compiled() -> None:
    state = {"devices": [{"index": 0, "name": "B", "compute_capability": "12.0"},
                         {"index": 1, "name": "A", "compute_capability": "8.9"}],
             "tf_measured": {"build": {"cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80", "compute_90"]}}}
    jit = check.extras(state, {}, {})["ptx_jit"]
    assert jit["compute_capabilities"] == ["12.0"]  # Blackwell: PTX of 9.0 only
    assert jit["coverage"]["8.9"] == "sass sm_80" and "minutes" in jit["note"]


def test_matching_numbering_needs_no_note() -> None:
    state = {"devices": [{"index": 0, "name": "A", "compute_capability": "8.0", "pci": "0000:01:00.0"}],
             "tf_measured": {"gpus": ["a", "b"], "mirrored_replicas": 1,
                             "build": {"cuda_compute_capabilities": ["sm_80"]}}}
    out = check.extras(state, HW, {})
    assert "note" not in out["visible_devices"] and out["mixed_precision"]["eligible"] is True
    assert out["ptx_jit"]["compute_capabilities"] == []
    assert out["mirrored_strategy"]["sees_all"] is False  # 2 GPUs listed, 1 replica
