"""The GPU check's documents, typed: the plan it is given, what each layer measures, and the one JSON
report it prints (stdlib only: runs inside the target env, imported by file name; the host reads the
same types by the package path).

These are TypedDicts, so the report stays the plain dict it always was, key for key and in the same
order (the host parses it: verify/host.py); what they add is that every key a layer writes and its
type are written down here and checked by mypy. A key that only some layers or some runs have is in a
`total=False` part. Where one key carries different things in different layers (`devices`, `gpus`,
`burn`), its entry type holds every key any of them writes.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypedDict, Union


# ---- what the host gives -------------------------------------------------------------------------
class FloorRow(TypedDict, total=False):
    """profiles/kernels.yaml `floors` row (tfgpucheck_known.FLOORS)."""

    library: str
    since: str
    min_cc: str
    last: str
    source: str
    gpus: list[str]  # added where it is hit


class FailureRow(TypedDict, total=False):
    """profiles/kernels.yaml `known_failures` row (tfgpucheck_known.KNOWN_FAILURES)."""

    id: str
    tensorflow: str
    cc_min: str
    cc_max: str
    unless_sass: bool
    inferred: bool
    text: str
    runs_instead: list[str]
    sources: list[str]
    gpus: list[str]  # added where it is hit


class KernelRows(TypedDict, total=False):
    floors: list[FloorRow]
    known_failures: list[FailureRow]


class CheckPlan(TypedDict, total=False):
    """--plan-json (verify/host.py CheckPlan.to_json, snapshot/image.py, verify/hostcheck.py)."""

    cuda: Optional[str]
    cudnn: Optional[str]
    tensorflow: Optional[str]
    lib_dirs: list[str]
    site_dirs: list[str]
    cpu_only: bool
    libcuda: str
    kernels: KernelRows


# ---- one layer's outcome -------------------------------------------------------------------------
class ErrorCode(TypedDict):
    code: int
    name: str


PciGpu = TypedDict("PciGpu", {"pci": str, "device_id": str, "class": str, "kernel_driver": Optional[str]},
                   total=False)


class NvmlDevice(TypedDict, total=False):
    """A GPU as NVML (and nvidia-smi) numbers it."""

    nvidia_smi: int
    uuid: Optional[str]
    pci: Optional[str]
    mig: bool
    mig_uuids: list[str]
    error: str  # NVML could not open it
    matched_by: str  # telemetry's GPU: how the CUDA device was found


class Limits(TypedDict, total=False):
    sm_max_mhz: int
    mem_max_mhz: int
    power_limit_w: float
    shutdown_c: int
    slowdown_c: int
    mem_max_c: int
    gpu_max_c: int


class Ecc(TypedDict, total=False):
    uncorrected_volatile: int
    corrected_volatile: int
    uncorrected_aggregate: int
    unsupported: str
    error: str


class RemappedRows(TypedDict, total=False):
    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool
    unsupported: str
    error: str


class RetiredPages(TypedDict, total=False):
    multiple_single_bit: int
    double_bit: int
    pending: Optional[bool]
    unsupported: str
    error: str


class Health(TypedDict, total=False):
    """A GPU's health counters (tfgpucheck_nvml.Nvml.health), or {"error": why}."""

    ecc: Ecc
    remapped_rows: RemappedRows
    retired_pages: RetiredPages
    error: Optional[str]


class HealthVerdict(TypedDict, total=False):
    state: str  # "ok" | "needs_reset" | "failing" | "unknown"
    problems: list[str]
    notes: list[str]
    before: Optional[Health]  # a burn's: the counters before and after it
    after: Optional[Health]


class Process(TypedDict):
    pid: int
    used_mib: Optional[int]
    this_check: bool


class Processes(TypedDict, total=False):
    processes: list[Process]
    error: str


class GpuFacts(TypedDict, total=False):
    """NVML's view of one CUDA device's GPU (tfgpucheck_nvml.gpu_facts)."""

    cuda: Optional[int]
    nvidia_smi: Optional[int]
    error: str
    matched_by: str
    limits: Limits
    health: Health
    processes: list[Process]
    verdict: HealthVerdict


class NvmlFacts(TypedDict, total=False):
    gpus: list[GpuFacts]
    error: Optional[str]


class NvmlInventory(TypedDict, total=False):
    devices: list[NvmlDevice]
    error: Optional[str]


class ConvForward(TypedDict, total=False):
    """One cudnnConvolutionForward (tfgpucheck_cudnn.ConvCheck.forward)."""

    algo: str
    ok: bool
    status: str
    workspace: int
    code: int
    max_abs_error: float


class Offered(TypedDict):
    algo: Union[str, int]
    status: str


class DeviceEntry(TypedDict, total=False):
    """A CUDA device as a layer records it: the driver's facts (index ... uuid), the runtime's context
    (context, free/total), cuDNN's convolution (device ... offered), cuBLAS's SGEMM (device,
    max_abs_error, status)."""

    index: int
    name: str
    compute_capability: str
    compute_mode: str
    memory_mib: int
    pci: str
    uuid: str
    context: str
    free_mib: int
    total_mib: int
    device: int
    algorithms: list[ConvForward]
    tensor_op: Optional[ConvForward]
    failure: Optional[str]
    offered: list[Offered]
    max_abs_error: float
    status: str


class TfBuild(TypedDict, total=False):
    """tf.sysconfig.get_build_info()'s keys the check reads (values as TensorFlow gives them)."""

    is_cuda_build: Optional[bool]
    cuda_version: Optional[str]
    cudnn_version: Optional[str]
    cuda_compute_capabilities: Optional[list[str]]


class DlopenFailure(TypedDict, total=False):
    library: str
    dlerror: str
    harmless: bool


class CreatedDevice(TypedDict):
    device: str
    memory_mb: int
    name: str
    pci: str
    compute_capability: Optional[str]


class TfLogFacts(TypedDict):
    """What TensorFlow's own log says (tfgpucheck_tf.parse_tf_log)."""

    dlopen_failures: list[DlopenFailure]
    created_devices: list[CreatedDevice]
    notes: list[str]
    cudnn_loaded: Optional[int]


class TfLog(TypedDict, total=False):
    """The report's `tf_log`: where the log went, its tail, and what parse_tf_log read in it."""

    path: Optional[str]
    tail: list[str]
    dlopen_failures: list[DlopenFailure]
    created_devices: list[CreatedDevice]
    notes: list[str]
    cudnn_loaded: Optional[int]


class AllReduce(TypedDict, total=False):
    replicas: int
    expected: float
    max_error: Optional[float]
    ok: bool
    devices: list[str]
    error: str


class BenchRow(TypedDict, total=False):
    n: int
    cpu_gflops: float
    fp32_gflops: float
    tf32_gflops: float
    fp16_gflops: float
    bf16_gflops: float
    gpu_gflops: float
    gpu_math: str
    speedup: float


class Headline(TypedDict, total=False):
    gflops: float
    math: str
    why: str
    n: int


class MixedPrecisionAdvice(TypedDict, total=False):
    measured: bool
    why: str
    n: int
    dtype: str
    speedup_over_default: float
    default_math: str
    policy: str
    worth_it: bool
    advice: str


class Benchmark(TypedDict):
    device: str
    precision: str
    headline: Optional[Headline]
    mixed_precision: Optional[MixedPrecisionAdvice]
    tf32_setting_kept: Optional[bool]
    sizes: list[BenchRow]


Stats = dict[str, float]  # min, max, mean, steady, samples (tfgpucheck_health.stats)
# One NVML sample: reading name -> value (temp_c, sm_mhz, power_w, throttle: reason names or the raw
# bits as recorded, t: the burn's clock); a reading the GPU does not give is absent, never 0.
Sample = dict[str, Union[int, float, list[str], None]]


class MinMax(TypedDict):
    min: float
    max: float


class Telemetry(TypedDict, total=False):
    """One GPU's NVML samples under load (tfgpucheck_nvml.Telemetry.summary)."""

    source: Optional[str]
    samples: int
    under_load: int
    error: Optional[str]
    gpu: Optional[NvmlDevice]
    unsupported: list[str]
    failed_reads: int
    limits: Limits
    interval_s: float
    series: list[Sample]
    stats: dict[str, Stats]
    temp_c: MinMax
    mem_temp_c: MinMax
    sm_mhz: MinMax
    mem_mhz: MinMax
    power_w: MinMax
    util_pct: MinMax
    throttle_reasons: list[str]
    throttle_shares: dict[str, float]


class Heat(TypedDict, total=False):
    guide_c: int
    slowdown_c: Optional[int]
    max_c: Optional[float]
    steady_c: Optional[float]
    heat_throttle: list[str]
    mem_max_c: float
    mem_limit_c: Optional[int]
    verdict: str  # "cool" | "hot" | "slowing" | "unknown"
    text: str


class HostMismatch(TypedDict):
    row: int
    column: int
    gpu: Optional[float]
    host: float


class HostCheck(TypedDict, total=False):
    entries: int
    mismatches: int
    first: list[HostMismatch]


class WrongProduct(TypedDict, total=False):
    row: int
    column: int
    difference: float
    buffer: int
    sum_abs: float
    pass_no: int
    t: float


class BurnGpu(TypedDict):
    cuda: Optional[int]
    name: Optional[str]
    uuid: Optional[str]
    pci: Optional[str]


class BurnPlan(TypedDict, total=False):
    n: int
    buffers: int
    bytes_per_product: int
    free_bytes: int
    l2_bytes: Optional[int]
    share_of_free: float
    free_known: bool


class GflopsSeries(TypedDict):
    gflops: list[list[float]]


class Burn(TypedDict, total=False):
    """A burn: the SGEMM burn's per-GPU record (kind cublas-sgemm) or TensorFlow's (tensorflow-matmul)."""

    kind: str
    gpu: BurnGpu
    gpus_under_load: int
    seconds: float
    loop_seconds: float
    setup_seconds: float
    n: int
    products: int
    iterations: int
    checks: int
    mismatches: int
    max_abs_error: float
    wrong_products: list[WrongProduct]
    passes: int
    buffers: int
    working_set_bytes: int
    l2_bytes: Optional[int]
    free_bytes: int
    compared: str
    host_reference: HostCheck
    gflops: float
    host_share: float
    gpu_seconds: Optional[float]
    gpu_gflops: Optional[float]
    duty_cycle: Optional[float]
    duty_source: Optional[str]
    series: GflopsSeries
    telemetry: Telemetry
    throttled: list[str]
    heat: Heat
    load: list[str]
    health: HealthVerdict
    line: str


class Measured(TypedDict, total=False):
    """What a layer measured, by layer: hardware (gpus, device_nodes, wsl2, tegra); driver (libcuda,
    driver_cuda, devices, nvml); cuda-runtime (libcudart ... context); cudnn (libcudnn ... convolution);
    cublas (libcublas, m, n, k, devices, max_abs_error); tensorflow (tensorflow ... all_reduce);
    benchmark (burns, burn, concurrent, benchmark, tf_burn)."""

    gpus: Union[list[PciGpu], list[str]]  # the PCI bus's GPUs (hardware), TensorFlow's names (tensorflow)
    device_nodes: list[str]
    wsl2: bool
    tegra: str
    libcuda: str
    driver_cuda: str
    devices: list[DeviceEntry]
    nvml: NvmlFacts
    libcudart: str
    runtime_cuda: str
    device_count: int
    context: str
    libcudnn: str
    sublibraries: list[str]
    cudnn: str
    cudnn_cuda: str
    cudnn_max_device_sm: int
    forward_compatibility: list[str]
    nvrtc: Optional[str]
    handle: str
    convolution: str
    libcublas: str
    m: int
    n: int
    k: int
    max_abs_error: float
    tensorflow: str
    import_seconds: float
    build: TfBuild
    log: TfLogFacts
    matmul_device: str
    matmul_max_abs_error: float
    conv2d_device: str
    conv2d_max_abs_error: float
    tf32_restored_to: Optional[bool]
    created_devices: list[CreatedDevice]
    mirrored_replicas: int
    mirrored_error: str
    all_reduce: AllReduce
    burns: list[Burn]
    burn: Burn
    concurrent: bool
    benchmark: Benchmark
    tf_burn: Burn


class Outcome(TypedDict):
    """One layer's result (tfgpucheck_codes.outcome)."""

    status: str  # "pass" | "fail" | "skip"
    summary: str
    measured: Measured
    error: Optional[ErrorCode]
    hint: Optional[str]


class LayerEntry(Outcome, total=False):
    """A layer in the report: its number and name first, then its outcome, then how long it ran."""

    layer: int
    name: str
    seconds: float


# ---- the report's extras and the report ----------------------------------------------------------
class MixedPrecision(TypedDict, total=False):
    eligible: bool
    compute_capabilities: list[str]
    why: str
    measured: MixedPrecisionAdvice
    policy: Optional[str]


class DeviceMap(TypedDict):
    cuda: int
    nvidia_smi: Optional[int]
    pci: Optional[str]
    uuid: Optional[str]
    matched_by: Optional[str]
    name: str


class VisibleDevices(TypedDict, total=False):
    CUDA_VISIBLE_DEVICES: Optional[str]
    CUDA_DEVICE_ORDER: Optional[str]
    mapping: list[DeviceMap]
    nvml_error: str
    nvml_gpu_errors: list[str]
    note: str


class PtxJit(TypedDict):
    compute_capabilities: list[str]
    no_kernels: list[str]
    coverage: dict[str, str]
    build_archs: list[str]
    note: str


class Mirrored(TypedDict):
    replicas: int
    gpus: int
    sees_all: bool


class Extras(TypedDict, total=False):
    mixed_precision: MixedPrecision
    visible_devices: VisibleDevices
    ptx_jit: PtxJit
    mirrored_strategy: Mirrored


class FirstFailure(TypedDict):
    layer: Optional[int]
    name: Optional[str]
    summary: Optional[str]
    hint: Optional[str]
    error: Optional[ErrorCode]


class Report(TypedDict):
    """The one JSON document check.py prints."""

    format: int
    ok: bool
    mode: str
    gpu_verified: bool
    device: str
    python: str
    executable: str
    plan: dict[str, object]  # the plan as given (--plan-json), less the knowledge rows
    layers: list[LayerEntry]
    first_failure: Optional[FirstFailure]
    extras: Extras
    tf_log: TfLog
    elapsed_seconds: float


class TfGpu(TypedDict, total=False):
    name: str
    compute_capability: Optional[str]
    details_error: str


class State(TypedDict, total=False):
    """What the layers hand on to later ones within one run (never printed as such)."""

    plan: CheckPlan
    devices: list[DeviceEntry]  # the driver layer's CUDA devices
    driver_cuda: str
    nvml_facts: NvmlFacts
    read_health: Callable[[list[DeviceEntry]], NvmlFacts]
    nvml: NvmlInventory
    cudart: Any  # the loaded libcudart (ctypes.CDLL)
    cublas: Any  # the loaded libcublas
    runtime_version: int
    runtime_ok: bool
    cudnn_built_for: int
    tf: Any  # the tensorflow module
    tf_measured: Measured
    tf_gpus: list[TfGpu]
    bench_measured: Measured
