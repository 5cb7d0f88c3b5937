"""Issue 41: the burn's health report (verify --burn --report FILE.html), from recorded samples, rendered in
headless Chromium with no network; and the CLI refusing what it can before the burn."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.stublibs import StubLibs, plant_pci
from tfgpu_install.cli import main
from tfgpu_install.verify.healthreport import burns_of, render, write_report
from tfgpu_install.verify.host import VerifyReport

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gpucheck" / "burn-two-h200.json"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _report(**changes: object) -> VerifyReport:
    doc = json.loads(FIXTURE.read_text())
    for burn in doc["layers"][-1]["measured"]["burns"]:
        burn.update(changes)
    return VerifyReport.from_json(doc)


def _chromium(args: list[str], page: Path) -> subprocess.CompletedProcess[str]:
    """Headless Chromium, inside a network namespace with no interface up where one can be made."""
    assert CHROMIUM is not None
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--virtual-time-budget=8000", *args, page.as_uri()]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        argv = ["unshare", "-n", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


def test_the_page_stands_alone_with_one_panel_and_line_per_gpu(tmp_path: Path) -> None:
    report = _report()
    page = render(report, when="2026-12-06 00:00:00 UTC")
    burns = burns_of(report)
    assert [b.label for b in burns] == ["GPU 0 - NVIDIA H200", "GPU 1 - NVIDIA H200"]
    assert page.count("plotly-graph-div") == 2 and page.count("Plotly.newPlot") == 2
    assert "plotly.js v" in page or "Plotly" in page[:5_000_000]  # the library itself is in the page, once
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", page)  # nothing fetched
    for b in burns:
        assert b.line in page
    assert "86 C max, 85 C steady: the GPU slows itself down (throttled for heat: sw_thermal)" in page
    assert "throttle: sw_thermal" in page and "throttle: sw_power_cap" in page  # bands, named in the legend
    assert "slowdown threshold" in page and "80 \\u00b0C guide" in page and "power limit" in page


def test_text_from_the_record_is_escaped(tmp_path: Path) -> None:
    doc = json.loads(FIXTURE.read_text())
    doc["layers"][-1]["measured"]["burns"][0]["gpu"]["name"] = "<img src=x onerror=alert(1)>"
    doc["layers"][-1]["measured"]["burns"][0]["line"] = "<script>alert(2)</script>"
    page = render(VerifyReport.from_json(doc))
    assert "<img src=x" not in page and "<script>alert(2)" not in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page


def test_a_burn_without_samples_says_so(tmp_path: Path) -> None:
    page = render(_report(telemetry={"error": "NVML not available (libnvidia-ml.so.1 did not load)", "series": []},
                          series={"gflops": []}))
    assert page.count("No NVML samples: temperature, clocks and power are unknown.") == 2
    assert "NVML: NVML not available" in page and "plotly-graph-div" not in page


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt install chromium)")
def test_headless_chromium_draws_every_panel_with_no_network(tmp_path: Path) -> None:
    page = write_report(tmp_path / "health.html", _report())
    dom = _chromium(["--dump-dom"], page).stdout
    assert dom.count('class="main-svg"') >= 4, dom[:2000]  # each panel drew its SVG (two per plot)
    assert len(re.findall(r'class="trace scatter', dom)) >= 2 * 10  # the curves and threshold lines of both GPUs
    assert "Temperature (°C)" in dom and "seconds into the burn" in dom
    shot = tmp_path / "health.png"
    _chromium([f"--screenshot={shot}", "--window-size=1280,2300", "--hide-scrollbars"], page)
    assert shot.stat().st_size > 50_000  # a drawn page, not a blank one (looked at by hand: see the report)


def test_report_needs_a_burn_and_a_place_to_go(tmp_env: dict[str, str], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--host-only", "--report", str(tmp_path / "h.html"), "--json"], environ=tmp_env) == 2
    assert "it needs --burn" in json.loads(capsys.readouterr().out)["message"]
    missing = tmp_path / "no" / "such" / "h.html"
    assert main(["verify", "--host-only", "--burn", "5", "--report", str(missing), "--json"], environ=tmp_env) == 2
    assert "does not exist" in json.loads(capsys.readouterr().out)["message"]
    assert main(["verify", "--host-only", "--burn", "--report", str(tmp_path / "h.txt"), "--json"],
                environ=tmp_env) == 2
    assert "is an HTML file" in json.loads(capsys.readouterr().out)["message"]


def test_burn_without_a_number_is_a_minute() -> None:
    from tfgpu_install.cli import build_parser

    args = build_parser("verify").parse_args(["verify", "--burn", "--host-only"])
    assert args.burn == 60.0
    assert build_parser("verify").parse_args(["verify", "--burn", "12"]).burn == 12.0
    assert build_parser("verify").parse_args(["verify"]).burn == 0.0


def test_verify_host_only_burn_writes_the_report_end_to_end(tmp_env: dict[str, str], stubs: StubLibs,
                                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plant_pci(Path(tmp_env["TFGPU_ROOT"]), [("0000:01:00.0", "0x10de", "0x030200")])
    out = tmp_path / "gpu-health.html"
    environ = dict(tmp_env, LD_LIBRARY_PATH=f"{stubs.driver}:{stubs.env}", STUB_CUBLAS_SGEMM_US="2000",
                   STUB_CU_FREE_MIB="4", STUB_NVML_TEMP="84")
    code = main(["verify", "--host-only", "--burn", "1", "--report", str(out), "--json"], environ=environ)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert doc["report"] == str(out) and "Stub GPU 0" in out.read_text()
    burn = next(lay for lay in doc["layers"] if lay["name"] == "benchmark")["measured"]["burn"]
    assert burn["heat"]["verdict"] == "hot" and burn["products"] > 0
