// blocks/swizzle.cuh — shared-memory tile layouts (smem layouts): plain rows and the XOR swizzle of
// 16-byte chunks; host-callable constexpr, so a host program can print them (tests/test_ptx_compile.py).
// Device building blocks (csrc/blocks/, one file per concern: smem layouts, copies, stage sync, fragments,
// epilogues), shared by the kernels in sm80/ and by the sweeps and tests that instantiate them.
#pragma once


namespace tile {

// Shared-memory tile layouts: element offset of (row, col) in a tile with row stride ld halves.
struct Plain {
  __host__ __device__ static constexpr int chunk(int, int c) { return c; }
  __host__ __device__ static constexpr int off(int r, int c, int ld) { return r * ld + c; }
};
// XOR swizzle of 16-byte chunks: chunk c of row r is stored at chunk c ^ f(r), so the 8 rows an ldmatrix reads
// (same logical chunk) and the chunks a warp's cp.async writes land in 8 different bank groups (of 4 banks).
// CH = chunks per row: rows of 8+ chunks XOR with r % 8; narrower rows share a 128-byte bank line between
// 8 / CH rows, so the XOR uses the row bits above those.
template <int CH>
struct Xor {
  static_assert(CH == 2 || CH == 4 || CH % 8 == 0, "chunks per row: 2, 4 or a multiple of 8");
  __host__ __device__ static constexpr int chunk(int r, int c) {
    return CH >= 8 ? (c ^ (r % 8)) : (c ^ ((r / (8 / CH)) % CH));
  }
  __host__ __device__ static constexpr int off(int r, int c, int ld) { return r * ld + chunk(r, c / 8) * 8 + c % 8; }
};

// True when the layout repeats every `rows` rows: off(r + rows, c) = off(r, c) + rows * ld (Plain always; the
// XOR swizzles have a period of 8 rows).
template <class Layout, int ROWS_STEP, int COLS, int LDS>
__host__ __device__ constexpr bool repeats_every() {
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < COLS; c += 8)
      if (Layout::off(r + ROWS_STEP, c, LDS) != Layout::off(r, c, LDS) + ROWS_STEP * LDS) return false;
  return true;
}

}  // namespace tile
