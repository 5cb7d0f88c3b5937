#!/usr/bin/env bash
# The whole chain on a machine that has an NVIDIA GPU, as one command:
#   a fresh venv with this tool -> `tfgpu-install --profile stable -y` -> `verify --benchmark --burn N`
# and a short table at the end. Everything it makes lives under one work dir (printed), so it
# never touches the user's own envs or state.
#
# Usage: scripts/gpu-check.sh [BURN_SECONDS]      (default 30)
#   PYTHON=python3.11   interpreter for the tool's venv
#   TFGPU_CHECK_DIR=DIR  work dir (default: a new /tmp/tfgpu-gpu-check.XXXXXX)
#   PROFILE=stable       profile to install
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
BURN="${1:-30}"
PY="${PYTHON:-python3}"
PROFILE="${PROFILE:-stable}"
WORK="${TFGPU_CHECK_DIR:-$(mktemp -d /tmp/tfgpu-gpu-check.XXXXXX)}"
mkdir -p "$WORK"
export TFGPU_STATE_DIR="$WORK/state" TFGPU_CACHE_DIR="$WORK/cache" TFGPU_DATA_DIR="$WORK/data"
TOOL="$WORK/tool/bin/tfgpu-install"
ENV_DIR="$WORK/env"
ROWS=()
FAILED=0

run_stage() {  # name, command...: run, log to $WORK/<name>.log, remember status and time
  local name="$1"; shift
  local start end rc
  start=$(date +%s)
  "$@" >"$WORK/$name.log" 2>&1
  rc=$?
  end=$(date +%s)
  ROWS+=("$(printf '%-10s %-6s %5ss  %s' "$name" "$([ $rc -eq 0 ] && echo ok || echo "rc=$rc")" $((end - start)) "$WORK/$name.log")")
  [ $rc -eq 0 ] || FAILED=1
  return $rc
}

echo "tfgpu-install GPU check in $WORK"
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>/dev/null || echo "(nvidia-smi not found)"
run_stage venv "$PY" -m venv "$WORK/tool" &&
  run_stage tool "$WORK/tool/bin/python" -m pip install -q "$REPO" &&
  run_stage install "$TOOL" --profile "$PROFILE" -y --env "$ENV_DIR"
# verify runs even after a failed install: its layers say where the stack breaks.
if [ -x "$TOOL" ]; then
  "$TOOL" verify --env "$ENV_DIR" --benchmark --burn "$BURN" --json >"$WORK/verify.json" 2>"$WORK/verify.log"
  rc=$?
  ROWS+=("$(printf '%-10s %-6s %6s  %s' verify "$([ $rc -eq 0 ] && echo ok || echo "rc=$rc")" "" "$WORK/verify.json")")
  [ $rc -eq 0 ] || FAILED=1
fi

echo
printf '%s\n' "${ROWS[@]}"
if [ -s "$WORK/verify.json" ]; then
  "$WORK/tool/bin/python" - "$WORK/verify.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
if "layers" not in doc:
    print(f"verify: {doc.get('message')}  fix: {doc.get('hint')}")
    sys.exit()
print()
for lay in doc["layers"]:
    print(f"  {lay['layer']} {lay['name']:<13} {lay['status']:<5} {lay['summary'][:100]}")
six = next((l for l in doc["layers"] if l["layer"] == 6), None)
bench = (six or {}).get("measured", {}).get("benchmark")
if bench:
    print("\n  matmul n    CPU GFLOP/s   GPU GFLOP/s   speed-up")
    for r in bench["sizes"]:
        print(f"  {r['n']:>8} {r['cpu_gflops']:>13} {r['gpu_gflops']:>13} {r['speedup']:>9}x")
burn = (six or {}).get("measured", {}).get("burn")
if burn:
    t = burn["telemetry"]
    temp = t.get("temp_c", {})
    print(f"\n  burn {burn['seconds']}s: {burn['iterations']} matmuls, {burn['gflops']} GFLOP/s, "
          f"{burn['mismatches']} wrong, max {temp.get('max', '?')} C, throttled: {', '.join(burn['throttled']) or 'no'}"
          + (f" ({t['error']})" if t.get("error") else ""))
mp = doc.get("extras", {}).get("mixed_precision")
if mp:
    print(f"  mixed precision: {'eligible' if mp['eligible'] else 'no'} (cc {', '.join(mp['compute_capabilities'])})")
print(f"\n  overall: {doc['summary']}")
PYEOF
fi
exit $FAILED
