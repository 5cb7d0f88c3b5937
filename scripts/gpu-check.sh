#!/usr/bin/env bash
# The GPU check on a real machine, three ways:
#
#   scripts/gpu-check.sh [BURN_SECONDS]       online: a fresh venv with this tool -> `tfgpu-install --profile
#                                             stable -y` -> `verify --benchmark --burn N` (default 30)
#   scripts/gpu-check.sh --pack DIR           write what --offline needs into DIR (this script, the tool's
#                                             wheel and its runtime dependencies for CPython 3.9-3.14 on this
#                                             CPU architecture, recorded in DIR/ARCH; no TensorFlow), at most
#                                             64 MiB
#   scripts/gpu-check.sh --offline DIR [--out FILE] [--burn SECONDS] [--stage-timeout SECONDS]
#                                             on a machine with no network: install from DIR only
#                                             (python3 -m venv + pip --no-index; without ensurepip, the pack's
#                                             uv: uv venv + uv pip install --offline), then each stage under a
#                                             timeout (the tool is told the time left, so it ends its check):
#     probe       tfgpu-install probe --json, nvidia-smi -L and --query-gpu
#     host        verify --host-only: layers 0-4 (hardware, driver, CUDA runtime, cuDNN handle, cuBLAS
#                 SGEMM checked numerically) against the CUDA libraries the machine has: the system's, or
#                 nvidia-* wheels (cu11/cu12 nvidia/<pkg>/lib, cu13 nvidia/cu13/lib) in any Python env found
#     burn        the cuBLAS SGEMM burn on every GPU at once (default 60 s: near a steady temperature), every
#                 product checked, NVML heat/clocks/power/throttling judged against 80 C and the GPU's
#                 slowdown threshold, health counters before and after; curves in <work dir>/health.html
#     visible-*   CUDA_VISIBLE_DEVICES="" (must give CUDA_ERROR_NO_DEVICE), =<CUDA device 0's UUID from the
#                 host stage: GPU-..., or MIG-... on a MIG instance>, and CUDA_DEVICE_ORDER=PCI_BUS_ID
#     tensorflow  layers 0-5 in the first Python env where TensorFlow is importable (TF imported once);
#                 the envs searched: $VIRTUAL_ENV, every python3 on PATH as it is (a venv's bin/python3 is
#                 a link to its base: never resolved), /opt/*/.venv, ~/.venv*, conda envs, /usr/bin ...
#   The summary JSON is written by an exit trap (so a killed run still leaves one) to --out FILE, else
#   $OUT/gpu-check-summary.json when $OUT is set, else <work dir>/summary.json; the last line printed
#   is one PASS/FAIL line. Exit 0 every stage passed (result PASS, or PASS_HOST_ONLY when no env here
#   has TensorFlow), 3 no NVIDIA GPU, 9 a stage (layer) failed, 130 interrupted (SIGINT/SIGTERM: the
#   stage in progress is recorded as `interrupted`, the stages that did not run are listed), 2 usage.
#
# Environment: PYTHON (interpreter for the tool's venv, default python3), TFGPU_CHECK_DIR (work dir,
# default a new /tmp/tfgpu-gpu-check.XXXXXX), PROFILE (online mode, default stable).
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"  # gpu_check_summary.py lies beside this script (in the repo and the pack)
PY="${PYTHON:-python3}"
PACK_LIMIT=$((64 * 1024 * 1024))

die() { echo "gpu-check: $*" >&2; exit 2; }

usage() {
  cat <<'USAGE'
usage: gpu-check.sh [BURN_SECONDS]
       gpu-check.sh --pack DIR
       gpu-check.sh --offline DIR [--out FILE] [--burn SECONDS] [--stage-timeout SECONDS]
       gpu-check.sh --find-envs      (the Python envs the offline run searches)
Exit codes: 0 pass, 2 usage, 3 no NVIDIA GPU, 9 a stage failed, 130 interrupted.
USAGE
}

# ---- --pack DIR ------------------------------------------------------------------------------------
pack() {
  local dir="$1" arch ver
  mkdir -p "$dir/wheels" || die "cannot create $dir"
  arch="$(uname -m)"
  if [ -f "$REPO/pyproject.toml" ]; then  # a source checkout: build the tool's wheel
    "$PY" -m pip wheel -q --no-deps --wheel-dir "$dir/wheels" "$REPO" || die "building the tool's wheel failed"
  elif [ "$(basename "$REPO")" = share ] && [ -f "$REPO/../__init__.py" ]; then
    # installed from the wheel (site-packages/tfgpu_install/share/scripts/gpu-check.sh): the tool's
    # wheel again, from the installed files its RECORD lists
    repack "$(cd "$REPO/../.." && pwd)" "$dir/wheels" || die "repacking the installed tool into a wheel failed"
  else
    die "--pack needs a source checkout (pyproject.toml) or the installed package (tfgpu_install/share); $REPO is neither"
  fi
  cp "$0" "$dir/gpu-check.sh" && chmod +x "$dir/gpu-check.sh" && cp "$HERE/gpu_check_summary.py" "$dir/" \
    || die "copying the check's scripts into $dir failed"
  # The runtime dependencies as binary wheels for every CPython the tool supports (pure-Python wheels
  # once; pyyaml and friends per version); the target machine's Python is not known here.
  for ver in 3.9 3.10 3.11 3.12 3.13 3.14; do
    "$PY" -m pip download -q --only-binary=:all: --dest "$dir/wheels" --python-version "$ver" \
      --implementation cp --platform "manylinux2014_$arch" --platform "manylinux_2_17_$arch" \
      --platform "manylinux_2_28_$arch" --platform "linux_$arch" "$(ls "$dir"/wheels/tfgpu_install-*.whl)[report]" \
      || die "downloading the dependencies for Python $ver failed"
  done
  # pip evaluates a dependency's markers for the running interpreter, not --python-version: add
  # what only older Pythons need (pyproject: tomli for Python < 3.11).
  "$PY" -m pip download -q --only-binary=:all: --dest "$dir/wheels" --python-version 3.9 "tomli>=1.1" \
    || die "downloading tomli failed"
  echo "$arch" > "$dir/ARCH"
  local bytes
  bytes=$(du -sb "$dir" | cut -f1)
  if [ "$bytes" -gt "$PACK_LIMIT" ]; then
    die "the pack is $bytes bytes, over the 64 MiB limit"
  fi
  echo "packed $(ls "$dir/wheels" | wc -l) wheels, $bytes bytes, into $dir (run: $dir/gpu-check.sh --offline $dir)"
}

repack() {  # repack SITE_PACKAGES DEST: tfgpu_install-*.whl from the installed files (RECORD), hashes anew
  "$PY" - "$1" "$2" <<'PYEOF'
import base64, csv, hashlib, io, os, pathlib, sys, zipfile
site, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
prefix = site.parents[2]  # <prefix>/lib/pythonX.Y/site-packages
infos = sorted(site.glob("tfgpu_install-*.dist-info"))
if len(infos) != 1:
    sys.exit(f"expected one tfgpu_install-*.dist-info in {site}, found {len(infos)}")
info = infos[0]
tags = [line.split(":", 1)[1].strip() for line in (info / "WHEEL").read_text().splitlines() if line.startswith("Tag:")]
if not tags:
    sys.exit(f"{info}/WHEEL names no tag")
installer_only = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}  # pip wrote these at install time
out = dest / f"{info.name[:-len('.dist-info')]}-{'.'.join(sorted(set(tags)))}.whl"
record = []
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for row in csv.reader((info / "RECORD").read_text().splitlines()):
        rel = row[0] if row else ""
        parts = rel.split("/")
        arc = rel
        if rel.startswith("../"):  # a data file (the man page): <prefix>/share/... goes back under .data/data
            inner = pathlib.Path(os.path.normpath(site / rel))
            if not inner.is_relative_to(prefix / "share"):
                continue  # scripts in bin/ (regenerated from entry_points.txt)
            arc = f"{info.name[:-len('.dist-info')]}.data/data/{inner.relative_to(prefix).as_posix()}"
        elif (not rel or rel.startswith("/") or ".." in parts or "__pycache__" in parts or rel.endswith(".pyc")
                or (parts[0] == info.name and parts[-1] in installer_only)):
            continue  # bytecode, the installer's own files
        path = site / rel
        data = path.read_bytes()
        zi = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
        zi.external_attr = (0o100000 | (path.stat().st_mode & 0o777)) << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(zi, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append([arc, f"sha256={digest}", str(len(data))])
    record.append([f"{info.name}/RECORD", "", ""])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(record)
    z.writestr(f"{info.name}/RECORD", buf.getvalue())
print(out)
PYEOF
}

# ---- --offline DIR ---------------------------------------------------------------------------------
STAGES=""        # TSV: name, exit code, seconds, log file, json file (may be empty)
SUMMARY=""
WORK=""
FINAL_CODE=9
GPU_STATE="unknown"
INTERRUPTED=""
CURRENT=""       # the stage in progress: name, start time, log, json (for the interruption record)
STAGE_PID=""
EXPECTED="install probe host burn visible-none visible-uuid visible-pci-order tensorflow"

stage() {  # stage NAME TIMEOUT JSON_OUT CMD...: run CMD under a timeout, log it, remember the result
  local name="$1" limit="$2" json="$3"; shift 3
  local log="$WORK/$name.log" start rc
  start=$(date +%s)
  echo "gpu-check: stage $name (timeout ${limit}s)" >&2
  CURRENT="$name	$start	$log	$json"
  # In the background and waited for: a signal to this script runs its trap at once, not after the stage.
  if [ -n "$json" ]; then
    timeout --kill-after=10 "$limit" "$@" >"$json" 2>"$log" &
  else
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1 &
  fi
  STAGE_PID=$!
  wait "$STAGE_PID"
  rc=$?
  STAGE_PID="" CURRENT=""
  STAGES+="$name	$rc	$(( $(date +%s) - start ))	$log	$json"$'\n'
  return $rc
}

skip_stage() { STAGES+="$1	skip	0		$2"$'\n'; }

interrupted() {  # the INT/TERM trap: end the stage in progress (its timeout passes TERM on), record it
  INTERRUPTED=1
  if [ -n "$STAGE_PID" ]; then
    kill -TERM "$STAGE_PID" 2>/dev/null
    wait "$STAGE_PID" 2>/dev/null
  fi
  if [ -n "$CURRENT" ]; then
    local name start log json
    IFS=$'\t' read -r name start log json <<<"$CURRENT"
    STAGES+="$name	interrupted	$(( $(date +%s) - start ))	$log	$json"$'\n'
  fi
  exit 130
}

write_summary() {  # the exit trap: the summary JSON and the one PASS/FAIL line, whatever happened
  local writer="$PY" code
  [ -x "$WORK/tool/bin/python" ] && writer="$WORK/tool/bin/python"
  printf '%s' "$STAGES" > "$WORK/stages.tsv"
  "$writer" "$HERE/gpu_check_summary.py" summary "$SUMMARY" "$GPU_STATE" "$WORK" "$INTERRUPTED" "$EXPECTED"
  code=$?
  exit $code
}

find_envs() {  # one line per Python env found: "python<TAB>site dir<TAB>has-tensorflow"
  local cands=() p
  # As found, never resolved: a venv's bin/python3 is a link to its base interpreter, and only the
  # unresolved path makes Python read the venv's pyvenv.cfg (and so its site dirs).
  [ -n "${VIRTUAL_ENV:-}" ] && cands+=("$VIRTUAL_ENV/bin/python")
  for p in python3 python3.9 python3.10 python3.11 python3.12 python3.13 python3.14 python; do
    command -v "$p" >/dev/null 2>&1 && cands+=("$(command -v "$p")")
  done
  for p in /opt/*/.venv/bin/python /opt/*/venv/bin/python /opt/venv*/bin/python /opt/*/bin/python \
           "$HOME"/.venv*/bin/python "$HOME"/*/.venv/bin/python /usr/bin/python3* /usr/local/bin/python3* \
           /opt/conda/bin/python /opt/conda/envs/*/bin/python "$HOME"/miniconda3/bin/python \
           "$HOME"/miniconda3/envs/*/bin/python "$HOME"/.conda/envs/*/bin/python; do
    [ -x "$p" ] && cands+=("$p")
  done
  for p in "${cands[@]}"; do
    case "$p" in *-config|*.py) continue ;; esac
    timeout 30 "$p" - <<'PYEOF' 2>/dev/null
import importlib.util, site, sys, sysconfig
dirs = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")} | set(getattr(site, "getsitepackages", lambda: [])())
tf = "yes" if importlib.util.find_spec("tensorflow") else "no"
for d in sorted(x for x in dirs if x):
    print(f"{sys.executable}\t{d}\t{tf}\t{sys.prefix}")
PYEOF
  done
}

tool_venv() {  # tool_venv PACK: the tool's venv from the pack alone
  local dir="$1"
  if "$PY" -m venv "$WORK/tool" 2>"$WORK/venv.err"; then
    "$WORK/tool/bin/python" -m pip install -q --isolated --no-index --find-links "$dir/wheels" 'tfgpu-install[report]'
    return
  fi
  # No ensurepip (Debian/Ubuntu without python3-venv): the pack carries uv.
  echo "python3 -m venv failed ($(tail -n1 "$WORK/venv.err")): using the pack's uv" >&2
  rm -rf "$WORK/tool"
  local wheel
  wheel="$(ls "$dir"/wheels/uv-*.whl 2>/dev/null | head -n1)"
  [ -n "$wheel" ] || { echo "no uv wheel in $dir/wheels to fall back on" >&2; return 1; }
  "$PY" - "$wheel" "$WORK/uv" <<'PYEOF' || return 1
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".data/scripts/uv"))
    with zf.open(name) as src, open(sys.argv[2], "wb") as dst:
        dst.write(src.read())
os.chmod(sys.argv[2], 0o755)
PYEOF
  "$WORK/uv" venv -q --python "$PY" "$WORK/tool" &&
    "$WORK/uv" pip install -q --offline --no-index --find-links "$dir/wheels" -p "$WORK/tool/bin/python" \
      'tfgpu-install[report]'
}

offline() {
  local dir="$1" out="$2" burn="$3" limit="$4"
  [ -d "$dir/wheels" ] || die "$dir/wheels not found: make it with --pack DIR on a machine with network"
  local packed here
  packed="$(cat "$dir/ARCH" 2>/dev/null || echo unknown)" here="$(uname -m)"
  if [ "$packed" != unknown ] && [ "$packed" != "$here" ]; then
    die "this pack holds wheels for $packed; this machine is $here (aarch64: GH200, Jetson): make the pack with --pack DIR on a $here machine"
  fi
  WORK="${TFGPU_CHECK_DIR:-$(mktemp -d /tmp/tfgpu-gpu-check.XXXXXX)}"
  mkdir -p "$WORK"
  SUMMARY="${out:-${OUT:+$OUT/gpu-check-summary.json}}"
  SUMMARY="${SUMMARY:-$WORK/summary.json}"
  mkdir -p "$(dirname "$SUMMARY")"
  trap write_summary EXIT
  trap interrupted INT TERM
  export TFGPU_STATE_DIR="$WORK/state" TFGPU_CACHE_DIR="$WORK/cache" TFGPU_DATA_DIR="$WORK/data"
  export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
  echo "tfgpu-install offline GPU check in $WORK" >&2
  export -f tool_venv
  export WORK PY
  stage install "$limit" "" bash -c 'tool_venv "$1"' tool_venv "$dir" || return
  local tool="$WORK/tool/bin/tfgpu-install" searches=() tfpy="" line py site tf prefix
  local inner=$((limit > 30 ? limit - 15 : limit))  # the tool's own timeout: it ends its check first
  stage probe "$limit" "$WORK/probe.json" "$tool" probe --json
  if command -v nvidia-smi >/dev/null 2>&1; then
    stage nvidia-smi "$limit" "" bash -c "nvidia-smi -L; nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,\
compute_cap,temperature.gpu,clocks.sm,power.draw,mig.mode.current --format=csv"
  fi
  local -A seen=() envs=()
  while IFS=$'\t' read -r py site tf prefix; do  # one env per sys.prefix, however many paths reach it
    [ -n "$prefix" ] && [ -n "${envs[$prefix]:-}" ] && [ "${envs[$prefix]}" != "$py" ] && continue
    envs[$prefix]="$py"
    [ -n "$site" ] && [ -z "${seen[$site]:-}" ] && searches+=(--search "$site") && seen[$site]=1
    [ "$tf" = yes ] && [ -z "$tfpy" ] && tfpy="$py"
  done < <(find_envs)
  printf '%s\n' "${searches[@]}" > "$WORK/searched.txt"
  echo "${tfpy:-none}" > "$WORK/tensorflow-python.txt"
  stage host "$limit" "$WORK/host.json" "$tool" verify --host-only --json --timeout "$inner" "${searches[@]}"
  case $? in
    0) GPU_STATE="present" ;;
    3) GPU_STATE="none" ;;
    *) GPU_STATE="broken" ;;
  esac
  if [ "$GPU_STATE" = none ]; then
    for s in burn visible-none visible-uuid visible-pci-order tensorflow; do skip_stage "$s" "no NVIDIA GPU"; done
    return 3
  fi
  # every GPU under load at once, every product checked, NVML through the run; the curves in health.html
  stage burn $((limit + ${burn%.*} * 2)) "$WORK/burn.json" "$tool" verify --host-only --json --burn "$burn" \
    --report "$WORK/health.html" --timeout $((inner + ${burn%.*} * 2)) "${searches[@]}"
  stage visible-none "$limit" "$WORK/visible-none.json" env CUDA_VISIBLE_DEVICES= "$tool" verify --host-only --json \
    --timeout "$inner" "${searches[@]}"
  local uuid
  # CUDA device 0's UUID as the host stage read it (MIG-... on a MIG instance): no nvidia-smi needed.
  uuid="$("$WORK/tool/bin/python" "$HERE/gpu_check_summary.py" uuid "$WORK/host.json" 2>/dev/null)"
  if [ -n "$uuid" ]; then
    stage visible-uuid "$limit" "$WORK/visible-uuid.json" env CUDA_VISIBLE_DEVICES="$uuid" "$tool" verify --host-only \
      --json --timeout "$inner" "${searches[@]}"
  else
    skip_stage visible-uuid "the host stage read no UUID for CUDA device 0"
  fi
  stage visible-pci-order "$limit" "$WORK/visible-pci-order.json" env CUDA_DEVICE_ORDER=PCI_BUS_ID "$tool" verify \
    --host-only --json --timeout "$inner" "${searches[@]}"
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
    OUTFILE="" BURN=60 LIMIT=300
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
  --find-envs) find_envs ;;  # the Python envs the tensorflow stage chooses from (python, site dir, TF, prefix)
  -h|--help) usage ;;
  *) online "${1:-30}" ;;
esac
