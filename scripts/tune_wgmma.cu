// tune_wgmma.cu — the Hopper ladder on its own, outside Python: exact checks against cuBLAS on odd shapes, then
// timings interleaved with cuBLAS and the wgmma instruction ceiling (GPU only; sm_90a).
//   bash scripts/build_tune.sh DIR && DIR/tune_wgmma [check|bench|all] [MxNxK,...]
// Exact checks: small-integer inputs, so fp32 accumulation is exact and C must equal cuBLAS's (fp32 compute)
// bit for bit; fp16 accumulation is exact while partial sums stay below 2048 (K <= 227 here). Outputs are
// NaN-poisoned before every run. Timing: median of CUDA events, L2 flushed (256 MB written) before every call.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hgemm.cuh"
#include "tune_common.cuh"  // TUNE_CHECK
#include "lab/lab.h"

// The kernel files' launchers (templates over the element type, instantiated there for fp16 and bf16); the sweep
// runs fp16.
template <typename E>
cudaError_t launch_wgmma_tma(const GemmArgsOf<E>&, Acc, cudaStream_t, LaunchInfo*);
template <typename E>
cudaError_t launch_wgmma_ws(const GemmArgsOf<E>&, Acc, cudaStream_t, LaunchInfo*);
template <typename E>
cudaError_t launch_wgmma_persistent(const GemmArgsOf<E>&, Acc, cudaStream_t, LaunchInfo*);
template <typename E>
cudaError_t launch_wgmma_splitk(const GemmArgsOf<E>&, Acc, cudaStream_t, LaunchInfo*);
template <typename E>
cudaError_t launch_wgmma_cluster(const GemmArgsOf<E>&, Acc, cudaStream_t, LaunchInfo*);

#define CK(x) TUNE_CHECK(x)

struct Kern {
  const char* name;
  cudaError_t (*fn)(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
  int tile;   // GemmArgs::tile: 0 = the launcher's choice; persistent / splitk: 1, 2, 3 = 128 x 256, 128, 64;
              // persistent only: 4 = 128 x 192, 5 / 6 = 256 x 152 in 4 / 3 stages (column-major B)
  int split;  // GemmArgs::split: 0 = the launcher's choice, 1 = none, 2 / 4 parts
  int grid = 0;  // GemmArgs::grid: 0 = the launcher's choice (the fewest blocks for the rounds), 1 = one per SM
};
static const Kern kAllKernels[] = {{"wgmma_tma", launch_wgmma_tma<half>, 0, 0},
                                   {"wgmma_ws", launch_wgmma_ws<half>, 0, 0},
                                   {"wgmma_persistent", launch_wgmma_persistent<half>, 0, 0},
                                   {"persistent_nosplit", launch_wgmma_persistent<half>, 0, 1},
                                   {"persistent_256", launch_wgmma_persistent<half>, 1, 1},
                                   {"persistent_128", launch_wgmma_persistent<half>, 2, 1},
                                   {"persistent_64", launch_wgmma_persistent<half>, 3, 1},
                                   {"persistent_192", launch_wgmma_persistent<half>, 4, 1},
                                   {"persistent_tall", launch_wgmma_persistent<half>, 5, 1},
                                   {"persistent_tall3", launch_wgmma_persistent<half>, 6, 1},
                                   {"persistent_256_full", launch_wgmma_persistent<half>, 1, 1, 1},
                                   {"persistent_192_full", launch_wgmma_persistent<half>, 4, 1, 1},
                                   {"wgmma_splitk", launch_wgmma_splitk<half>, 0, 0},
                                   {"splitk_256x4", launch_wgmma_splitk<half>, 1, 4},
                                   {"splitk_256x2", launch_wgmma_splitk<half>, 1, 2},
                                   {"splitk_128x4", launch_wgmma_splitk<half>, 2, 4},
                                   {"splitk_128x2", launch_wgmma_splitk<half>, 2, 2},
                                   {"splitk_128x1", launch_wgmma_splitk<half>, 2, 1},
                                   {"splitk_64x4", launch_wgmma_splitk<half>, 3, 4},
                                   {"splitk_64x2", launch_wgmma_splitk<half>, 3, 2},
                                   {"wgmma_cluster", launch_wgmma_cluster<half>, 0, 0},
                                   {"cluster_full", launch_wgmma_cluster<half>, 0, 0, 1}};
// Whether k takes this B layout: the 256 x 152 tiles (GemmArgs::tile 5, 6) take column-major B only.
static bool takes(const Kern& k, bool bcol) { return bcol || k.tile < 5; }
// TUNE_KERNELS="name,name,..." runs only those (default: all of the above).
static std::vector<Kern> kKernels = [] {
  std::vector<Kern> ks;
  const char* only = std::getenv("TUNE_KERNELS");
  for (const Kern& k : kAllKernels)
    if (!only || !*only || std::strstr((std::string(",") + only + ",").c_str(),
                                       (std::string(",") + k.name + ",").c_str()))
      ks.push_back(k);
  return ks;
}();

// Leading dimensions rounded up to TUNE_LD_ALIGN halves (default 8: the 16 bytes TMA needs; 64 = 128-byte rows).
static int ld8(int x) {
  static const int align = std::getenv("TUNE_LD_ALIGN") ? std::atoi(std::getenv("TUNE_LD_ALIGN")) : 8;
  return (x + align - 1) / align * align;
}

struct Problem {
  int M, N, K;
  bool bcol;
  int lda, ldb, ldc;
  half *A, *B, *C, *R;
  void alloc() {
    lda = ld8(K);
    ldb = bcol ? ld8(K) : ld8(N);
    ldc = N;
    CK(cudaMalloc(&A, size_t(M) * lda * 2));
    CK(cudaMalloc(&B, size_t(bcol ? N : K) * ldb * 2));
    CK(cudaMalloc(&C, size_t(M) * ldc * 2 + 16));
    CK(cudaMalloc(&R, size_t(M) * ldc * 2 + 16));
  }
  void release() {
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(R);
  }
  GemmArgs args(half* out, int tile = 0, int split = 0, int grid = 0) const {
    GemmArgs p;
    p.tile = tile;
    p.split = split;
    p.grid = grid;
    p.A = A, p.B = B, p.C = out, p.M = M, p.N = N, p.K = K;
    p.sam = lda, p.sak = 1;
    if (bcol) p.sbk = 1, p.sbn = ldb;
    else p.sbk = ldb, p.sbn = 1;
    p.ldc = ldc;
    p.b_col_major = bcol;
    return p;
  }
};

static void fill(half* d, size_t n, bool ints, unsigned seed) {
  std::vector<half> h(n);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> di(-3, 3);
  std::normal_distribution<float> dn(0.f, 1.f);
  for (auto& x : h) x = __float2half(ints ? float(di(rng)) : dn(rng));
  CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
}

static void cublas_ref(cublasHandle_t h, const Problem& pr, half* out, bool f16acc) {
  const float one = 1.f, zero = 0.f;
  const half hone = __float2half(1.f), hzero = __float2half(0.f);
  const void* alpha = f16acc ? static_cast<const void*>(&hone) : static_cast<const void*>(&one);
  const void* beta = f16acc ? static_cast<const void*>(&hzero) : static_cast<const void*>(&zero);
  CK(cublasGemmEx(h, pr.bcol ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, pr.N, pr.M, pr.K, alpha, pr.B, CUDA_R_16F,
                  pr.ldb, pr.A, CUDA_R_16F, pr.lda, beta, out, CUDA_R_16F, pr.ldc,
                  f16acc ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static int check(cublasHandle_t h) {
  const int shapes[][3] = {{1, 1, 1},       {7, 9, 13},      {16, 8, 8},     {64, 64, 64},    {128, 256, 64},
                           {129, 257, 65},  {127, 255, 63},  {200, 300, 227}, {256, 512, 512}, {333, 1000, 129},
                           {1000, 333, 777}, {4095, 4097, 4099}, {16, 4096, 4096}, {3000, 5000, 2000},
                           {16, 4096, 8},   {33, 500, 300},  {17, 1000, 4099}, {1, 4096, 4096}};
  int bad = 0, total = 0;
  // TUNE_CHECK_MAX_MNK: skip shapes with M * N * K above it (a run under compute-sanitizer)
  const double max_mnk = std::getenv("TUNE_CHECK_MAX_MNK") ? std::atof(std::getenv("TUNE_CHECK_MAX_MNK")) : 1e30;
  for (auto& s : shapes)
    for (int bcol = 0; bcol < 2; ++bcol)
      for (int f16 = 0; f16 < 2; ++f16) {
        if (f16 && s[2] > 227) continue;
        if (double(s[0]) * s[1] * s[2] > max_mnk) continue;
        Problem pr{s[0], s[1], s[2], bool(bcol)};
        pr.alloc();
        fill(pr.A, size_t(pr.M) * pr.lda, true, 1);
        fill(pr.B, size_t(bcol ? pr.N : pr.K) * pr.ldb, true, 2);
        cublas_ref(h, pr, pr.R, false);  // fp32 compute: exact for these inputs
        std::vector<uint16_t> ref(size_t(pr.M) * pr.ldc), got(ref.size());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(ref.data(), pr.R, ref.size() * 2, cudaMemcpyDeviceToHost));
        for (const Kern& k : kKernels) {
          if (!takes(k, bcol)) continue;
          CK(cudaMemset(pr.C, 0xFF, size_t(pr.M) * pr.ldc * 2));  // NaN
          LaunchInfo info;
          const cudaError_t err = k.fn(pr.args(pr.C, k.tile, k.split, k.grid), f16 ? Acc::F16 : Acc::F32, 0, &info);
          const cudaError_t sync = cudaDeviceSynchronize();
          ++total;
          if (err != cudaSuccess || sync != cudaSuccess) {
            std::printf("FAIL %-17s %dx%dx%d %s %s: launch %s / %s\n", k.name, pr.M, pr.N, pr.K, bcol ? "NT" : "NN",
                        f16 ? "fp16" : "fp32", cudaGetErrorString(err), cudaGetErrorString(sync));
            ++bad;
            if (sync != cudaSuccess) std::exit(1);
            continue;
          }
          CK(cudaMemcpy(got.data(), pr.C, got.size() * 2, cudaMemcpyDeviceToHost));
          size_t nbad = 0, first = 0;
          for (size_t i = 0; i < got.size(); ++i)
            if (got[i] != ref[i]) {
              if (!nbad) first = i;
              ++nbad;
            }
          if (nbad) {
            ++bad;
            std::printf("FAIL %-17s %dx%dx%d %s %s: %zu of %zu differ, first at (%zu, %zu): %g vs %g\n", k.name,
                        pr.M, pr.N, pr.K, bcol ? "NT" : "NN", f16 ? "fp16" : "fp32", nbad, got.size(),
                        first / pr.ldc, first % pr.ldc, __half2float(*reinterpret_cast<half*>(&got[first])),
                        __half2float(*reinterpret_cast<half*>(&ref[first])));
          }
        }
        pr.release();
      }
  std::printf("check: %d of %d runs exact\n", total - bad, total);
  for (const auto& s : {std::array<int, 3>{4096, 4096, 4096}, std::array<int, 3>{16, 4096, 4096},
                        std::array<int, 3>{3000, 5000, 2000}}) {
    // what each launcher picks for a large and a skinny problem
    Problem pr{s[0], s[1], s[2], true};
    pr.alloc();
    std::printf("%dx%dx%d NT:\n", s[0], s[1], s[2]);
    for (const Kern& k : kKernels) {
      LaunchInfo info;
      CK(k.fn(pr.args(pr.C, k.tile, k.split, k.grid), Acc::F32, 0, &info));
      std::printf("launch %-18s grid %u x %u, %u threads, %d B shared, tile %dx%d, split %d\n", k.name,
                  info.grid_x, info.grid_y, info.block, info.smem_bytes, info.tile_m, info.tile_n, info.split);
    }
    CK(cudaDeviceSynchronize());
    pr.release();
  }
  return bad;
}

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static void bench(cublasHandle_t h, const char* only) {
  const int all_shapes[][3] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048}, {4096, 4096, 1024},
                           {8192, 8192, 1024}, {128, 8192, 8192},  {16, 4096, 4096},   {3000, 5000, 2000},
                           {8192, 28672, 4096}, {4095, 4097, 4099}, {3072, 5120, 2048}, {64, 8192, 8192},
                           {512, 4096, 14336}, {1, 4096, 4096}};
  // `only`: "MxNxK,MxNxK,..." to time those shapes instead of the list above
  std::vector<std::array<int, 3>> shapes;
  for (auto& s : all_shapes) shapes.push_back({s[0], s[1], s[2]});
  if (only && *only) {
    shapes.clear();
    for (const char* q = only; *q;) {
      std::array<int, 3> s{};
      if (std::sscanf(q, "%dx%dx%d", &s[0], &s[1], &s[2]) != 3) break;
      shapes.push_back(s);
      q = std::strchr(q, ',');
      if (!q) break;
      ++q;
    }
  }
  void* flush;
  const size_t flush_bytes = 256u << 20;
  CK(cudaMalloc(&flush, flush_bytes));
  float* sink;
  CK(cudaMalloc(&sink, 132 * 256 * 4 * 8));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  // wgmma ceiling: 132 blocks x 2 warpgroups, ~2 ms
  for (int f16 = 0; f16 < 2; ++f16) {
    const int iters = 20000;
    std::vector<float> t;
    for (int r = 0; r < 7; ++r) {
      cudaEventRecord(e0);
      CK(launch_wgmma_ceiling(132, iters, f16 ? Acc::F16 : Acc::F32, sink, 0));
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      t.push_back(ms);
    }
    const double flops = wgmma_ceiling_flops(132, iters);
    std::printf("wgmma ceiling %s: %.1f TFLOPS\n", f16 ? "fp16" : "fp32", flops / median(t) / 1e9);
  }
  for (auto& s : shapes)
    for (int bcol = 0; bcol < 2; ++bcol) {
      Problem pr{s[0], s[1], s[2], bool(bcol)};
      pr.alloc();
      fill(pr.A, size_t(pr.M) * pr.lda, false, 3);
      fill(pr.B, size_t(bcol ? pr.N : pr.K) * pr.ldb, false, 4);
      const int nk = 1 + 2 * int(kKernels.size());
      std::vector<std::vector<float>> t(nk);
      const int reps = (double(pr.M) * pr.N * pr.K > 1e11) ? 10 : 30;
      for (int r = 0; r < reps; ++r)
        for (int i = 0; i < nk; ++i) {
          CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
          cudaEventRecord(e0);
          if (i == 0) cublas_ref(h, pr, pr.R, false);
          else if (takes(kKernels[(i - 1) / 2], bcol)) {
            const Kern& k = kKernels[(i - 1) / 2];
            CK(k.fn(pr.args(pr.C, k.tile, k.split, k.grid), (i - 1) % 2 ? Acc::F16 : Acc::F32, 0, nullptr));
          }
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          float ms;
          cudaEventElapsedTime(&ms, e0, e1);
          t[i].push_back(ms);
        }
      const double flops = 2.0 * pr.M * pr.N * pr.K;
      const float base = median(t[0]);
      std::printf("%5dx%5dx%5d %s cuBLAS %6.1f |", pr.M, pr.N, pr.K, bcol ? "NT" : "NN", flops / base / 1e9);
      for (int i = 1; i < nk; ++i) {
        if (!takes(kKernels[(i - 1) / 2], bcol)) continue;
        const float m = median(t[i]);
        std::printf(" %s%s %6.1f %.3fx |", kKernels[(i - 1) / 2].name, (i - 1) % 2 ? "/16" : "", flops / m / 1e9,
                    base / m);
      }
      std::printf("\n");
      pr.release();
    }
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  cublasHandle_t h;
  CK(cublasCreate(&h));
  int bad = 0;
  if (what == "check" || what == "all") bad = check(h);
  if (what == "bench" || what == "all") bench(h, argc > 2 ? argv[2] : "");
  return bad ? 1 : 0;
}
