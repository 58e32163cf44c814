// blocks/epilogue.cuh — epilogues: accumulators to C, guarded at the edges: WMMA fragments through a
// per-warp scratch, m16n8 accumulators straight from registers, and a block's staged C tile copied out
// in 16-byte chunks.
// Device building blocks (csrc/blocks/, one file per concern: smem layouts, copies, stage sync, fragments,
// epilogues), shared by the kernels in sm80/ and by the sweeps and tests that instantiate them.
#pragma once
#include <mma.h>
#include "hgemm.cuh"
#include "blocks/common.cuh"
#include "blocks/element.cuh"
#include "blocks/fragments.cuh"

namespace tile {

// Store one 16x16 accumulator fragment at C[row0.., col0..], guarded at the edges: through a per-warp 16x16
// scratch in shared memory (fragment layouts are opaque), then each lane writes 8 consecutive halves of one row.
template <typename AccT, typename Frag>
__device__ __forceinline__ void store_fragment(const Frag& frag, AccT* scratch, half* C, int64_t ldc, int row0,
                                               int col0, int M, int N, bool c_vec_ok) {
  using namespace nvcuda;
  wmma::store_matrix_sync(scratch, frag, 16, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  const int r = lane / 2, c = (lane % 2) * 8;
  const int row = row0 + r, col = col0 + c;
  if (row < M) {
    alignas(16) half v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = static_cast<half>(scratch[r * 16 + c + e]);
    half* dst = C + row * ldc + col;
    if (c_vec_ok && col + 8 <= N) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (col + e < N) dst[e] = v[e];
    }
  }
  __syncwarp();
}

// Epilogue of a warp's FM x FN fragment grid whose top-left output element is (row0, col0).
template <int FM, int FN, typename AccT, typename AccFrag>
__device__ __forceinline__ void store_warp_tile(const AccFrag (&c)[FM][FN], AccT* scratch, const GemmArgs& p,
                                                int row0, int col0) {
  const bool c_vec_ok = aligned16(p.C) && p.ldc % 8 == 0;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      if (row0 + i * 16 < p.M && col0 + j * 16 < p.N)
        store_fragment(c[i][j], scratch, p.C, p.ldc, row0 + i * 16, col0 + j * 16, p.M, p.N, c_vec_ok);
}

// The last step of an epilogue that stages the block's BM x BN output tile in shared memory (sC, row stride ldc
// elements of SrcT: C's element type E, or float rounded to E here): the block copies it to C[row0.., col0..] in rows of 8 elements,
// 16-byte loads and stores where C allows (consecutive threads take consecutive chunks of a row, so 8 threads
// write a full 128-byte line), element by element at the right and bottom edges. sC rows must be 16-byte aligned.
template <int BM, int BN, int THREADS, typename SrcT, typename E>
__device__ __forceinline__ void copy_out_tile(const SrcT* sC, int ldc, const GemmArgsOf<E>& p, int row0, int col0) {
  static_assert(BN % 8 == 0, "rows of 8-half chunks");
  const bool vec = aligned16(p.C) && p.ldc % 8 == 0;
  for (int ch = threadIdx.x; ch < BM * BN / 8; ch += THREADS) {
    const int rr = ch / (BN / 8), cc = (ch % (BN / 8)) * 8;
    const int row = row0 + rr, col = col0 + cc;
    if (row >= p.M || col >= p.N) continue;
    const SrcT* src = sC + rr * ldc + cc;
    E* dst = p.C + row * p.ldc + col;
    if (vec && col + 8 <= p.N) {
      uint4 v;
      if constexpr (std::is_same<SrcT, E>::value) {
        v = *reinterpret_cast<const uint4*>(src);
      } else {
        const float4 lo = reinterpret_cast<const float4*>(src)[0], hi = reinterpret_cast<const float4*>(src)[1];
        v = make_uint4(pair_bits<E>(lo.x, lo.y), pair_bits<E>(lo.z, lo.w), pair_bits<E>(hi.x, hi.y),
                       pair_bits<E>(hi.z, hi.w));
      }
      *reinterpret_cast<uint4*>(dst) = v;
    } else {
      for (int e = 0; e < 8 && col + e < p.N; ++e) dst[e] = to_element<E>(src[e]);
    }
  }
}

// Store one m16n8 accumulator at C[row0.., col0..], guarded: lane (g, t) holds rows g and g + 8, columns 2t and
// 2t + 1 — one 4-byte pair store each when both columns are inside and C allows it.
template <Acc ACC, typename E>
__device__ __forceinline__ void store_acc(const MmaAcc<ACC, E>& c, const GemmArgsOf<E>& p, int row0, int col0,
                                          bool c_pair_ok) {
  const int l = threadIdx.x % 32, g = l / 4, t = l % 4;
  const int col = col0 + 2 * t;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = row0 + g + 8 * i;
    if (row >= p.M || col >= p.N) continue;
    const typename Element<E>::Pair v = c.pair(i);
    E* dst = p.C + row * p.ldc + col;
    if (c_pair_ok && col + 1 < p.N) {
      *reinterpret_cast<typename Element<E>::Pair*>(dst) = v;
    } else {
      dst[0] = v.x;
      if (col + 1 < p.N) dst[1] = v.y;
    }
  }
}

// C allows pair (half2, bfloat162) stores: 4-byte aligned base and an even row stride (columns 2t are even).
template <typename E>
__host__ __device__ inline bool c_pairs_aligned(const GemmArgsOf<E>& p) { return (reinterpret_cast<uintptr_t>(p.C) & 3) == 0 && p.ldc % 2 == 0; }

// Store a warp's MI x NI grid of m16n8 accumulators whose top-left element is C[row0, col0].
template <int MI, int NI, Acc ACC, typename E>
__device__ __forceinline__ void store_warp_acc(const MmaAcc<ACC, E> (&c)[MI][NI], const GemmArgsOf<E>& p, int row0,
                                               int col0) {
  const bool pairs = c_pairs_aligned(p);
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) store_acc(c[i][j], p, row0 + i * 16, col0 + j * 8, pairs);
}

}  // namespace tile
