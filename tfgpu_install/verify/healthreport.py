"""The burn's health report: one self-contained HTML file (`verify --burn N --report FILE.html`).

One panel per GPU, over the burn's own time: temperature (GPU and HBM) with the 80 C guide and the
GPU's slowdown threshold, SM and memory clocks against their maximum, power against its limit,
GFLOP/s, and every throttle reason as a band; above them one line per GPU (the same words as the
terminal, tfgpucheck_health.one_line) and its health counters. Drawn with Plotly (the `report`
extra, `pip install 'tfgpu-install[report]'`); its JavaScript is written into the file, so the page
needs no network. The burn's record comes from the check's own JSON, read here into typed data
(numbers that are not numbers are dropped, text is escaped).
"""

from __future__ import annotations

import html
import importlib.util
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, cast

from tfgpu_install.errors import EnvironmentProblem, UsageError
from tfgpu_install.verify.gpucheck import tfgpucheck_health as judge
from tfgpu_install.verify.host import VerifyReport

if TYPE_CHECKING:
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import Burn

EXTRA = "pip install 'tfgpu-install[report]'"
SERIES = ("temp_c", "mem_temp_c", "sm_mhz", "mem_mhz", "power_w", "util_pct")
BAND_COLOURS = {"sw_power_cap": "#f2c744", "hw_power_brake": "#e07b39", "sw_thermal": "#e0463c",
                "hw_thermal": "#9e1b32", "hw_slowdown": "#7b2d8e", "sync_boost": "#4e9ad6",
                "applications_clocks_setting": "#8c8c8c", "display_clock_setting": "#b0b0b0"}


def plotting_available() -> bool:
    return importlib.util.find_spec("plotly") is not None


def check_report_target(path: Path, burn: float) -> None:
    """Everything that can be refused before the check runs (minutes of burn) is refused now."""
    if burn <= 0:
        raise UsageError("--report draws the burn's curves: it needs --burn", hint="add --burn (60 s) or --burn N")
    if path.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"{path}: the report is an HTML file", hint="name it FILE.html")
    if path.is_dir():
        raise UsageError(f"{path} is a directory", hint="name a file, e.g. gpu-health.html")
    if not path.parent.is_dir():
        raise UsageError(f"{path.parent} does not exist", hint="create it first, or name a file in an existing one")
    if not os.access(path.parent, os.W_OK):
        raise EnvironmentProblem(f"{path.parent} is not writable", hint="name a file in a directory you can write")
    if not plotting_available():
        raise EnvironmentProblem("the health report needs Plotly, which is not installed",
                                 hint=f"{EXTRA} (a pure-Python wheel), or run without --report")


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass(frozen=True)
class Sample:
    t: float
    values: Mapping[str, float]  # SERIES keys present in this sample
    throttle: tuple[str, ...]


@dataclass(frozen=True)
class GpuBurn:
    """One GPU's burn as the report draws it."""

    label: str
    line: str
    samples: tuple[Sample, ...]
    gflops: tuple[tuple[float, float], ...]
    limits: Mapping[str, float]
    heat: str
    health_state: str
    health: tuple[str, ...]  # problems, then notes
    error: Optional[str] = None
    facts: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def _sample(raw: Any) -> Optional[Sample]:
    if not isinstance(raw, Mapping):
        return None
    t = _num(raw.get("t"))
    if t is None:
        return None
    values = {k: v for k in SERIES if (v := _num(raw.get(k))) is not None}
    thr = raw.get("throttle")
    names = judge.reasons(thr) if isinstance(thr, int) and not isinstance(thr, bool) else \
        [str(x) for x in thr] if isinstance(thr, list) else []
    return Sample(t, values, tuple(names))


def read_burn(raw: Mapping[str, Any]) -> GpuBurn:
    """A burn record of the check's JSON (measured["burns"][i]) -> GpuBurn."""
    gpu, tele, heat, health = (_map(raw.get(k)) for k in ("gpu", "telemetry", "heat", "health"))
    series: list[Any] = tele["series"] if isinstance(tele.get("series"), list) else []
    samples = tuple(s for s in (_sample(x) for x in series) if s is not None)
    flops = _map(raw.get("series")).get("gflops")
    gflops = tuple((float(p[0]), float(p[1])) for p in (flops if isinstance(flops, list) else [])
                   if isinstance(p, list) and len(p) == 2 and _num(p[0]) is not None and _num(p[1]) is not None)
    limits = {str(k): float(v) for k, v in _map(tele.get("limits")).items() if _num(v) is not None}
    problems: list[Any] = health["problems"] if isinstance(health.get("problems"), list) else []
    notes: list[Any] = health["notes"] if isinstance(health.get("notes"), list) else []
    label = f"GPU {gpu.get('cuda', '?')}" + (f" - {gpu['name']}" if isinstance(gpu.get("name"), str) else "")
    facts = [("products", raw.get("products")), ("wrong products", raw.get("mismatches")),
             ("n", raw.get("n")), ("GFLOP/s while busy", raw.get("gpu_gflops")),
             ("GPU busy", f"{raw['duty_cycle']:.1%}" if _num(raw.get("duty_cycle")) is not None else None),
             ("working set", f"{raw['working_set_bytes'] / 2**30:.1f} GiB" if _num(raw.get("working_set_bytes"))
              else None), ("L2", f"{raw['l2_bytes'] / 2**20:.0f} MiB" if _num(raw.get("l2_bytes")) else None),
             ("NVML samples under load", tele.get("under_load"))]
    return GpuBurn(label=label, line=str(raw.get("line") or judge.one_line(cast("Burn", dict(raw)))), samples=samples,
                   gflops=gflops, limits=limits, heat=str(heat.get("text") or "unknown"),
                   health_state=str(health.get("state") or "unknown"),
                   health=tuple(str(x) for x in list(problems) + list(notes)),
                   error=str(tele["error"]) if tele.get("error") else None,
                   facts=tuple((k, str(v)) for k, v in facts if v is not None))


def burns_of(report: VerifyReport) -> list[GpuBurn]:
    lay = report.layer("benchmark")
    if lay is None:
        return []
    raw = lay.measured.get("burns") or ([lay.measured["burn"]] if isinstance(lay.measured.get("burn"), Mapping)
                                        else [])
    return [read_burn(r) for r in raw if isinstance(r, Mapping)]


def _bands(samples: Sequence[Sample]) -> list[tuple[str, float, float]]:
    """(reason, start, end) for every run of consecutive samples in which a reason was active."""
    out: list[tuple[str, float, float]] = []
    open_: dict[str, float] = {}
    last = samples[0].t if samples else 0.0
    for s in samples:
        for name in list(open_):
            if name not in s.throttle:
                out.append((name, open_.pop(name), s.t))
        for name in s.throttle:
            if name != "gpu_idle" and name not in open_:
                open_[name] = s.t
        last = s.t
    out += [(name, start, last) for name, start in open_.items()]
    return out


def figure(burn: GpuBurn) -> Any:
    """One GPU's panel: four rows sharing the time axis."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("Temperature (°C)", "Clocks (MHz)", "Power (W)", "GFLOP/s"))
    ts = [s.t for s in burn.samples]

    def line(key: str, name: str, row: int, colour: str) -> None:
        pts = [(s.t, s.values[key]) for s in burn.samples if key in s.values]
        if pts:
            fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=name, mode="lines+markers",
                            line={"color": colour}, marker={"size": 4}, row=row, col=1)

    def level(y: Optional[float], name: str, row: int, colour: str) -> None:
        if y is not None and ts:
            fig.add_scatter(x=[min(ts), max(ts)], y=[y, y], name=name, mode="lines",
                            line={"color": colour, "dash": "dash", "width": 1.5}, row=row, col=1)

    line("temp_c", "GPU temperature", 1, "#d62728")
    line("mem_temp_c", "memory (HBM) temperature", 1, "#ff9896")
    level(float(judge.GUIDE_C), f"{judge.GUIDE_C} °C guide", 1, "#2ca02c")
    level(burn.limits.get("slowdown_c"), "slowdown threshold", 1, "#9e1b32")
    line("sm_mhz", "SM clock", 2, "#1f77b4")
    line("mem_mhz", "memory clock", 2, "#17becf")
    level(burn.limits.get("sm_max_mhz"), "SM max", 2, "#1f77b4")
    level(burn.limits.get("mem_max_mhz"), "memory max", 2, "#17becf")
    line("power_w", "power", 3, "#9467bd")
    level(burn.limits.get("power_limit_w"), "power limit", 3, "#9467bd")
    if burn.gflops:
        fig.add_scatter(x=[p[0] for p in burn.gflops], y=[p[1] for p in burn.gflops], name="GFLOP/s",
                        mode="lines", line={"color": "#2c3e50"}, row=4, col=1)
    shown: set[str] = set()
    shapes = []
    for name, start, end in _bands(burn.samples):
        colour = BAND_COLOURS.get(name, "#cccccc")
        # one rectangle over the whole height (the rows share the x axis), set in one go: fast
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": start, "x1": max(end, start + 0.05),
                       "y0": 0, "y1": 1, "fillcolor": colour, "opacity": 0.22, "line": {"width": 0},
                       "layer": "below"})
        if name not in shown:  # a legend entry per reason
            fig.add_scatter(x=[None], y=[None], mode="markers", name=f"throttle: {name}",
                            marker={"color": colour, "size": 12, "symbol": "square"}, row=1, col=1)
            shown.add(name)
    fig.update_layout(shapes=shapes)
    fig.update_xaxes(title_text="seconds into the burn", row=4, col=1)
    for row in (2, 3, 4):  # from zero: a 1% wobble must not look like a collapse
        fig.update_yaxes(rangemode="tozero", row=row, col=1)
    fig.update_layout(title={"text": html.escape(burn.label)}, height=900, template="plotly_white",
                      legend={"orientation": "v"}, margin={"t": 80, "l": 60, "r": 20, "b": 50})
    return fig


_STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:1.4em}
.line{font-family:ui-monospace,monospace;background:#f4f4f4;padding:6px 10px;margin:4px 0;white-space:pre-wrap}
.bad{color:#b00020;font-weight:600}.ok{color:#1b7a1b}table{border-collapse:collapse;margin:8px 0}
td{border:1px solid #ddd;padding:3px 8px;font-size:.9em}.gpu{margin-top:28px}"""


def render(report: VerifyReport, when: Optional[str] = None) -> str:
    """The whole page as one string (Plotly's JavaScript inline, once)."""
    burns = burns_of(report)
    when = when or time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    e = html.escape
    head = [f"<h1>GPU health report</h1><p>tfgpu-install verify, {e(when)}; {e(report.summary())}</p>"]
    if not burns:
        bench = report.layer("benchmark")
        why = bench.summary if bench else "the burn did not run"
        head.append(f"<p class='bad'>No burn samples: {e(why)}</p>")
    for b in burns:
        head.append(f"<div class='line'>{e(b.line)}</div>")
    parts = []
    first = True
    for b in burns:
        state = "ok" if b.health_state == "ok" else "bad" if b.health_state in ("needs_reset", "failing") else ""
        rows = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in b.facts)
        health = "; ".join(b.health) or "no problems"
        parts.append(f"<div class='gpu'><h2>{e(b.label)}</h2><p>Heat: {e(b.heat)}</p>"
                     f"<p>Health counters: <span class='{state}'>{e(b.health_state)}</span> ({e(health)})</p>"
                     + (f"<p class='bad'>NVML: {e(b.error)}</p>" if b.error else "") + f"<table>{rows}</table>")
        if b.samples or b.gflops:
            parts.append(figure(b).to_html(full_html=False, include_plotlyjs=first, include_mathjax=False,
                                           config={"displaylogo": False, "responsive": True}))
            first = False
        else:
            parts.append("<p class='bad'>No NVML samples: temperature, clocks and power are unknown.</p>")
        parts.append("</div>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>GPU health report</title>"
            f"<style>{_STYLE}</style></head><body>" + "".join(head) + "".join(parts) + "</body></html>")


def write_report(path: Path, report: VerifyReport) -> Path:
    """Written atomically: a half-written report is never left under the user's name."""
    text = render(report)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
