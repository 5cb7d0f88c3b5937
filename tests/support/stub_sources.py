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
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
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
#ifndef CUDART_DEFAULT
#define CUDART_DEFAULT 12030
#endif
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
    return (dev >= 0 && dev < cu_visible(vis)) ? 0 : 101;
}
int cudaDeviceSynchronize(void) { return 0; }
/* Events: this "device" runs every call synchronously, so an event records the time it is reached. */
#include <time.h>
static double events[256];
static int nevents = 0;
int cudaEventCreate(void **e) {
    if (!e) return 1;
    if (nevents >= 256) return 2;
    *e = &events[nevents++];
    return 0;
}
int cudaEventDestroy(void *e) { return (e >= (void *)events && e < (void *)(events + 256)) ? 0 : 400; }
int cudaEventRecord(void *e, void *stream) {
    if (!(e >= (void *)events && e < (void *)(events + 256))) return 400; /* cudaErrorInvalidResourceHandle */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *(double *)e = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    return 0;
}
int cudaEventSynchronize(void *e) { return 0; }
int cudaEventElapsedTime(float *ms, void *a, void *b) {
    if (!ms) return 1;
    *ms = (float)(*(double *)b - *(double *)a);
    return 0;
}
/* "Device" memory is host memory the stub tracks: the stub cuBLAS computes on the CPU, and
   refuses any pointer that did not come from cudaMalloc, as a real GPU would fault on it. */
static struct { char *p; size_t size; unsigned long gen; } allocs[256];
static unsigned long next_gen = 1;
/* A write generation per allocation (bumped by cudaMemcpy into it and by stub_touch): the stub
   cuBLAS reuses a product whose inputs and output were not written since it computed it. */
unsigned long stub_gen(const void *ptr) {
    const char *c = (const char *)ptr;
    for (int i = 0; i < 256; i++)
        if (allocs[i].p && c >= allocs[i].p && c < allocs[i].p + allocs[i].size) return allocs[i].gen;
    return 0;
}
void stub_touch(const void *ptr) {
    const char *c = (const char *)ptr;
    for (int i = 0; i < 256; i++)
        if (allocs[i].p && c >= allocs[i].p && c < allocs[i].p + allocs[i].size) allocs[i].gen = next_gen++;
}
int stub_is_device(const void *ptr, size_t bytes) {
    const char *c = (const char *)ptr;
    for (int i = 0; i < 256; i++)
        if (allocs[i].p && c >= allocs[i].p && c + bytes <= allocs[i].p + allocs[i].size) return 1;
    return 0;
}
int cudaMalloc(void **p, size_t size) {
    if (!p) return 1;
    stub_dev vis[MAXDEV];
    if (cu_visible(vis) == 0) return 100;
    for (int i = 0; i < 256; i++)
        if (!allocs[i].p) {
            allocs[i].p = malloc(size ? size : 1);
            if (!allocs[i].p) return 2;
            allocs[i].size = size;
            allocs[i].gen = next_gen++;
            *p = allocs[i].p;
            return 0;
        }
    return 2; /* cudaErrorMemoryAllocation */
}
int cudaFree(void *p) {
    if (!p) { /* cudaFree(0): the usual way to make the primary context */
        stub_dev vis[MAXDEV];
        if (cu_visible(vis) == 0) return 100;
        if (env_int("STUB_CU_EXCLUSIVE_BUSY", 0)) return 46; /* cudaErrorDevicesUnavailable */
        return 0;
    }
    for (int i = 0; i < 256; i++)
        if (allocs[i].p == p) { free(p); allocs[i].p = NULL; return 0; }
    return 1; /* cudaErrorInvalidValue: not a device pointer */
}
int cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    int dd = stub_is_device(dst, count), sd = stub_is_device(src, count);
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
    {100, "cudaErrorNoDevice"}, {101, "cudaErrorInvalidDevice"}, {304, "cudaErrorOperatingSystem"},
    {800, "cudaErrorNotPermitted"}, {801, "cudaErrorNotSupported"}, {805, "cudaErrorMpsConnectionFailed"},
};
const char *cudaGetErrorName(int code) {
    for (size_t i = 0; i < sizeof RT_ERRORS / sizeof RT_ERRORS[0]; i++)
        if (RT_ERRORS[i].code == code) return RT_ERRORS[i].name;
    return "unrecognized error code";
}
const char *cudaGetErrorString(int code) { return cudaGetErrorName(code); }
"""

LIBCUDNN = "#define _GNU_SOURCE\n" + COMMON + r"""
#include <dlfcn.h>
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
#define ST_INTERNAL 4000
#define ST_DRIVER 5003
size_t cudnnGetMaxDeviceVersion(void) { need_graph(); return CUDNN_MAX_SM; }
#else
#define need_graph() ((void)0)
#define ST_NOT_INITIALIZED 1
#define ST_BAD_PARAM 3
#define ST_INTERNAL 4
#define ST_DRIVER 8
#endif
size_t cudnnGetVersion(void) { need_graph(); return (size_t)env_int("STUB_CUDNN_VERSION", CUDNN_DEFAULT); }
size_t cudnnGetCudartVersion(void) { need_graph(); return (size_t)CUDNN_CUDART; }
static int handles[64];
int cudnnCreate(void **h) {
    need_graph();
    if (!h) return ST_BAD_PARAM;
    int rc = env_int("STUB_CUDNN_CREATE_ERROR", 0);
    if (rc) return rc;
    stub_dev vis[MAXDEV];
    if (cu_visible(vis) == 0) return ST_NOT_INITIALIZED; /* no GPU */
    if (env_int("STUB_CU_EXCLUSIVE_BUSY", 0)) return ST_DRIVER; /* its context could not be made */
    for (int i = 0; i < 64; i++) if (!handles[i]) { handles[i] = 1; *h = &handles[i]; return 0; }
    return ST_INTERNAL;
}
int cudnnDestroy(void *h) {
    for (int i = 0; i < 64; i++) if (h == &handles[i] && handles[i]) { handles[i] = 0; return 0; }
    return ST_BAD_PARAM;
}
const char *cudnnGetErrorString(int status) {
    switch (status) {
    case 0: return "CUDNN_STATUS_SUCCESS";
#if CUDNN_DEFAULT >= 90000
    case 1001: return "CUDNN_STATUS_NOT_INITIALIZED";
    case 1008: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case 2000: return "CUDNN_STATUS_BAD_PARAM";
    case 3000: return "CUDNN_STATUS_NOT_SUPPORTED";
    case 4000: return "CUDNN_STATUS_INTERNAL_ERROR";
    case 5000: return "CUDNN_STATUS_EXECUTION_FAILED";
    case 5003: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
#else
    case 1: return "CUDNN_STATUS_NOT_INITIALIZED";
    case 2: return "CUDNN_STATUS_ALLOC_FAILED";
    case 3: return "CUDNN_STATUS_BAD_PARAM";
    case 4: return "CUDNN_STATUS_INTERNAL_ERROR";
    case 8: return "CUDNN_STATUS_EXECUTION_FAILED";
#endif
    default: return "CUDNN_UNKNOWN_STATUS";
    }
}
"""

# cuDNN 9's sub-libraries, loaded by libcudnn.so.9 at run time; each stub exports one symbol.
CUDNN_SUB = r"""
int stub_cudnn_sublibrary(void) { return 9; }
"""

LIBCUBLAS = "#define _GNU_SOURCE\n" + COMMON + r"""
#include <dlfcn.h>
#include <math.h>
static int handles[64];
static int valid(void *h) {
    for (int i = 0; i < 64; i++) if (h == &handles[i] && handles[i]) return 1;
    return 0;
}
int cublasCreate_v2(void **handle) {
    if (!handle) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    int rc = env_int("STUB_CUBLAS_CREATE_ERROR", 0);
    if (rc) return rc;
    stub_dev vis[MAXDEV];
    if (cu_visible(vis) == 0) return 1; /* CUBLAS_STATUS_NOT_INITIALIZED: no GPU */
    for (int i = 0; i < 64; i++) if (!handles[i]) { handles[i] = 1; *handle = &handles[i]; return 0; }
    return 3;
}
int cublasDestroy_v2(void *handle) {
    if (!valid(handle)) return 1;
    *(int *)handle = 0;
    return 0;
}
static int on_device(const void *p, size_t bytes) {
    int (*is_dev)(const void *, size_t) = (int (*)(const void *, size_t))dlsym(RTLD_DEFAULT, "stub_is_device");
    return is_dev && is_dev(p, bytes);
}
static unsigned long gen_of(const void *p) {
    unsigned long (*g)(const void *) = (unsigned long (*)(const void *))dlsym(RTLD_DEFAULT, "stub_gen");
    return g ? g(p) : 0;
}
static void touch(const void *p) {
    void (*t)(const void *) = (void (*)(const void *))dlsym(RTLD_DEFAULT, "stub_touch");
    if (t) t(p);
}
/* STUB_CUBLAS_SGEMM_US=N: every SGEMM takes N microseconds more (a GPU's known kernel time). A
   product whose inputs and output were not written since it was computed is not computed again
   (the result is the same), so a large burn costs only its known time. */
static struct { const void *a, *b, *c; unsigned long ga, gb, gc; int m, n, k; float alpha, beta; } memo;
/* Column-major C = alpha*A*B + beta*C, no transposes (all the check asks for). */
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A, int lda,
                   const float *B, int ldb, const float *beta, float *C, int ldc) {
    if (!valid(h)) return 1;                       /* CUBLAS_STATUS_NOT_INITIALIZED */
    if (ta != 0 || tb != 0) return 15;             /* CUBLAS_STATUS_NOT_SUPPORTED (in this stub) */
    if (m < 0 || n < 0 || k < 0 || !alpha || !beta) return 7;
    if (lda < (m > 1 ? m : 1) || ldb < (k > 1 ? k : 1) || ldc < (m > 1 ? m : 1)) return 7;
    if (!on_device(A, sizeof(float) * (size_t)lda * k) || !on_device(B, sizeof(float) * (size_t)ldb * n) ||
        !on_device(C, sizeof(float) * (size_t)ldc * n))
        return 13; /* CUBLAS_STATUS_EXECUTION_FAILED: the kernel faulted on a host pointer */
    int us = env_int("STUB_CUBLAS_SGEMM_US", 0);
    if (us > 0) usleep((useconds_t)us);
    int same = memo.a == A && memo.b == B && memo.c == C && memo.ga == gen_of(A) && memo.gb == gen_of(B) &&
               memo.gc == gen_of(C) && memo.m == m && memo.n == n && memo.k == k && memo.alpha == *alpha &&
               *beta == 0.0f && memo.beta == 0.0f;
    if (!same) {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float s = 0.0f;
                for (int p = 0; p < k; p++) s += A[p * lda + i] * B[j * ldb + p];
                C[j * ldc + i] = (*alpha) * s + (*beta) * C[j * ldc + i];
            }
        if (env_int("STUB_CUBLAS_WRONG", 0)) C[0] += 1.0f;
        touch(C);
        memo.a = A; memo.b = B; memo.c = C; memo.ga = gen_of(A); memo.gb = gen_of(B); memo.gc = gen_of(C);
        memo.m = m; memo.n = n; memo.k = k; memo.alpha = *alpha; memo.beta = *beta;
    }
    return 0;
}
/* y = alpha*x + y and the 1-based index of max |x|: what an on-device comparison needs. */
int cublasSaxpy_v2(void *h, int n, const float *alpha, const float *x, int incx, float *y, int incy) {
    if (!valid(h)) return 1;
    if (n < 0 || !alpha || incx != 1 || incy != 1) return 7;
    if (!on_device(x, sizeof(float) * (size_t)n) || !on_device(y, sizeof(float) * (size_t)n)) return 13;
    for (int i = 0; i < n; i++) y[i] += (*alpha) * x[i];
    touch(y);
    return 0;
}
int cublasIsamax_v2(void *h, int n, const float *x, int incx, int *result) {
    if (!valid(h)) return 1;
    if (n < 0 || incx != 1 || !result) return 7;
    if (!on_device(x, sizeof(float) * (size_t)n)) return 13;
    int best = 0;
    for (int i = 1; i < n; i++) if (fabsf(x[i]) > fabsf(x[best])) best = i;
    *result = n > 0 ? best + 1 : 0;
    return 0;
}
const char *cublasGetStatusName(int status) {
    switch (status) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
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
int nvmlDeviceGetTemperature(stub_dev *h, int sensor, unsigned int *t) {
    int rc = sample_rc(h);
    if (rc) return rc;
    *t = (unsigned)(env_int("STUB_NVML_TEMP", 40) + (int)(h - gpus));
    return 0;
}
int nvmlDeviceGetClockInfo(stub_dev *h, int type, unsigned int *mhz) {
    int rc = sample_rc(h);
    if (rc) return rc;
    *mhz = 1980;
    return 0;
}
int nvmlDeviceGetPowerUsage(stub_dev *h, unsigned int *mw) {
    int rc = sample_rc(h);
    if (rc) return rc;
    *mw = 250000 + 1000 * (unsigned)(h - gpus);
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
    *r = (unsigned long long)env_int("STUB_NVML_THROTTLE", 0);
    return 0;
}
const char *nvmlErrorString(int rc) {
    switch (rc) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 15: return "GPU is lost";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}
"""
