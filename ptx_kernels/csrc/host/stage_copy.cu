// host/stage_copy.cu — the staging copy: operands whose rows a TMA descriptor cannot read (base or row pitch off
// 16 bytes) copied into buffers whose rows start on 128-byte lines, a call's A and B in one launch
// (ptx_kernels.call stages them; the buffers come from Torch's caching allocator there).
//
// Each thread moves 16-byte chunks: 8 elements of one row, read in the widest loads the source row's alignment
// allows (its base and pitch share 2, 4, 8 or 16 bytes: `width`, the same for every row) and stored in one 16-byte
// store (the destination's rows are 16-byte aligned). A row's last chunk, where cols is not a multiple of 8, moves
// element by element and writes nothing past cols. Bits move unchanged: NaN payloads and signed zeros included.
// A block takes `rows_per_block` rows of one segment of at most kThreads chunks: a long row is cut into segments,
// so that a few long rows still spread over the SMs (a decode-sized A, a B of few rows); short rows are packed
// several to a block.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "host/stage_copy.h"

namespace {

constexpr int kThreads = 256, kChunkElems = 8;

struct Job {
  const uint8_t* src;
  uint8_t* dst;
  int64_t src_pitch, dst_pitch;  // bytes
  int64_t rows, cols;            // cols in elements
  int64_t chunks;                // per row: cdiv(cols, 8)
  int seg, segs, rows_per_block, width;
  int64_t blocks;
};

// 16 bytes from `p`, whose address is a multiple of W, in loads of W bytes.
template <int W>
__device__ __forceinline__ uint4 load16(const uint8_t* p) {
  if constexpr (W == 16) {
    return *reinterpret_cast<const uint4*>(p);
  } else {
    using Word = typename std::conditional<W == 8, uint2, typename std::conditional<W == 4, uint32_t,
                                                                                      uint16_t>::type>::type;
    Word w[16 / W];
#pragma unroll
    for (int i = 0; i < 16 / W; ++i) w[i] = reinterpret_cast<const Word*>(p)[i];
    uint4 v;
    memcpy(&v, w, 16);
    return v;
  }
}

template <int W>
__device__ __forceinline__ void copy_block(const Job& job, int64_t block) {
  const int64_t row_block = block / job.segs, seg = block % job.segs;
  const int span = job.rows_per_block * job.seg;
  for (int i = threadIdx.x; i < span; i += kThreads) {
    const int64_t r = row_block * job.rows_per_block + i / job.seg, j = seg * job.seg + i % job.seg;
    if (r >= job.rows || j >= job.chunks) continue;
    const uint8_t* s = job.src + r * job.src_pitch + j * 16;
    uint8_t* d = job.dst + r * job.dst_pitch + j * 16;
    const int64_t left = job.cols - j * kChunkElems;  // elements of this chunk inside the row
    if (left >= kChunkElems) {
      *reinterpret_cast<uint4*>(d) = load16<W>(s);
    } else {
      for (int e = 0; e < left; ++e)
        reinterpret_cast<uint16_t*>(d)[e] = reinterpret_cast<const uint16_t*>(s)[e];
    }
  }
}

struct Jobs {
  Job job[2];
};

// Matrix blockIdx.y of the launch (its blocks past that matrix's own count do nothing). __grid_constant__: the job
// is read where the parameters lie, not copied to the stack to be indexed.
__global__ void __launch_bounds__(kThreads) stage_copy_kernel(const __grid_constant__ Jobs jobs) {
  const Job& job = jobs.job[blockIdx.y];
  if (int64_t(blockIdx.x) >= job.blocks) return;
  switch (job.width) {  // the same for the whole block
    case 16: copy_block<16>(job, blockIdx.x); break;
    case 8: copy_block<8>(job, blockIdx.x); break;
    case 4: copy_block<4>(job, blockIdx.x); break;
    default: copy_block<2>(job, blockIdx.x); break;
  }
}

Job job_of(const StageCopy& c) {
  Job j{};
  j.src = static_cast<const uint8_t*>(c.src);
  j.dst = static_cast<uint8_t*>(c.dst);
  j.src_pitch = 2 * c.src_pitch, j.dst_pitch = 2 * c.dst_pitch;
  j.rows = c.rows, j.cols = c.cols;
  j.chunks = (c.cols + kChunkElems - 1) / kChunkElems;
  if (j.chunks == 0 || c.rows == 0) {  // nothing to copy: no blocks
    j.seg = j.segs = j.rows_per_block = 1;
    return j;
  }
  j.seg = int(std::min<int64_t>(j.chunks, kThreads));
  j.segs = int((j.chunks + j.seg - 1) / j.seg);
  j.rows_per_block = std::max(1, kThreads / std::max(j.seg, 1));
  const uint64_t bits = reinterpret_cast<uintptr_t>(c.src) | uint64_t(j.src_pitch) | 16;
  j.width = int(bits & (~bits + 1));  // the lowest set bit: the alignment base and pitch share, at most 16
  j.blocks = (c.rows + j.rows_per_block - 1) / j.rows_per_block * j.segs;
  return j;
}

}  // namespace

cudaError_t launch_stage_copy(const StageCopy* copies, int count, cudaStream_t stream) {
  if (count < 1 || count > 2) return cudaErrorInvalidValue;
  Jobs jobs{{job_of(copies[0]), count == 2 ? job_of(copies[1]) : Job{}}};
  for (int i = 0; i < count; ++i) {
    const Job& j = jobs.job[i];
    if (j.rows < 0 || j.cols < 0 || reinterpret_cast<uintptr_t>(j.dst) % 16 || j.dst_pitch % 16 ||
        (j.rows > 1 && j.dst_pitch < 2 * j.cols))
      return cudaErrorInvalidValue;
  }
  const int64_t blocks = std::max(jobs.job[0].blocks, jobs.job[1].blocks);
  if (blocks == 0) return cudaSuccess;
  if (blocks > int64_t(0x7fffffff)) return cudaErrorInvalidValue;
  stage_copy_kernel<<<dim3(unsigned(blocks), unsigned(count)), kThreads, 0, stream>>>(jobs);
  return cudaGetLastError();
}
