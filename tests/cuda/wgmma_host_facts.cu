// Host-side facts of the Hopper blocks, printed for tests/test_hopper_cpu.py (built with nvcc for sm_90a, run on
// the CPU): shared-memory matrix descriptors and the epilogue staging buffer's swizzled offsets.
#include <cstdio>

#include "blocks/wgmma_tile.cuh"

int main() {
  const unsigned addrs[] = {0u, 1024u, 8192u + 32u, 0x3fff0u, 227u * 1024u};
  const unsigned strides[][2] = {{16u, 1024u}, {8192u, 1024u}, {1024u, 8192u}};
  for (unsigned a : addrs)
    for (auto& st : strides)
      std::printf("desc %u %u %u %llu\n", a, st[0], st[1],
                  static_cast<unsigned long long>(ptx::make_smem_desc_sw128(a, st[0], st[1])));
  for (int r = 0; r < 64; r += 3)
    for (int c = 0; c < 128; c += 2) std::printf("stage %d %d %u\n", r, c, hopper::staging_offset(r, c));
  return 0;
}
