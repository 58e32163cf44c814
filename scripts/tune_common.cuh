// tune_common.cuh — the timing loop the tile sweeps (scripts/tune_*.cu) share: candidates and cuBLAS interleaved
// in one process, L2 flushed before every call, median of CUDA-event times, each candidate's output compared with
// cuBLAS's on the same inputs before it is timed (a wrong result is reported, never timed). GPU only.
// Beside cuBLAS it times the mma.sync instruction ceiling (ptx_kernels/csrc/lab/mma_ceiling.cu, as the harness runs it:
// a register-only loop of ~1.7 ms), so each candidate's TFLOPS per GHz can be read against the ceiling's.
#pragma once
#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "hgemm.cuh"
#include "host/launch.h"
#include "lab/mma_ceiling.cu"

#define TUNE_CHECK(x)                                                                 \
  do {                                                                                \
    auto e_ = (x);                                                                    \
    if (e_ != 0) {                                                                    \
      std::printf("error %d at %s:%d: %s\n", int(e_), __FILE__, __LINE__, #x);        \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace tune {

using Fn = cudaError_t (*)(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);

struct Candidate {
  const char* name;
  Fn fn;  // launches the tile for the layout p.b_col_major says
  const void* kernel[2];  // the NN and NT instantiations, for their registers and blocks per SM
  int threads;
  int smem_bytes[2];  // NN, NT
};

// One tile of a sweep: NN and NT launch the tile's two instantiations for accumulation ACC (launch(p, stream,
// info)), KERNEL_NN / KERNEL_NT are those kernels, SMEM_NN / SMEM_NT their shared memory. The candidate's launcher
// picks the instantiation p.b_col_major asks for and refuses other accumulations and unaligned rows.
template <Acc ACC, auto NN, auto NT>
cudaError_t launch_layout(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (acc != ACC || !tile::rows_aligned16(p)) return cudaErrorInvalidValue;
  return (p.b_col_major ? NT : NN)(p, stream, info);
}
template <Acc ACC, auto NN, auto NT, auto KERNEL_NN, auto KERNEL_NT>
Candidate candidate(const char* name, int threads, int smem_nn, int smem_nt) {
  return {name,
          launch_layout<ACC, NN, NT>,
          {reinterpret_cast<const void*>(KERNEL_NN), reinterpret_cast<const void*>(KERNEL_NT)},
          threads,
          {smem_nn, smem_nt}};
}

// The SM clock (MHz) and board power (W) right after a timed call, read through NVML (dlopen'd, so the sweep
// builds and runs without its header; both read as 0 when it is missing). The H100 here is power-capped at 700 W:
// a kernel that draws more runs at a lower clock, so TFLOPS per GHz tells instruction efficiency from clock.
struct Nvml {
  using Init = int (*)();
  using Handle = int (*)(unsigned, void**);
  using Clock = int (*)(void*, int, unsigned*);
  using Power = int (*)(void*, unsigned*);
  void* dev = nullptr;
  Clock clock = nullptr;
  Power power = nullptr;
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return;
    auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    auto handle = reinterpret_cast<Handle>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    clock = reinterpret_cast<Clock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power = reinterpret_cast<Power>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    int cuda_dev = 0;
    if (!init || !handle || !clock || !power || init() != 0 || cudaGetDevice(&cuda_dev) != cudaSuccess ||
        handle(unsigned(cuda_dev), &dev) != 0)
      dev = nullptr;  // (the CUDA index equals NVML's when one GPU is visible, as on the lent machine)
  }
  float sm_mhz() const {
    unsigned v = 0;
    return dev && clock(dev, 1 /* NVML_CLOCK_SM */, &v) == 0 ? float(v) : 0.f;
  }
  float watts() const {
    unsigned mw = 0;
    return dev && power(dev, &mw) == 0 ? mw / 1000.f : 0.f;
  }
};

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline std::vector<float> to_host(const half* d, size_t n) {
  std::vector<half> h(n);
  TUNE_CHECK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = __half2float(h[i]);
  return f;
}

// Sweep the candidates for problems n^3 (each n in sizes), NN or NT (B column-major: b_col), with accumulation
// acc; print TFLOPS and the ratio to cublasGemmEx (fp32 compute for F32, fp16 compute for F16) measured
// interleaved in the same run.
inline void sweep(const Candidate* cands, int count, Acc acc, std::initializer_list<int> sizes, bool b_col) {
  cublasHandle_t handle;
  TUNE_CHECK(cublasCreate(&handle));
  void* flush;
  const size_t flush_bytes = 256u << 20;
  TUNE_CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  TUNE_CHECK(cudaEventCreate(&e0));
  TUNE_CHECK(cudaEventCreate(&e1));
  const char* acc_name = acc == Acc::F32 ? (b_col ? "NT fp32 acc" : "NN fp32 acc")
                                        : (b_col ? "NT fp16 acc" : "NN fp16 acc");
  const Nvml nvml;
  int dev = 0, sms = 0;
  TUNE_CHECK(cudaGetDevice(&dev));
  TUNE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  float* sink;  // the ceiling kernel's output
  TUNE_CHECK(cudaMalloc(&sink, size_t(16) * sms * mma_ceiling::THREADS * sizeof(float)));
  for (int c = 0; c < count; ++c) {
    const void* kernel = cands[c].kernel[b_col];
    const int smem = cands[c].smem_bytes[b_col];
    cudaFuncAttributes attr;
    int blocks = 0;
    TUNE_CHECK(cudaFuncGetAttributes(&attr, kernel));
    if (smem > 48 * 1024)
      TUNE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    TUNE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, cands[c].threads, smem));
    std::printf("%-24s %s: %3d registers, %3d KB shared, %d blocks/SM\n", cands[c].name, acc_name, attr.numRegs,
                smem / 1024, blocks);
  }
  for (int n : sizes) {
    const size_t elems = size_t(n) * n;
    std::vector<half> host(elems);
    std::mt19937 rng(n);
    std::normal_distribution<float> dist;
    half *A, *B, *C, *R;
    TUNE_CHECK(cudaMalloc(&A, elems * 2));
    TUNE_CHECK(cudaMalloc(&B, elems * 2));
    TUNE_CHECK(cudaMalloc(&C, elems * 2));
    TUNE_CHECK(cudaMalloc(&R, elems * 2));
    for (auto& x : host) x = __float2half(dist(rng));
    TUNE_CHECK(cudaMemcpy(A, host.data(), elems * 2, cudaMemcpyHostToDevice));
    for (auto& x : host) x = __float2half(dist(rng));
    TUNE_CHECK(cudaMemcpy(B, host.data(), elems * 2, cudaMemcpyHostToDevice));
    // B row-major: element (k, j) at B[k * n + j]; column-major: at B[j * n + k].
    GemmArgs p{A, B, C, n, n, n, n, 1, b_col ? 1 : n, b_col ? n : 1, n, b_col};
    const float alpha = 1.f, beta = 0.f;
    const half halpha = __float2half(1.f), hbeta = __float2half(0.f);
    // Row-major C = A B is column-major C^T = B^T A^T; cuBLAS reads a row-major B as B^T in column-major order
    // and a column-major B as B, so it transposes the latter.
    const cublasOperation_t op_b = b_col ? CUBLAS_OP_T : CUBLAS_OP_N;
    auto cublas = [&](half* out) {
      if (acc == Acc::F32)
        TUNE_CHECK(cublasGemmEx(handle, op_b, CUBLAS_OP_N, n, n, n, &alpha, B, CUDA_R_16F, n, A, CUDA_R_16F, n,
                                &beta, out, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      else
        TUNE_CHECK(cublasGemmEx(handle, op_b, CUBLAS_OP_N, n, n, n, &halpha, B, CUDA_R_16F, n, A, CUDA_R_16F, n,
                                &hbeta, out, CUDA_R_16F, n, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
    };
    cublas(R);
    TUNE_CHECK(cudaDeviceSynchronize());
    const std::vector<float> ref = to_host(R, elems);
    // Inputs ~N(0, 1): |C| ~ sqrt(n); fp16 rounding of C and accumulation-order differences stay far below this.
    const float tol = (acc == Acc::F32 ? 0.02f : 0.1f) * std::sqrt(float(n));
    std::vector<bool> ok(count, true);
    for (int c = 0; c < count; ++c) {
      TUNE_CHECK(cudaMemset(C, 0xff, elems * 2));  // NaN
      TUNE_CHECK(cands[c].fn(p, acc, 0, nullptr));
      TUNE_CHECK(cudaDeviceSynchronize());
      const std::vector<float> got = to_host(C, elems);
      float worst = 0.f;
      for (size_t i = 0; i < elems; ++i) {
        const float d = std::fabs(got[i] - ref[i]);
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
      }
      if (!(worst <= tol)) {
        ok[c] = false;
        std::printf("%d^3 %s  %-24s WRONG: max |C - cuBLAS| = %g (tolerance %g), not timed\n", n, acc_name,
                    cands[c].name, worst, tol);
      }
    }
    const int reps = n <= 4096 ? 30 : 10, rounds = 3;
    // index count: cuBLAS; count + 1: the mma.sync ceiling (16 blocks of 4 warps per SM, 4096 iterations)
    const int ceiling_blocks = 16 * sms, ceiling_iters = 4096;
    std::vector<std::vector<float>> t(count + 2), mhz(count + 2), watts(count + 2);
    for (int r = 0; r < rounds; ++r) {
      for (int c = 0; c <= count + 1; ++c) {
        if (c < count && !ok[c]) continue;
        for (int i = 0; i < reps + (r == 0 ? 2 : 0); ++i) {
          TUNE_CHECK(cudaMemsetAsync(flush, 0, flush_bytes));
          TUNE_CHECK(cudaEventRecord(e0));
          if (c == count) cublas(C);
          else if (c == count + 1) TUNE_CHECK(launch_mma_ceiling(ceiling_blocks, ceiling_iters, acc, sink, 0));
          else TUNE_CHECK(cands[c].fn(p, acc, 0, nullptr));
          TUNE_CHECK(cudaEventRecord(e1));
          TUNE_CHECK(cudaEventSynchronize(e1));
          float ms;
          TUNE_CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (!(r == 0 && i < 2)) {
            t[c].push_back(ms);
            mhz[c].push_back(nvml.sm_mhz());
            watts[c].push_back(nvml.watts());
          }
        }
      }
    }
    const double flop = 2.0 * n * n * double(n);
    const double ceiling_flop = mma_ceiling_flops(ceiling_blocks, ceiling_iters);
    const float base = median(t[count]);
    // TFLOPS / GHz: per-clock efficiency (the median clock read right after each timed call); for candidates also
    // as a share of the ceiling's TFLOPS / GHz.
    auto per_ghz = [&](int c, double f) {
      const float mhz_c = median(mhz[c]);
      return mhz_c > 0 ? f / median(t[c]) / 1e9 / (mhz_c / 1000.f) : 0.0;
    };
    const double ceiling_per_ghz = per_ghz(count + 1, ceiling_flop);
    auto clocks = [&](int c) {
      const double g = per_ghz(c, c == count + 1 ? ceiling_flop : flop);
      std::printf("  %4.0f MHz %3.0f W  %5.1f TFLOPS/GHz", median(mhz[c]), median(watts[c]), g);
      if (c < count && ceiling_per_ghz > 0) std::printf(" (%.0f%% of the ceiling's)", 100.0 * g / ceiling_per_ghz);
      std::printf("\n");
    };
    std::printf("%d^3 %s  %-24s %7.1f TFLOPS", n, acc_name, "mma.sync ceiling",
                ceiling_flop / median(t[count + 1]) / 1e9);
    clocks(count + 1);
    std::printf("%d^3 %s  %-24s %7.1f TFLOPS", n, acc_name, "cuBLAS", flop / base / 1e9);
    clocks(count);
    for (int c = 0; c < count; ++c) {
      if (!ok[c]) continue;
      const float ms = median(t[c]);
      std::printf("%d^3 %s  %-24s %7.1f TFLOPS  %.3fx cuBLAS", n, acc_name, cands[c].name, flop / ms / 1e9,
                  base / ms);
      clocks(c);
    }
    TUNE_CHECK(cudaFree(A));
    TUNE_CHECK(cudaFree(B));
    TUNE_CHECK(cudaFree(C));
    TUNE_CHECK(cudaFree(R));
  }
  TUNE_CHECK(cudaFree(flush));
  TUNE_CHECK(cudaFree(sink));
  TUNE_CHECK(cublasDestroy(handle));
}

// The layout a sweep binary was asked for: `tune_x` or `tune_x NN` times NN, `tune_x NT` NT.
inline bool b_col_from_args(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "NN") return false;
  if (std::string(argv[1]) == "NT") return true;
  std::printf("usage: %s [NN|NT]\n", argv[0]);
  std::exit(2);
}

}  // namespace tune
