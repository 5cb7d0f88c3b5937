"""The offline GPU check's summary (scripts/gpu-check.sh runs this beside itself, in the repo and the pack).

    gpu_check_summary.py summary PATH GPU_STATE WORK INTERRUPTED EXPECTED   -> writes PATH, prints the
        PASS/FAIL line, exits with the run's code (0 PASS / PASS_HOST_ONLY, 3 NO_GPU, 9 FAIL, 130 interrupted)
    gpu_check_summary.py uuid HOST_JSON   -> CUDA device 0's UUID as the host stage read it (GPU-/MIG-)
    gpu_check_summary.py compare OUT      -> OUT/compare.json: every value the check reported against the
        ground truth in OUT/truth.json (scripts/device-check.sh), one line per value printed

stdlib only: it runs under whatever Python the machine has.
"""

import json
import sys
import time


def read_stages(work):
    stages = []
    for line in open(f"{work}/stages.tsv").read().splitlines():
        name, rc, seconds, log, extra = (line.split("\t") + [""] * 5)[:5]
        st = {"name": name, "seconds": int(seconds or 0), "log": log or None}
        if rc == "skip":
            st.update(status="skip", why=extra)
        elif rc == "interrupted":
            st.update(status="interrupted")
        else:
            status = {"0": "pass", "3": "no_gpu", "124": "timeout", "137": "timeout"}.get(rc, "fail")
            st.update(exit_code=int(rc), status=status)
            if extra:
                try:
                    st["result"] = json.load(open(extra))
                except (OSError, ValueError):
                    st["result"] = None
        if log:
            try:
                st["log_tail"] = open(log, errors="replace").read().splitlines()[-15:]
            except OSError:
                pass
        stages.append(st)
    # a stage's own verdict: visible-none passes when CUDA says "no device"; everything else when it exits 0
    for st in stages:
        if st["name"] == "visible-none" and st["status"] == "fail":
            lay = ((st.get("result") or {}).get("layers") or [{}, {}])[1]
            if (lay.get("error") or {}).get("name") == "CUDA_ERROR_NO_DEVICE":
                st["status"] = "pass"
    return stages


def verdict(stages, gpu_state, interrupted, expected):
    """(code, result, failed, missing) for the recorded stages."""
    failed = [s["name"] for s in stages if s["status"] in ("fail", "timeout", "interrupted")]
    missing = [n for n in expected.split() if n not in {s["name"] for s in stages}]
    tf_skipped = any(s["name"] == "tensorflow" and s["status"] == "skip" for s in stages)
    if interrupted:
        stages.append({"name": "interrupted", "status": "fail", "why": "SIGINT/SIGTERM before every stage ran",
                       "missing_stages": missing})
        return 130, "FAIL", failed + ["interrupted"], missing
    if gpu_state == "none":
        return 3, "NO_GPU", failed, []
    if failed or not stages or missing:
        return 9, "FAIL", failed, missing
    return 0, ("PASS_HOST_ONLY" if tf_skipped else "PASS"), failed, missing


def summary(path, gpu_state, work, interrupted, expected):
    stages = read_stages(work)
    host = next((s for s in stages if s["name"] == "host"), None)
    message = ((host or {}).get("result") or {}).get("message")
    code, result, failed, missing = verdict(stages, gpu_state, interrupted, expected)
    doc = {"format": 1, "tool": "scripts/gpu-check.sh --offline",
           "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "result": result, "exit_code": code,
           "message": message if gpu_state == "none" else None, "failed_stages": failed, "missing_stages": missing,
           "stages": stages, "work_dir": work}
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
    line = {"PASS": "PASS: every stage passed", "NO_GPU": f"FAIL: {message or 'no NVIDIA GPU'} (exit 3)",
            "PASS_HOST_ONLY": "PASS (host layers only; TensorFlow not checked: no Python env here can import it)",
            "FAIL": f"FAIL: stage(s) {', '.join(failed) or 'none ran'} failed (exit {code})"
            + (f"; not run: {', '.join(missing)}" if missing else "")}[result]
    print(f"summary: {path}")
    print(line)
    return code


def uuid(host_json):
    doc = json.load(open(host_json))
    mapping = ((doc.get("extras") or {}).get("visible_devices") or {}).get("mapping") or [{}]
    return mapping[0].get("uuid") or ""


def _load(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def _layers(stage):
    return {lay.get("name"): lay for lay in ((stage or {}).get("result") or {}).get("layers") or []}


def compare_rows(truth, summary):
    """(value, check, truth, state) rows: state "same", "differs", "unknown" (one side has no value), or
    "ratio" for rates (the check's burn against PyTorch's GEMM: same order expected, not equal)."""
    stages = {s.get("name"): s for s in summary.get("stages", [])}
    host, burn = _layers(stages.get("host")), _layers(stages.get("burn"))
    devices = ((host.get("driver") or {}).get("measured") or {}).get("devices") or []
    runtime = ((host.get("cuda-runtime") or {}).get("measured") or {}).get("devices") or []
    burns = ((burn.get("benchmark") or {}).get("measured") or {}).get("burns") or []
    nvcc = truth.get("nvcc_program") or {}
    rows = []

    def row(what, ours, theirs, state=None):
        if state is None:
            state = "unknown" if ours is None or theirs is None else ("same" if str(ours) == str(theirs) else "differs")
        rows.append({"value": what, "check": ours, "truth": theirs, "state": state})

    for i, g in enumerate(truth.get("gpus") or []):
        d = devices[i] if i < len(devices) else {}
        for key in ("name", "compute_capability", "memory_mib"):
            row(f"gpu{i}.{key} (PyTorch)", d.get(key), g.get(key))
        row(f"gpu{i}.uuid (PyTorch)", d.get("uuid"), (g.get("uuid") or "").replace("GPU-", "") or None)
    for i, g in enumerate(nvcc.get("gpus") or []):
        d = devices[i] if i < len(devices) else {}
        r = runtime[i] if i < len(runtime) else {}
        b = burns[i] if i < len(burns) else {}
        row(f"gpu{i}.pci (nvcc program)", d.get("pci"), g.get("pci"))
        row(f"gpu{i}.l2_bytes (nvcc program)", b.get("l2_bytes"), g.get("l2_bytes"))
        row(f"gpu{i}.total_mib (nvcc program)", r.get("total_mib"), g.get("total_mib"))
        free, theirs = r.get("free_mib"), g.get("free_mib")
        row(f"gpu{i}.free_mib (nvcc program, +-5%)", free, theirs,
            None if free is None or theirs is None else "same" if abs(free - theirs) <= 0.05 * max(theirs, 1)
            else "differs")
    drv = (host.get("driver") or {}).get("measured") or {}
    dv = nvcc.get("driver_cuda")
    row("driver CUDA version (nvcc program)", drv.get("driver_cuda"),
        f"{dv // 1000}.{dv % 1000 // 10}" if isinstance(dv, int) and dv else None)
    cudnn = ((host.get("cudnn") or {}).get("measured") or {}).get("cudnn")
    t = truth.get("cudnn")
    row("cudnn major.minor (PyTorch)", ".".join(str(cudnn).split(".")[:2]) if cudnn else None,
        f"{t // 10000}.{t % 10000 // 100}" if isinstance(t, int) and t >= 90000 else None)
    for i, b in enumerate(burns):
        ours, theirs = b.get("gpu_gflops"), truth.get("fp32_gflops_8192")
        rows.append({"value": f"gpu{i} burn GFLOP/s (n={b.get('n')}) / PyTorch FP32 (n=8192)", "check": ours,
                     "truth": theirs, "state": "ratio", "ratio": round(ours / theirs, 3) if ours and theirs else None,
                     "duty_cycle": b.get("duty_cycle"), "heat": (b.get("heat") or {}).get("text")})
    return rows


def compare(out):
    truth, summary = _load(f"{out}/truth.json"), _load(f"{out}/gpu-check-summary.json")
    rows = compare_rows(truth, summary)
    with open(f"{out}/compare.json", "w") as fh:
        json.dump({"result": summary.get("result"), "truth_error": truth.get("error"), "rows": rows}, fh, indent=1)
    for r in rows:
        extra = f" ratio={r['ratio']}" if r.get("ratio") is not None else ""
        print(f"{r['state']:>8}  {r['value']}: check={r['check']} truth={r['truth']}{extra}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2]))
    if sys.argv[1] == "uuid":
        print(uuid(sys.argv[2]))
        sys.exit(0)
    sys.exit(summary(*sys.argv[2:7]))
