"""parse_tf_log (inside the env's check) against real TensorFlow logs from public reports."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import load_cases
from tfgpu_install.verify.host import CHECK_SCRIPT

sys.path.insert(0, str(CHECK_SCRIPT.parent))  # the check's modules live beside it, outside the package
import tfgpucheck_nvml  # noqa: E402
import tfgpucheck_tf  # noqa: E402

CASES = {c["id"]: c for c in load_cases("logs")}


def test_dlopen_failure_names_its_library() -> None:
    log = tfgpucheck_tf.parse_tf_log(CASES["case_031"]["verbatim"])
    assert log["dlopen_failures"] == [{"library": "libcudart.so.11.0", "harmless": False,
                                       "dlerror": "libcudart.so.11.0: cannot open shared object file: "
                                       "No such file or directory"}]


def test_several_missing_libraries() -> None:
    log = tfgpucheck_tf.parse_tf_log(CASES["case_063"]["verbatim"])
    assert [d["library"] for d in log["dlopen_failures"]][:4] == [
        "cublas64_11.dll", "cublasLt64_11.dll", "cufft64_10.dll", "cusparse64_11.dll"]


def test_created_device_and_loaded_cudnn() -> None:
    log = tfgpucheck_tf.parse_tf_log(CASES["case_049"]["verbatim"])
    assert log["created_devices"] == [{"device": "/job:localhost/replica:0/task:0/device:GPU:0", "memory_mb": 13272,
                                       "name": "NVIDIA GeForce RTX 5060 Ti", "pci": "0000:2b:00.0",
                                       "compute_capability": "12.0"}]
    assert log["cudnn_loaded"] == 90800


def test_cannot_dlopen_without_names_is_kept_as_a_note() -> None:
    log = tfgpucheck_tf.parse_tf_log(CASES["case_029"]["verbatim"])
    assert log["dlopen_failures"] == []
    assert len(log["notes"]) == 1 and "Cannot dlopen some GPU libraries" in log["notes"][0]


@pytest.mark.parametrize("line,harmless", [
    ("I dso_loader.cc:70] Could not load dynamic library 'libnvinfer.so.8.6.1'; dlerror: x", True),
    ("I dso_loader.cc:70] Could not load dynamic library 'libcudnn.so.8'; dlerror: x", False),
])
def test_tensorrt_is_never_blamed(line: str, harmless: bool) -> None:
    assert tfgpucheck_tf.parse_tf_log(line)["dlopen_failures"][0]["harmless"] is harmless


def test_telemetry_summary_flags_throttling() -> None:
    tel = tfgpucheck_nvml.Telemetry()  # no NVML here: samples given by hand
    tel.source = "pynvml"
    tel.samples = [{"gpu": 0, "temp_c": 70, "sm_mhz": 1980, "power_w": 300.0, "util_pct": 99, "throttle": 0x4},
                   {"gpu": 0, "temp_c": 91, "sm_mhz": 1410, "power_w": 280.5, "util_pct": 100, "throttle": 0x40 | 0x4}]
    out = tel.summary()
    assert out["temp_c"] == {"min": 70, "max": 91} and out["sm_mhz"] == {"min": 1410, "max": 1980}
    assert out["throttle_reasons"] == ["hw_thermal", "sw_power_cap"]
