"""The offline GPU check's summary (scripts/gpu-check.sh runs this beside itself, in the repo and the pack).

    gpu_check_summary.py summary PATH GPU_STATE WORK INTERRUPTED EXPECTED   -> writes PATH, prints the
        PASS/FAIL line, exits with the run's code (0 PASS / PASS_HOST_ONLY, 3 NO_GPU, 9 FAIL, 130 interrupted)
    gpu_check_summary.py uuid HOST_JSON   -> CUDA device 0's UUID as the host stage read it (GPU-/MIG-)

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


if __name__ == "__main__":
    if sys.argv[1] == "uuid":
        print(uuid(sys.argv[2]))
        sys.exit(0)
    sys.exit(summary(*sys.argv[2:7]))
