// Sweep of wmma_multistage tile configurations against cuBLAS, in one process (GPU only).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc
//        scripts/tune_wmma_multistage.cu -lcublas -o /tmp/tune && /tmp/tune
// Prints, for NN fp32-accumulation at 4096^3 and 8192^3, the median TFLOPS (L2 flushed before each call) and
// the ratio to cublasGemmEx measured interleaved in the same run. Results go in wmma_multistage.cu's header.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "wmma_multistage.cu"

#define CHECK(x)                                                                      \
  do {                                                                                \
    auto e_ = (x);                                                                    \
    if (e_ != 0) {                                                                    \
      std::printf("error %d at %s:%d: %s\n", int(e_), __FILE__, __LINE__, #x);        \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

using namespace wmma_multistage;
using Fn = cudaError_t (*)(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);

struct Candidate {
  const char* name;
  Fn fn;
};

static float median_ms(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  const Candidate cands[] = {
      {"128x256x32 w2x4 s4", launch_tile<Tile<128, 256, 32, 2, 4, 4>>},
      {"128x256x32 w2x4 s3", launch_tile<Tile<128, 256, 32, 2, 4, 3>>},
      {"128x256x64 w2x4 s3", launch_tile<Tile<128, 256, 64, 2, 4, 3>>},
      {"256x128x32 w4x2 s4", launch_tile<Tile<256, 128, 32, 4, 2, 4>>},
      {"128x128x32 w2x2 s4", launch_tile<Tile<128, 128, 32, 2, 2, 4>>},
      {"128x128x64 w2x2 s3", launch_tile<Tile<128, 128, 64, 2, 2, 3>>},
      {"128x128x32 w2x4 s4", launch_tile<Tile<128, 128, 32, 2, 4, 4>>},
      {"64x256x32 w1x4 s4", launch_tile<Tile<64, 256, 32, 1, 4, 4>>},
  };
  cublasHandle_t handle;
  CHECK(cublasCreate(&handle));
  void* flush;
  const size_t flush_bytes = 256u << 20;
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int n : {4096, 8192}) {
    const size_t elems = size_t(n) * n;
    std::vector<half> host(elems);
    std::mt19937 rng(n);
    std::normal_distribution<float> dist;
    half *A, *B, *C;
    CHECK(cudaMalloc(&A, elems * 2));
    CHECK(cudaMalloc(&B, elems * 2));
    CHECK(cudaMalloc(&C, elems * 2));
    for (auto& x : host) x = __float2half(dist(rng));
    CHECK(cudaMemcpy(A, host.data(), elems * 2, cudaMemcpyHostToDevice));
    for (auto& x : host) x = __float2half(dist(rng));
    CHECK(cudaMemcpy(B, host.data(), elems * 2, cudaMemcpyHostToDevice));
    GemmArgs p{A, B, C, n, n, n, n, 1, n, 1, n, false};
    const float alpha = 1.f, beta = 0.f;
    // Row-major C = A B is column-major C^T = B^T A^T.
    auto cublas = [&] {
      CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, B, CUDA_R_16F, n, A, CUDA_R_16F, n,
                         &beta, C, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    const int reps = n == 4096 ? 30 : 10, rounds = 3;
    const int count = int(sizeof(cands) / sizeof(cands[0]));
    std::vector<std::vector<float>> t(count + 1);
    for (int r = 0; r < rounds; ++r) {
      for (int c = 0; c <= count; ++c) {
        for (int i = 0; i < reps + (r == 0 ? 2 : 0); ++i) {
          CHECK(cudaMemsetAsync(flush, 0, flush_bytes));
          CHECK(cudaEventRecord(e0));
          if (c == count) cublas();
          else CHECK(cands[c].fn(p, Acc::F32, 0, nullptr));
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          float ms;
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (!(r == 0 && i < 2)) t[c].push_back(ms);
        }
      }
    }
    const double flop = 2.0 * n * n * double(n);
    const float base = median_ms(t[count]);
    std::printf("%d^3  cuBLAS %.1f TFLOPS\n", n, flop / base / 1e9);
    for (int c = 0; c < count; ++c) {
      const float ms = median_ms(t[c]);
      std::printf("%d^3  %-20s %7.1f TFLOPS  %.3fx cuBLAS\n", n, cands[c].name, flop / ms / 1e9, base / ms);
    }
    CHECK(cudaFree(A));
    CHECK(cudaFree(B));
    CHECK(cudaFree(C));
  }
  return 0;
}
