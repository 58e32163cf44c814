// Host-side facts of the Hopper blocks, printed for tests/test_hopper_cpu.py (built with nvcc for sm_90a, run on
// the CPU): shared-memory matrix descriptors, the epilogue staging buffer's swizzled offsets, the tile / split-K
// plans of wgmma_persistent and wgmma_splitk on a 132-SM GPU where 30 clusters of 4 fit at once,
// wgmma_persistent's unsplit plans with its 256 x 152 tile offered (column-major B), the plans of the split over
// the grid (wgmma_splitk_grid) with wgmma_persistent's choice of it, and its plans with the cut tiles offered, and
// with the swapped cut tiles.
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
  const int shapes[][3] = {{1, 4096, 4096},   {16, 4096, 4096},   {64, 8192, 8192},   {128, 8192, 8192},
                           {512, 4096, 14336}, {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
                           {4096, 4096, 1024}, {8192, 8192, 8192}, {8192, 28672, 4096}, {3000, 5000, 2000},
                           {4095, 4097, 4099}, {4096, 16, 4096},   {8192, 8192, 64},   {16, 4096, 8},
                           {7, 9, 13},         {33, 500, 300},     {1, 1, 1},          {17, 1000, 4099}};
  for (auto& s : shapes)
    for (int force_split : {0, 1, 2, 4}) {
      const hopper::Plan p = hopper::choose_plan(s[0], s[1], s[2], 132, 0, force_split, 4, 132, 120);
      std::printf("plan %d %d %d %d %d %d\n", s[0], s[1], s[2], force_split, p.bn, p.split);
    }
  // wgmma_persistent's unsplit plans with B column-major (256 x 152 offered) and 128-byte rows (128 x 192 offered)
  const int more[][3] = {{3001, 4999, 2003}, {3072, 5120, 2048}, {16384, 16384, 16384}, {8192, 8192, 1024}};
  auto tall_plans = [](const int (*list)[3], int count) {
    for (int i = 0; i < count; ++i)
      for (double speed192 : {0.0, 0.96}) {
        const int* s = list[i];
        const hopper::Plan p = hopper::choose_plan(s[0], s[1], s[2], 132, 0, 0, 4, 132, 120, speed192,
                                                   hopper::kSpeedTall);
        std::printf("tall %d %d %d %d %d %d %d\n", s[0], s[1], s[2], speed192 > 0, p.bm, p.bn, p.split);
      }
  };
  tall_plans(shapes, int(sizeof shapes / sizeof shapes[0]));
  tall_plans(more, int(sizeof more / sizeof more[0]));
  // split-K over the grid: hopper::choose_grid_split's tile and slices, auto and forced, and wgmma_persistent's choice
  // between its own plan and the grid's (hopper::prefer_grid_split) on the issue's suites, the shapes above and the
  // GPU tests' small outputs
  const int grid_shapes[][3] = {
      {256, 256, 65536}, {128, 128, 131072}, {512, 512, 16384}, {256, 1024, 32768},  // small_out_large_k
      {64, 4096, 4096},  {64, 14336, 4096},  {64, 4096, 14336}, {128, 4096, 4096},   {128, 14336, 4096},
      {128, 4096, 14336}, {256, 4096, 4096}, {256, 14336, 4096}, {256, 4096, 14336},  // m_sweep
      {512, 4096, 4096},  {4096, 4096, 512}, {4096, 14336, 4096}, {14336, 4096, 4096}, {4096, 4096, 14336},
      {16384, 8192, 8192}, {8192, 8192, 16384},                                        // training
      {128, 128, 32768},  {256, 256, 16384}, {200, 130, 20001}, {96, 520, 9000}, {128, 256, 16384}};
  auto route = [](const int* s) {
    const hopper::Plan own = hopper::choose_plan(s[0], s[1], s[2], 132, 0, 0, 4, 132, 120, 0.96, hopper::kSpeedTall);
    const hopper::Plan p = hopper::prefer_grid_split(own, s[0], s[1], s[2], 132);
    std::printf("route %d %d %d %d %d %d %.4f %.4f\n", s[0], s[1], s[2], int(p.grid), p.bn, p.split, own.score,
                own.fill);
    for (int force : {0, 3, 8, 64, 300}) {
      const hopper::Plan g = hopper::choose_grid_split(s[0], s[1], s[2], 132, 0, force);
      std::printf("grid %d %d %d %d %d %d\n", s[0], s[1], s[2], force, g.bn, g.split);
    }
    for (int bn : {256, 128, 64}) {
      const hopper::Plan g = hopper::choose_grid_split(s[0], s[1], s[2], 132, bn);
      std::printf("gridw %d %d %d %d %d %.6f\n", s[0], s[1], s[2], g.bn, g.split, g.score);
    }
  };
  // outputs that are not skinny with a long K (a sweep's shapes) and the suites' squares and LLM shapes
  const int wide_shapes[][3] = {{192, 3232, 16760}, {800, 920, 30128}, {384, 1552, 16584}, {240, 2232, 22256},
                                {376, 3016, 22824}, {1808, 312, 3872}, {2560, 408, 3952}, {384, 2880, 4200},
                                {528, 1950, 10832}, {592, 1248, 10640}, {2048, 2048, 2048}, {8192, 8192, 8192},
                                {8192, 28672, 4096}, {16384, 16384, 16384}};
  for (const auto& s : grid_shapes) route(s);
  for (const auto& s : shapes) route(s);
  for (const auto& s : wide_shapes) route(s);
  // the cut tiles (hopper::cut_tile) and wgmma_persistent's unsplit plans with none, the whole-box ones (row-major
  // B) or all of them offered, on the shapes above and outputs whose tile counts 256, 192 and 128 leave off rounds
  for (int i = 0; i < hopper::kCutTileCount; ++i)
    std::printf("cuttile %d %d %d\n", hopper::kCutFirstCode + i, hopper::cut_tile(i).bm, hopper::cut_tile(i).bn);
  const int cut_shapes[][3] = {{8288, 848, 1816}, {1288, 1576, 2512}, {792, 5560, 27400}, {5624, 2336, 2480},
                               {960, 17400, 2304}, {4096, 4096, 4104}, {1064, 7880, 4848}, {13712, 856, 320}};
  auto cut_plans = [](const int (*list)[3], int count) {
    for (int i = 0; i < count; ++i)
      for (int menu : {hopper::kNoCut, hopper::kCutWholeBoxes, hopper::kCutAll}) {
        const int* s = list[i];
        const hopper::Plan p = hopper::choose_plan(s[0], s[1], s[2], 132, 0, 0, 4, 132, 120, 0.96,
                                                   menu == hopper::kCutAll ? hopper::kSpeedTall : 0.0, menu);
        std::printf("cut %d %d %d %d %d %d %d %d %.4f\n", s[0], s[1], s[2], menu, p.bm, p.bn, p.split, p.cut,
                    p.score);
      }
  };
  cut_plans(shapes, int(sizeof shapes / sizeof shapes[0]));
  cut_plans(cut_shapes, int(sizeof cut_shapes / sizeof cut_shapes[0]));
  // the swapped cut tiles (hopper::kSwapFirstCode) and the unsplit plans with all cut tiles offered, without and
  // with the swapped ones, on the shapes above and outputs whose M the 128-row tiles cover poorly
  for (int i = 0; i < hopper::kCutTileCount; ++i)
    if (hopper::swappable(i))
      std::printf("swaptile %d %d %d\n", hopper::kSwapFirstCode + i, hopper::cut_tile(i).bm, hopper::cut_tile(i).bn);
  for (int i = 0; i < hopper::kCutTileCount; ++i)  // the paired ones (hopper::kPairFirstCode), pinned only
    if (hopper::pairable(i))
      std::printf("pairtile %d %d %d\n", hopper::kPairFirstCode + i, hopper::cut_tile(i).bm, hopper::cut_tile(i).bn);
  const int swap_shapes[][3] = {{160, 24016, 3048}, {392, 5200, 5040}, {168, 29144, 4944}, {4504, 608, 3776},
                                {1056, 3888, 8688}, {160, 8136, 8624}, {200, 8192, 8192}, {129, 30000, 1000}};
  auto swap_plans = [](const int (*list)[3], int count) {
    for (int i = 0; i < count; ++i)
      for (bool swap : {false, true}) {
        const int* s = list[i];
        const hopper::Plan p = hopper::choose_plan(s[0], s[1], s[2], 132, 0, 0, 4, 132, 120, 0.96,
                                                   hopper::kSpeedTall, hopper::kCutAll, swap);
        std::printf("swap %d %d %d %d %d %d %d %d %d %.4f\n", s[0], s[1], s[2], int(swap), p.bm, p.bn, p.split, p.cut,
                    int(p.swap), p.score);
      }
  };
  swap_plans(shapes, int(sizeof shapes / sizeof shapes[0]));
  swap_plans(cut_shapes, int(sizeof cut_shapes / sizeof cut_shapes[0]));
  swap_plans(swap_shapes, int(sizeof swap_shapes / sizeof swap_shapes[0]));
  return 0;
}
