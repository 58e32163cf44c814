// Host program (nvcc, no GPU): hopper::stream_k_cut and hopper::stream_k_launch (blocks/stream_k.cuh) over a grid
// of (tiles, k-blocks, SMs), and the k-blocks each slice of a cut tile starts at, printed for
// tests/test_hopper_cpu.py to compare with hgemm_common.schedules.stream_k_cut and triton_kernels.streamk.
#include <cstdio>

#include "blocks/stream_k.cuh"

int main() {
  const int sms[] = {1, 2, 3, 4, 7, 8, 13, 16, 66, 78, 114, 132, 144};
  const int long_k[] = {100, 127, 128, 129, 255, 1024, 4099};
  auto print = [](int tiles, int iters, int s) {
    const hopper::StreamKCut cut = hopper::stream_k_cut(tiles, iters, s);
    const hopper::StreamKLaunch launch = hopper::stream_k_launch(tiles, iters, s, 0);
    std::printf("cut %d %d %d %d %d %d %d %d %d", tiles, iters, s, cut.programs, cut.sk_tiles, cut.slices,
                launch.programs, launch.sk_tiles, launch.slices);
    for (int j = 0; j <= launch.slices && launch.sk_tiles; ++j)
      std::printf(" %d", hopper::slice_first(j, iters, launch.slices));
    std::printf("\n");
  };
  for (int s : sms)
    for (int tiles = 0; tiles <= 300; ++tiles) {
      for (int iters = 0; iters <= 70; ++iters) print(tiles, iters, s);
      for (int iters : long_k) print(tiles, iters, s);
    }
  return 0;
}
