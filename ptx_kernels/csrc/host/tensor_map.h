// host/tensor_map.h — TMA tensor maps for fp16 and bf16 matrices, built with the driver's cuTensorMapEncodeTiled and cached.
//
// The driver function is reached through cudaGetDriverEntryPointByVersion, so the extension needs no -lcuda.
// L2 promotion 128 bytes, not 256: with a row pitch that is not a multiple of 128 bytes (B row-major at
// 3000x5000x2000) 256-byte promotion fetched twice the lines each box row needs (docs/design/hopper.md).
// A map encodes the global address, so it is cached by everything it encodes: (address, shape, leading
// dimension, box, swizzle). A repeated call with the same tensor reuses it; a new allocation at the same address
// with the same shape describes the same bytes, so reusing its map is correct too.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <array>
#include <cstdint>
#include <mutex>

#include "hgemm.cuh"

namespace host {

// What one map describes: a row-major (rows x cols) fp16 or bf16 (dtype) matrix with leading dimension ld (elements), loaded or
// stored in boxes of (box_rows x box_cols) with the 128-byte swizzle (box_cols * 2 bytes <= 128) or none.
// The 2:4 sparse kernel adds two kinds: its compressed A with the 64-byte swizzle (swizzle64, box rows of 64 bytes)
// and its metadata, 32-bit words (words) without swizzle.
struct TensorMapKey {
  const void* ptr;
  uint64_t rows, cols, ld;
  uint32_t box_rows, box_cols;
  bool swizzle128;
  bool swizzle64 = false;
  bool words = false;  // 32-bit elements (int32) instead of 16-bit ones
  DType dtype = DType::F16;  // the 16-bit elements' type (TMA copies bytes either way; the map names the type)
  bool operator==(const TensorMapKey& o) const {
    return ptr == o.ptr && rows == o.rows && cols == o.cols && ld == o.ld && box_rows == o.box_rows &&
           box_cols == o.box_cols && swizzle128 == o.swizzle128 && swizzle64 == o.swizzle64 && words == o.words &&
           dtype == o.dtype;
  }
};

// TMA's own limits: 16-byte aligned base, leading dimension a multiple of 16 bytes, box edges <= 256.
inline bool tma_describable(const void* ptr, uint64_t ld) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (ld * 2) % 16 == 0;
}

inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

inline cudaError_t encode(const TensorMapKey& k, CUtensorMap* out) {
  auto fn = encode_tiled();
  if (!fn) return cudaErrorNotSupported;
  const uint64_t elem = k.words ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(k.ptr) % 16 != 0 || (k.ld * elem) % 16 != 0) return cudaErrorMisalignedAddress;
  const cuuint64_t dims[2] = {k.cols, k.rows};
  const cuuint64_t strides[1] = {k.ld * elem};
  const cuuint32_t box[2] = {k.box_cols, k.box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUtensorMapSwizzle swizzle = k.swizzle128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                      : k.swizzle64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                    : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUtensorMapDataType type = k.words                  ? CU_TENSOR_MAP_DATA_TYPE_INT32
                                   : k.dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  auto encode_once = [&] {
    return fn(out, type, 2, const_cast<void*>(k.ptr), dims, strides, box, elem_strides,
              CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  CUresult r = encode_once();
  if (r != CUDA_SUCCESS) {
    // The encoder is a driver call and needs a current context, which a host thread that has made no runtime call
    // needing one lacks: torch runs backward on autograd threads of its own that set the device without making its
    // context current (pytorch/pytorch#124565), so a Hopper kernel called first thing in a backward failed here.
    // cudaFree(nullptr) makes the device's primary context current on this thread; then once more.
    cudaFree(nullptr);
    r = encode_once();
  }
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// A small cache of recently built maps (round-robin replacement), safe to call from several host threads.
inline cudaError_t cached_tensor_map(const TensorMapKey& k, CUtensorMap* out) {
  constexpr int kSlots = 32;
  struct Slot {
    TensorMapKey key;
    CUtensorMap map;
    bool used;
  };
  static std::array<Slot, kSlots> slots{};
  static int next = 0;
  static std::mutex mu;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const Slot& s : slots)
      if (s.used && s.key == k) {
        *out = s.map;
        return cudaSuccess;
      }
  }
  CUtensorMap m;
  const cudaError_t err = encode(k, &m);
  if (err != cudaSuccess) return err;
  std::lock_guard<std::mutex> lock(mu);
  slots[next] = Slot{k, m, true};
  next = (next + 1) % kSlots;
  *out = m;
  return cudaSuccess;
}

}  // namespace host
