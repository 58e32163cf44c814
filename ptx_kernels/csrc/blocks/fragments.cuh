// blocks/fragments.cuh — warp fragments: WMMA operand fragments (loaded with ptx/wmma.cuh's immediate
// offsets) and mma.sync m16n8k16 operands (ldmatrix addressing) and accumulators.
// Device building blocks (csrc/blocks/, one file per concern: smem layouts, copies, stage sync, fragments,
// epilogues), shared by the kernels in sm80/ and by the sweeps and tests that instantiate them.
#pragma once
#include <mma.h>
#include <type_traits>
#include "hgemm.cuh"
#include "blocks/common.cuh"
#include "blocks/element.cuh"
#include "blocks/swizzle.cuh"
#include "ptx/cvta.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mma_sync.cuh"
#include "ptx/wmma.cuh"

namespace tile {

// A warp's FM x FN grid of 16x16 fragments, one BK=16 step: its FM A and FN B operand fragments.
template <int FM, int FN, bool B_COL>
struct WmmaOperands {
  using BLayout = typename std::conditional<B_COL, nvcuda::wmma::col_major, nvcuda::wmma::row_major>::type;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> a[FM];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, BLayout> b[FN];

  // Load from shared memory: sA points at the warp's first row and the step's k (row stride lda); sB at the
  // warp's first column and the step's k: (k, n) storage with row stride ldb, or (n, k) storage when B_COL.
  __device__ __forceinline__ void load(const half* sA, int lda, const half* sB, int ldb) {
#pragma unroll
    for (int i = 0; i < FM; ++i) nvcuda::wmma::load_matrix_sync(a[i], sA + i * 16 * lda, lda);
#pragma unroll
    for (int j = 0; j < FN; ++j) nvcuda::wmma::load_matrix_sync(b[j], B_COL ? sB + j * 16 * ldb : sB + j * 16, ldb);
  }
  // The same from shared addresses known up to a constant: sA / sB are the shared addresses of the warp's
  // operands of the stage at offset 0 (as in load's pointers), A_OFF / B_OFF (bytes) the stage and k-step; row
  // strides LDA / LDB halves. Through ptx::wmma_load_*, so every offset is an immediate of the LDSM.
  template <int LDA, int LDB, int A_OFF, int B_OFF>
  __device__ __forceinline__ void load_shared(uint32_t sA, uint32_t sB) {
    load_a_shared<LDA, A_OFF>(sA);
    static_for<FN>([&](auto j) { load_b_shared<decltype(j)::value, LDB, B_OFF>(sB); });
  }
  // The A fragments alone, and B fragment J alone (same addressing).
  template <int LDA, int A_OFF>
  __device__ __forceinline__ void load_a_shared(uint32_t sA) {
    static_for<FM>([&](auto i) {
      ptx::wmma_load_a_row_m16n16k16<LDA, A_OFF + decltype(i)::value * 16 * LDA * 2>(
          reinterpret_cast<uint32_t(&)[8]>(a[decltype(i)::value].x), sA);
    });
  }
  template <int J, int LDB, int B_OFF>
  __device__ __forceinline__ void load_b_shared(uint32_t sB) {
    ptx::wmma_load_b_m16n16k16<B_COL, LDB, B_OFF + (B_COL ? J * 16 * LDB : J * 16) * 2>(
        reinterpret_cast<uint32_t(&)[8]>(b[J].x), sB);
  }
  // c[i][j] += a[i] b[j]: FM * FN wmma::mma_sync.
  // Column J of the grid: c[i][J] += a[i] b[J] for every i (A fragments from `as`, which may be another buffer).
  template <int J, typename AccFrag>
  __device__ __forceinline__ void mma_column(AccFrag (&c)[FM][FN], const WmmaOperands& as) const {
#pragma unroll
    for (int i = 0; i < FM; ++i) nvcuda::wmma::mma_sync(c[i][J], as.a[i], b[J], c[i][J]);
  }
  template <typename AccFrag>
  __device__ __forceinline__ void mma(AccFrag (&c)[FM][FN]) const {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) nvcuda::wmma::mma_sync(c[i][j], a[i], b[j], c[i][j]);
  }
};

// One BK=16 step of a warp's FM x FN grid of 16x16 fragments: load, then FM*FN wmma::mma_sync.
template <int FM, int FN, bool B_COL, typename AccFrag>
__device__ __forceinline__ void wmma_warp_step(AccFrag (&c)[FM][FN], const half* sA, int lda, const half* sB,
                                               int ldb) {
  WmmaOperands<FM, FN, B_COL> ops;
  ops.load(sA, lda, sB, ldb);
  ops.mma(c);
}

template <int FM, int FN, typename AccFrag>
__device__ __forceinline__ void fill_warp_tile(AccFrag (&c)[FM][FN]) {
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) nvcuda::wmma::fill_fragment(c[i][j], 0);
}

// ---- mma.sync fragments (m16n8k16); addressing proved against the ISA in tests/test_layouts.py -------------

// Offset (halves) of chunk c_lane + c_step of row r0 + r in a tile of layout L with row stride ld, for the
// ldmatrix addressing below: r0 is a multiple of 8 (a swizzle's row period) and c_step is even while c_lane is 0
// or 1, so the sum is c_lane ^ c_step and the swizzle, an XOR of r's bits, splits into a per-lane part the
// compiler hoists out of the loop and one XOR with the k-step's constant.
template <class L>
__device__ __forceinline__ int ldsm_off(int r0, int r, int c_lane, int c_step, int ld) {
  return (r0 + r) * ld + L::chunk(r, c_lane ^ c_step) * 8;
}

// A fragment of the 16x16 block at (m0, k0) of the tile sA (row stride lda halves, layout L): lane l points at
// row m0 + l % 16, column k0 + 8 * (l / 16). m0 and k0 are multiples of 16.
// E: the element type (half or __nv_bfloat16: ldmatrix moves 16-bit elements either way).
template <class L = Plain, typename E>
__device__ __forceinline__ void ldsm_a(uint32_t (&a)[4], const E* sA, int m0, int k0, int lda) {
  const int l = threadIdx.x % 32;
  ptx::ldmatrix_x4(a[0], a[1], a[2], a[3], ptx::smem_u32(sA + ldsm_off<L>(m0, l % 16, l / 16, k0 / 8, lda)));
}

// One B fragment (k16 x n8). B_COL=false: sB is (k, n) with row stride ldb, at (k0, n0): ldmatrix.x2.trans, lane
// l < 16 points at row k0 + l. B_COL=true: sB is (n, k) at (n0, k0): ldmatrix.x2, lane l < 16 points at
// (n0 + l % 8, k0 + 8 * (l / 8)).
template <bool B_COL>
__device__ __forceinline__ void ldsm_b(uint32_t (&b)[2], const half* sB, int ldb) {
  const int l = threadIdx.x % 32;
  if (B_COL)
    ptx::ldmatrix_x2(b[0], b[1], ptx::smem_u32(sB + (l % 8) * ldb + 8 * ((l / 8) % 2)));
  else
    ptx::ldmatrix_x2_trans(b[0], b[1], ptx::smem_u32(sB + (l % 16) * ldb));
}

// Two B fragments at once (k16 x n16 at (k0, n0): n8 tiles n0 and n0 + 8) with one ldmatrix.x4; matrix
// q = l / 8 covers k-half q % 2 of n8-tile q / 2. The tile sB is (n, k) when B_COL, else (k, n); layout L.
// k0 and n0 are multiples of 16.
template <bool B_COL, class L = Plain, typename E>
__device__ __forceinline__ void ldsm_b2(uint32_t (&b0)[2], uint32_t (&b1)[2], const E* sB, int k0, int n0,
                                        int ldb) {
  const int l = threadIdx.x % 32, q = l / 8, r = l % 8;
  if (B_COL)  // row n0 + 8 (q / 2) + r, column k0 + 8 (q % 2)
    ptx::ldmatrix_x4(b0[0], b0[1], b1[0], b1[1],
                     ptx::smem_u32(sB + ldsm_off<L>(n0, 8 * (q / 2) + r, q % 2, k0 / 8, ldb)));
  else  // row k0 + 8 (q % 2) + r, column n0 + 8 (q / 2)
    ptx::ldmatrix_x4_trans(b0[0], b0[1], b1[0], b1[1],
                           ptx::smem_u32(sB + ldsm_off<L>(k0, 8 * (q % 2) + r, q / 2, n0 / 8, ldb)));
}

// The B fragment of one n8 tile over 32 k (mma.sp m16n8k32: registers k 0-7, 8-15, 16-23, 24-31, i.e. two k16
// fragments back to back) with one ldmatrix.x4: matrix q = l / 8 covers k chunk q, so the four registers land in
// the order the instruction takes them (no moves). The tile sB is (n, k) when B_COL, else (k, n); layout L;
// k0 a multiple of 32, n0 of 8.
template <bool B_COL, class L = Plain, typename E>
__device__ __forceinline__ void ldsm_b_k32(uint32_t (&b)[4], const E* sB, int k0, int n0, int ldb) {
  const int l = threadIdx.x % 32, q = l / 8, r = l % 8;
  if (B_COL)  // row n0 + r, column k0 + 8 q
    ptx::ldmatrix_x4(b[0], b[1], b[2], b[3], ptx::smem_u32(sB + ldsm_off<L>(n0, r, q, k0 / 8, ldb)));
  else  // row k0 + 8 q + r, column n0
    ptx::ldmatrix_x4_trans(b[0], b[1], b[2], b[3], ptx::smem_u32(sB + ldsm_off<L>(k0, 8 * q + r, 0, n0 / 8, ldb)));
}

// Accumulator of one m16n8 tile for operands of element type E: fp32 = 4 floats (fp16 or bf16 operands), fp16 = 2
// registers of two halves (fp16 operands only: mma.sync has no bf16 accumulator, so MmaAcc<Acc::F16, bf16> does not
// exist). pair(i): row half i's two columns rounded to E (blocks/element.cuh).
template <Acc ACC, typename E = half>
struct MmaAcc;
template <typename E>
struct MmaAcc<Acc::F32, E> {
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  __device__ __forceinline__ void mma(const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    if constexpr (is_bf16<E>) ptx::mma_m16n8k16_f32_bf16(v, a, b, v);
    else ptx::mma_m16n8k16_f32(v, a, b, v);
  }
  __device__ __forceinline__ typename Element<E>::Pair pair(int i) const {
    return Element<E>::pair(v[2 * i], v[2 * i + 1]);
  }
};
template <>
struct MmaAcc<Acc::F16, half> {
  uint32_t v[2] = {0u, 0u};
  __device__ __forceinline__ void mma(const uint32_t (&a)[4], const uint32_t (&b)[2]) { ptx::mma_m16n8k16_f16(v, a, b, v); }
  __device__ __forceinline__ half2 pair(int i) const { return *reinterpret_cast<const half2*>(&v[i]); }
};

}  // namespace tile
