"""The nvidia-smi / kernel-module / lspci parsers against real recorded outputs.

Every case in tests/fixtures/shared/nvidia-smi (and our own finds in nvidia-smi-extra)
must be read right: the table below states, per case, what a correct reading is
(taken from each file's `expected`, restricted to what its `verbatim` shows).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.probe_machine import load_dir

from tfgpu_install.facts import gpu as smi
from tfgpu_install.facts.cuda import parse_nvcc_version
from tfgpu_install.facts.probe import lookup_cc
from tfgpu_install.knowledge.load import load_knowledge

SHARED = {c["id"]: c for c in load_dir("shared/nvidia-smi")}
EXTRA = {c["id"]: c for c in load_dir("nvidia-smi-extra")}

# id -> what parse_nvidia_smi must return. gpus: (index, name, truncated, memory_mib, cc) where cc is the
# compute capability a correct reading reaches (from the output itself or the GPU-name table).
READINGS: dict[str, dict[str, Any]] = {
    "case_001": dict(state="ok", driver="331.62", cuda=None, cuda_field="absent",
                     gpus=[(i, "GeForce GTX 680", False, 4095, "3.0") for i in range(3)]),
    "case_003": dict(state="ok", driver="367.48", cuda=None, cuda_field="absent",
                     gpus=[(0, "Quadro K3100M", False, 4034, "3.0")], nvcc="7.5"),
    "case_005": dict(state="ok", driver="384.66", cuda=None, cuda_field="absent",
                     gpus=[(0, "TITAN Xp", False, 12174, "6.1")]),
    "case_007": dict(state="ok", driver="435.21", cuda="10.1", cuda_field="ok",
                     gpus=[(0, "GeForce RTX 208", True, None, "7.5")]),
    "case_009": dict(state="ok", driver="440.82", cuda="10.2", gpus=[(0, "GeForce GTX 960M", False, 2004, "5.0")]),
    "case_011": dict(state="ok", driver="450.203.08", cuda="11.0",
                     gpus=[(0, "Tesla K80", False, 11441, "3.7"), (1, "Tesla K80", False, 11441, "3.7")]),
    "case_013": dict(state="ok", driver="546.80", tool="545.46", cuda=None, cuda_field="error", cuda_raw="ERR!",
                     gpus=[(0, "NVIDIA GeForce RTX 3060", True, 6144, "8.6")]),
    "case_015": dict(state="ok", driver="573.76", tool="570.194", cuda="12.8",
                     gpus=[(0, "NVIDIA RTX PRO 1000 Blac", True, None, "12.0")]),
    "case_017": dict(state="ok", driver="525.89.02", cuda="12.0", gpus=[(0, None, False, None, "8.9")], nvcc="11.5"),
    "case_019": dict(state="ok", driver=None, cuda=None, gpus=[],
                     mig=[(1, 3, 0, 0, 19968), (1, 5, 0, 1, 19968), (1, 6, 0, 2, 19968)]),
    "case_021": dict(state="no-driver", driver=None, gpus=[], message_has="NVRM"),
    "case_023": dict(state="no-driver", driver=None, gpus=[], message_has="couldn't communicate"),
    "case_025": dict(state="ok", driver="442.92", cuda="10.2", gpu_count=4,
                     gpus=[(0, "GeForce GTX 1080 Ti", False, None, "6.1")]),
    # The stored excerpt stops before the GPU row: the GPU (GTX 750 Ti) is only in the issue template.
    "case_027": dict(state="ok", driver="545.29.06", cuda="12.3", gpus=[]),
    "extra_001": dict(state="ok", driver="610.43.02", cuda="13.3", cuda_label="CUDA UMD Version",
                      gpus=[(0, "NVIDIA B200", False, 183359, "10.0"), (1, "NVIDIA B200", False, 183359, "10.0")]),
    "extra_002": dict(state="ok", driver="610.43.02", cuda="13.3", cuda_label="CUDA UMD Version",
                      gpus=[(0, "NVIDIA GeForce RTX 5070", True, 12227, "12.0")]),
    "extra_003": dict(state="ok", driver="510.06", tool="470.57.02", cuda="11.6",
                      gpus=[(0, "NVIDIA GeForce", True, 8192, None)]),
    "extra_004": dict(state="ok", driver="450.57", cuda="11.0", gpus=[(0, "TITAN Xp", False, 12196, "6.1")]),
    "extra_005": dict(state="ok", driver="450.66", cuda="11.0", gpu_count=1,
                      gpus=[(0, "GeForce GTX 780", False, None, "3.5")]),
    "extra_006": dict(state="ok", driver="396.54", cuda=None, cuda_field="absent", gpu_count=1,
                      gpus=[(0, "GeForce GTX 1080", False, None, "6.1")]),
    "extra_008": dict(state="version-mismatch", driver=None, gpus=[], nvml_lib="580.178", module="580.173.02"),
    "extra_009": dict(state="ok", driver="570.133.07", cuda="12.8", gpus=[(0, None, False, None, "8.9")]),
    "extra_010": dict(state="unrecognized", driver=None, gpus=[], invalid="compute_cap"),
    "extra_011": dict(state="ok", driver="531.14", cuda="12.1",
                      gpus=[(0, "NVIDIA GeForce GTX 1080 Ti", False, 11264, "6.1")]),
    "extra_012": dict(state="ok", driver="535.129.03", cuda="12.2",
                      gpus=[(0, "Quadro RTX 4000", False, 8192, "7.5"), (1, "Quadro RTX 4000", False, None, "7.5")]),
    "extra_013": dict(state="no-devices", driver=None, gpus=[]),
    "extra_018": dict(state="ok", driver="580.82.09", cuda="13.0",
                      gpus=[(0, "NVIDIA GeForce RTX 5090", False, 32607, "12.0"),
                            (1, "NVIDIA GeForce RTX 4090", False, 24564, "8.9")]),
    "extra_019": dict(state="ok", driver="575.64.03", cuda=None, cuda_field="error", cuda_raw="N/A",
                      gpus=[(0, "NVIDIA GeForce RTX 5070", False, 12227, "12.0")]),
    # issue 12: -L, CSV in another column order, one-column CSV, noheader CSV printed as a Python list,
    # WSL2 and R384 tables cut short, -q/-a of R375..R510 (Product Architecture).
    "extra_020": dict(state="ok", driver="570.86.15", cuda=None, cuda_field="absent",
                      gpus=[(0, "NVIDIA TITAN V", False, None, "7.0"),
                            (1, "NVIDIA RTX 5880 Ada Generation", False, None, "8.9")]),
    "extra_021": dict(state="ok", driver="570.133.07", cuda="12.8", gpus=[(0, None, False, None, "8.9")]),
    "extra_022": dict(state="ok", driver="440.64", cuda=None, cuda_field="absent",
                      gpus=[(0, "GeForce RTX 2080", False, 7979, "7.5")]),
    "extra_023": dict(state="ok", driver="522.25", tool="525.60.13", cuda="11.8",
                      gpus=[(0, "NVIDIA GeForce", True, 6144, None)]),
    "extra_024": dict(state="ok", driver="384.69", cuda=None, cuda_field="absent",
                      gpus=[(0, "GeForce GTX 108", True, 11171, "6.1")]),
    "extra_025": dict(state="ok", driver="510.68.02", cuda="11.6", gpu_count=1,
                      gpus=[(0, "NVIDIA GeForce GTX 1650", False, None, "7.5")]),
    "extra_026": dict(state="ok", driver="440.82", cuda="10.2", gpu_count=1,
                      gpus=[(0, "GeForce GTX 1650", False, None, "7.5")]),
    "extra_027": dict(state="ok", driver="375.82", cuda=None, cuda_field="absent", gpu_count=1,
                      gpus=[(0, "Quadro M1000M", False, None, "5.0")]),
    "extra_028": dict(state="ok", driver="535.216.01", cuda=None, cuda_field="error", cuda_raw="N/A",
                      gpus=[(0, "NVIDIA GeForce RTX 2070", False, None, "7.5")]),
    "extra_029": dict(state="ok", driver="530.41.03", cuda="12.1", gpu_count=1,
                      gpus=[(0, "NVIDIA GeForce RTX 3060 Laptop GPU", False, None, "8.6")]),
    "extra_030": dict(state="ok", driver="535.104.05", cuda="12.2",
                      gpus=[(0, "NVIDIA GeForce RTX 3070", True, 8192, "8.6"),
                            (1, "NVIDIA GeForce RTX 3080", True, 8192, "8.6")]),
    "extra_031": dict(state="ok", driver="546.12", cuda="12.3",
                      gpus=[(0, "NVIDIA GeForce RTX 3050", True, 4096, "8.6")]),
    "extra_032": dict(state="ok", driver="580.95.05", cuda="13.0",
                      gpus=[(0, "NVIDIA GeForce RTX 3060", False, 12288, "8.6")]),
}
SMI_KINDS = ("nvidia_smi", "nvidia_smi_failure")
REAL = load_knowledge()  # the packaged gpus.yaml: every real output must be read right with it
ALL = {**SHARED, **EXTRA}


def test_every_recorded_case_has_a_reading() -> None:
    smi_cases = {i for i, c in ALL.items() if c["kind"] in SMI_KINDS}
    assert smi_cases == set(READINGS), "add the new fixture to READINGS"
    assert len(SHARED) == 14


@pytest.mark.parametrize("case_id", sorted(READINGS))
def test_reading(case_id: str) -> None:
    case, want = ALL[case_id], READINGS[case_id]
    r = smi.parse_nvidia_smi(case["verbatim"])
    assert r.state == want["state"]
    assert r.driver_version == want["driver"]
    if "cuda" in want:
        assert r.cuda_version == want["cuda"]
    if "cuda_field" in want:
        assert r.cuda_field == want["cuda_field"]
    if "cuda_raw" in want:
        assert r.cuda_raw == want["cuda_raw"]
    if "cuda_label" in want:
        assert r.cuda_label == want["cuda_label"]
    assert r.tool_version in (want.get("tool", want["driver"]), None)
    assert r.tool_differs == ("tool" in want)
    got = []
    for g in r.gpus:
        cc = g.compute_capability
        if cc is None and g.name:
            cc, _ = lookup_cc(REAL, g.name + (" ..." if g.name_truncated else ""), g.name_truncated)
        got.append((g.index, g.name, g.name_truncated, g.memory_mib, cc))
    assert got == want["gpus"]
    if "mig" in want:
        assert [(m.gpu, m.gi, m.ci, m.mig_dev, m.memory_mib) for m in r.mig_devices] == want["mig"]
    if "gpu_count" in want:
        assert r.gpu_count == want["gpu_count"]
    if "message_has" in want:
        assert want["message_has"] in (r.message or "")
    if "nvml_lib" in want:
        assert (r.nvml_library_version, r.module_version) == (want["nvml_lib"], want["module"])
    if "invalid" in want:
        assert r.invalid_field == want["invalid"]
    if "nvcc" in want:
        nv = parse_nvcc_version(case["verbatim"])
        assert nv is not None and nv.release == want["nvcc"]


def test_expected_fields_agree_with_the_table() -> None:
    """Cross-check READINGS against each fixture's own `expected` where it names plain values."""
    for case_id, want in READINGS.items():
        exp = ALL[case_id].get("expected") or {}
        if isinstance(exp.get("driver_version"), str) and want["driver"]:
            assert exp["driver_version"].split()[0] == want["driver"], case_id
        for i, g in enumerate(exp.get("gpus") or []):
            if i < len(want["gpus"]) and g.get("compute_capability"):
                assert want["gpus"][i][4] == g["compute_capability"], case_id


def test_query_csv_multi_gpu_driver_lines() -> None:
    """uv #14647: one driver_version line per GPU, not one version."""
    gpus, invalid = smi.parse_query_gpu(EXTRA["extra_007"]["verbatim"], ["driver_version"])
    assert invalid is None
    assert [g.driver_version for g in gpus] == ["572.60", "572.60"]


def test_query_csv_full_fields_and_mixed_gpus() -> None:
    text = (
        "0, NVIDIA GeForce RTX 3090, GPU-5f0c1b2e-aaaa-bbbb-cccc-000000000000, 00000000:01:00.0, 535.104.05, 8.6, "
        "24576\n"
        "1, NVIDIA GeForce GTX 1080 Ti, GPU-11111111-aaaa-bbbb-cccc-000000000000, 00000000:02:00.0, 535.104.05, 6.1, "
        "11264\n"
    )
    gpus, invalid = smi.parse_query_gpu(text)
    assert invalid is None
    assert [(g.index, g.name, g.compute_capability, g.memory_mib, g.bus_id) for g in gpus] == [
        (0, "NVIDIA GeForce RTX 3090", "8.6", 24576, "00000000:01:00.0"),
        (1, "NVIDIA GeForce GTX 1080 Ti", "6.1", 11264, "00000000:02:00.0"),
    ]


def test_query_csv_invalid_field_and_not_supported() -> None:
    assert smi.parse_query_gpu(EXTRA["extra_010"]["verbatim"]) == ((), "compute_cap")
    gpus, _ = smi.parse_query_gpu("0, Tesla K80, [N/A], 00000000:00:04.0, 470.82.01, 11441", smi.QUERY_FIELDS_OLD)
    assert gpus[0].uuid is None and gpus[0].name == "Tesla K80" and gpus[0].compute_capability is None


def test_query_csv_failure_text_yields_no_rows() -> None:
    for text in ("No devices were found", SHARED["case_023"]["verbatim"], EXTRA["extra_008"]["verbatim"]):
        assert smi.parse_query_gpu(text) == ((), None)


@pytest.mark.parametrize("case_id", sorted(i for i, c in EXTRA.items() if c["kind"] == "proc_driver_version"))
def test_proc_driver_version(case_id: str) -> None:
    case = EXTRA[case_id]
    assert smi.parse_proc_driver_version(case["verbatim"]) == case["expected"]["driver_version"]


def test_proc_and_sys_versions_edge_cases() -> None:
    assert smi.parse_proc_driver_version("") is None
    assert smi.parse_proc_driver_version("NVRM version: garbage") is None
    assert smi.parse_sys_module_version("535.104.05\n") == "535.104.05"
    assert smi.parse_sys_module_version("not a version") is None


def test_lspci_mixed_gpus() -> None:
    case = EXTRA["extra_017"]
    got = smi.parse_lspci(case["verbatim"])
    assert [{"slot": g.slot, "device_id": g.device_id, "name": g.name} for g in got] == case["expected"]["gpus"]


def test_lspci_3d_controller_and_plain_format() -> None:
    text = (
        "00:02.0 VGA compatible controller [0300]: Intel Corporation UHD Graphics 620 [8086:5917] (rev 07)\n"
        "00:04.0 3D controller [0302]: NVIDIA Corporation GK210GL [Tesla K80] [10de:102d] (rev a1)\n"
        "01:00.0 VGA compatible controller: NVIDIA Corporation GP104 [GeForce GTX 1080] (rev a1)\n"
    )
    got = smi.parse_lspci(text)
    assert ([(g.slot, g.name, g.device_id) for g in got]
            == [("00:04.0", "Tesla K80", "102d"), ("01:00.0", "GeForce GTX 1080", None)])


def test_cuda_from_int() -> None:
    assert smi.cuda_from_int(12020) == "12.2"
    assert smi.cuda_from_int(11080) == "11.8"
    assert smi.cuda_from_int(0) is None and smi.cuda_from_int("12020") is None


_TEXTS = st.one_of(
    st.text(max_size=400),
    st.lists(st.sampled_from([
        "| NVIDIA-SMI 535.1  Driver Version: x  CUDA Version: ERR! |", "|   0  ", " Off  |", "MiB /", "MIG devices:",
        "Processes:", "|  1    3   0   0  |", "GPU 0000:01:00.0", "    Product Name : ", "Attached GPUs : ",
        "Field \"x\" is not a valid field to query.", "index, name", "0, , , , , , ", "NVRM version: Module  1.2",
        "No devices were found", "\n", "|", ",", "...", "FB Memory Usage", "        Total : 12 MiB", "[10de:1234]",
    ]), max_size=30).map("".join),
)


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_no_text_crashes_a_parser(text: str) -> None:
    smi._parse_nvidia_smi(text)  # the unguarded core: a crash here is a parser bug
    smi.parse_query_gpu(text)
    smi.parse_query_gpu(text, ("driver_version",))
    smi.parse_smi_q(text)
    smi.parse_smi_table(text)
    smi.parse_proc_driver_version(text)
    smi.parse_sys_module_version(text)
    smi.parse_lspci(text)
    smi.parse_smi_failure(text)
    parse_nvcc_version(text)


def test_lspci_numeric_form_gives_the_device_id() -> None:
    """`lspci -n` prints numbers only: the device id is what identifies the GPU (issue 12)."""
    text = "00:02.0 0600: 8086:3e0f\n01:00.0 0300: 10de:2204 (rev a1)\n01:00.1 0403: 10de:1aef (rev a1)\n"
    (gpu,) = smi.parse_lspci(text)
    assert (gpu.slot, gpu.device_id) == ("01:00.0", "2204")


def test_query_csv_shapes() -> None:
    """Header in any order, noheader after the pasted command, a Python-list paste, -L with MIG devices."""
    r = smi.parse_nvidia_smi("name, pci.device_id, index, compute_cap\nNVIDIA A10, 0x223610DE, 0, 8.6\n")
    assert [(g.index, g.name, g.pci_device_id, g.compute_capability) for g in r.gpus] == [
        (0, "NVIDIA A10", "0x223610DE", "8.6")]
    r = smi.parse_nvidia_smi("$ nvidia-smi --query-gpu=compute_cap,name --format=csv,noheader\n8.9, NVIDIA L4\n")
    assert [(g.name, g.compute_capability) for g in r.gpus] == [("NVIDIA L4", "8.9")]
    r = smi.parse_nvidia_smi("nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader\n"
                             "out = [b'Tesla T4, 7.5\\n', b'Tesla T4, 7.5\\n']\n")
    assert [(g.index, g.name, g.compute_capability) for g in r.gpus] == [(0, "Tesla T4", "7.5"), (1, "Tesla T4", "7.5")]
    r = smi.parse_nvidia_smi("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-a2f3-5e8b-90d5-6f6d1c1b0e2c)\n"
                             "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n")
    assert [(g.name, g.uuid, g.mig_mode) for g in r.gpus] == [
        ("NVIDIA A100-SXM4-40GB", "GPU-5d5ba0d6-a2f3-5e8b-90d5-6f6d1c1b0e2c", "Enabled")]
    assert "-L" in r.formats


@pytest.mark.parametrize("text,state", [
    ("Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n", smi.GPU_LOST),
    ("GPU is lost.  Reboot the system to recover this GPU\n", smi.GPU_LOST),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", smi.NO_DRIVER),
    ("2024-01-01 [ERR] Failed to initialize NVML: Unknown Error\nFailed to initialize NVML: Unknown Error\n",
     smi.NVML_FAILED),
])
def test_failure_states(text: str, state: str) -> None:
    r = smi.parse_nvidia_smi(text)
    assert r.state == state and r.message


# ---------------------------------------------------------------- issue 26: shapes from real pastes


def test_missing_libnvidia_ml_is_a_machine_state() -> None:
    # as printed in https://github.com/NVIDIA/nvidia-docker/issues/1163 (and canonical/lxd#9964)
    r = smi.parse_nvidia_smi(
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
        "Driver is properly installed and present in your system.\nPlease also try adding directory that contains "
        "libnvidia-ml.so to your system PATH.\n")
    assert r.state == smi.NVML_MISSING and r.message is not None and "libnvidia-ml.so" in r.message


def test_typographic_apostrophe_still_reads_as_no_driver() -> None:
    for quote in ("\u2018", "\u2019", "`"):
        r = smi.parse_nvidia_smi(f"NVIDIA-SMI has failed because it couldn{quote}t communicate with the NVIDIA driver. "
                                 "Make sure that the latest NVIDIA driver is installed and running.\n")
        assert r.state == smi.NO_DRIVER, quote
        assert r.message is not None and r.message.startswith("NVIDIA-SMI has failed")


def test_list_line_cut_before_its_parenthesis() -> None:
    r = smi.parse_nvidia_smi("GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-5e4a2b11-1c3d-4e5f-8a9b-0c1d2e3f4a5b\n"
                             "GPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-5e4a")
    assert r.state == smi.OK
    assert [(g.index, g.name, g.uuid) for g in r.gpus] == [
        (0, "NVIDIA GeForce RTX 4090", "GPU-5e4a2b11-1c3d-4e5f-8a9b-0c1d2e3f4a5b"),
        (1, "NVIDIA GeForce RTX 4090", None)]  # a UUID cut short is not kept


def test_headerless_csv_of_name_and_pci_device_id() -> None:
    r = smi.parse_nvidia_smi("NVIDIA GB10, 0x2E1210DE\n")
    assert r.state == smi.OK and [(g.name, g.pci_device_id) for g in r.gpus] == [("NVIDIA GB10", "0x2E1210DE")]
    r = smi.parse_nvidia_smi("0x233010DE, NVIDIA H100 80GB HBM3\n0x233010DE, NVIDIA H100 80GB HBM3\n")
    assert [(g.index, g.name) for g in r.gpus] == [(0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA H100 80GB HBM3")]
    assert smi.parse_nvidia_smi("hello, 0x12345678\n").state == smi.UNRECOGNIZED  # not NVIDIA's vendor id


def test_gb10_gets_its_capability_from_the_name() -> None:
    from tfgpu_install.facts.probe import lookup_cc
    from tfgpu_install.knowledge.load import load_knowledge

    r = smi.parse_nvidia_smi("NVIDIA GB10, 0x2E1210DE\n")
    assert lookup_cc(load_knowledge(), r.gpus[0].name or "") == ("12.1", "table:gpus.yaml")
