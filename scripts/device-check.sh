#!/usr/bin/env bash
# The one prepared command for a lent GPU machine (an H100/H200, no network, <= 64 MiB carried, at most
# 8 files back from $OUT, a few minutes of device time):
#
#   here:   tfgpu-install gpu-check --pack .gpu-pack        (or scripts/gpu-check.sh --pack .gpu-pack)
#   there:  scripts/device-check.sh .gpu-pack               (the `run` tool: carry [".gpu-pack"], timeout_s 420)
#
# Within DEVICE_CHECK_BUDGET seconds (default 330: under 6 minutes with the pack's install), each part
# under its own share of what is left:
#   1. ground truth from what the machine has: PyTorch (GPU name, compute capability, memory, UUID, cuDNN,
#      FP32 and TF32 GEMM rates at n=8192) and a CUDA program built there with nvcc (L2 size, SM count,
#      free memory, driver and runtime versions); nvidia-smi's view
#   2. the offline check: PACK/gpu-check.sh --offline PACK --burn 60 (every GPU under load, the health report)
#   3. every value the check reported compared with the ground truth ("same" / "differs" / "unknown")
# It writes exactly these files to $OUT (six; the machine returns at most eight):
#   device-check.txt        everything printed, the comparison last
#   truth.json              the ground truth
#   gpu-check-summary.json  the offline check's summary (every stage's JSON inside)
#   health.html             the burn's health report (curves per GPU)
#   compare.json            the comparison
#   logs.tar.gz             every stage's log and JSON, the truth's stderr, the nvcc build
# Exit: the offline check's code (0 pass, 3 no GPU, 9 a stage failed, 130 interrupted); 2 usage.
set -uo pipefail
PACK="${1:-}"
[ -n "$PACK" ] && [ -d "$PACK/wheels" ] || { echo "usage: $0 PACK_DIR (make it with: tfgpu-install gpu-check --pack DIR)" >&2; exit 2; }
PACK="$(cd "$PACK" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
BUDGET="${DEVICE_CHECK_BUDGET:-330}"
BURN="${DEVICE_CHECK_BURN:-60}"
START=$SECONDS
left() { echo $(( BUDGET - (SECONDS - START) )); }
share() { local want="$1" rest; rest=$(left); [ "$rest" -lt "$want" ] && want=$rest; [ "$want" -lt 1 ] && want=1; echo "$want"; }
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/tfgpu-device.XXXXXX)"
LOGS="$WORK/logs"
mkdir -p "$LOGS"
exec > >(tee "$OUT/device-check.txt") 2>&1
echo "device-check: budget ${BUDGET}s, burn ${BURN}s, pack $PACK"

# ---- 1. ground truth --------------------------------------------------------------------------------
truth_py=""
for p in python3 /usr/bin/python3 /opt/conda/bin/python /opt/*/bin/python /opt/*/.venv/bin/python "$HOME"/.venv*/bin/python; do
  cand="$(command -v "$p" 2>/dev/null || true)"
  [ -n "$cand" ] && [ -x "$cand" ] && timeout 30 "$cand" -c 'import torch' 2>/dev/null && { truth_py="$cand"; break; }
done
cat >"$WORK/props.cu" <<'CUEOF'
#include <cstdio>
#include <cuda_runtime.h>
int main() {
  int n = 0, drv = 0, rt = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  cudaDriverGetVersion(&drv); cudaRuntimeGetVersion(&rt);
  printf("{\"error\": %s, \"driver_cuda\": %d, \"runtime_cuda\": %d, \"gpus\": [", e ? "\"count failed\"" : "null", drv, rt);
  for (int i = 0; i < n; i++) {
    cudaDeviceProp p; cudaGetDeviceProperties(&p, i);
    size_t fr = 0, tot = 0; cudaSetDevice(i); cudaMemGetInfo(&fr, &tot);
    printf("%s{\"index\": %d, \"name\": \"%s\", \"cc\": \"%d.%d\", \"total_mib\": %zu, \"free_mib\": %zu, "
           "\"l2_bytes\": %d, \"sms\": %d, \"pci\": \"%04x:%02x:%02x.0\", \"uuid\": \"", i ? ", " : "", i, p.name,
           p.major, p.minor, p.totalGlobalMem >> 20, fr >> 20, p.l2CacheSize, p.multiProcessorCount,
           p.pciDomainID, p.pciBusID, p.pciDeviceID);
    for (int k = 0; k < 16; k++) printf("%s%02x", (k == 4 || k == 6 || k == 8 || k == 10) ? "-" : "",
                                        (unsigned char)p.uuid.bytes[k]);
    printf("\"}");
  }
  printf("]}\n");
  return 0;
}
CUEOF
nvcc_json="null"
if command -v nvcc >/dev/null 2>&1 && timeout "$(share 60)" nvcc -O2 -o "$WORK/props" "$WORK/props.cu" >"$LOGS/nvcc.log" 2>&1; then
  nvcc_json="$(timeout "$(share 20)" "$WORK/props" 2>>"$LOGS/nvcc.log" || echo null)"
else
  echo "nvcc: not found or the build failed (see logs/nvcc.log)" >>"$LOGS/nvcc.log"
fi
smi_csv="$(timeout "$(share 20)" nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,compute_cap,memory.total,temperature.gpu,temperature.memory,clocks.max.sm,power.limit --format=csv,noheader 2>>"$LOGS/nvidia-smi.log" || true)"
if [ -n "$truth_py" ]; then
  NVCC_JSON="$nvcc_json" SMI_CSV="$smi_csv" timeout "$(share 90)" "$truth_py" - >"$OUT/truth.json" 2>"$LOGS/truth.err" <<'PYEOF'
import json, os, time, torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "gpus": [],
       "nvcc_program": json.loads(os.environ.get("NVCC_JSON") or "null"),
       "nvidia_smi": [line.split(", ") for line in os.environ.get("SMI_CSV", "").splitlines() if line]}
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
print(json.dumps(out, indent=1))
PYEOF
else
  NVCC_JSON="$nvcc_json" python3 -c 'import json, os; print(json.dumps({"error": "no Python with torch found", "nvcc_program": json.loads(os.environ.get("NVCC_JSON") or "null")}))' >"$OUT/truth.json"
fi

# ---- 2. the offline check ---------------------------------------------------------------------------
offline=$(( $(left) - 25 ))
[ "$offline" -lt 30 ] && offline=30
stage=$(( (offline - BURN) / 6 ))
[ "$stage" -lt 20 ] && stage=20
echo "device-check: the offline check gets ${offline}s (stages ${stage}s each)"
OUT="$WORK/check-out" TFGPU_CHECK_DIR="$WORK/check" timeout --kill-after=10 "$offline" "$PACK/gpu-check.sh" --offline \
  "$PACK" --burn "$BURN" --stage-timeout "$stage" --out "$OUT/gpu-check-summary.json" >"$LOGS/gpu-check.out" 2>&1
rc=$?
tail -n 3 "$LOGS/gpu-check.out"
if [ -f "$WORK/check/health.html" ]; then cp "$WORK/check/health.html" "$OUT/health.html"; fi
cp "$WORK"/check/*.json "$WORK"/check/*.log "$WORK"/check/*.txt "$LOGS/" 2>/dev/null

# ---- 3. compare ---------------------------------------------------------------------------------------
timeout 20 python3 "$HERE/gpu_check_summary.py" compare "$OUT" || echo "device-check: the comparison failed"
tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs 2>/dev/null
rm -rf "$WORK"
echo "device-check: done in $((SECONDS - START))s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc
