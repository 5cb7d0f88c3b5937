"""The machine walk against planted broken layouts in a temp root, with recorded nvidia-smi outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.doctor_layouts import (
    build_so,
    fake_tf_env,
    make_ctx,
    plant,
    plant_driver_ok,
    plant_toolkit,
    recorded_smi,
    replay,
)
from tests.support.promised import absent
from tests.support.stublibs import plant_pci
from tests.support.tfenv import tf_env  # noqa: F401  (fixture)
from tfgpu_install.doctor.chain import ABSENT, BROKEN, OK, WARN, walk
from tfgpu_install.doctor.rules import load_rules
from tfgpu_install.runner import Completed

pytestmark = pytest.mark.skipif(absent("gcc"), reason="gcc builds the stub libraries")
RULES = load_rules()
SMI_OK = recorded_smi("case_027")  # 545.29.06, CUDA 12.3 (tensorflow/tensorflow#62962)
SMI_K80 = recorded_smi("case_011")  # 2 x Tesla K80, 450.203.08, CUDA 11.0


def _root(tmp_env: dict[str, str]) -> Path:
    return Path(tmp_env["TFGPU_ROOT"])


def test_no_gpu_no_driver_is_a_calm_absent(tmp_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_env, replay(None))
    rep = walk(ctx, RULES)
    assert rep.no_gpu and rep.broken is None
    (c,) = rep.checks
    assert c.status == ABSENT and "no NVIDIA GPU" in c.summary and "Nothing is broken" in c.cause
    assert "plan --from-nvidia-smi" in c.fix


def test_container_without_gpu_says_gpus_all(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant(root, "/.dockerenv")
    rep = walk(make_ctx(tmp_env, replay(None)), RULES)
    assert rep.no_gpu and rep.container and "--gpus all" in rep.checks[0].fix
    plant_pci(root, [("0000:01:00.0", "0x10de", "0x030000")])
    rep = walk(make_ctx(tmp_env, replay(None)), RULES)
    assert rep.broken is not None and rep.broken.name == "container" and "--gpus all" in rep.broken.fix


def test_nouveau_loaded(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant(root, "/proc/modules", "nouveau 2306048 1 - Live 0x0\nttm 106496 1 nouveau, Live 0x0\n")
    plant_pci(root, [("0000:01:00.0", "0x10de", "0x030000")], driver="nouveau")
    rep = walk(make_ctx(tmp_env, replay(recorded_smi("case_023"))), RULES)
    assert rep.broken is not None and rep.broken.rule == "nouveau-loaded"
    assert "blacklist nouveau" in rep.broken.fix and "reboot" in rep.broken.fix


def test_driver_library_mismatch_after_upgrade(tmp_env: dict[str, str]) -> None:
    plant_driver_ok(_root(tmp_env))
    smi = recorded_smi("extra_003", kind="logs-extra")  # "Failed to initialize NVML: Driver/library version mismatch"
    rep = walk(make_ctx(tmp_env, replay(smi)), RULES)
    assert rep.broken is not None and rep.broken.rule == "driver-library-mismatch"
    assert "reboot" in rep.broken.fix


def test_gpu_on_pci_without_driver_module(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant(root, "/proc/modules", "snd 1 0 - Live 0x0\n")
    plant_pci(root, [("0000:01:00.0", "0x10de", "0x030000")], driver="none")
    rep = walk(make_ctx(tmp_env, replay(None)), RULES)
    assert rep.broken is not None and rep.broken.name == "kernel module"
    assert "modprobe nvidia" in rep.broken.fix and "an NVIDIA GPU is on the PCI bus" in rep.broken.summary


def test_healthy_driver_and_leftover_process_warning(tmp_env: dict[str, str]) -> None:
    plant_driver_ok(_root(tmp_env))
    runner = replay(SMI_OK, apps="4242, python3, 15320 MiB\n")
    rep = walk(make_ctx(tmp_env, runner), RULES)
    assert rep.broken is None and not rep.no_gpu
    assert rep.checks[0].status == OK and "545.29.06" in rep.checks[0].summary and "12.3" in rep.checks[0].summary
    (w,) = rep.warnings
    assert "kill 4242" in w.fix and w.evidence == ("4242, python3, 15320 MiB",)
    assert not runner.mutating_calls


def test_two_toolkits_path_and_ld_library_path_split(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    plant_toolkit(root, "11.8", "11.8.89")
    plant_toolkit(root, "12.2", "12.2.140")
    ctx = make_ctx(tmp_env, replay(SMI_OK), PATH="/usr/local/cuda-12.2/bin:/usr/bin",
                   LD_LIBRARY_PATH="/usr/local/cuda-11.8/lib64")
    rep = walk(ctx, RULES)
    b = rep.broken
    assert b is not None and b.name == "two toolkits"
    assert "/usr/local/cuda-12.2 (PATH)" in b.summary and "/usr/local/cuda-11.8 (LD_LIBRARY_PATH)" in b.summary
    assert "export PATH=/usr/local/cuda-11.8/bin:$PATH" in b.fix


def test_usr_local_cuda_points_at_the_other_toolkit(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    plant_toolkit(root, "11.8")
    plant_toolkit(root, "12.2")
    os.symlink("/usr/local/cuda-11.8", root / "usr/local/cuda")  # absolute, as installers write it
    ctx = make_ctx(tmp_env, replay(SMI_OK), PATH="/usr/local/cuda-12.2/bin:/usr/bin",
                   LD_LIBRARY_PATH="/usr/local/cuda-12.2/lib64")
    b = walk(ctx, RULES).broken
    assert b is not None and b.name == "/usr/local/cuda"
    assert "sudo ln -sfn /usr/local/cuda-12.2 /usr/local/cuda" in b.fix


def test_dangling_usr_local_cuda(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    (root / "usr/local").mkdir(parents=True)
    os.symlink("cuda-11.2", root / "usr/local/cuda")
    plant_toolkit(root, "12.2")
    b = walk(make_ctx(tmp_env, replay(SMI_OK)), RULES).broken
    assert b is not None and "dangling" in b.cause and "cuda-11.2 (missing)" in b.summary
    assert "sudo ln -sfn /usr/local/cuda-12.2 /usr/local/cuda" in b.fix


def test_toolkit_newer_than_driver(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    plant_toolkit(root, "12.4", "12.4.131")
    env = {"PATH": "/usr/local/cuda-12.4/bin:/usr/bin", "LD_LIBRARY_PATH": "/usr/local/cuda-12.4/lib64"}
    # Driver CUDA 12.3: same major, minor-version compatibility -> a warning, not broken.
    rep = walk(make_ctx(tmp_env, replay(SMI_OK), **env), RULES)
    assert rep.broken is None
    assert any(c.status == WARN and "12.4.131" in c.cause for c in rep.checks)
    # Driver CUDA 11.0 (K80 box): a CUDA 12 toolkit cannot run at all.
    b = walk(make_ctx(tmp_env, replay(SMI_K80), **env), RULES).broken
    assert b is not None and b.name == "toolkit vs driver" and "newer than the driver's CUDA 11.0" in b.cause


def test_stale_cudnn_8_beside_cudnn_9(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    build_so(root / "opt/old-cudnn/lib", "libcudnn.so.8", "libcudnn.so.8.6.0")
    build_so(root / "opt/cudnn9/lib", "libcudnn.so.9", "libcudnn.so.9.3.0")
    ctx = make_ctx(tmp_env, replay(SMI_OK), LD_LIBRARY_PATH="/opt/old-cudnn/lib:/opt/cudnn9/lib")
    b = walk(ctx, RULES).broken
    assert b is not None and b.name == "stale cuDNN" and b.layer == "cudnn"
    assert "rm /opt/old-cudnn/lib/libcudnn.so.8.6.0" in b.fix
    # The SONAME was read from the ELF file, not from its name.
    assert "/opt/cudnn9/lib/libcudnn.so.9.3.0 (SONAME libcudnn.so.9)" in b.evidence


def test_older_cudnn_of_the_same_major_first_on_the_path(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    build_so(root / "usr/local/cuda-11.2/lib64", "libcudnn.so.8", "libcudnn.so.8.1.0")
    build_so(root / "opt/cudnn/lib", "libcudnn.so.8", "libcudnn.so.8.6.0")
    ctx = make_ctx(tmp_env, replay(SMI_OK), LD_LIBRARY_PATH="/usr/local/cuda-11.2/lib64:/opt/cudnn/lib")
    b = walk(ctx, RULES).broken
    assert b is not None and "8.1.0 is found first and shadows 8.6.0" in b.cause


def test_dangling_library_symlink(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True, exist_ok=True)
    os.symlink("libcudnn.so.8.9.7", lib / "libcudnn.so.8")
    b = walk(make_ctx(tmp_env, replay(SMI_OK)), RULES).broken
    assert b is not None and b.name == "dangling symlink"
    assert b.fix.startswith("Remove it: `sudo rm /usr/lib/x86_64-linux-gnu/libcudnn.so.8`")


def test_cuda_visible_devices_empty_and_missing_gpu(tmp_env: dict[str, str]) -> None:
    plant_driver_ok(_root(tmp_env))
    b = walk(make_ctx(tmp_env, replay(SMI_K80), CUDA_VISIBLE_DEVICES=""), RULES).broken
    assert b is not None and b.rule == "cuda-visible-devices-empty" and "unset CUDA_VISIBLE_DEVICES" in b.fix
    b = walk(make_ctx(tmp_env, replay(SMI_K80), CUDA_VISIBLE_DEVICES="0,3"), RULES).broken
    assert b is not None and "names GPU '3'" in b.cause and "lists 2 GPU(s)" in b.summary
    rep = walk(make_ctx(tmp_env, replay(SMI_K80), CUDA_VISIBLE_DEVICES="1"), RULES)
    assert rep.broken is None


def test_wsl_linux_driver_installed_inside_wsl(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant(root, "/proc/version", "Linux version 5.15.146.1-microsoft-standard-WSL2 (root@65c757a075e2)\n")
    build_so(root / "usr/lib/wsl/lib", "libcuda.so.1")
    smi = recorded_smi("case_013")  # WSL2: NVIDIA-SMI 545.46, Windows driver 546.80, "CUDA Version: ERR!"
    rep = walk(make_ctx(tmp_env, replay(smi)), RULES)
    assert rep.wsl and rep.broken is None and rep.checks[0].status == OK
    build_so(root / "usr/lib/x86_64-linux-gnu", "libcuda.so.1", "libcuda.so.1")
    b = walk(make_ctx(tmp_env, replay(smi)), RULES).broken
    assert b is not None and "Never install a Linux driver inside WSL" in b.fix
    assert "/usr/lib/x86_64-linux-gnu/libcuda.so.1" in b.summary


def test_wsl_without_windows_driver(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant(root, "/proc/version", "Linux version 5.15.146.1-microsoft-standard-WSL2\n")
    b = walk(make_ctx(tmp_env, replay(None)), RULES).broken
    assert b is not None and "wsl --update" in b.fix and "Never install a Linux NVIDIA driver" in b.fix


# ------------------------------------------------------------------ the env layers


def test_env_healthy_with_activation(tmp_env: dict[str, str], tmp_path: Path) -> None:
    plant_driver_ok(_root(tmp_env))
    env = fake_tf_env(tmp_path / "env")
    py = str(env / "bin" / "python")
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, python=py)), RULES, str(env))
    assert rep.broken is None, rep.broken
    names = {c.name: c for c in rep.checks}
    assert names["activation"].status == OK
    assert names["import tensorflow"].status == OK and "2.17.1" in names["import tensorflow"].summary
    assert names["device list"].status == OK


def test_env_without_activation_and_no_gpu_listed(tmp_env: dict[str, str], tmp_path: Path) -> None:
    plant_driver_ok(_root(tmp_env))
    # TF 2.13 does not find pip CUDA wheels by itself: the missing activation is the cause.
    env = fake_tf_env(tmp_path / "env", version="2.13.1", gpus=0, activation=False)
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python"))), RULES, str(env))
    assert any(c.name == "activation" and c.status == WARN for c in rep.checks)
    b = rep.broken
    assert b is not None and b.name == "device list" and "no activation block" in b.summary
    assert f"tfgpu-install install --env {env}" in b.fix


def test_tf_216_pip_libraries_off_the_loader_path(tmp_env: dict[str, str], tmp_path: Path) -> None:
    plant_driver_ok(_root(tmp_env))
    env = fake_tf_env(tmp_path / "env", version="2.16.1", gpus=0, activation=False)
    b = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python"))), RULES, str(env)).broken
    assert b is not None and b.rule == "tf216-pip-libs-off-path" and "LD_LIBRARY_PATH" in b.fix


def test_env_without_activation_but_working_is_only_a_warning(tmp_env: dict[str, str], tmp_path: Path) -> None:
    plant_driver_ok(_root(tmp_env))
    env = fake_tf_env(tmp_path / "env", activation=False)
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python"))), RULES, str(env))
    assert rep.broken is None and [c.name for c in rep.warnings] == ["activation"]


def test_import_failure_is_classified(tmp_env: dict[str, str], tmp_path: Path) -> None:
    plant_driver_ok(_root(tmp_env))
    numpy_msg = ("\nA module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.1.2 as it may crash.\n")
    env = fake_tf_env(tmp_path / "env", import_error="_ARRAY_API not found", stderr=numpy_msg)
    b = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python"))), RULES, str(env)).broken
    assert b is not None and b.rule == "numpy2-abi" and "numpy<2" in b.fix


def test_sudo_strips_ld_library_path(tmp_env: dict[str, str], tmp_path: Path) -> None:
    plant_driver_ok(_root(tmp_env))
    env = fake_tf_env(tmp_path / "env", gpus=0)
    ctx = make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python")), SUDO_USER="alice")
    b = walk(ctx, RULES, str(env)).broken
    assert b is not None and b.rule == "sudo-strips-ld-library-path"


def test_no_gpu_listed_with_a_known_log_line(tmp_env: dict[str, str], tmp_path: Path) -> None:
    plant_driver_ok(_root(tmp_env))
    log = "W tensorflow/core/common_runtime/gpu/gpu_device.cc:2256] Cannot dlopen some GPU libraries.\n"
    env = fake_tf_env(tmp_path / "env", gpus=0, stderr=log)
    b = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python"))), RULES, str(env)).broken
    assert b is not None and b.rule == "cannot-dlopen-gpu-libs" and b.evidence


def test_tensorflow_missing_from_env(tmp_env: dict[str, str], tmp_path: Path) -> None:
    import subprocess
    import sys

    plant_driver_ok(_root(tmp_env))
    env = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    b = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python"))), RULES, str(env)).broken
    assert b is not None and "not installed" in b.summary


@pytest.mark.parametrize(
    "cc, archs, status",
    [
        ("8.9", "sm_60,sm_70,sm_80", OK),  # sm_80 SASS runs on 8.9 (same major, lower minor)
        ("9.0", "sm_60,sm_70,sm_80,compute_80", WARN),  # PTX JIT
        ("9.0", "sm_60,sm_70,sm_80", BROKEN),  # neither
        ("5.0", "sm_60,sm_70,compute_70", BROKEN),  # older GPU than every arch
    ],
)
def test_compute_capability_against_the_build(tmp_env: dict[str, str], tmp_path: Path, cc: str, archs: str,
                                              status: str) -> None:
    plant_driver_ok(_root(tmp_env))
    env = fake_tf_env(tmp_path / "env", archs=archs)
    query = f"0, NVIDIA GPU, GPU-95ef7c5d-fc11-835b-cd38-2020193cf8e0, 00000000:01:00.0, 545.29.06, {cc}, 24564\n"
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, query=query, python=str(env / "bin/python"))), RULES, str(env))
    cc_checks = [c for c in rep.checks if c.name.startswith("GPU 0 CC")]
    assert [c.status for c in cc_checks] == [status]


def test_ptxas_too_old_for_the_gpu(tmp_env: dict[str, str], tmp_path: Path) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    ptxas = plant(root, "/usr/local/cuda-11.5/bin/ptxas", "#!/bin/sh\n")
    ptxas.chmod(0o755)
    env = fake_tf_env(tmp_path / "env")
    # nvcc/ptxas 11.5 and a CC 8.9 GPU, as in the recorded case_017 (chelsea0x3b/dfdx#619).
    version_out = "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 11.5, V11.5.119\n"
    query = ("0, NVIDIA GeForce RTX 4090, GPU-95ef7c5d-fc11-835b-cd38-2020193cf8e0, 00000000:01:00.0, 525.89.02, "
             "8.9, 24564\n")
    runner = replay(SMI_OK, query=query, python=str(env / "bin/python"),
                    extra={("/usr/local/cuda-11.5/bin/ptxas", "--version"): Completed(
                        ("/usr/local/cuda-11.5/bin/ptxas", "--version"), 0, version_out)})
    rep = walk(make_ctx(tmp_env, runner, PATH="/usr/local/cuda-11.5/bin:/usr/bin"), RULES, str(env))
    (w,) = [c for c in rep.warnings if c.name == "ptxas"]
    assert "CUDA 11.5" in w.summary and ">= 11.8" in w.summary and "nvidia-cuda-nvcc-cu12" in w.fix


@pytest.mark.slow
def test_real_tensorflow_env_without_a_usable_driver(tmp_env: dict[str, str], tf_env: Path) -> None:
    """Real TensorFlow 2.17.1 + nvidia wheels; nvidia-smi replayed as healthy but no libcuda here:
    TF lists no GPU and logs only known noise. Doctor must not blame the noise, and must say so."""
    plant_driver_ok(_root(tmp_env))
    runner = replay(SMI_OK, python=str(tf_env / "bin" / "python"))
    rep = walk(make_ctx(tmp_env, runner), RULES, str(tf_env))
    names = {c.name: c for c in rep.checks}
    assert names["import tensorflow"].status == OK and "TensorFlow 2.17.1" in names["import tensorflow"].summary
    assert "CUDA 12.3" in names["import tensorflow"].summary
    b = rep.broken
    assert b is not None and b.name == "device list" and b.rule is None
    assert "no known cause" in b.cause and "doctor --log" in b.fix
    assert [c.name for c in rep.warnings] == ["activation"]  # not blamed: TF 2.17 finds its wheels itself


def test_nvidia_smi_works_but_libcuda_is_missing(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant(root, "/proc/modules", "nvidia 56487936 2 - Live 0x0\n")
    b = walk(make_ctx(tmp_env, replay(SMI_OK)), RULES).broken
    assert b is not None and b.rule == "libcuda-missing" and "--gpus all" in b.fix


def test_driver_loaded_but_no_devices(tmp_env: dict[str, str]) -> None:
    plant_driver_ok(_root(tmp_env))
    b = walk(make_ctx(tmp_env, replay("No devices were found\n")), RULES).broken
    assert b is not None and "sees no GPU" in b.cause and "xid" in b.fix.lower()


def test_import_runs_through_the_env_launcher(tmp_env: dict[str, str], tmp_path: Path) -> None:
    """The user's shell need not be activated: doctor imports through <env>/bin/tfgpu-run."""
    plant_driver_ok(_root(tmp_env))
    env = fake_tf_env(tmp_path / "env", gpus=0, launcher_env="FAKE_TF_GPUS=2")
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, python=str(env / "bin/python"))), RULES, str(env))
    names = {c.name: c for c in rep.checks}
    assert "through bin/tfgpu-run" in names["import tensorflow"].summary
    assert names["device list"].status == OK and "2 GPU(s)" in names["device list"].summary


# ------------------------------------------------------------------ issue 12: CPU features, stub libcuda

NO_AVX_CPU = ("processor\t: 0\nmodel name\t: Intel(R) Celeron(R) N4505 @ 2.00GHz\n"
              "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr sse sse2 ssse3 sse4_1 sse4_2 popcnt\n")
AVX_CPU = NO_AVX_CPU.replace("popcnt", "popcnt aes xsave avx f16c avx2 fma")


def test_cpu_without_avx_is_named_before_the_import(tmp_env: dict[str, str], tmp_path: Path) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    plant(root, "/proc/cpuinfo", NO_AVX_CPU)
    runner = replay(SMI_OK)
    rep = walk(make_ctx(tmp_env, runner), RULES, env=str(tmp_path / "env"))
    b = rep.broken
    assert b is not None and b.rule == "illegal-instruction-avx" and b.name == "CPU features"
    assert "AVX" in b.summary and "Illegal instruction" in b.cause and "/proc/cpuinfo" in b.fix
    assert not any("python" in " ".join(c) for c in runner.calls)  # stopped before any import would die
    plant(root, "/proc/cpuinfo", AVX_CPU)
    rep = walk(make_ctx(tmp_env, replay(SMI_OK)), RULES)
    assert rep.broken is None and any(c.name == "CPU features" and c.status == OK for c in rep.checks)


def test_cpu_with_avx_passes(tmp_env: dict[str, str]) -> None:
    from tfgpu_install.doctor.cpu_check import parse_cpu_flags

    flags = parse_cpu_flags(AVX_CPU)
    assert flags is not None and {"avx", "avx2", "fma"} <= flags
    assert parse_cpu_flags("processor : 0\nFeatures : fp asimd evtstrm aes\n") is None  # aarch64: nothing to check


def test_stub_libcuda_on_the_library_path(tmp_env: dict[str, str]) -> None:
    root = _root(tmp_env)
    plant_driver_ok(root)
    build_so(root / "usr/local/cuda-12.1/lib64/stubs", "libcuda.so.1", "libcuda.so")
    ctx = make_ctx(tmp_env, replay(SMI_OK), LD_LIBRARY_PATH="/usr/local/cuda-12.1/lib64/stubs")
    b = walk(ctx, RULES).broken
    assert b is not None and b.rule == "libcuda-stub-loaded" and b.layer == "libraries"
    assert "/usr/local/cuda-12.1/lib64/stubs/libcuda.so" in b.summary and "LD_LIBRARY_PATH" in b.fix
