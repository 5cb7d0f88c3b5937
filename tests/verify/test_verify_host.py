"""tfgpu_install/verify.py: the host runs the check in a real env through the real runner and reads it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.support.stublibs import StubLibs, plant_pci
from tests.support.tfenv import make_venv
from tfgpu_install.context import Context, build_context
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.report import Bullets, Table, Text
from tfgpu_install.resolver.model import Choice
from tfgpu_install.runner import TIMED_OUT, Completed
from tfgpu_install.verify.host import (
    CheckPlan,
    LayerResult,
    VerifyReport,
    parse_check_output,
    plan_from_env,
    report_blocks,
    run_verification,
)

PLAN = CheckPlan(cuda="12.3", cudnn="8.9.7.29")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("bare") / "env")


def _ctx(tmp_env: dict[str, str], stubs: StubLibs, **extra: str) -> Context:
    plant_pci(Path(tmp_env["TFGPU_ROOT"]), [("0000:01:00.0", "0x10de", "0x030000")])
    return build_context(dict(tmp_env, LD_LIBRARY_PATH=str(stubs.driver), **extra))


def _plan(stubs: StubLibs) -> CheckPlan:
    return CheckPlan(cuda="12.3", cudnn="8.9.7.29", lib_dirs=(str(stubs.env),))


def test_gpu_layers_pass_then_tensorflow_is_missing(tmp_env: dict[str, str], stubs: StubLibs, venv: Path) -> None:
    report = run_verification(_ctx(tmp_env, stubs), venv, _plan(stubs))
    assert [lay.status for lay in report.layers] == ["pass"] * 5 + ["fail"]
    assert report.first_failure is not None and report.first_failure.name == "tensorflow"
    assert "import tensorflow failed" in report.first_failure.summary
    assert report.ok is False and report.crashed is None and report.env == str(venv)
    assert report.raw["argv"][0] == str(venv / "bin" / "python")


def test_no_gpu_here(ctx: Context, venv: Path) -> None:
    report = run_verification(ctx, venv, PLAN)
    assert report.layers[0].status == "fail" and "no NVIDIA GPU" in report.layers[0].summary
    assert {lay.status for lay in report.layers[1:]} == {"skip"}
    assert report.summary().startswith("layer 0 (hardware) failed: no NVIDIA GPU")


def test_a_crashing_driver_names_the_layer(tmp_env: dict[str, str], stubs: StubLibs, venv: Path) -> None:
    report = run_verification(_ctx(tmp_env, stubs, STUB_CU_INIT_CRASH="1"), venv, _plan(stubs))
    assert report.crashed == "crashed (SIGSEGV)"
    assert report.layers[0].status == "pass"
    assert report.layers[1].status == "fail" and report.layers[1].summary == "the check crashed (SIGSEGV) in this layer"
    assert [lay.status for lay in report.layers[2:]] == ["skip"] * 4


def test_a_hung_driver_times_out(tmp_env: dict[str, str], stubs: StubLibs, venv: Path) -> None:
    report = run_verification(_ctx(tmp_env, stubs, STUB_CU_INIT_HANG="1"), venv, _plan(stubs), timeout=3)
    assert report.crashed == "timed out after 3s"
    assert report.layers[1].status == "fail" and "timed out after 3s in this layer" in report.layers[1].summary


def test_the_envs_launcher_applies_its_activation(tmp_env: dict[str, str], stubs: StubLibs, tmp_path: Path) -> None:
    env = make_venv(tmp_path / "env")
    launcher = env / "bin" / "tfgpu-run"
    launcher.write_text(f'#!/bin/sh\nexport LD_LIBRARY_PATH="{stubs.driver}"\nexec "$@"\n')
    launcher.chmod(0o755)
    ctx = _ctx(tmp_env, stubs)
    ctx.environ.pop("LD_LIBRARY_PATH")  # type: ignore[attr-defined]
    report = run_verification(ctx, env, _plan(stubs))
    assert report.raw["argv"][0] == str(launcher)
    assert report.layer("driver") is not None and report.layer("driver").status == "pass"  # type: ignore[union-attr]


def test_env_without_python(ctx: Context, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="has no bin/python"):
        run_verification(ctx, tmp_path, PLAN)


def test_parse_exit_without_report() -> None:
    done = Completed(("py",), 1, "", "Traceback ...\nSyntaxError: invalid syntax\n")
    report = parse_check_output(done)
    assert report.layers[0].status == "fail" and "exited 1 without a report: SyntaxError" in report.layers[0].summary


def test_parse_timeout_before_any_layer() -> None:
    report = parse_check_output(Completed(("py",), TIMED_OUT, "", ""), timeout=5)
    assert report.crashed == "timed out after 5s" and report.layers[0].status == "fail"


def test_parse_timeout_in_the_burn_fails_layer_6() -> None:
    err = "".join(f"tfgpu-check: layer {i} begin\ntfgpu-check: layer {i} pass\n" for i in range(5))
    report = parse_check_output(Completed(("py",), TIMED_OUT, "", ""), timeout=9,
                                progress_text=err + "tfgpu-check: layer 6 begin\n")
    assert [lay.status for lay in report.layers] == ["pass"] * 5 + ["skip", "fail"]
    assert report.first_failure is not None and report.first_failure.name == "benchmark"
    assert "timed out after 9s" in report.summary()


def test_parse_crash_in_tensorflow_keeps_its_log() -> None:
    err = "".join(f"tfgpu-check: layer {i} begin\ntfgpu-check: layer {i} pass\n" for i in range(5))
    err += "tfgpu-check: layer 5 begin\n"
    report = parse_check_output(Completed(("py",), -signal.SIGABRT, "", err), tf_log_text="F0000 check failed\n")
    assert report.crashed == "crashed (SIGABRT)"
    assert [lay.status for lay in report.layers] == ["pass"] * 5 + ["fail"]
    assert report.tf_log["tail"] == ["F0000 check failed"]
    texts = [b for b in report_blocks(report) if isinstance(b, Bullets)]
    assert texts and texts[-1].items == ("F0000 check failed",)


def test_plan_from_env_reads_the_wheels(tmp_path: Path) -> None:
    sp = tmp_path / "lib/python3.11/site-packages"
    for d in ("nvidia_cudnn_cu12-9.3.0.75", "nvidia_cuda_runtime_cu12-12.5.82", "tensorflow-2.18.0", "numpy-2.0.2"):
        (sp / f"{d}.dist-info").mkdir(parents=True)
    assert plan_from_env(tmp_path) == CheckPlan(cuda="12.5", cudnn="9.3.0.75", tensorflow="2.18.0")


def test_plan_from_env_reads_cuda_13_wheel_names(tmp_path: Path) -> None:
    # CUDA 13's wheels dropped the -cu suffix (nvidia-cuda-runtime 13.x); cuDNN kept it (-cu13).
    sp = tmp_path / "lib/python3.12/site-packages"
    for d in ("nvidia_cudnn_cu13-9.13.0.50", "nvidia_cuda_runtime-13.0.96", "nvidia_cublas-13.1.0.3"):
        (sp / f"{d}.dist-info").mkdir(parents=True)
    plan = plan_from_env(tmp_path)
    assert (plan.cuda, plan.cudnn) == ("13.0", "9.13.0.50")


def test_plan_from_choice_prefers_the_exact_cudnn_pin() -> None:
    choice = Choice(tensorflow="2.17.1", cuda="12.3", cudnn="8.9", python="3.11", jit_only=False,
                    pins={"nvidia-cudnn-cu12": "8.9.7.29", "nvidia-cublas-cu12": "12.3.4.1"})
    plan = CheckPlan.from_choice(choice, cpu_only=True)
    assert plan == CheckPlan(cuda="12.3", cudnn="8.9.7.29", tensorflow="2.17.1", cpu_only=True)
    assert CheckPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_blocks_for_a_failure(ctx: Context, venv: Path) -> None:
    blocks = report_blocks(run_verification(ctx, venv, PLAN))
    assert isinstance(blocks[0], Table) and blocks[0].rows[0][:3] == ("0", "hardware", "fail")
    texts = [b.text for b in blocks if isinstance(b, Text)]
    assert texts[0].startswith("Layer 0 (hardware) failed: no NVIDIA GPU")
    assert texts[1].startswith("Fix: ")


def test_a_passing_layer_with_a_warning_is_shown() -> None:
    report = VerifyReport(ok=True, mode="gpu", gpu_verified=True, layers=(
        LayerResult(0, "hardware", "pass", "1 NVIDIA GPU(s) on the PCI bus (kernel driver: nouveau)",
                    hint="the nouveau driver holds the GPU"),))
    texts = [b.text for b in report_blocks(report) if isinstance(b, Text)]
    assert texts == ["verified on the GPU: 1 layer(s) passed",
                     "Note on layer 0 (hardware): the nouveau driver holds the GPU"]


def test_benchmark_and_burn_blocks() -> None:
    six = LayerResult(6, "benchmark", "pass", "matmul 4096: ...", measured={
        "benchmark": {"device": "/GPU:0", "precision": "float32 (TF32 off)",
                      "sizes": [{"n": 4096, "cpu_gflops": 900.0, "gpu_gflops": 45000.0, "speedup": 50.0,
                                 "tf32_gflops": 380000.0}]},
        "burn": {"seconds": 30.0, "n": 4096, "iterations": 4000, "mismatches": 0, "gflops": 44000.0,
                 "duty_cycle": 0.987, "gpu_gflops": 44600.0,
                 "telemetry": {"source": "pynvml", "samples": 60, "error": None, "temp_c": {"min": 40, "max": 83},
                               "throttle_reasons": ["hw_thermal"]}, "throttled": ["hw_thermal"]}})
    report = VerifyReport(ok=True, mode="gpu", gpu_verified=True, layers=(six,))
    blocks = report_blocks(report)
    bench = next(b for b in blocks if isinstance(b, Table) and b.title.startswith("Matmul benchmark"))
    assert bench.rows == (("4096", "900.0", "45000.0", "380000.0", "-", "50.0x"),)  # no bf16 figure: '-'
    burn = next(b for b in blocks if isinstance(b, Bullets) and b.title == "Burn test")
    assert "GPU busy 99% of the burn (44600.0 GFLOP/s while busy)" in burn.items
    assert "temp_c: 40-83 °C" in burn.items and "throttled: hw_thermal" in burn.items and burn.style == "error"
