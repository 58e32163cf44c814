// blocks/splitk_reduce.cuh — the second pass of a split-K over the grid: S fp32 partial products of C (slices of a
// global workspace, M x ldw each, ldw = N rounded up to 4) added in a fixed order and stored in E, launched as a
// programmatic dependent of the kernel that wrote them (sm_90). Shared by the kernels that split K over the grid
// and hand the sum to it (sm90/wgmma_splitk_grid.cu, sm90/mma_stream.cu, and sm90/wgmma_persistent.cu's cut tiles),
// as is the cap on their workspace (cap_split).
// The reduction is the same tree on every run, so the bits never depend on timing: in a block of 8 warps, warp w
// adds slices [w S / 8, (w + 1) S / 8) of 32 float4 columns in index order, then warp 0 adds the 8 warps' sums in
// warp order. The whole grid reduces: a 128 x 128 x 131072 product leaves 8 MB of partial tiles, which the last
// block of the tile, adding them alone, would read through one SM.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "blocks/element.cuh"
#include "ptx/griddepcontrol.cuh"

namespace splitk {

constexpr int kReduceWarps = 8;  // the reduce kernel's block: 8 warps x 32 float4 columns

// Forced splits of a large output are cut to a workspace of at most this many bytes (the planned ones, on outputs
// that fill a fraction of one wave of tiles, need a few MB).
constexpr int64_t kMaxWorkspaceBytes = int64_t(256) << 20;

// A split of `split` slices of slice_bytes each, cut to the slices kMaxWorkspaceBytes holds (at least one).
inline int cap_split(int split, int64_t slice_bytes) {
  return split > 1 && split * slice_bytes > kMaxWorkspaceBytes
             ? int(std::max<int64_t>(1, kMaxWorkspaceBytes / slice_bytes))
             : split;
}

// Four consecutive elements of a row of C from fp32, the first `valid` of them (all four: one 8-byte store where
// `vec`, C's base 8-byte aligned and ldc a multiple of 4).
template <typename E>
__device__ __forceinline__ void store4(E* dst, float4 t, int valid, bool vec) {
  if (vec && valid >= 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(tile::pair_bits<E>(t.x, t.y), tile::pair_bits<E>(t.z, t.w));
  } else {
    const float v[4] = {t.x, t.y, t.z, t.w};
    for (int e = 0; e < 4 && e < valid; ++e) dst[e] = tile::to_element<E>(v[e]);
  }
}

namespace {

// C = the sum of the workspace's S slices, in the fixed order of the file's header. Lane l of warp w takes float4
// column chunk blockIdx.x * 32 + l of the M x ldw slices (row-major: chunk / (ldw / 4) is the row) and slices
// [w S / 8, (w + 1) S / 8); a warp with no slices (S < 8) adds nothing. `vec`: C takes 8-byte stores of 4 elements
// (8-byte aligned base, ldc a multiple of 4).
template <typename E>
__global__ void __launch_bounds__(kReduceWarps * 32)
    splitk_reduce_kernel(const float* __restrict__ ws, int split, int ldw, E* __restrict__ C, int64_t ldc, int M,
                         int N, bool vec) {
  extern __shared__ float4 sums[];  // (warp, lane), kReduceWarps x 32: each warp's sum of its slices
  ptx::griddepcontrol_wait();                // the product's partial tiles are complete and visible
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row_chunks = ldw / 4, slice_chunks = int64_t(M) * row_chunks;
  const int64_t chunk = int64_t(blockIdx.x) * 32 + lane;
  const auto first = [split](int w) { return int(int64_t(split) * w / kReduceWarps); };
  const float4* src = reinterpret_cast<const float4*>(ws) + chunk;
  if (chunk < slice_chunks && first(warp + 1) > first(warp)) {
    const int s0 = first(warp), s1 = first(warp + 1);
    float4 sum = __ldcs(src + s0 * slice_chunks);
    for (int s = s0 + 1; s < s1; s += 4) {  // four loads in flight, then the adds in slice order
      float4 v[4];
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (s + q < s1) v[q] = __ldcs(src + (s + q) * slice_chunks);
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (s + q < s1) sum.x += v[q].x, sum.y += v[q].y, sum.z += v[q].z, sum.w += v[q].w;
    }
    sums[warp * 32 + lane] = sum;
  }
  __syncthreads();
  if (warp != 0 || chunk >= slice_chunks) return;
  float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
  bool any = false;
#pragma unroll
  for (int w = 0; w < kReduceWarps; ++w) {
    if (first(w + 1) == first(w)) continue;
    const float4 v = sums[w * 32 + lane];
    if (any) t.x += v.x, t.y += v.y, t.z += v.z, t.w += v.w;
    else t = v;
    any = true;
  }
  const int row = int(chunk / row_chunks), col = int(chunk % row_chunks) * 4;
  if (col >= N) return;
  store4(C + int64_t(row) * ldc + col, t, N - col, vec);
}

}  // namespace

// The reduction of S = split slices of `ws` (M x ldw fp32 each) into C (M x N, row stride ldc), on `stream` after
// the kernel that wrote them, as its programmatic dependent: queued while that kernel still runs, it waits for the
// kernel's grid to complete before it reads (that kernel calls griddepcontrol.launch_dependents once its blocks
// are past their main loops).
template <typename E>
inline cudaError_t launch_reduce(const float* ws, int split, int ldw, E* C, int64_t ldc, int M, int N,
                                 cudaStream_t stream) {
  const int64_t chunks = int64_t(M) * (ldw / 4);
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned((chunks + 31) / 32));
  cfg.blockDim = dim3(kReduceWarps * 32);
  cfg.dynamicSmemBytes = kReduceWarps * 32 * sizeof(float4);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  const bool vec = ldc % 4 == 0 && reinterpret_cast<uintptr_t>(C) % 8 == 0;
  return cudaLaunchKernelEx(&cfg, splitk_reduce_kernel<E>, ws, split, ldw, C, ldc, M, N, vec);
}

}  // namespace splitk
