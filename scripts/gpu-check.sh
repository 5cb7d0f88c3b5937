#!/usr/bin/env bash
# The GPU check on a real machine, three ways:
#
#   scripts/gpu-check.sh [BURN_SECONDS]       online: a fresh venv with this tool -> `tfgpu-install --profile
#                                             stable -y` -> `verify --benchmark --burn N` (default 30)
#   scripts/gpu-check.sh --pack DIR           write what --offline needs into DIR (this script, the tool's
#                                             wheel and its runtime dependencies for CPython 3.9-3.13 on this
#                                             CPU architecture; no TensorFlow), at most 64 MiB
#   scripts/gpu-check.sh --offline DIR [--out FILE] [--burn SECONDS] [--stage-timeout SECONDS]
#                                             on a machine with no network: install from DIR only
#                                             (pip --no-index), then run each stage under a timeout:
#     probe       tfgpu-install probe --json, nvidia-smi -L and --query-gpu
#     host        verify --host-only: layers 0-4 (hardware, driver, CUDA runtime, cuDNN handle, cuBLAS
#                 SGEMM checked numerically) against the CUDA libraries the machine has: the system's, or
#                 nvidia-* wheels (cu11/cu12 nvidia/<pkg>/lib, cu13 nvidia/cu13/lib) in any Python env found
#     burn        a short cuBLAS SGEMM burn with NVML temperature, clocks, power of the GPU under load
#     visible-*   CUDA_VISIBLE_DEVICES="" (must give CUDA_ERROR_NO_DEVICE), =<GPU 0's UUID>, and
#                 CUDA_DEVICE_ORDER=PCI_BUS_ID
#     tensorflow  layers 0-5 in the first Python env where TensorFlow is importable (TF imported once)
#   The summary JSON is written by an exit trap (so a killed run still leaves one) to --out FILE, else
#   $OUT/gpu-check-summary.json when $OUT is set, else <work dir>/summary.json; the last line printed
#   is one PASS/FAIL line. Exit 0 every stage passed, 3 no NVIDIA GPU, 9 a stage (layer) failed.
#
# Environment: PYTHON (interpreter for the tool's venv, default python3), TFGPU_CHECK_DIR (work dir,
# default a new /tmp/tfgpu-gpu-check.XXXXXX), PROFILE (online mode, default stable).
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
PACK_LIMIT=$((64 * 1024 * 1024))

die() { echo "gpu-check: $*" >&2; exit 2; }

# ---- --pack DIR ------------------------------------------------------------------------------------
pack() {
  local dir="$1" arch ver
  [ -f "$REPO/pyproject.toml" ] || die "--pack runs from a source checkout (no pyproject.toml in $REPO)"
  mkdir -p "$dir/wheels" || die "cannot create $dir"
  arch="$(uname -m)"
  "$PY" -m pip wheel -q --no-deps --wheel-dir "$dir/wheels" "$REPO" || die "building the tool's wheel failed"
  # The runtime dependencies as binary wheels for every CPython the tool supports (pure-Python wheels
  # once; pyyaml and friends per version); the target machine's Python is not known here.
  for ver in 3.9 3.10 3.11 3.12 3.13; do
    "$PY" -m pip download -q --only-binary=:all: --dest "$dir/wheels" --python-version "$ver" \
      --implementation cp --platform "manylinux2014_$arch" --platform "manylinux_2_17_$arch" \
      --platform "manylinux_2_28_$arch" --platform "linux_$arch" "$dir"/wheels/tfgpu_install-*.whl \
      || die "downloading the dependencies for Python $ver failed"
  done
  # pip evaluates a dependency's markers for the running interpreter, not --python-version: add
  # what only older Pythons need (pyproject: tomli for Python < 3.11).
  "$PY" -m pip download -q --only-binary=:all: --dest "$dir/wheels" --python-version 3.9 "tomli>=1.1" \
    || die "downloading tomli failed"
  cp "$0" "$dir/gpu-check.sh" && chmod +x "$dir/gpu-check.sh"
  local bytes
  bytes=$(du -sb "$dir" | cut -f1)
  if [ "$bytes" -gt "$PACK_LIMIT" ]; then
    die "the pack is $bytes bytes, over the 64 MiB limit"
  fi
  echo "packed $(ls "$dir/wheels" | wc -l) wheels, $bytes bytes, into $dir (run: $dir/gpu-check.sh --offline $dir)"
}

# ---- --offline DIR ---------------------------------------------------------------------------------
STAGES=""        # TSV: name, exit code, seconds, log file, json file (may be empty)
SUMMARY=""
WORK=""
FINAL_CODE=9
GPU_STATE="unknown"

stage() {  # stage NAME TIMEOUT JSON_OUT CMD...: run CMD under a timeout, log it, remember the result
  local name="$1" limit="$2" json="$3"; shift 3
  local log="$WORK/$name.log" start rc
  start=$(date +%s)
  echo "gpu-check: stage $name (timeout ${limit}s)" >&2
  if [ -n "$json" ]; then
    timeout --kill-after=10 "$limit" "$@" >"$json" 2>"$log"
  else
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  fi
  rc=$?
  STAGES+="$name	$rc	$(( $(date +%s) - start ))	$log	$json"$'\n'
  return $rc
}

skip_stage() { STAGES+="$1	skip	0		$2"$'\n'; }

write_summary() {  # the exit trap: the summary JSON and the one PASS/FAIL line, whatever happened
  local writer="$PY" code
  [ -x "$WORK/tool/bin/python" ] && writer="$WORK/tool/bin/python"
  printf '%s' "$STAGES" > "$WORK/stages.tsv"
  "$writer" - "$SUMMARY" "$GPU_STATE" "$WORK" <<'PYEOF'
import json, sys, time
path, gpu_state, work = sys.argv[1], sys.argv[2], sys.argv[3]
stages = []
for line in open(f"{work}/stages.tsv").read().splitlines():
    name, rc, seconds, log, extra = (line.split("\t") + [""] * 5)[:5]
    st = {"name": name, "seconds": int(seconds or 0), "log": log or None}
    if rc == "skip":
        st.update(status="skip", why=extra)
    else:
        st.update(exit_code=int(rc), status={"0": "pass", "3": "no_gpu", "124": "timeout", "137": "timeout"}.get(rc, "fail"))
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
host = next((s for s in stages if s["name"] == "host"), None)
message = ((host or {}).get("result") or {}).get("message")
failed = [s["name"] for s in stages if s["status"] in ("fail", "timeout")]
if gpu_state == "none":
    code, result = 3, "NO_GPU"
elif failed or not stages:
    code, result = 9, "FAIL"
else:
    code, result = 0, "PASS"
doc = {"format": 1, "tool": "scripts/gpu-check.sh --offline", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
       "result": result, "exit_code": code, "message": message if gpu_state == "none" else None,
       "failed_stages": failed, "stages": stages, "work_dir": work}
with open(path, "w") as fh:
    json.dump(doc, fh, indent=1)
line = {"PASS": "PASS: every stage passed", "NO_GPU": f"FAIL: {message or 'no NVIDIA GPU'} (exit 3)",
        "FAIL": f"FAIL: stage(s) {', '.join(failed) or 'none ran'} failed (exit 9)"}[result]
print(f"summary: {path}")
print(line)
sys.exit(code)
PYEOF
  code=$?
  exit $code
}

find_envs() {  # one line per Python found: "python<TAB>site dir<TAB>has-tensorflow"
  local cands=() p
  for p in python3 python3.9 python3.10 python3.11 python3.12 python3.13 python3.14 python; do
    command -v "$p" >/dev/null 2>&1 && cands+=("$(command -v "$p")")
  done
  for p in /usr/bin/python3* /usr/local/bin/python3* /opt/conda/bin/python /opt/conda/envs/*/bin/python \
           "$HOME"/miniconda3/bin/python "$HOME"/miniconda3/envs/*/bin/python "$HOME"/.conda/envs/*/bin/python \
           /opt/*/bin/python /opt/venv*/bin/python; do
    [ -x "$p" ] && cands+=("$p")
  done
  for p in $(printf '%s\n' "${cands[@]}" | xargs -r -n1 readlink -f 2>/dev/null | sort -u); do
    case "$p" in *-config|*.py) continue ;; esac
    timeout 30 "$p" - <<'PYEOF' 2>/dev/null
import importlib.util, site, sys, sysconfig
dirs = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")} | set(getattr(site, "getsitepackages", lambda: [])())
tf = "yes" if importlib.util.find_spec("tensorflow") else "no"
for d in sorted(x for x in dirs if x):
    print(f"{sys.executable}\t{d}\t{tf}")
PYEOF
  done
}

offline() {
  local dir="$1" out="$2" burn="$3" limit="$4"
  [ -d "$dir/wheels" ] || die "$dir/wheels not found: make it with --pack DIR on a machine with network"
  WORK="${TFGPU_CHECK_DIR:-$(mktemp -d /tmp/tfgpu-gpu-check.XXXXXX)}"
  mkdir -p "$WORK"
  SUMMARY="${out:-${OUT:+$OUT/gpu-check-summary.json}}"
  SUMMARY="${SUMMARY:-$WORK/summary.json}"
  mkdir -p "$(dirname "$SUMMARY")"
  trap write_summary EXIT
  trap 'exit 130' INT TERM
  export TFGPU_STATE_DIR="$WORK/state" TFGPU_CACHE_DIR="$WORK/cache" TFGPU_DATA_DIR="$WORK/data"
  export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
  echo "tfgpu-install offline GPU check in $WORK" >&2
  stage install "$limit" "" bash -c "'$PY' -m venv '$WORK/tool' && '$WORK/tool/bin/python' -m pip install -q \
    --isolated --no-index --find-links '$dir/wheels' tfgpu-install" || return
  local tool="$WORK/tool/bin/tfgpu-install" searches=() tfpy="" line py site tf
  stage probe "$limit" "$WORK/probe.json" "$tool" probe --json
  if command -v nvidia-smi >/dev/null 2>&1; then
    stage nvidia-smi "$limit" "" bash -c "nvidia-smi -L; nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,\
compute_cap,temperature.gpu,clocks.sm,power.draw,mig.mode.current --format=csv"
  fi
  local -A seen=()
  while IFS=$'\t' read -r py site tf; do
    [ -n "$site" ] && [ -z "${seen[$site]:-}" ] && searches+=(--search "$site") && seen[$site]=1
    [ "$tf" = yes ] && [ -z "$tfpy" ] && tfpy="$py"
  done < <(find_envs)
  printf '%s\n' "${searches[@]}" > "$WORK/searched.txt"
  stage host "$limit" "$WORK/host.json" "$tool" verify --host-only --json "${searches[@]}"
  case $? in
    0) GPU_STATE="present" ;;
    3) GPU_STATE="none" ;;
    *) GPU_STATE="broken" ;;
  esac
  if [ "$GPU_STATE" = none ]; then
    for s in burn visible-none visible-uuid visible-pci-order tensorflow; do skip_stage "$s" "no NVIDIA GPU"; done
    return 3
  fi
  stage burn $((limit + ${burn%.*})) "$WORK/burn.json" "$tool" verify --host-only --json --burn "$burn" "${searches[@]}"
  stage visible-none "$limit" "$WORK/visible-none.json" env CUDA_VISIBLE_DEVICES= "$tool" verify --host-only --json "${searches[@]}"
  local uuid
  uuid="$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' ')"
  if [ -n "$uuid" ]; then
    stage visible-uuid "$limit" "$WORK/visible-uuid.json" env CUDA_VISIBLE_DEVICES="$uuid" "$tool" verify --host-only --json "${searches[@]}"
  else
    skip_stage visible-uuid "nvidia-smi gave no UUID"
  fi
  stage visible-pci-order "$limit" "$WORK/visible-pci-order.json" env CUDA_DEVICE_ORDER=PCI_BUS_ID "$tool" verify --host-only --json "${searches[@]}"
  if [ -n "$tfpy" ]; then
    local check
    check="$("$WORK/tool/bin/python" -c 'from tfgpu_install.verify.host import CHECK_SCRIPT; print(CHECK_SCRIPT)')"
    # One process, one TensorFlow import: layers 0-5 in the env that has TensorFlow.
    stage tensorflow $((limit * 2)) "$WORK/tensorflow.json" "$tfpy" "$check" --plan-json '{}' --keep-going
  else
    skip_stage tensorflow "no Python env here can import tensorflow"
  fi
}

# ---- online (the original chain) ------------------------------------------------------------------
online() {
  local burn="$1" profile="${PROFILE:-stable}"
  WORK="${TFGPU_CHECK_DIR:-$(mktemp -d /tmp/tfgpu-gpu-check.XXXXXX)}"
  mkdir -p "$WORK"
  export TFGPU_STATE_DIR="$WORK/state" TFGPU_CACHE_DIR="$WORK/cache" TFGPU_DATA_DIR="$WORK/data"
  local tool="$WORK/tool/bin/tfgpu-install" failed=0
  echo "tfgpu-install GPU check in $WORK"
  "$PY" -m venv "$WORK/tool" && "$WORK/tool/bin/python" -m pip install -q "$REPO" &&
    "$tool" --profile "$profile" -y --env "$WORK/env" || failed=1
  if [ -x "$tool" ]; then  # verify runs even after a failed install: its layers say where the stack breaks
    "$tool" verify --env "$WORK/env" --benchmark --burn "$burn" || failed=1
  fi
  echo "$([ $failed -eq 0 ] && echo PASS || echo FAIL): see $WORK"
  return $failed
}

case "${1:-}" in
  --pack)
    [ $# -eq 2 ] || die "usage: $0 --pack DIR"
    pack "$2" ;;
  --offline)
    [ $# -ge 2 ] || die "usage: $0 --offline DIR [--out FILE] [--burn SECONDS] [--stage-timeout SECONDS]"
    DIR="$(cd "$2" 2>/dev/null && pwd)" || die "$2: no such directory"
    shift 2
    OUTFILE="" BURN=10 LIMIT=300
    while [ $# -gt 0 ]; do
      case "$1" in
        --out) OUTFILE="${2:?--out FILE}"; shift 2 ;;
        --burn) BURN="${2:?--burn SECONDS}"; shift 2 ;;
        --stage-timeout) LIMIT="${2:?--stage-timeout SECONDS}"; shift 2 ;;
        *) die "unknown option $1" ;;
      esac
    done
    offline "$DIR" "$OUTFILE" "$BURN" "$LIMIT"
    exit $? ;;  # the exit trap writes the summary and decides the code
  -h|--help) sed -n '2,28p' "$0" ;;
  *) online "${1:-30}" ;;
esac
