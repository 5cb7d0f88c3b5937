"""Judging a GPU under load and its health counters: pure functions over plain data (stdlib only).

Used inside the target env by the burn (imported by file name from check.py's directory) and on
the host by the terminal summary and the HTML health report (by its package path), so both say the
same thing about the same samples.

What is judged, and against what:
  - heat: the hottest GPU temperature while the load ran, against 80 C (the guide this check follows:
    keep a card under 80 C at full load; a card at 90+ C was found at half speed) and against the
    GPU's own slowdown threshold (NVML_TEMPERATURE_THRESHOLD_SLOWDOWN); the HBM temperature against
    the memory's own maximum (NVML_TEMPERATURE_THRESHOLD_MEM_MAX) where the GPU reports both;
  - clocks against their maximum, power against the enforced limit, every throttle reason NVML names,
    with the share of the load's samples it was active in;
  - health counters (as DCGM's health check reads them): a pending row remap or page retirement needs a
    GPU reset; a failed row remap or uncorrectable ECC errors mean the memory cannot be trusted; new
    uncorrectable errors during the burn fail it.
Only samples taken while the load ran count (the first one used to be taken at idle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

if TYPE_CHECKING:  # the sibling as mypy sees it; inside the env it is imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        Burn,
        Health,
        HealthVerdict,
        Heat,
        Limits,
        Sample,
        Stats,
    )

GUIDE_C = 80  # the guide this check follows: under 80 C at full load
THROTTLE_BITS = {  # nvmlClocksEventReasons (nvml.h): every reason NVML names
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
    0x100: "display_clock_setting",
}
HEAT = ("sw_thermal", "hw_thermal", "hw_slowdown")  # the card slowed itself down for heat (or a hardware signal)
POWER = ("sw_power_cap", "hw_power_brake")
SeriesKey = Literal["temp_c", "mem_temp_c", "sm_mhz", "mem_mhz", "power_w", "util_pct"]
SERIES_KEYS: tuple[SeriesKey, ...] = ("temp_c", "mem_temp_c", "sm_mhz", "mem_mhz", "power_w", "util_pct")


def reasons(bits: int) -> list[str]:
    """nvmlClocksEventReasons bits -> names (unknown bits by number, never dropped)."""
    out = [name for bit, name in THROTTLE_BITS.items() if bits & bit]
    rest = bits & ~sum(THROTTLE_BITS)
    if rest:
        out.append(f"bits 0x{rest:x}")
    return out


def under_load(samples: list[Sample], start: Optional[float], end: Optional[float]) -> list[Sample]:
    """The samples taken while the load ran ([start, end] in the samples' own clock)."""
    if start is None or end is None:
        return []
    return [s for s in samples if start <= _time(s) <= end]


def _time(sample: Sample) -> float:
    t = sample.get("t")
    return float(t) if isinstance(t, (int, float)) else -1.0


def stats(samples: list[Sample], key: str) -> Optional[Stats]:
    """min / max / mean, and `steady`: the mean of the last quarter (after the card warmed up)."""
    vals = [float(v) for v in (s.get(key) for s in samples) if isinstance(v, (int, float))]
    if not vals:
        return None
    tail = vals[len(vals) - max(1, len(vals) // 4):]
    return {"min": min(vals), "max": max(vals), "mean": round(sum(vals) / len(vals), 1),
            "steady": round(sum(tail) / len(tail), 1), "samples": len(vals)}


def throttle_shares(samples: list[Sample]) -> dict[str, float]:
    """Each throttle reason -> the share of the samples it was active in."""
    counts: dict[str, int] = {}
    seen = [s["throttle"] for s in samples if isinstance(s.get("throttle"), (list, int))]
    for throttle in seen:
        names = reasons(throttle) if isinstance(throttle, int) else throttle if isinstance(throttle, list) else []
        for name in names:  # bits, as recorded, or their names
            counts[name] = counts.get(name, 0) + 1
    return {name: round(n / len(seen), 3) for name, n in sorted(counts.items())} if seen else {}


def judge_heat(temp: Optional[Stats], mem_temp: Optional[Stats], limits: Limits,
               shares: dict[str, float]) -> Heat:
    """{"verdict": "cool" | "hot" | "slowing" | "unknown", "text": ...}: the answer to "does it stay under
    80 C at full load?"."""
    slowdown = limits.get("slowdown_c")
    heat = sorted(r for r in shares if r in HEAT)
    out: Heat = {"guide_c": GUIDE_C, "slowdown_c": slowdown, "max_c": temp["max"] if temp else None,
                           "steady_c": temp["steady"] if temp else None, "heat_throttle": heat}
    if mem_temp:
        out["mem_max_c"], out["mem_limit_c"] = mem_temp["max"], limits.get("mem_max_c")
    if temp is None:
        out.update({"verdict": "unknown", "text": "temperature unknown (NVML gave no reading under load)"})
        return out
    hot = int(temp["max"])
    where = f"{hot} C max, {temp['steady']:.0f} C steady"
    mem_hot = bool(mem_temp and limits.get("mem_max_c") and mem_temp["max"] >= limits["mem_max_c"])
    if heat or (slowdown and hot >= slowdown) or mem_hot:
        why = []
        if heat:
            why.append("throttled for heat: " + ", ".join(heat))
        if slowdown and hot >= slowdown:
            why.append(f"at or above its slowdown threshold ({slowdown} C)")
        if mem_hot and mem_temp is not None:
            why.append(f"memory {mem_temp['max']:.0f} C at its limit ({limits['mem_max_c']} C)")
        out.update({"verdict": "slowing", "text": f"{where}: the GPU slows itself down ({'; '.join(why)})"})
    elif hot > GUIDE_C:
        room = f"; slowdown at {slowdown} C" if slowdown else ""
        out.update({"verdict": "hot", "text": f"{where}: above {GUIDE_C} C at full load{room}"})
    else:
        out.update({"verdict": "cool", "text": f"{where}: under {GUIDE_C} C at full load"})
    return out


def judge_load(series: dict[str, Stats], limits: Limits,
               shares: dict[str, float]) -> list[str]:
    """Clocks against their maximum, power against its limit, throttle reasons: one phrase each."""
    out = []
    sm, sm_max = series.get("sm_mhz"), limits.get("sm_max_mhz")
    if sm and sm_max:
        out.append(f"SM clock {sm['steady']:.0f} of {sm_max} MHz ({sm['steady'] / sm_max:.0%})")
    mem, mem_max = series.get("mem_mhz"), limits.get("mem_max_mhz")
    if mem and mem_max:
        out.append(f"memory clock {mem['steady']:.0f} of {mem_max} MHz")
    power, cap = series.get("power_w"), limits.get("power_limit_w")
    if power and cap:
        out.append(f"power {power['steady']:.0f} of {cap:.0f} W ({power['steady'] / cap:.0%})")
    active = {r: v for r, v in shares.items() if r != "gpu_idle"}
    if active:
        out.append("throttle reasons: " + ", ".join(f"{r} {v:.0%} of the time" for r, v in active.items()))
    return out


def judge_health(before: Optional[Health], after: Optional[Health] = None) -> HealthVerdict:
    """{"state": "ok" | "needs_reset" | "failing" | "unknown", "problems": [...], "notes": [...]}.

    `before`/`after`: a GPU's counters as tfgpucheck_nvml.health() reads them ({"ecc": {...} or
    {"unsupported": ...}, "remapped_rows": {...}, "retired_pages": {...}} or {"error": why})."""
    now = after or before
    if not now or now.get("error"):
        return {"state": "unknown", "problems": [], "notes": [f"health counters unknown: {(now or {}).get('error')}"
                                                                  if now else "health counters not read"]}
    problems: list[str] = []
    notes: list[str] = []
    reset = failing = False
    rows = now.get("remapped_rows") or {}
    if rows.get("pending"):
        reset = True
        problems.append("a row remap is pending (the GPU needs a reset for it to take effect)")
    if rows.get("failure"):
        failing = True
        problems.append("a row remap failed (the memory has more bad rows than spares)")
    pages = now.get("retired_pages") or {}
    if pages.get("pending"):
        reset = True
        problems.append("a page retirement is pending (the GPU needs a reset)")
    ecc = now.get("ecc") or {}
    unc = ecc.get("uncorrected_volatile")
    if unc:
        failing = True
        problems.append(f"{unc} uncorrectable ECC error(s) since the driver loaded")
    if after and before and not before.get("error"):
        grew = (unc or 0) - ((before.get("ecc") or {}).get("uncorrected_volatile") or 0)
        if grew > 0:
            failing = True
            problems.append(f"{grew} new uncorrectable ECC error(s) during the burn")
        corr = (ecc.get("corrected_volatile") or 0) - ((before.get("ecc") or {}).get("corrected_volatile") or 0)
        if corr > 0:
            notes.append(f"{corr} corrected ECC error(s) during the burn")
    if rows.get("uncorrectable"):
        notes.append(f"{rows['uncorrectable']} row(s) remapped for uncorrectable errors so far")
    if pages.get("double_bit") or pages.get("multiple_single_bit"):
        notes.append(f"retired pages: {pages.get('double_bit', 0)} double-bit, "
                     f"{pages.get('multiple_single_bit', 0)} multiple single-bit")
    parts = (("ecc", now.get("ecc")), ("remapped_rows", now.get("remapped_rows")),
             ("retired_pages", now.get("retired_pages")))
    unsupported = [k for k, part in parts if part and part.get("unsupported")]
    if len(unsupported) == 3:
        notes.append("this GPU reports no ECC, row-remap or page-retirement counters")
    state = "failing" if failing else "needs_reset" if reset else "ok"
    return {"state": state, "problems": problems, "notes": notes}


HEALTH_HINT = {
    "needs_reset": "reset the GPU with nothing running on it (`nvidia-smi -r -i N`, or reboot) so the pending "
    "remap or retirement takes effect, then run the check again",
    "failing": "the GPU's memory reports uncorrectable errors: drain it from use, reset it (`nvidia-smi -r -i N`) "
    "and run `tfgpu-install verify --burn`; if the errors come back, the card needs service "
    "(`nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT`)",
}


def one_line(burn: Burn) -> str:
    """A GPU's burn in one line, for the terminal: products, wrong ones, heat, clocks, power."""
    gpu = burn.get("gpu")
    name = gpu.get("name") if gpu else None
    who = f"GPU {gpu.get('cuda', '?') if gpu else '?'}" + (f" ({name})" if name else "")
    parts = [f"{burn.get('products', burn.get('iterations', 0))} products, {burn.get('mismatches', 0)} wrong"]
    rate = burn.get("gpu_gflops") or burn.get("gflops")
    if rate:
        parts.append(f"{rate:g} GFLOP/s")
    heat = burn.get("heat") or {}
    if heat.get("text"):
        parts.append(heat["text"])
    parts += list(burn.get("load") or [])
    health = burn.get("health") or {}
    if health.get("state") in ("needs_reset", "failing"):
        parts.append("health: " + "; ".join(health.get("problems") or []))
    return f"{who}: " + "; ".join(parts)
