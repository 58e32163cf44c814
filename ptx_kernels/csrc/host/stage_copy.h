// host/stage_copy.h — the staging copy's launcher (host/stage_copy.cu), for binding.cpp. Plain C++: the binding is
// compiled by the host compiler.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

// One matrix to stage: rows x cols elements of 2 bytes (fp16 or bf16: the copy moves bits), row-major with unit
// column stride on both sides; `src` at any 2-byte alignment and row pitch, `dst` with 16-byte aligned base and
// pitch. Pitches in elements.
struct StageCopy {
  const void* src;
  void* dst;
  int64_t src_pitch, dst_pitch;
  int64_t rows, cols;
};

// Copies `count` (1 or 2) matrices in one launch on `stream`: a call's A and B, whichever its kernel cannot read
// in place (ptx_kernels.call: rows off 16 bytes, which a TMA descriptor refuses).
cudaError_t launch_stage_copy(const StageCopy* copies, int count, cudaStream_t stream);
