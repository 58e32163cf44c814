// Host program (nvcc, no GPU): prints the sparse Hopper stage's shared-memory placements and 64-byte-swizzle
// descriptors (blocks/wgmma_sp_tile.cuh) for tests/test_sparse.py to check against TMA's swizzles and the ISA's
// descriptor fields.
#include <cstdio>

#include "blocks/wgmma_sp_tile.cuh"

int main() {
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < hopper_sp::BKC; ++c) std::printf("a %d %d %u\n", r, c, hopper_sp::a_offset(r, c));
  for (int n = 0; n < 256; ++n)
    for (int k = 0; k < hopper::BK; ++k)
      std::printf("b %d %d %u %u\n", n, k, hopper_sp::b_kmajor_offset(n, k), hopper_sp::b_nmajor_offset(n, k));
  const unsigned addrs[] = {0, 32, 4096, 4128, 0x31000, 0x31020};
  for (unsigned addr : addrs)
    std::printf("desc %u %u %llu\n", addr, hopper_sp::kSw64SBO,
                static_cast<unsigned long long>(ptx::make_smem_desc_sw64(addr, hopper_sp::kSw64SBO)));
  return 0;
}
