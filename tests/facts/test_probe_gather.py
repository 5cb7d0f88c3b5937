"""gather(): whole machines from recorded outputs, cross-checks, and overrides beating detection."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
from support.probe_machine import (
    LSPCI,
    MINI_KNOWLEDGE,
    NVML_MISSING,
    QUERY,
    QUERY_OLD,
    SMI,
    load_dir,
    nvml_json,
    plant,
    replay,
)

from tests.conftest import make_tmp_env
from tfgpu_install.context import Context, build_context
from tfgpu_install.errors import BadInputError, UsageError
from tfgpu_install.facts.model import AssumeFlags
from tfgpu_install.facts.nvml import nvml_argv
from tfgpu_install.facts.probe import Assumptions, assumptions, gather
from tfgpu_install.runner import Completed, ReplayRunner

CASES = {c["id"]: c for c in load_dir("shared/nvidia-smi") + load_dir("nvidia-smi-extra")}
WSL_PROC = "Linux version 5.15.146.1-microsoft-standard-WSL2 (gcc (GCC) 11.2.0) #1 SMP\n"


def _ctx(tmp_env: dict[str, str], runner: ReplayRunner, files: Optional[dict[str, str]] = None,
         **env: str) -> Context:
    nvml = runner.responses.get(nvml_argv())
    if isinstance(nvml, Completed) and nvml.stdout != NVML_MISSING:
        files = {"/dev/nvidiactl": "", **(files or {})}  # NVML answered: the machine has the driver's node
    plant(Path(tmp_env["TFGPU_ROOT"]), {"/etc/os-release": 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\n',
                                        **(files or {})})
    empty = Path(tmp_env["HOME"]) / "empty-path"
    empty.mkdir(exist_ok=True)
    return build_context({**tmp_env, "PATH": str(empty), **env}, runner=runner)


def _problems(facts: Any, severity: str = "") -> str:
    return "\n".join(p.reason for p in facts.problems if not severity or p.severity == severity)


def test_working_machine_nvml_and_nvidia_smi_agree(tmp_env: dict[str, str]) -> None:
    table = CASES["extra_012"]["verbatim"].split("root@node1:~# nvidia-smi\n", 1)[1]
    runner = replay(
        nvml=nvml_json("535.129.03", 12020, [
            {"index": 0, "name": "Quadro RTX 4000", "compute_capability": "7.5", "memory_mib": 8192},
            {"index": 1, "name": "Quadro RTX 4000", "compute_capability": "7.5", "memory_mib": 8192},
        ]),
        query="0, Quadro RTX 4000, GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43, 00000000:06:00.0, 535.129.03, 7.5, 8192\n"
              "1, Quadro RTX 4000, GPU-d6de6afc-bdfe-75c4-5273-0544439153fc, 00000000:07:00.0, 535.129.03, 7.5, 8192\n",
        table=table,
    )
    facts = gather(_ctx(tmp_env, runner, {"/proc/driver/nvidia/version":
                   "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:42:13 UTC 2023\n"}),
                   knowledge=MINI_KNOWLEDGE)
    d = facts.driver
    assert ((d.version, d.source, d.max_cuda, d.max_cuda_source, d.loaded)
            == ("535.129.03", "nvml", "12.2", "nvml", True))
    assert [(g.index, g.name, g.compute_capability, g.cc_source, g.source) for g in facts.gpus] == [
        (0, "Quadro RTX 4000", "7.5", "nvml", "nvml"), (1, "Quadro RTX 4000", "7.5", "nvml", "nvml")]
    assert [p for p in facts.problems if p.field.startswith(("driver", "gpus"))] == []
    assert facts.gpu_on_pci is True
    assert {t.source for t in facts.sources_tried} >= {"nvml", "nvidia-smi", "/proc/driver/nvidia/version"}
    j = facts.to_json()
    assert set(j) >= {"driver", "gpus", "host", "pythons", "cuda_installs", "problems"}
    assert set(j["driver"]) >= {"version", "max_cuda", "source"}
    assert set(j["gpus"][0]) >= {"index", "name", "compute_capability", "memory_mib", "source"}
    assert set(j["host"]) >= {"os", "arch", "glibc", "wsl", "container", "sudo"}


def test_old_driver_rejects_compute_cap_and_cc_comes_from_the_name_table(tmp_env: dict[str, str]) -> None:
    runner = replay(
        query='Field "compute_cap" is not a valid field to query.\n',
        query_old="0, Tesla K80, GPU-aaa, 00000000:00:04.0, 450.203.08, 11441\n"
                  "1, Tesla K80, GPU-bbb, 00000000:00:05.0, 450.203.08, 11441\n",
        table=CASES["case_011"]["verbatim"],
    )
    facts = gather(_ctx(tmp_env, runner), knowledge=MINI_KNOWLEDGE)
    assert QUERY in runner.calls and QUERY_OLD in runner.calls
    assert facts.driver.version == "450.203.08" and facts.driver.source == "nvidia-smi"
    assert (facts.driver.max_cuda, facts.driver.max_cuda_source) == ("11.0", "nvidia-smi")
    assert [(g.name, g.compute_capability, g.cc_source, g.memory_mib) for g in facts.gpus] == [
        ("Tesla K80", "3.7", "table:gpus.yaml", 11441)] * 2


def test_wsl2_err_cuda_and_tool_version_differs(tmp_env: dict[str, str]) -> None:
    table = CASES["case_013"]["verbatim"]
    runner = replay(query="0, NVIDIA GeForce RTX 3060 Laptop GPU, GPU-1, 00000000:01:00.0, 546.80, 8.6, 6144\n",
                    table=table)
    facts = gather(_ctx(tmp_env, runner, {"/proc/version": WSL_PROC}), knowledge=MINI_KNOWLEDGE)
    assert facts.host.wsl
    assert facts.driver.version == "546.80" and facts.driver.tool_version == "545.46"
    assert (facts.driver.max_cuda, facts.driver.max_cuda_source) == ("12.3", "table:drivers.yaml")
    assert "ERR!" in _problems(facts) and "545.46" in _problems(facts)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6")]


def test_version_mismatch_after_upgrade(tmp_env: dict[str, str]) -> None:
    failure = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.178\n"
    runner = replay(
        nvml='{"ok": false, "stage": "init", "error": "Driver/library version mismatch"}\n',
        query=failure,
        lspci="01:00.0 VGA compatible controller [0300]: NVIDIA Corporation AD102 [GeForce RTX 4090] [10de:2684] (rev "
              "a1)\n",
    )
    runner.executables["lspci"] = LSPCI
    files = {"/proc/driver/nvidia/version":
             "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.173.02  Tue Jun 23 08:38:17 UTC 2026\n"}
    facts = gather(_ctx(tmp_env, runner, files), knowledge=MINI_KNOWLEDGE)
    assert facts.driver.version == "580.173.02" and facts.driver.source == "/proc/driver/nvidia/version"
    assert facts.gpus == () and facts.gpu_on_pci is True
    text = _problems(facts)
    assert "version mismatch" in text and "reboot" in text
    assert "580.178" in text  # the library/module disagreement is named
    assert "GeForce RTX 4090" in text  # lspci saw the GPU the driver cannot drive
    assert (SMI,) not in runner.calls  # the table is not asked once the query failed


def test_no_gpu_at_all_lists_every_source(tmp_env: dict[str, str]) -> None:
    facts = gather(_ctx(tmp_env, replay()), knowledge=MINI_KNOWLEDGE)
    assert facts.gpus == () and facts.driver.version is None and facts.gpu_on_pci is False
    tried = {t.source: t.outcome for t in facts.sources_tried}
    assert tried["nvml"].startswith("skipped: no NVIDIA kernel driver")
    assert tried["nvidia-smi"] == "not on PATH"
    assert tried["/proc/driver/nvidia/version"] == "absent"
    assert "no NVIDIA GPU found" in _problems(facts, "error")


def test_container_without_gpu_access_gets_the_docker_hint(tmp_env: dict[str, str]) -> None:
    runner = replay(query=CASES["case_023"]["verbatim"].split("\n", 1)[1])
    facts = gather(_ctx(tmp_env, runner, {"/.dockerenv": ""}), knowledge=MINI_KNOWLEDGE)
    assert facts.host.container == "docker"
    assert "--gpus all" in _problems(facts, "error")


def test_mig_gpu_from_nvml(tmp_env: dict[str, str]) -> None:
    runner = replay(nvml=nvml_json("535.104.05", 12020, [
        {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0", "memory_mib": 40960, "mig": True}]))
    facts = gather(_ctx(tmp_env, runner), knowledge=MINI_KNOWLEDGE)
    assert facts.gpus[0].mig and facts.gpus[0].compute_capability == "8.0"
    assert facts.driver.max_cuda == "12.2"


def test_knowledge_not_available_leaves_cc_unknown_with_a_reason(
    tmp_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tfgpu_install.knowledge.load as k

    def missing(directory: Any = None) -> Any:
        raise NotImplementedError

    monkeypatch.setattr(k, "load_knowledge", missing)
    runner = replay(query='Field "compute_cap" is not a valid field to query.\n',
                    query_old="0, Tesla K80, GPU-aaa, 00000000:00:04.0, 450.203.08, 11441\n",
                    table=CASES["case_011"]["verbatim"])
    facts = gather(_ctx(tmp_env, runner))
    assert facts.gpus[0].compute_capability is None
    assert "compute capability unknown" in _problems(facts)


# ------------------------------------------------------------------ overrides


def _args(**kw: Any) -> AssumeFlags:
    names = dict(assume_driver="driver", assume_gpu="gpus", assume_python="python", assume_glibc="glibc",
                 from_nvidia_smi="nvidia_smi")
    return AssumeFlags(**{names[k]: (tuple(v) if k == "assume_gpu" else v) for k, v in kw.items() if v is not None})


def test_flags_beat_env_and_env_beats_detection(tmp_env: dict[str, str]) -> None:
    ctx = _ctx(tmp_env, ReplayRunner(), TFGPU_OVERRIDE_DRIVER="470.82.01", TFGPU_OVERRIDE_GPUS="Tesla K80,8.9",
               TFGPU_OVERRIDE_PYTHON="3.9", TFGPU_OVERRIDE_GLIBC="2.17", TFGPU_OVERRIDE_OS="windows")
    a = assumptions((_args(assume_driver="550.54.14")), ctx)
    assert a.driver == "550.54.14" and a.sources["driver"] == "override:flag"
    assert a.gpus == ("Tesla K80", "8.9") and a.sources["gpus"] == "override:env"
    facts = gather(ctx, a, knowledge=MINI_KNOWLEDGE)
    assert ctx.runner.calls == []  # driver and GPUs both assumed: nothing live is probed
    assert (facts.driver.version, facts.driver.source) == ("550.54.14", "override:flag")
    assert (facts.driver.max_cuda, facts.driver.max_cuda_source) == ("12.4", "table:drivers.yaml")
    assert [(g.name, g.compute_capability, g.source) for g in facts.gpus] == [
        ("Tesla K80", "3.7", "override:env"), ("GPU with compute capability 8.9", "8.9", "override:env")]
    assert [(p.version, p.source) for p in facts.pythons] == [("3.9", "override:env")]
    assert (facts.host.glibc, facts.host.glibc_source) == ("2.17", "override:env")
    assert (facts.host.os_id, facts.host.source) == ("windows", "override:env")


def test_from_nvidia_smi_file_reads_no_live_gpu_source(tmp_env: dict[str, str], tmp_path: Path) -> None:
    saved = tmp_path / "smi.txt"
    saved.write_text(CASES["case_001"]["verbatim"])
    runner = ReplayRunner()  # no NVML, no nvidia-smi: any live GPU probe fails the test
    ctx = _ctx(tmp_env, runner)
    a = assumptions(_args(from_nvidia_smi=str(saved), assume_gpu=None), ctx)
    facts = gather(ctx, a, knowledge=MINI_KNOWLEDGE)
    assert runner.calls == []
    assert (facts.driver.version, facts.driver.source) == ("331.62", "nvidia-smi file")
    assert (facts.driver.max_cuda, facts.driver.max_cuda_source) == ("6.0", "table:drivers.yaml")
    assert ([(g.name, g.compute_capability, g.source) for g in facts.gpus]
            == [("GeForce GTX 680", "3.0", "nvidia-smi file")] * 3)


def test_bad_overrides_fail_loudly(tmp_env: dict[str, str], tmp_path: Path) -> None:
    ctx = _ctx(tmp_env, ReplayRunner())
    with pytest.raises(UsageError, match="--assume-driver"):
        assumptions((_args(assume_driver="latest")), ctx)
    with pytest.raises(UsageError, match="--assume-python"):
        assumptions((_args(assume_python="2")), ctx)
    with pytest.raises(BadInputError, match="cannot read"):
        assumptions(_args(from_nvidia_smi=str(tmp_path / "missing.txt")), ctx)
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\n")
    with pytest.raises(BadInputError, match="no nvidia-smi output"):
        assumptions(_args(from_nvidia_smi=str(junk)), ctx)
    env_ctx = _ctx(tmp_env, ReplayRunner(), TFGPU_OVERRIDE_GLIBC="two")
    with pytest.raises(UsageError, match="TFGPU_OVERRIDE_GLIBC"):
        assumptions((_args()), env_ctx)


def test_unknown_assumed_gpu_is_an_error_problem(tmp_env: dict[str, str]) -> None:
    ctx = _ctx(tmp_env, ReplayRunner())
    facts = gather(ctx, Assumptions(gpus=("Voodoo 5 5500",), driver="535.54.03"), knowledge=MINI_KNOWLEDGE)
    assert facts.gpus[0].compute_capability is None
    assert "give its compute capability" in _problems(facts, "error")


def test_unreadable_table_falls_back_to_q(tmp_env: dict[str, str]) -> None:
    """A table layout we do not know (nothing parses) still yields the driver through `nvidia-smi -q`."""
    long = CASES["extra_005"]["verbatim"].split("\n", 1)[1]
    runner = replay(query="0, NVIDIA GeForce GTX 780, GPU-a2, 00000000:01:00.0, 450.66, 3.5, 3021\n",
                    table="NVIDIA System Management (a layout from the future)\n", long=long)
    facts = gather(_ctx(tmp_env, runner), knowledge=MINI_KNOWLEDGE)
    assert (SMI, "-q") in runner.calls
    assert ((facts.driver.version, facts.driver.max_cuda, facts.driver.max_cuda_source)
            == ("450.66", "11.0", "nvidia-smi"))
    assert ([(g.name, g.compute_capability, g.source) for g in facts.gpus]
            == [("NVIDIA GeForce GTX 780", "3.5", "nvidia-smi")])


def test_hung_driver_is_asked_once(tmp_env: dict[str, str]) -> None:
    """nvidia-smi timing out (a wedged driver) is reported, not retried three ways."""
    runner = replay()
    runner.add(QUERY, stdout="", returncode=124, stderr="timed out after 15.0s: nvidia-smi")
    facts = gather(_ctx(tmp_env, runner), knowledge=MINI_KNOWLEDGE)
    assert [c for c in runner.calls if c[0] == SMI] == [QUERY]
    assert "dmesg" in _problems(facts, "error")


def test_nvml_timeout_skips_nvidia_smi(tmp_env: dict[str, str]) -> None:
    runner = replay(query="0, x, x, x, 535.104.05, 8.6, 1\n", table="")
    from tfgpu_install.facts.nvml import nvml_argv

    runner.add(nvml_argv(), stdout="", returncode=124, stderr="timed out after 10.0s: NVML probe")
    runner.executables.pop(Path(nvml_argv()[0]).name, None)
    facts = gather(_ctx(tmp_env, runner), knowledge=MINI_KNOWLEDGE)
    assert not any(c[0] == SMI for c in runner.calls)
    assert {t.source: t.outcome for t in facts.sources_tried}["nvidia-smi"].startswith("skipped")


def test_cuda_visible_devices_hiding_every_gpu_is_flagged(tmp_env: dict[str, str]) -> None:
    ctx = _ctx(tmp_env, ReplayRunner(), CUDA_VISIBLE_DEVICES="-1")
    facts = gather(ctx, Assumptions(driver="535.54.03", gpus=("8.6",)), knowledge=MINI_KNOWLEDGE)
    assert facts.cuda_visible_devices == "-1"
    assert "hides every GPU" in _problems(facts, "warning")


def test_nvml_and_kernel_module_disagree(tmp_env: dict[str, str]) -> None:
    runner = replay(nvml=nvml_json("550.54.14", 12040, [
        {"index": 0, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9", "memory_mib": 24564}]))
    files = {"/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
                                            "2023\n",
             "/sys/module/nvidia/version": "535.104.05\n"}
    facts = gather(_ctx(tmp_env, runner, files), knowledge=MINI_KNOWLEDGE)
    assert (facts.driver.version, facts.driver.source) == ("550.54.14", "nvml")
    warning = _problems(facts, "warning")
    assert "driver versions disagree" in warning and "535.104.05" in warning and "reboot" in warning


def test_gpu_on_the_pci_bus_without_a_driver_from_sysfs(tmp_env: dict[str, str]) -> None:
    dev = "/sys/bus/pci/devices/0000:01:00.0/"
    files = {dev + "vendor": "0x10de\n", dev + "class": "0x030000\n", dev + "device": "0x2204\n",
             "/sys/bus/pci/devices/0000:00:1f.3/vendor": "0x8086\n",
             "/sys/bus/pci/devices/0000:00:1f.3/class": "0x040300\n"}
    facts = gather(_ctx(tmp_env, replay(), files), knowledge=MINI_KNOWLEDGE)
    assert facts.gpus == () and facts.gpu_on_pci is True
    err = _problems(facts, "error")
    assert "device 2204" in err and "kernel module is not loaded" in err


def test_unknown_name_identified_by_sysfs_device_id(tmp_env: dict[str, str]) -> None:
    """Issue 12: nvidia-smi names a GPU no table knows; /sys/bus/pci/devices/<bus id>/device still does."""
    from tfgpu_install.knowledge.load import load_knowledge

    runner = replay(query="0, NVIDIA Graphics Device, GPU-0a1b, 00000000:01:00.0, 510.47.03, [N/A], 4096\n",
                    table=CASES["case_009"]["verbatim"])
    files = {"/sys/bus/pci/devices/0000:01:00.0/device": "0x1401\n",
             "/sys/bus/pci/devices/0000:01:00.0/vendor": "0x10de\n"}
    facts = gather(_ctx(tmp_env, runner, files), knowledge=load_knowledge())
    g = next(g for g in facts.gpus if g.name == "NVIDIA Graphics Device")
    assert (g.pci_device_id, g.compute_capability) == ("0x1401", "5.2")
    assert g.cc_source is not None and g.cc_source.startswith("table:pci_ids.yaml (device 1401")


def test_nvml_is_not_asked_without_any_nvidia_kernel_side(tmp_env: dict[str, str]) -> None:
    """No module, no device node, no WSL2 GPU: NVML can only fail, so no child is spent on it."""
    runner = replay()
    facts = gather(_ctx(tmp_env, runner), knowledge=MINI_KNOWLEDGE)
    assert nvml_argv() not in runner.calls
    tried = {t.source: t.outcome for t in facts.sources_tried}
    assert tried["nvml"].startswith("skipped: no NVIDIA kernel driver")


def test_nvml_is_asked_when_any_kernel_side_is_there(tmp_env: dict[str, str], tmp_path: Path) -> None:
    for i, path in enumerate(["/dev/dxg", "/sys/module/nvidia/version", "/dev/nvidiactl"]):
        env = make_tmp_env(tmp_path / str(i))
        runner = replay()
        facts = gather(_ctx(env, runner, {path: "580.65.06\n"}), knowledge=MINI_KNOWLEDGE)
        assert nvml_argv() in runner.calls, path
        assert {t.source: t.outcome for t in facts.sources_tried}["nvml"] == "NVML Shared Library Not Found"


def test_an_amd_gpu_is_named_and_gets_no_nvidia_driver_remedy(tmp_env: dict[str, str]) -> None:
    """Issue #43: a machine whose GPU is AMD was told to install an NVIDIA driver."""
    from tfgpu_install.knowledge.model import Policy
    from tfgpu_install.resolver.resolve import resolve

    dev = "/sys/bus/pci/devices/0000:03:00.0/"
    files = {dev + "vendor": "0x1002\n", dev + "class": "0x030000\n", dev + "device": "0x73bf\n",
             "/sys/bus/pci/devices/0000:00:1f.3/vendor": "0x8086\n",  # audio: not a display device
             "/sys/bus/pci/devices/0000:00:1f.3/class": "0x040300\n"}
    facts = gather(_ctx(tmp_env, replay(), files), knowledge=MINI_KNOWLEDGE)
    assert facts.gpus == () and not facts.gpu_on_pci and facts.other_gpus == ("AMD (1002:73bf) at 0000:03:00.0",)
    res = resolve(facts, MINI_KNOWLEDGE, Policy("stable", "", "newest"))
    said = " ".join(res.reasons + res.remedies)
    assert "the display devices here are AMD (1002:73bf)" in said and "tensorflow-rocm" in said
    assert not any("install its driver" in r or "NVIDIA driver >=" in r for r in res.remedies)
    assert any("--allow-cpu" in r for r in res.remedies)


def test_control_no_display_device_keeps_the_nvidia_driver_remedy(tmp_env: dict[str, str]) -> None:
    from tfgpu_install.knowledge.model import Policy
    from tfgpu_install.resolver.resolve import resolve

    facts = gather(_ctx(tmp_env, replay(), {}), knowledge=MINI_KNOWLEDGE)
    assert facts.other_gpus == ()
    res = resolve(facts, MINI_KNOWLEDGE, Policy("stable", "", "newest"))
    assert any("install its driver" in r for r in res.remedies)
    # the sources by name once; their outcomes stay in the probe note only (was printed in both)
    why = next(r for r in res.reasons if r.startswith("no NVIDIA GPU found"))
    assert "(asked: " in why and "absent" not in why
