"""Fuzz: mutated real nvidia-smi outputs (every fixture: tables, -q, CSV, -L, failures) through every
parser, without the safety net parse_nvidia_smi wraps around them. No exception, ever."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.probe_machine import load_dir

from tfgpu_install.facts import gpu as smi
from tfgpu_install.facts.gpudetect import reading_to_detection

REAL = [c["verbatim"] for c in load_dir("shared/nvidia-smi") + load_dir("nvidia-smi-extra") if c.get("verbatim")]
NOISE = ["|", ",", ":", "...", "\u2026", "N/A", "[N/A]", "0x", "MiB", "GPU ", "UUID: GPU-", "Device Id : 0x",
         "compute_cap", "--query-gpu=", "noheader", "['", "']", "b'", "\\n", "\t", "\x00", "\ufeff", "\r",
         "NVIDIA-SMI 550.54.14", "Driver Version: ", "CUDA Version: ERR!", "MIG devices:", "Processes:",
         "Product Architecture : ", "NVRM: ", "Failed to initialize NVML: "]


@st.composite
def mutated(draw: Any) -> str:
    text = draw(st.sampled_from(REAL))
    lines = text.splitlines()
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["drop", "dup", "cut", "insert", "swap", "join", "chars"]))
        i = draw(st.integers(0, max(0, len(lines) - 1))) if lines else 0
        if op == "drop" and lines:
            del lines[i]
        elif op == "dup" and lines:
            lines.insert(i, lines[i])
        elif op == "cut" and lines:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif op == "insert":
            lines.insert(i, draw(st.sampled_from(NOISE)) + draw(st.text(max_size=20)))
        elif op == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "join":
            lines += draw(st.sampled_from(REAL)).splitlines()
        elif op == "chars" and lines:
            s = lines[i]
            k = draw(st.integers(0, len(s)))
            lines[i] = s[:k] + draw(st.sampled_from(NOISE)) + s[k:]
    return "\n".join(lines)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_real_outputs_never_raise(text: str) -> None:
    reading = smi._parse_nvidia_smi(text)  # the unguarded parser
    smi.parse_smi_table(text)
    smi.parse_smi_q(text)
    smi.parse_smi_list(text)
    smi.parse_smi_failure(text)
    smi.parse_query_gpu(text)
    smi.parse_query_gpu(text, ["name", "compute_cap", "pci.device_id"])
    det = reading_to_detection(reading, "nvidia-smi file")
    assert len(det.gpus) == len(reading.gpus)
    assert all(g.name for g in det.gpus)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text: str) -> None:
    smi._parse_nvidia_smi(text)
