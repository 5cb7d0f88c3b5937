"""The NVML probe: the child's JSON protocol, a real run here (no driver), a hung child."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from support.probe_machine import nvml_json

from tfgpu_install.context import Context
from tfgpu_install.facts.nvml import nvml_argv, parse_nvml_output, query_nvml
from tfgpu_install.runner import TIMED_OUT, ReplayRunner, SubprocessRunner


def test_parse_working_machine() -> None:
    text = nvml_json("535.104.05", 12020, [
        {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-1", "pci_bus_id": "00000000:07:00.0",
         "compute_capability": "8.0", "memory_mib": 40960, "mig": True},
        {"index": 1, "name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6", "memory_mib": 24576},
    ])
    r = parse_nvml_output(text)
    assert r.ok and r.driver_version == "535.104.05" and r.max_cuda == "12.2"
    assert [(g.index, g.name, g.compute_capability, g.memory_mib, g.mig) for g in r.gpus] == [
        (0, "NVIDIA A100-SXM4-40GB", "8.0", 40960, True),
        (1, "NVIDIA GeForce RTX 3090", "8.6", 24576, False),
    ]


def test_parse_failures() -> None:
    r = parse_nvml_output(json.dumps({"ok": False, "stage": "init", "error": "Driver Not Loaded"}))
    assert not r.ok and r.error == "Driver Not Loaded"
    r = parse_nvml_output(json.dumps({"ok": False, "stage": "import", "error": "ModuleNotFoundError: pynvml"}))
    assert not r.ok and r.error is not None and r.error.startswith("import:")
    assert not parse_nvml_output("Segmentation fault").ok
    assert not parse_nvml_output("").ok


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
        ["ok", "gpus", "index", "driver_version", "name", "memory_mib", "cuda_driver_version"]), c, max_size=5),
    max_leaves=20,
).map(json.dumps)))
def test_no_output_crashes_the_nvml_parser(text: str) -> None:
    r = parse_nvml_output(text)
    assert r.ok or r.error  # a reading, or a failure that says why
    assert all(isinstance(g.index, int) for g in r.gpus)


def test_real_child_process_here(ctx: Context) -> None:
    """Really spawn the probe with this interpreter. What it must say depends on this machine: with an
    NVIDIA driver loaded, the driver's own version and at least one GPU; without one, why not."""
    r = query_nvml(SubprocessRunner())
    try:
        loaded = Path("/proc/driver/nvidia/version").read_text(errors="replace")
    except OSError:
        loaded = ""
    if loaded:
        assert r.ok, r.error
        assert r.driver_version and r.driver_version in loaded and r.gpus
    else:
        assert not r.ok
        assert r.error  # e.g. "NVML Shared Library Not Found"


def test_hung_child_is_a_reading_not_a_hang() -> None:
    runner = ReplayRunner()
    runner.add(nvml_argv(), stdout="", returncode=TIMED_OUT, stderr="timed out after 10.0s: NVML probe")
    r = query_nvml(runner)
    assert not r.ok and "timed out" in (r.error or "")


def test_timeout_really_kills_a_hanging_child(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real child that never answers (a wedged driver) is cut off by the timeout."""
    wedged = tmp_path / "python-wedged"
    wedged.write_text("#!/bin/sh\nexec sleep 30\n")
    wedged.chmod(0o755)
    r = query_nvml(SubprocessRunner(), python=str(wedged), timeout=0.5)
    assert not r.ok and "timed out" in (r.error or "")


def test_the_child_runs_without_site_and_still_finds_pynvml(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The probe runs `python -S` (no .pth files to read) with pynvml's directory on its path;
    with a libnvidia-ml.so.1 to load (the gcc-built stub) it really goes through pynvml."""
    import os

    from support.stublibs import build_stub_libs

    argv = nvml_argv()
    assert argv[1] == "-S"
    libs = build_stub_libs(tmp_path / "stubs")
    env = {**os.environ, "LD_LIBRARY_PATH": str(libs.driver)}
    r = query_nvml(SubprocessRunner(base_env=env))
    # pynvml was imported and called into the stub (which lacks nvmlInitWithFlags: pynvml says so)
    assert not r.ok and r.error == "Function Not Found"
    # no library to load: answered before pynvml is imported, in pynvml's words
    r = query_nvml(SubprocessRunner(base_env={**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}))
    assert not r.ok and r.error == "NVML Shared Library Not Found"
