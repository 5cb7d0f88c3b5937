#!/usr/bin/env bash
# The one prepared command for a lent GPU machine (issue 25: an H200, no network, <= 64 MiB carried):
#
#   here:   scripts/gpu-check.sh --pack .gpu-pack              (needs PyPI; ~30 MB, refused over 64 MiB)
#   there:  scripts/device-check.sh .gpu-pack                  (run with the `run` tool, carry [".gpu-pack"],
#                                                                timeout_s 540; everything lands in $OUT)
#
# Three parts, each under its own timeout, ~8 minutes at most together:
#   1. ground truth from the PyTorch the machine has (GPU name, compute capability, memory, UUID, cuDNN
#      version, FP32 and TF32 GEMM rates at n=8192): $OUT/torch-truth.json
#   2. the offline check: DIR/gpu-check.sh --offline DIR --burn 30 (summary: $OUT/gpu-check-summary.json,
#      stage logs and JSON copied to $OUT/stages/)
#   3. every value the check reported compared with the ground truth: $OUT/compare.json, one line per
#      value ("same" / "differs" / "unknown") printed last.
# Exit: the offline check's code (0 pass, 3 no GPU, 9 a stage failed, 130 interrupted); 2 usage.
set -uo pipefail
PACK="${1:-}"
[ -n "$PACK" ] && [ -d "$PACK/wheels" ] || { echo "usage: $0 PACK_DIR (make it with scripts/gpu-check.sh --pack DIR)" >&2; exit 2; }
PACK="$(cd "$PACK" && pwd)"
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT/stages"
WORK="$(mktemp -d /tmp/tfgpu-device.XXXXXX)"

# ---- 1. ground truth (PyTorch) ---------------------------------------------------------------------
truth_py=""
for p in python3 /usr/bin/python3 /opt/conda/bin/python /opt/*/bin/python /opt/*/.venv/bin/python "$HOME"/.venv*/bin/python; do
  cand="$(command -v "$p" 2>/dev/null || true)"
  [ -n "$cand" ] && [ -x "$cand" ] && timeout 60 "$cand" -c 'import torch' 2>/dev/null && { truth_py="$cand"; break; }
done
if [ -n "$truth_py" ]; then
  timeout 150 "$truth_py" - >"$OUT/torch-truth.json" 2>"$OUT/torch-truth.err" <<'PYEOF'
import json, time, torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "gpus": []}
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    out["gpus"].append({"index": i, "name": p.name, "compute_capability": f"{p.major}.{p.minor}",
                        "memory_mib": p.total_memory // (1024 * 1024), "uuid": str(getattr(p, "uuid", "")) or None})
def rate(n, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.rand(n, n, device="cuda"); b = torch.rand(n, n, device="cuda")
    a @ b; torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    return round(20 * 2 * n ** 3 / (time.perf_counter() - t) / 1e9, 1)
if out["gpus"]:
    out["fp32_gflops_8192"], out["tf32_gflops_8192"] = rate(8192, False), rate(8192, True)
    out["fp32_gflops_2048"] = rate(2048, False)
print(json.dumps(out, indent=1))
PYEOF
else
  echo '{"error": "no Python with torch found"}' >"$OUT/torch-truth.json"
fi

# ---- 2. the offline check ----------------------------------------------------------------------------
OUT="$OUT" TFGPU_CHECK_DIR="$WORK/check" timeout --kill-after=10 330 "$PACK/gpu-check.sh" --offline "$PACK" \
  --burn 30 --stage-timeout 90 >"$OUT/gpu-check.out" 2>&1
rc=$?
cp "$WORK"/check/*.json "$WORK"/check/*.log "$WORK"/check/*.txt "$OUT/stages/" 2>/dev/null
tail -n 3 "$OUT/gpu-check.out"

# ---- 3. compare ----------------------------------------------------------------------------------------
python3 - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(f"{out}/{name}"))
    except (OSError, ValueError):
        return {}
truth, summary = load("torch-truth.json"), load("gpu-check-summary.json")
stages = {s["name"]: s for s in summary.get("stages", [])}
host = (stages.get("host") or {}).get("result") or {}
layers = {l.get("name"): l for l in host.get("layers", [])}
devices = ((layers.get("driver") or {}).get("measured") or {}).get("devices") or []
burn = ((((stages.get("burn") or {}).get("result") or {}).get("layers") or [{}])[-1].get("measured") or {}).get("burn") or {}
rows = []
def cmp(what, ours, theirs):
    state = "unknown" if ours is None or theirs is None else ("same" if str(ours) == str(theirs) else "differs")
    rows.append({"value": what, "check": ours, "pytorch": theirs, "state": state})
for i, g in enumerate(truth.get("gpus", [])):
    d = devices[i] if i < len(devices) else {}
    for key in ("name", "compute_capability", "memory_mib"):
        cmp(f"gpu{i}.{key}", d.get(key), g.get(key))
    cmp(f"gpu{i}.uuid", d.get("uuid"), (g.get("uuid") or "").replace("GPU-", "") or None)
cudnn = ((layers.get("cudnn") or {}).get("measured") or {}).get("cudnn")
t = truth.get("cudnn")
cmp("cudnn (major.minor)", ".".join(str(cudnn).split(".")[:2]) if cudnn else None,
    f"{t // 10000}.{t % 10000 // 100}" if isinstance(t, int) and t >= 90000 else None)
rows.append({"value": "burn fp32 GFLOP/s (n=2048) vs pytorch fp32 (n=2048)", "check": burn.get("gpu_gflops"),
             "pytorch": truth.get("fp32_gflops_2048"), "state": "compare by eye", "duty_cycle": burn.get("duty_cycle")})
json.dump({"result": summary.get("result"), "rows": rows}, open(f"{out}/compare.json", "w"), indent=1)
for r in rows:
    print(f"{r['state']:>14}  {r['value']}: check={r['check']} pytorch={r['pytorch']}")
PYEOF
rm -rf "$WORK"
exit $rc
