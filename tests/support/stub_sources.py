"""C sources of the stand-in CUDA libraries (built by tests/support/stublibs.py).

Strict the way the real libraries are, so the GPU check's mistakes show: device calls before
cuInit give CUDA_ERROR_NOT_INITIALIZED; CUDA_VISIBLE_DEVICES is applied as CUDA documents it
("" hides every GPU -> cuInit gives CUDA_ERROR_NO_DEVICE; indices, GPU-/MIG- UUID prefixes; the
list stops at the first entry that names no GPU); CUDA_DEVICE_ORDER=PCI_BUS_ID re-orders;
cudaMalloc'd pointers are tracked and cuBLAS refuses host pointers, unknown handles and leading
dimensions below the matrix's rows; error-name functions behave as their headers say
(cuGetErrorName writes through a `const char **` and returns CUDA_ERROR_INVALID_VALUE for an
unknown code; cudaGetErrorName returns "unrecognized error code").
"""

from __future__ import annotations

COMMON = r"""
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <signal.h>
#include <unistd.h>
#include <ctype.h>
static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return (v && *v) ? atoi(v) : dflt;
}
#define MAXDEV 16
typedef struct { char pci[32]; unsigned char uuid[16]; unsigned char mig_uuid[16]; int mig; int phys; } stub_dev;

/* The machine's GPUs in CUDA's default (fastest first) order: STUB_CU_DEVICES of them, bus ids
   from STUB_CU_PCI, UUIDs derived from the bus id (so a GPU keeps its UUID in any order). */
static int stub_all(stub_dev *out) {
    int n = env_int("STUB_CU_DEVICES", 1);
    if (n > MAXDEV) n = MAXDEV;
    const char *p = getenv("STUB_CU_PCI");
    if (p && !*p) p = NULL;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (p) {
            int k = 0;
            while (p[k] && p[k] != ',' && k < 31) { out[i].pci[k] = (char)toupper((unsigned char)p[k]); k++; }
            p = strchr(p, ',');
            if (p) p++;
        } else {
            snprintf(out[i].pci, sizeof out[i].pci, "0000:%02X:00.0", i + 1);
        }
        unsigned long h = 5381;
        for (const char *c = out[i].pci; *c; c++) h = h * 33 + (unsigned char)*c;
        for (int k = 0; k < 16; k++) {
            h ^= h << 13; h ^= h >> 7; h ^= h << 17;
            out[i].uuid[k] = (unsigned char)(h & 0xff);
            out[i].mig_uuid[k] = (unsigned char)((h >> 8) & 0xff);
        }
        out[i].mig = env_int("STUB_MIG", 0);
        out[i].phys = i;
    }
    return n;
}
static void fmt_uuid(const unsigned char *b, const char *prefix, char *out, size_t len) {
    snprintf(out, len, "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
static int by_pci(const void *a, const void *b) {
    return strcmp(((const stub_dev *)a)->pci, ((const stub_dev *)b)->pci);
}

/* What CUDA shows: CUDA_DEVICE_ORDER, then CUDA_VISIBLE_DEVICES (indices or UUID prefixes, stopping
   at the first entry that names no GPU). */
static int cu_visible(stub_dev *out) {
    stub_dev all[MAXDEV];
    int n = stub_all(all);
    const char *order = getenv("CUDA_DEVICE_ORDER");
    if (order && !strcmp(order, "PCI_BUS_ID")) qsort(all, n, sizeof all[0], by_pci);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) { memcpy(out, all, sizeof(stub_dev) * n); return n; }
    int m = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", cvd);
    for (char *tok = strtok(buf, ","); tok && m < MAXDEV; tok = strtok(NULL, ",")) {
        while (*tok == ' ') tok++;
        int found = -1, as_mig = 0;
        if (isdigit((unsigned char)*tok)) {
            int idx = atoi(tok);
            if (idx < n) found = idx;
        } else {
            for (int i = 0; i < n && found < 0; i++) {
                char g[64], mg[64];
                fmt_uuid(all[i].uuid, "GPU-", g, sizeof g);
                fmt_uuid(all[i].mig_uuid, "MIG-", mg, sizeof mg);
                if (strlen(tok) > 4 && !strncmp(g, tok, strlen(tok))) found = i;
                if (strlen(tok) > 4 && !strncmp(mg, tok, strlen(tok))) { found = i; as_mig = 1; }
            }
        }
        if (found < 0) break;
        out[m] = all[found];
        if (as_mig) out[m].mig = 1;
        m++;
    }
    return m;
}
"""

LIBCUDA = COMMON + r"""
static int inited = 0;
static stub_dev vis[MAXDEV];
static int nvis = 0;
int cuInit(unsigned int flags) {
    if (env_int("STUB_CU_INIT_CRASH", 0)) raise(SIGSEGV);  /* a driver that kills its caller */
    if (env_int("STUB_CU_INIT_HANG", 0)) sleep(3600);      /* a wedged driver */
    int rc = env_int("STUB_CU_INIT_ERROR", 0);
    if (rc) return rc;
    nvis = cu_visible(vis);
    if (nvis == 0) return 100; /* CUDA_ERROR_NO_DEVICE: CUDA_VISIBLE_DEVICES="" or no GPU */
    inited = 1;
    return 0;
}
int cuDriverGetVersion(int *v) {  /* works before cuInit, as the real one */
    if (!v) return 1;
    int rc = env_int("STUB_CU_DRIVER_VERSION_ERROR", 0);
    if (rc) return rc;
    *v = env_int("STUB_CU_DRIVER_VERSION", 12040);
    return 0;
}
static int check_dev(int dev) {
    if (!inited) return 3;                 /* CUDA_ERROR_NOT_INITIALIZED */
    if (dev < 0 || dev >= nvis) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    return 0;
}
int cuDeviceGetCount(int *n) {
    if (!inited) return 3;
    if (!n) return 1;
    *n = nvis;
    return 0;
}
int cuDeviceGet(int *dev, int ordinal) {
    if (!inited) return 3;
    if (!dev) return 1;
    if (ordinal < 0 || ordinal >= nvis) return 101;
    *dev = ordinal;
    return 0;
}
int cuDeviceGetName(char *name, int len, int dev) {
    int rc = check_dev(dev);
    if (rc) return rc;
    rc = env_int("STUB_CU_NAME_ERROR", 0);
    if (rc) return rc;
    if (!name || len <= 0) return 1;
    snprintf(name, len, "Stub GPU %d", dev);
    return 0;
}
int cuDeviceGetAttribute(int *value, int attrib, int dev) {
    int rc = check_dev(dev);
    if (rc) return rc;
    const char *cc = getenv("STUB_CU_CC");
    int maj = 8, min = 6;
    if (cc && *cc) sscanf(cc, "%d.%d", &maj, &min);
    if (attrib == 75) { *value = maj; return 0; }
    if (attrib == 76) { *value = min; return 0; }
    if (attrib == 20) { *value = env_int("STUB_CU_COMPUTE_MODE", 0); return 0; } /* COMPUTE_MODE */
    return 1;
}
int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    int rc = check_dev(dev);
    if (rc) return rc;
    *bytes = (size_t)8 << 30;
    return 0;
}
int cuDeviceGetPCIBusId(char *out, int len, int dev) {
    int rc = check_dev(dev);
    if (rc) return rc;
    if (!out || len < 13) return 1;
    snprintf(out, len, "%s", vis[dev].pci);
    return 0;
}
typedef struct { unsigned char bytes[16]; } CUuuid;
int cuDeviceGetUuid(CUuuid *u, int dev) {  /* the GPU's UUID, even for a MIG instance */
    int rc = check_dev(dev);
    if (rc) return rc;
    memcpy(u->bytes, vis[dev].uuid, 16);
    return 0;
}
int cuDeviceGetUuid_v2(CUuuid *u, int dev) {  /* a MIG instance's own UUID (CUDA 11.4+) */
    int rc = check_dev(dev);
    if (rc) return rc;
    memcpy(u->bytes, vis[dev].mig ? vis[dev].mig_uuid : vis[dev].uuid, 16);
    return 0;
}
static const struct { int code; const char *name; const char *text; } CU_ERRORS[] = {
    {0, "CUDA_SUCCESS", "no error"}, {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {805, "CUDA_ERROR_MPS_CONNECTION_FAILED",
     "MPS client failed to connect to the MPS control daemon or the MPS server"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};
static int cu_lookup(int code, const char **out, int text) {
    if (!out) return 1;
    for (size_t i = 0; i < sizeof CU_ERRORS / sizeof CU_ERRORS[0]; i++)
        if (CU_ERRORS[i].code == code) { *out = text ? CU_ERRORS[i].text : CU_ERRORS[i].name; return 0; }
    *out = NULL;
    return 1; /* CUDA_ERROR_INVALID_VALUE: not a CUresult */
}
int cuGetErrorName(int code, const char **out) { return cu_lookup(code, out, 0); }
int cuGetErrorString(int code, const char **out) { return cu_lookup(code, out, 1); }
"""

LIBCUDART = COMMON + r"""
#include <pthread.h>
#include <time.h>
#ifndef CUDART_DEFAULT
#define CUDART_DEFAULT 12030
#endif
/* The calling thread's device (cudaSetDevice is per host thread, as in the real runtime); the stub
   cuBLAS and cuDNN read it through stub_current_device to bind a handle to its device. */
static __thread int cur_dev = 0;
int stub_current_device(void) { return cur_dev; }
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int cudaRuntimeGetVersion(int *v) { if (!v) return 1; *v = env_int("STUB_CUDART_VERSION", CUDART_DEFAULT); return 0; }
int cudaGetDeviceCount(int *n) {
    int rc = env_int("STUB_CUDART_COUNT_ERROR", 0);
    if (rc) return rc;
    stub_dev vis[MAXDEV];
    int m = cu_visible(vis);
    if (m == 0) return 100; /* cudaErrorNoDevice */
    *n = m;
    return 0;
}
int cudaSetDevice(int dev) {
    stub_dev vis[MAXDEV];
    if (dev < 0 || dev >= cu_visible(vis)) return 101;
    cur_dev = dev;
    return 0;
}
int cudaGetDevice(int *dev) { if (!dev) return 1; *dev = cur_dev; return 0; }
/* The device runs what is queued on it after what was queued before, while the host goes on, as a real
   GPU does: busy_until is when its queue drains (ms, CLOCK_MONOTONIC). Kernels queue their known time
   (stub_enqueue, from the stub cuBLAS); events record when the queue reaches them; a synchronous copy,
   an event wait or cudaDeviceSynchronize sleep until then. So a host that is late to queue the next
   piece of work leaves the device idle, and one that queued ahead does not. */
static double busy_until[MAXDEV];
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static void sleep_until(double ms) {
    if (ms <= now_ms()) return;
    struct timespec ts = {(time_t)(ms / 1e3), (long)((ms - (double)(long long)(ms / 1e3) * 1e3) * 1e6)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {}
}
void stub_enqueue(int dev, long us) {
    pthread_mutex_lock(&lock);
    double start = now_ms() > busy_until[dev] ? now_ms() : busy_until[dev];
    busy_until[dev] = start + us / 1e3;
    pthread_mutex_unlock(&lock);
}
void stub_wait_device(int dev) { sleep_until(busy_until[dev]); }
int cudaDeviceSynchronize(void) { stub_wait_device(cur_dev); return 0; }
/* STUB_CUDART_CTX_ERROR=D:RC: making a context on device D fails with RC (804 a compat libcuda on an
   unsupported GPU, 999 a GPU that fell off the bus); every other device works. */
static int ctx_error(int dev) {
    const char *e = getenv("STUB_CUDART_CTX_ERROR");
    if (!e || !*e || !strchr(e, ':')) return 0;
    return atoi(e) == dev ? atoi(strchr(e, ':') + 1) : 0;
}
int cudaDeviceGetAttribute(int *value, int attr, int dev) {
    stub_dev vis[MAXDEV];
    if (!value) return 1;
    if (dev < 0 || dev >= cu_visible(vis)) return 101;
    const char *cc = getenv("STUB_CU_CC");
    int maj = 8, min = 6;
    if (cc && *cc) sscanf(cc, "%d.%d", &maj, &min);
    switch (attr) {
    case 16: *value = 132; return 0;                                          /* multiprocessors */
    case 75: *value = maj; return 0;
    case 76: *value = min; return 0;
    case 89: *value = env_int("STUB_CU_L2_MIB", 6) << 20; return 0;           /* L2 cache bytes */
    default: return 1;
    }
}
/* Events record when the device's queue reaches them (now, when it is idle). */
static double events[1024];
static int nevents = 0;
int cudaEventCreate(void **e) {
    if (!e) return 1;
    int i = __sync_fetch_and_add(&nevents, 1);
    if (i >= 1024) return 2;
    *e = &events[i];
    return 0;
}
static int is_event(void *e) { return e >= (void *)events && e < (void *)(events + 1024); }
int cudaEventDestroy(void *e) { return is_event(e) ? 0 : 400; }
int cudaEventRecord(void *e, void *stream) {
    if (!is_event(e)) return 400; /* cudaErrorInvalidResourceHandle */
    double now = now_ms();
    *(double *)e = busy_until[cur_dev] > now ? busy_until[cur_dev] : now;
    return 0;
}
int cudaEventSynchronize(void *e) {
    if (!is_event(e)) return 400;
    sleep_until(*(double *)e);
    return 0;
}
int cudaEventElapsedTime(float *ms, void *a, void *b) {
    if (!ms || !is_event(a) || !is_event(b)) return 1;
    *ms = (float)(*(double *)b - *(double *)a);
    return 0;
}
/* "Device" memory is host memory the stub tracks, per device: the stub cuBLAS and cuDNN compute on
   the CPU, and refuse any pointer that did not come from cudaMalloc on their own device, as a real
   GPU would fault on it. Free memory starts at STUB_CU_FREE_MIB (default 64; the rest of the card is
   another process's) and shrinks with every allocation. */
#define MAXALLOC 1024
static struct { char *p; size_t size; unsigned long gen; int dev; } allocs[MAXALLOC];
static unsigned long next_gen = 1;
static size_t in_use[MAXDEV];
/* A write generation per allocation (bumped by every write into it): the stub cuBLAS reuses a
   product whose inputs were not written since it computed it. */
unsigned long stub_gen(const void *ptr) {
    const char *c = (const char *)ptr;
    unsigned long g = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAXALLOC; i++)
        if (allocs[i].p && c >= allocs[i].p && c < allocs[i].p + allocs[i].size) { g = allocs[i].gen; break; }
    pthread_mutex_unlock(&lock);
    return g;
}
void stub_touch(const void *ptr) {
    const char *c = (const char *)ptr;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAXALLOC; i++)
        if (allocs[i].p && c >= allocs[i].p && c < allocs[i].p + allocs[i].size) allocs[i].gen = next_gen++;
    pthread_mutex_unlock(&lock);
}
/* 1 + the device a whole range [ptr, ptr+bytes) was allocated on; 0 for anything else. */
int stub_is_device(const void *ptr, size_t bytes) {
    const char *c = (const char *)ptr;
    int dev = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAXALLOC; i++)
        if (allocs[i].p && c >= allocs[i].p && c + bytes <= allocs[i].p + allocs[i].size) {
            dev = allocs[i].dev + 1;
            break;
        }
    pthread_mutex_unlock(&lock);
    return dev;
}
static size_t free_bytes(int dev) {
    size_t start = (size_t)env_int("STUB_CU_FREE_MIB", 64) << 20;
    return in_use[dev] >= start ? 0 : start - in_use[dev];
}
int cudaMemGetInfo(size_t *freeb, size_t *total) {
    stub_dev vis[MAXDEV];
    if (!freeb || !total) return 1;
    if (cu_visible(vis) == 0) return 100;
    *total = (size_t)8 << 30;
    *freeb = free_bytes(cur_dev);
    return 0;
}
int cudaMalloc(void **p, size_t size) {
    if (!p) return 1;
    stub_dev vis[MAXDEV];
    if (cu_visible(vis) == 0) return 100;
    if (size > free_bytes(cur_dev)) return 2; /* cudaErrorMemoryAllocation */
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAXALLOC; i++)
        if (!allocs[i].p) {
            allocs[i].p = malloc(size ? size : 1);
            if (!allocs[i].p) { pthread_mutex_unlock(&lock); return 2; }
            allocs[i].size = size;
            allocs[i].gen = next_gen++;
            allocs[i].dev = cur_dev;
            in_use[cur_dev] += size;
            *p = allocs[i].p;
            pthread_mutex_unlock(&lock);
            return 0;
        }
    pthread_mutex_unlock(&lock);
    return 2;
}
int cudaFree(void *p) {
    if (!p) { /* cudaFree(0): the usual way to make the primary context */
        stub_dev vis[MAXDEV];
        if (cu_visible(vis) == 0) return 100;
        if (env_int("STUB_CU_EXCLUSIVE_BUSY", 0)) return 46; /* cudaErrorDevicesUnavailable */
        return ctx_error(cur_dev);
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAXALLOC; i++)
        if (allocs[i].p == p) {
            in_use[allocs[i].dev] -= allocs[i].size;
            free(p);
            allocs[i].p = NULL;
            pthread_mutex_unlock(&lock);
            return 0;
        }
    pthread_mutex_unlock(&lock);
    return 1; /* cudaErrorInvalidValue: not a device pointer */
}
int cudaMemset(void *p, int value, size_t count) {
    if (!stub_is_device(p, count)) return 1;
    memset(p, value, count);
    stub_touch(p);
    return 0;
}
int cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    stub_wait_device(cur_dev); /* synchronous: after everything queued before it */
    int dd = stub_is_device(dst, count) != 0, sd = stub_is_device(src, count) != 0;
    if (kind == 4) kind = sd ? (dd ? 3 : 2) : (dd ? 1 : 0); /* cudaMemcpyDefault */
    int ok = (kind == 0 && !dd && !sd) || (kind == 1 && dd && !sd)
          || (kind == 2 && !dd && sd) || (kind == 3 && dd && sd);
    if (kind < 0 || kind > 4) return 21; /* cudaErrorInvalidMemcpyDirection */
    if (!ok) return 1;
    memcpy(dst, src, count);
    if (dd) stub_touch(dst);
    return 0;
}
static const struct { int code; const char *name; } RT_ERRORS[] = {
    {0, "cudaSuccess"}, {1, "cudaErrorInvalidValue"}, {2, "cudaErrorMemoryAllocation"},
    {35, "cudaErrorInsufficientDriver"}, {36, "cudaErrorCallRequiresNewerDriver"}, {46, "cudaErrorDevicesUnavailable"},
    {100, "cudaErrorNoDevice"}, {101, "cudaErrorInvalidDevice"}, {209, "cudaErrorNoKernelImageForDevice"},
    {218, "cudaErrorInvalidPtx"}, {222, "cudaErrorUnsupportedPtxVersion"}, {304, "cudaErrorOperatingSystem"},
    {800, "cudaErrorNotPermitted"}, {801, "cudaErrorNotSupported"}, {804, "cudaErrorCompatNotSupportedOnDevice"},
    {805, "cudaErrorMpsConnectionFailed"}, {999, "cudaErrorUnknown"},
};
const char *cudaGetErrorName(int code) {
    for (size_t i = 0; i < sizeof RT_ERRORS / sizeof RT_ERRORS[0]; i++)
        if (RT_ERRORS[i].code == code) return RT_ERRORS[i].name;
    return "unrecognized error code";
}
const char *cudaGetErrorString(int code) { return cudaGetErrorName(code); }
"""

# What the stub cuBLAS and cuDNN share: the calling thread's device and the device of a pointer,
# read from the stub cudart (loaded first, RTLD_GLOBAL, as the real libraries are).
DEVICE_SIDE = r"""
#include <dlfcn.h>
static int current_device(void) {
    int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "stub_current_device");
    return f ? f() : 0;
}
/* 1 + the device a range was allocated on (0: not device memory). */
static int device_of(const void *p, size_t bytes) {
    int (*is_dev)(const void *, size_t) = (int (*)(const void *, size_t))dlsym(RTLD_DEFAULT, "stub_is_device");
    return is_dev ? is_dev(p, bytes) : 0;
}
static unsigned long gen_of(const void *p) {
    unsigned long (*g)(const void *) = (unsigned long (*)(const void *))dlsym(RTLD_DEFAULT, "stub_gen");
    return g ? g(p) : 0;
}
static void touch(const void *p) {
    void (*t)(const void *) = (void (*)(const void *))dlsym(RTLD_DEFAULT, "stub_touch");
    if (t) t(p);
}
/* STUB_<WHAT>_DEVICE=D: a fault injected only on device D (default: every device). */
static int on_faulty_device(const char *var, int dev) {
    const char *v = getenv(var);
    return !v || !*v || atoi(v) == dev;
}
"""

LIBCUDNN = "#define _GNU_SOURCE\n" + COMMON + DEVICE_SIDE + r"""
#include <math.h>
#include <pthread.h>
#ifndef CUDNN_DEFAULT
#define CUDNN_DEFAULT 8907
#endif
/* The CUDA runtime this cuDNN was built for: fixed at build time, as in the real library. */
#ifndef CUDNN_CUDART
#define CUDNN_CUDART 12030
#endif
/* The highest SM this cuDNN has native kernels for (cuDNN 9.x: cudnnGetMaxDeviceVersion). */
#ifndef CUDNN_MAX_SM
#define CUDNN_MAX_SM 900
#endif
#if CUDNN_DEFAULT >= 90000
/* cuDNN 9's libcudnn.so.9 is a shim: its first call loads libcudnn_graph.so.9 from its own
   directory and aborts the process when that fails, as the real one does. */
static void need_graph_named(const char *fn);
#define need_graph() need_graph_named(__func__)
static void need_graph_named(const char *fn) {
    static int done = 0;
    if (done) return;
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)need_graph_named, &info) || !info.dli_fname) abort();
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    if (slash) slash[1] = 0; else path[0] = 0;
    strncat(path, "libcudnn_graph.so.9", sizeof path - strlen(path) - 1);
    if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "Invalid handle. Cannot load symbol %s\n", fn); /* the real shim's words */
        abort();
    }
    done = 1;
}
#define ST_NOT_INITIALIZED 1001
#define ST_BAD_PARAM 2000
#define ST_NOT_SUPPORTED 3000
#define ST_ARCH_MISMATCH 3007
#define ST_INTERNAL 4000
#define ST_EXEC_FAILED 5000
#define ST_DRIVER 5003
size_t cudnnGetMaxDeviceVersion(void) { need_graph(); return CUDNN_MAX_SM; }
#else
#define need_graph() ((void)0)
#define ST_NOT_INITIALIZED 1
#define ST_BAD_PARAM 3
#define ST_NOT_SUPPORTED 9
#define ST_ARCH_MISMATCH 6
#define ST_INTERNAL 4
#define ST_EXEC_FAILED 8
#define ST_DRIVER 8
#endif
static int version(void) { return env_int("STUB_CUDNN_VERSION", CUDNN_DEFAULT); }
size_t cudnnGetVersion(void) { need_graph(); return (size_t)version(); }
size_t cudnnGetCudartVersion(void) { need_graph(); return (size_t)CUDNN_CUDART; }
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { int used; int dev; } handles[64];
static int handle_dev(void *h) {  /* the device a live handle was made on, -1 for anything else */
    for (int i = 0; i < 64; i++) if (h == &handles[i] && handles[i].used) return handles[i].dev;
    return -1;
}
int cudnnCreate(void **h) {
    need_graph();
    if (!h) return ST_BAD_PARAM;
    int rc = env_int("STUB_CUDNN_CREATE_ERROR", 0);
    if (rc) return rc;
    stub_dev vis[MAXDEV];
    if (cu_visible(vis) == 0) return ST_NOT_INITIALIZED; /* no GPU */
    if (env_int("STUB_CU_EXCLUSIVE_BUSY", 0)) return ST_DRIVER; /* its context could not be made */
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 64; i++)
        if (!handles[i].used) {
            handles[i].used = 1;
            handles[i].dev = current_device();
            *h = &handles[i];
            pthread_mutex_unlock(&lock);
            return 0;
        }
    pthread_mutex_unlock(&lock);
    return ST_INTERNAL;
}
int cudnnDestroy(void *h) {
    for (int i = 0; i < 64; i++) if (h == &handles[i] && handles[i].used) { handles[i].used = 0; return 0; }
    return ST_BAD_PARAM;
}
/* ---- the legacy convolution API (cuDNN 8, and cuDNN 9's shim): the descriptor calls answer as the
   real cuDNN 9.28 does without a GPU (tests/verify/test_check_real_cuda13_wheels.py holds them to it). */
enum { K_TENSOR = 1, K_FILTER = 2, K_CONV = 3 };
typedef struct { int kind, set, fmt, dtype, n, c, h, w, pad_h, pad_w, u, v, dil_h, dil_w, mode, math; } desc_t;
static desc_t descs[256];
static int new_desc(void **d, int kind) {
    need_graph();
    if (!d) return ST_BAD_PARAM;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 256; i++)
        if (!descs[i].kind) {
            memset(&descs[i], 0, sizeof descs[i]);
            descs[i].kind = kind;
            *d = &descs[i];
            pthread_mutex_unlock(&lock);
            return 0;
        }
    pthread_mutex_unlock(&lock);
    return ST_INTERNAL;
}
static desc_t *as_desc(void *d, int kind) {
    if ((desc_t *)d < descs || (desc_t *)d >= descs + 256) return NULL;
    desc_t *x = (desc_t *)d;
    return x->kind == kind ? x : NULL;
}
static int drop_desc(void *d, int kind) {
    desc_t *x = as_desc(d, kind);
    if (!x) return ST_BAD_PARAM;
    x->kind = 0;
    return 0;
}
int cudnnCreateTensorDescriptor(void **d) { return new_desc(d, K_TENSOR); }
int cudnnCreateFilterDescriptor(void **d) { return new_desc(d, K_FILTER); }
int cudnnCreateConvolutionDescriptor(void **d) { return new_desc(d, K_CONV); }
int cudnnDestroyTensorDescriptor(void *d) { return drop_desc(d, K_TENSOR); }
int cudnnDestroyFilterDescriptor(void *d) { return drop_desc(d, K_FILTER); }
int cudnnDestroyConvolutionDescriptor(void *d) { return drop_desc(d, K_CONV); }
/* formats: 0 NCHW, 1 NHWC, 2 NCHW_VECT_C; data types: 0 float ... 14 (fp8 and friends). */
static int dims4(desc_t *x, int fmt, int dtype, int n, int c, int h, int w) {
    if (!x || fmt < 0 || fmt > 2 || dtype < 0 || dtype > 14 || n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return ST_BAD_PARAM;
    x->fmt = fmt; x->dtype = dtype; x->n = n; x->c = c; x->h = h; x->w = w; x->set = 1;
    return 0;
}
int cudnnSetTensor4dDescriptor(void *d, int fmt, int dtype, int n, int c, int h, int w) {
    need_graph();
    return dims4(as_desc(d, K_TENSOR), fmt, dtype, n, c, h, w);
}
int cudnnSetFilter4dDescriptor(void *d, int dtype, int fmt, int k, int c, int h, int w) {
    need_graph();
    return dims4(as_desc(d, K_FILTER), fmt, dtype, k, c, h, w);
}
int cudnnSetConvolution2dDescriptor(void *d, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w, int mode,
                                    int compute) {
    need_graph();
    desc_t *x = as_desc(d, K_CONV);
    if (!x || pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dil_h <= 0 || dil_w <= 0 || mode < 0 || mode > 1 ||
        compute < 0 || compute > 14) return ST_BAD_PARAM;
    x->pad_h = pad_h; x->pad_w = pad_w; x->u = u; x->v = v; x->dil_h = dil_h; x->dil_w = dil_w; x->mode = mode;
    x->set = 1;
    return 0;
}
int cudnnSetConvolutionMathType(void *d, int math) {
    need_graph();
    desc_t *x = as_desc(d, K_CONV);
    if (!x || math < 0 || math > 3) return ST_BAD_PARAM;
    x->math = math;
    return 0;
}
static int out_dims(desc_t *cv, desc_t *x, desc_t *f, int *n, int *c, int *h, int *w) {
    if (!cv || !x || !f || !cv->set || !x->set || !f->set || x->c != f->c) return ST_BAD_PARAM;
    int oh = (x->h + 2 * cv->pad_h - ((f->h - 1) * cv->dil_h + 1)) / cv->u + 1;
    int ow = (x->w + 2 * cv->pad_w - ((f->w - 1) * cv->dil_w + 1)) / cv->v + 1;
    if (oh <= 0 || ow <= 0) return ST_BAD_PARAM;
    *n = x->n; *c = f->n; *h = oh; *w = ow;
    return 0;
}
int cudnnGetConvolution2dForwardOutputDim(void *conv, void *x, void *f, int *n, int *c, int *h, int *w) {
    need_graph();
    if (!n || !c || !h || !w) return ST_BAD_PARAM;
    *n = *c = *h = *w = 0; /* the real library leaves zeros when it refuses */
    return out_dims(as_desc(conv, K_CONV), as_desc(x, K_TENSOR), as_desc(f, K_FILTER), n, c, h, w);
}
int cudnnGetConvolutionForwardAlgorithmMaxCount(void *h, int *count) {
    need_graph();
    if (handle_dev(h) < 0 || !count) return ST_BAD_PARAM;
    *count = 8;
    return 0;
}
/* cc < 7.5 under cuDNN >= 9.11 has no kernels (NVIDIA dropped Maxwell, Pascal and Volta); STUB_CUDNN_NO_ENGINE=1:
   this cuDNN offers no engine for the GPU at all. */
static int arch_dropped(void) {
    const char *cc = getenv("STUB_CU_CC");
    int maj = 8, min = 6;
    if (cc && *cc) sscanf(cc, "%d.%d", &maj, &min);
    return version() >= 91100 && (maj * 10 + min) < 75;
}
typedef struct { int algo; int status; float time; size_t memory; int determinism; int math; int reserved[3]; } perf_t;
/* STUB_CUDNN_ALGOS=0,1,6: the algorithms this "GPU" supports for the problem (default 0,1,2,6: the
   implicit GEMMs, explicit GEMM and Winograd); the rest are offered with NOT_SUPPORTED, as the heuristics do. */
static int supported(int algo) {
    const char *a = getenv("STUB_CUDNN_ALGOS");
    if (!a || !*a) return algo == 0 || algo == 1 || algo == 2 || algo == 6;
    for (const char *p = a; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (atoi(p) == algo) return 1;
    return 0;
}
int cudnnGetConvolutionForwardAlgorithm_v7(void *h, void *x, void *f, void *conv, void *y, int requested,
                                           int *returned, perf_t *perf) {
    need_graph();
    int n, c, oh, ow;
    if (handle_dev(h) < 0 || !returned || !perf || requested <= 0) return ST_BAD_PARAM;
    if (out_dims(as_desc(conv, K_CONV), as_desc(x, K_TENSOR), as_desc(f, K_FILTER), &n, &c, &oh, &ow))
        return ST_BAD_PARAM;
    desc_t *yd = as_desc(y, K_TENSOR);
    if (!yd || yd->n != n || yd->c != c || yd->h != oh || yd->w != ow) return ST_BAD_PARAM;
    int m = 0;
    for (int pass = 0; pass < 2; pass++)  /* supported ones first, as the heuristics order them */
        for (int a = 0; a < 8 && m < requested; a++) {
            int ok = supported(a) && !arch_dropped() && !env_int("STUB_CUDNN_NO_ENGINE", 0);
            if (ok != (pass == 0)) continue;
            memset(&perf[m], 0, sizeof perf[m]);
            perf[m].algo = a;
            perf[m].status = ok ? 0 : (arch_dropped() ? ST_ARCH_MISMATCH : ST_NOT_SUPPORTED);
            perf[m].time = -1.0f;
            perf[m].memory = (a == 0) ? 0 : 4096;
            perf[m].math = as_desc(conv, K_CONV)->math;
            m++;
        }
    *returned = m;
    return 0;
}
int cudnnGetConvolutionForwardWorkspaceSize(void *h, void *x, void *f, void *conv, void *y, int algo, size_t *size) {
    need_graph();
    if (handle_dev(h) < 0 || !size || algo < 0 || algo > 7) return ST_BAD_PARAM;
    if (!supported(algo)) return ST_NOT_SUPPORTED;
    *size = (algo == 0) ? 0 : 4096;
    return 0;
}
/* The convolution on the CPU, NCHW, cross-correlation (mode 1) or convolution (mode 0, flipped filter).
   Faults, as the real failures look:
   STUB_CUDNN_CONV_ERROR=ALGO:STATUS   that algorithm returns STATUS (5000 EXECUTION_FAILED, 3000 ...)
   STUB_CUDNN_CONV_WRONG=ALGO          that algorithm returns a wrong element
   (both only on STUB_CUDNN_FAULT_DEVICE when set). */
int cudnnConvolutionForward(void *h, const void *alpha, void *xd, const float *x, void *fd, const float *w, void *cd,
                            int algo, void *ws, size_t ws_size, const void *beta, void *yd, float *y) {
    need_graph();
    int dev = handle_dev(h);
    desc_t *X = as_desc(xd, K_TENSOR), *F = as_desc(fd, K_FILTER), *C = as_desc(cd, K_CONV), *Y = as_desc(yd, K_TENSOR);
    int n, c, oh, ow;
    if (dev < 0 || !alpha || !beta || !X || !F || !C || !Y || algo < 0 || algo > 7) return ST_BAD_PARAM;
    if (out_dims(C, X, F, &n, &c, &oh, &ow) || Y->n != n || Y->c != c || Y->h != oh || Y->w != ow) return ST_BAD_PARAM;
    if (X->dtype != 0 || F->dtype != 0 || Y->dtype != 0 || X->fmt != 0 || Y->fmt != 0 || F->fmt != 0)
        return ST_NOT_SUPPORTED; /* this stub computes float NCHW only */
    size_t xb = sizeof(float) * X->n * X->c * X->h * X->w, fb = sizeof(float) * F->n * F->c * F->h * F->w;
    size_t yb = sizeof(float) * n * c * oh * ow;
    if (device_of(x, xb) != dev + 1 || device_of(w, fb) != dev + 1 || device_of(y, yb) != dev + 1)
        return ST_DRIVER; /* the kernel faulted on memory of another device, or on a host pointer */
    size_t need = (algo == 0) ? 0 : 4096;
    if (ws_size < need || (need && device_of(ws, need) != dev + 1)) return ST_BAD_PARAM;
    if (!supported(algo) || arch_dropped() || env_int("STUB_CUDNN_NO_ENGINE", 0)) return ST_NOT_SUPPORTED;
    const char *e = getenv("STUB_CUDNN_CONV_ERROR");
    if (e && *e && strchr(e, ':') && atoi(e) == algo && on_faulty_device("STUB_CUDNN_FAULT_DEVICE", dev))
        return atoi(strchr(e, ':') + 1);
    float a = *(const float *)alpha, b = *(const float *)beta;
    for (int in = 0; in < n; in++)
        for (int k = 0; k < c; k++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    double s = 0.0;
                    for (int ch = 0; ch < F->c; ch++)
                        for (int r = 0; r < F->h; r++)
                            for (int q = 0; q < F->w; q++) {
                                int ii = i * C->u - C->pad_h + r * C->dil_h, jj = j * C->v - C->pad_w + q * C->dil_w;
                                if (ii < 0 || jj < 0 || ii >= X->h || jj >= X->w) continue;
                                int rr = C->mode == 0 ? F->h - 1 - r : r, qq = C->mode == 0 ? F->w - 1 - q : q;
                                s += (double)x[((in * X->c + ch) * X->h + ii) * X->w + jj] *
                                     w[((k * F->c + ch) * F->h + rr) * F->w + qq];
                            }
                    float *out = &y[((in * c + k) * oh + i) * ow + j];
                    *out = a * (float)s + (b != 0.0f ? b * *out : 0.0f);
                }
    const char *wrong = getenv("STUB_CUDNN_CONV_WRONG");
    if (wrong && *wrong && atoi(wrong) == algo && on_faulty_device("STUB_CUDNN_FAULT_DEVICE", dev)) y[5] += 3.0f;
    touch(y);
    return 0;
}
const char *cudnnGetErrorString(int status) {
    switch (status) {
    case 0: return "CUDNN_STATUS_SUCCESS";
#if CUDNN_DEFAULT >= 90000
    case 1001: return "CUDNN_STATUS_NOT_INITIALIZED";
    case 1008: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case 2000: return "CUDNN_STATUS_BAD_PARAM";
    case 3000: return "CUDNN_STATUS_NOT_SUPPORTED";
    case 3007: return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case 3008: return "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING";
    case 4000: return "CUDNN_STATUS_INTERNAL_ERROR";
    case 5000: return "CUDNN_STATUS_EXECUTION_FAILED";
    case 5003: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
#else
    case 1: return "CUDNN_STATUS_NOT_INITIALIZED";
    case 2: return "CUDNN_STATUS_ALLOC_FAILED";
    case 3: return "CUDNN_STATUS_BAD_PARAM";
    case 4: return "CUDNN_STATUS_INTERNAL_ERROR";
    case 6: return "CUDNN_STATUS_ARCH_MISMATCH";
    case 8: return "CUDNN_STATUS_EXECUTION_FAILED";
    case 9: return "CUDNN_STATUS_NOT_SUPPORTED";
#endif
    default: return "CUDNN_UNKNOWN_STATUS";
    }
}
"""

# cuDNN 9's sub-libraries, loaded by libcudnn.so.9 at run time; each stub exports one symbol.
CUDNN_SUB = r"""
int stub_cudnn_sublibrary(void) { return 9; }
"""

LIBCUBLAS = "#define _GNU_SOURCE\n" + COMMON + DEVICE_SIDE + r"""
#include <math.h>
#include <time.h>
#include <pthread.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { int used; int dev; int mode; } handles[64];
static int hdev(void *h) {  /* the device of a live handle, -1 for anything else */
    for (int i = 0; i < 64; i++) if (h == &handles[i] && handles[i].used) return handles[i].dev;
    return -1;
}
static int hmode(void *h) {
    for (int i = 0; i < 64; i++) if (h == &handles[i]) return handles[i].mode;
    return 0;
}
int cublasCreate_v2(void **handle) {
    if (!handle) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    int rc = env_int("STUB_CUBLAS_CREATE_ERROR", 0);
    if (rc) return rc;
    stub_dev vis[MAXDEV];
    if (cu_visible(vis) == 0) return 1; /* CUBLAS_STATUS_NOT_INITIALIZED: no GPU */
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 64; i++)
        if (!handles[i].used) {
            handles[i].used = 1;
            handles[i].dev = current_device();
            handles[i].mode = 0;
            *handle = &handles[i];
            pthread_mutex_unlock(&lock);
            return 0;
        }
    pthread_mutex_unlock(&lock);
    return 3;
}
int cublasDestroy_v2(void *handle) {
    for (int i = 0; i < 64; i++) if (handle == &handles[i] && handles[i].used) { handles[i].used = 0; return 0; }
    return 1;
}
int cublasSetPointerMode_v2(void *handle, int mode) {
    if (hdev(handle) < 0) return 1;
    if (mode != 0 && mode != 1) return 7;
    for (int i = 0; i < 64; i++) if (handle == &handles[i]) handles[i].mode = mode;
    return 0;
}
int cublasGetPointerMode_v2(void *handle, int *mode) {
    if (hdev(handle) < 0 || !mode) return hdev(handle) < 0 ? 1 : 7;
    *mode = hmode(handle);
    return 0;
}
/* A scalar argument: in host pointer mode a host address, in device mode an address on the handle's
   device (anything else faults on a real GPU: CUBLAS_STATUS_EXECUTION_FAILED here). */
static int scalar_in(void *h, const float *p, float *out) {
    if (!p) return 7;
    int on = device_of(p, sizeof(float));
    if (hmode(h) == 1 ? on != hdev(h) + 1 : on != 0) return 13;
    *out = *p;
    return 0;
}
static int scalar_out(void *h, void *p, size_t bytes) {
    if (!p) return 7;
    int on = device_of(p, bytes);
    return (hmode(h) == 1 ? on != hdev(h) + 1 : on != 0) ? 13 : 0;
}
static int mine(void *h, const void *p, size_t bytes) { return device_of(p, bytes) == hdev(h) + 1; }
/* STUB_CUBLAS_SGEMM_US=N: every product takes N microseconds more (a GPU's known kernel time). A
   product whose inputs were not written since it was computed is copied from the last one (the
   result is the same), so a long burn costs only its known time. Per thread, as each GPU's burn
   runs in a thread of its own. */
static __thread struct { const void *a, *b; unsigned long ga, gb; int m, n, k, lda, ldb; float *p; size_t cap; } memo;
static long products[MAXDEV];
/* Faults: STUB_CUBLAS_WRONG=1 every product is wrong; STUB_CUBLAS_WRONG_AT=N only the Nth product
   computed on the device (a transient fault mid-batch); STUB_CUBLAS_WRONG_FROM=N the Nth and every later
   one, the same way (a GPU that goes bad once warm); all on STUB_CUBLAS_WRONG_DEVICE only, when set. */
static int wrong_now(int dev) {
    long nth = __sync_add_and_fetch(&products[dev], 1);
    if (!on_faulty_device("STUB_CUBLAS_WRONG_DEVICE", dev)) return 0;
    if (env_int("STUB_CUBLAS_WRONG", 0)) return 1;
    long at = env_int("STUB_CUBLAS_WRONG_AT", 0), from = env_int("STUB_CUBLAS_WRONG_FROM", 0);
    return (at > 0 && nth == at) || (from > 0 && nth >= from);
}
/* Column-major C = alpha*A*B + beta*C, no transposes (all the check asks for). */
/* The known kernel time of `products` products, queued on the handle's device (the call returns at
   once, as a real launch does; a synchronous copy or an event wait waits for it). */
static void gpu_time(void *h, long products) {
    long us = (long)env_int("STUB_CUBLAS_SGEMM_US", 0) * products;
    void (*enqueue)(int, long) = (void (*)(int, long))dlsym(RTLD_DEFAULT, "stub_enqueue");
    if (us <= 0) return;
    if (enqueue) {
        enqueue(hdev(h), us);
    } else {
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
}
/* A result returned to the host (pointer mode host) waits for the device, as a real one does. */
static void host_result(void *h) {
    void (*wait)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "stub_wait_device");
    if (wait && hmode(h) == 0) wait(hdev(h));
}
static int gemm_one(void *h, int m, int n, int k, float alpha, const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc) {
    size_t need = (size_t)m * n;
    unsigned long ga = gen_of(A), gb = gen_of(B);
    if (!(memo.p && memo.a == A && memo.b == B && memo.ga == ga && memo.gb == gb && memo.m == m && memo.n == n &&
          memo.k == k && memo.lda == lda && memo.ldb == ldb)) {
        if (memo.cap < need) { free(memo.p); memo.p = malloc(sizeof(float) * need); memo.cap = need; }
        if (!memo.p) return 3;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float s = 0.0f;
                for (int p = 0; p < k; p++) s += A[p * lda + i] * B[j * ldb + p];
                memo.p[j * m + i] = s;
            }
        memo.a = A; memo.b = B; memo.ga = ga; memo.gb = gb; memo.m = m; memo.n = n; memo.k = k;
        memo.lda = lda; memo.ldb = ldb;
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++)
            C[j * ldc + i] = alpha * memo.p[j * m + i] + (beta != 0.0f ? beta * C[j * ldc + i] : 0.0f);
    if (wrong_now(hdev(h))) C[0] += 1.0f;
    touch(C);
    return 0;
}
static int gemm_args(void *h, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc) {
    if (hdev(h) < 0) return 1;                     /* CUBLAS_STATUS_NOT_INITIALIZED */
    if (ta != 0 || tb != 0) return 15;             /* CUBLAS_STATUS_NOT_SUPPORTED (in this stub) */
    if (m < 0 || n < 0 || k < 0) return 7;
    if (lda < (m > 1 ? m : 1) || ldb < (k > 1 ? k : 1) || ldc < (m > 1 ? m : 1)) return 7;
    return 0;
}
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A, int lda,
                   const float *B, int ldb, const float *beta, float *C, int ldc) {
    int rc = gemm_args(h, ta, tb, m, n, k, lda, ldb, ldc);
    float al, be;
    if (rc) return rc;
    if ((rc = scalar_in(h, alpha, &al)) || (rc = scalar_in(h, beta, &be))) return rc;
    if (!mine(h, A, sizeof(float) * (size_t)lda * k) || !mine(h, B, sizeof(float) * (size_t)ldb * n) ||
        !mine(h, C, sizeof(float) * (size_t)ldc * n))
        return 13; /* CUBLAS_STATUS_EXECUTION_FAILED: the kernel faulted on a host pointer or another GPU's memory */
    gpu_time(h, 1);
    return gemm_one(h, m, n, k, al, A, lda, B, ldb, be, C, ldc);
}
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A,
                              int lda, long long sa, const float *B, int ldb, long long sb, const float *beta, float *C,
                              int ldc, long long sc, int count) {
    int rc = gemm_args(h, ta, tb, m, n, k, lda, ldb, ldc);
    float al, be;
    if (rc) return rc;
    if (count < 0 || sa < 0 || sb < 0 || sc < 0) return 7;
    if ((rc = scalar_in(h, alpha, &al)) || (rc = scalar_in(h, beta, &be))) return rc;
    gpu_time(h, count);  /* one batched launch: the kernels run back to back */
    for (int i = 0; i < count; i++) {
        const float *a = A + sa * i, *b = B + sb * i;
        float *c = C + sc * i;
        if (!mine(h, a, sizeof(float) * (size_t)lda * k) || !mine(h, b, sizeof(float) * (size_t)ldb * n) ||
            !mine(h, c, sizeof(float) * (size_t)ldc * n))
            return 13;
        if ((rc = gemm_one(h, m, n, k, al, a, lda, b, ldb, be, c, ldc))) return rc;
    }
    return 0;
}
/* y = alpha*x + y, sum |x|, the 1-based index of max |x|: what an on-device comparison needs. */
int cublasSaxpy_v2(void *h, int n, const float *alpha, const float *x, int incx, float *y, int incy) {
    float al;
    int rc;
    if (hdev(h) < 0) return 1;
    if (n < 0 || incx != 1 || incy != 1) return 7;
    if ((rc = scalar_in(h, alpha, &al))) return rc;
    if (!mine(h, x, sizeof(float) * (size_t)n) || !mine(h, y, sizeof(float) * (size_t)n)) return 13;
    for (int i = 0; i < n; i++) y[i] += al * x[i];
    touch(y);
    return 0;
}
int cublasSasum_v2(void *h, int n, const float *x, int incx, float *result) {
    int rc;
    if (hdev(h) < 0) return 1;
    if (n < 0 || incx != 1) return 7;
    if ((rc = scalar_out(h, result, sizeof(float)))) return rc;
    if (!mine(h, x, sizeof(float) * (size_t)n)) return 13;
    double s = 0.0;
    for (int i = 0; i < n; i++) s += fabsf(x[i]);
    host_result(h);
    *result = (float)s;
    if (hmode(h) == 1) touch(result);
    return 0;
}
int cublasIsamax_v2(void *h, int n, const float *x, int incx, int *result) {
    int rc;
    if (hdev(h) < 0) return 1;
    if (n < 0 || incx != 1) return 7;
    if ((rc = scalar_out(h, result, sizeof(int)))) return rc;
    if (!mine(h, x, sizeof(float) * (size_t)n)) return 13;
    int best = 0;
    for (int i = 1; i < n; i++) if (fabsf(x[i]) > fabsf(x[best])) best = i;
    host_result(h);
    *result = n > 0 ? best + 1 : 0;
    if (hmode(h) == 1) touch(result);
    return 0;
}
const char *cublasGetStatusName(int status) {
    switch (status) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}
"""

LIBNVML = COMMON + r"""
/* NVML sees every GPU given to this machine or container, ordered by PCI bus id (nvidia-smi's
   numbers); CUDA_VISIBLE_DEVICES does not apply to it. */
static int inited = 0;
static stub_dev gpus[MAXDEV];
static int ngpus = 0;
static stub_dev migs[MAXDEV];
typedef struct {
    char busIdLegacy[16]; unsigned int domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32];
} pci_info;
typedef struct { unsigned int gpu, memory; } util_t;
int nvmlInit_v2(void) {
    int rc = env_int("STUB_NVML_INIT_ERROR", 0);
    if (rc) return rc;
    ngpus = stub_all(gpus);
    qsort(gpus, ngpus, sizeof gpus[0], by_pci);
    for (int i = 0; i < ngpus; i++) { migs[i] = gpus[i]; migs[i].mig = 2; }
    inited = 1;
    return 0;
}
int nvmlShutdown(void) { inited = 0; return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { if (!inited) return 1; *n = ngpus; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, stub_dev **h) {
    if (!inited) return 1;                 /* NVML_ERROR_UNINITIALIZED */
    /* STUB_NVML_HANDLE_ERROR=I:RC: GPU I cannot be opened (4 no permission in a cgroup, 15 lost after an Xid) */
    const char *bad = getenv("STUB_NVML_HANDLE_ERROR");
    if (bad && *bad && (unsigned)atoi(bad) == i && strchr(bad, ':')) return atoi(strchr(bad, ':') + 1);
    if (i >= (unsigned)ngpus || !h) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *h = &gpus[i];
    return 0;
}
static int is_handle(stub_dev *h) {
    return inited && ((h >= gpus && h < gpus + ngpus) || (h >= migs && h < migs + ngpus));
}
int nvmlDeviceGetUUID(stub_dev *h, char *out, unsigned int len) {
    if (!is_handle(h)) return 2;
    if (h->mig == 2) fmt_uuid(h->mig_uuid, "MIG-", out, len); else fmt_uuid(h->uuid, "GPU-", out, len);
    return 0;
}
int nvmlDeviceGetPciInfo_v3(stub_dev *h, pci_info *pci) {
    if (!is_handle(h) || !pci) return 2;
    memset(pci, 0, sizeof *pci);
    unsigned int dom = 0, bus = 0, dev = 0, fn = 0;
    sscanf(h->pci, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", dom, bus, dev, fn);
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
    pci->domain = dom; pci->bus = bus; pci->device = dev; pci->pciDeviceId = 0x233510de;
    return 0;
}
int nvmlDeviceGetMigMode(stub_dev *h, unsigned int *cur, unsigned int *pending) {
    if (!is_handle(h)) return 2;
    *cur = *pending = (unsigned)(h->mig ? 1 : 0);
    return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(stub_dev *h, unsigned int *count) {
    if (!is_handle(h)) return 2;
    *count = h->mig ? 1 : 0;
    return 0;
}
int nvmlDeviceGetMigDeviceHandleByIndex(stub_dev *h, unsigned int i, stub_dev **mig) {
    if (!is_handle(h) || !h->mig || i != 0) return 2;
    *mig = &migs[h - gpus];
    return 0;
}
static int sample_rc(stub_dev *h) {
    if (!is_handle(h)) return 2;
    if (h->mig == 2) return 3; /* NVML_ERROR_NOT_SUPPORTED on a MIG instance's handle */
    return env_int("STUB_NVML_SAMPLE_ERROR", 0);
}
/* Faults below apply to STUB_NVML_FAULT_GPU only (nvidia-smi's number) when it is set, else to every GPU. */
static int faulty(stub_dev *h) {
    const char *v = getenv("STUB_NVML_FAULT_GPU");
    return !v || !*v || atoi(v) == (int)(h - gpus);
}
int nvmlDeviceGetTemperature(stub_dev *h, int sensor, unsigned int *t) {
    int rc = sample_rc(h);
    if (rc) return rc;
    *t = (unsigned)(faulty(h) ? env_int("STUB_NVML_TEMP", 40) + (int)(h - gpus) : 40 + (int)(h - gpus));
    return 0;
}
/* nvmlFieldValue_t (nvml.h): the HBM temperature is field 82, NVML_FI_DEV_MEMORY_TEMP. */
typedef struct { unsigned int fieldId, scopeId; long long timestamp, latencyUsec; int valueType, nvmlReturn;
                 unsigned long long value; } field_t;
int nvmlDeviceGetFieldValues(stub_dev *h, int count, field_t *values) {
    int rc = sample_rc(h);
    if (rc) return rc;
    if (count < 0 || (count && !values)) return 2;
    for (int i = 0; i < count; i++) {
        values[i].valueType = 1; /* unsigned int */
        values[i].value = 0;
        if (values[i].fieldId == 82 && env_int("STUB_NVML_MEM_TEMP", 45) >= 0) {
            values[i].nvmlReturn = 0;
            *(unsigned int *)&values[i].value = (unsigned)env_int("STUB_NVML_MEM_TEMP", 45);
        } else {
            values[i].nvmlReturn = 3; /* NVML_ERROR_NOT_SUPPORTED */
        }
    }
    return 0;
}
int nvmlDeviceGetTemperatureThreshold(stub_dev *h, int which, unsigned int *t) {
    if (!is_handle(h) || !t) return 2;
    switch (which) {
    case 0: *t = 95; return 0;                                            /* shutdown */
    case 1: *t = (unsigned)env_int("STUB_NVML_SLOWDOWN_C", 87); return 0;  /* slowdown */
    case 2: *t = 95; return 0;                                            /* memory max */
    case 3: *t = 85; return 0;                                            /* GPU max operating */
    default: return 3;
    }
}
int nvmlDeviceGetClockInfo(stub_dev *h, int type, unsigned int *mhz) {
    int rc = sample_rc(h);
    if (rc) return rc;
    *mhz = type == 2 ? 3201 : (unsigned)env_int("STUB_NVML_SM_MHZ", 1980);
    return 0;
}
int nvmlDeviceGetMaxClockInfo(stub_dev *h, int type, unsigned int *mhz) {
    if (!is_handle(h) || !mhz) return 2;
    *mhz = type == 2 ? 3201 : 1980;
    return 0;
}
int nvmlDeviceGetPowerUsage(stub_dev *h, unsigned int *mw) {
    int rc = sample_rc(h);
    if (rc) return rc;
    *mw = 250000 + 1000 * (unsigned)(h - gpus);
    return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(stub_dev *h, unsigned int *mw) {
    if (!is_handle(h) || !mw) return 2;
    *mw = 700000;
    return 0;
}
int nvmlDeviceGetUtilizationRates(stub_dev *h, util_t *u) {
    int rc = sample_rc(h);
    if (rc) return rc;
    if (h->mig) return 3; /* utilisation is not supported while MIG is on */
    u->gpu = 97; u->memory = 40;
    return 0;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(stub_dev *h, unsigned long long *r) {
    int rc = sample_rc(h);
    if (rc) return rc;
    *r = faulty(h) ? (unsigned long long)env_int("STUB_NVML_THROTTLE", 0) : 0;
    return 0;
}
/* Health counters. STUB_NVML_ECC_UNCORRECTED=N / STUB_NVML_ECC_CORRECTED=N (volatile = aggregate; ECC off:
   STUB_NVML_ECC_OFF=1), STUB_NVML_ECC_RISE=N (the volatile uncorrected count grows by N per read: errors
   during the burn), STUB_NVML_REMAP_PENDING=1 / STUB_NVML_REMAP_FAILURE=1 / STUB_NVML_REMAP_UNC=N (rows remapped for
   uncorrectable errors), STUB_NVML_RETIRED=N / STUB_NVML_RETIRED_PENDING=1 (page retirement, pre-Ampere;
   unset: NOT_SUPPORTED, as on Ampere and later). */
static unsigned long long ecc_reads = 0;
int nvmlDeviceGetTotalEccErrors(stub_dev *h, int type, int counter, unsigned long long *n) {
    if (!is_handle(h) || !n) return 2;
    if (env_int("STUB_NVML_ECC_OFF", 0)) return 3;
    if (!faulty(h)) { *n = 0; return 0; }
    if (type == 1) {
        *n = (unsigned long long)env_int("STUB_NVML_ECC_UNCORRECTED", 0);
        if (counter == 0)
            *n += (unsigned long long)env_int("STUB_NVML_ECC_RISE", 0) * __sync_fetch_and_add(&ecc_reads, 1);
    } else {
        *n = (unsigned long long)env_int("STUB_NVML_ECC_CORRECTED", 0);
    }
    return 0;
}
int nvmlDeviceGetRemappedRows(stub_dev *h, unsigned int *corr, unsigned int *unc, unsigned int *pending,
                              unsigned int *failure) {
    if (!is_handle(h) || !corr || !unc || !pending || !failure) return 2;
    int f = faulty(h);
    *corr = 0;
    *unc = f ? (unsigned)env_int("STUB_NVML_REMAP_UNC", 0) : 0;
    *pending = f ? (unsigned)env_int("STUB_NVML_REMAP_PENDING", 0) : 0;
    *failure = f ? (unsigned)env_int("STUB_NVML_REMAP_FAILURE", 0) : 0;
    return 0;
}
int nvmlDeviceGetRetiredPages(stub_dev *h, int cause, unsigned int *count, unsigned long long *addrs) {
    if (!is_handle(h) || !count) return 2;
    const char *v = getenv("STUB_NVML_RETIRED");
    if (!v || !*v) return 3;
    unsigned int have = faulty(h) && cause == 1 ? (unsigned)atoi(v) : 0;
    if (*count < have && addrs) { *count = have; return 7; } /* NVML_ERROR_INSUFFICIENT_SIZE */
    for (unsigned i = 0; addrs && i < have; i++) addrs[i] = 0x1000ull * (i + 1);
    *count = have;
    return 0;
}
int nvmlDeviceGetRetiredPagesPendingStatus(stub_dev *h, int *pending) {
    if (!is_handle(h) || !pending) return 2;
    const char *v = getenv("STUB_NVML_RETIRED");
    if (!v || !*v) return 3;
    *pending = faulty(h) ? env_int("STUB_NVML_RETIRED_PENDING", 0) : 0;
    return 0;
}
/* STUB_NVML_PROCS=GPU:PID:MIB,...: compute processes on each GPU (nvidia-smi's numbers). */
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_t;
int nvmlDeviceGetComputeRunningProcesses_v3(stub_dev *h, unsigned int *count, proc_t *infos) {
    if (!is_handle(h) || !count) return 2;
    const char *p = getenv("STUB_NVML_PROCS");
    unsigned int m = 0;
    proc_t found[MAXDEV];
    for (; p && *p && m < MAXDEV; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        int gpu = 0, pid = 0, mib = 0;
        if (sscanf(p, "%d:%d:%d", &gpu, &pid, &mib) == 3 && gpu == (int)(h - gpus)) {
            found[m].pid = (unsigned)pid; found[m].used = (unsigned long long)mib << 20;
            found[m].gi = found[m].ci = 0xFFFFFFFFu;
            m++;
        }
    }
    if (*count < m) { *count = m; return 7; }
    for (unsigned i = 0; i < m; i++) infos[i] = found[i];
    *count = m;
    return 0;
}
const char *nvmlErrorString(int rc) {
    switch (rc) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 7: return "Insufficient Size";
    case 15: return "GPU is lost";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}
"""
