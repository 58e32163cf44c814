"""The Hopper blocks' encodings on the CPU (nvcc, no GPU): wgmma shared-memory descriptors against the PTX ISA's
field table, the epilogue staging buffer against the 128-byte swizzle TMA applies, and the generated wgmma
wrappers against their generator."""
import subprocess
import sys
from pathlib import Path

import pytest

from compare import sweep
from ptx_kernels import toolchain
from ptx_kernels.variants import CSRC

ROOT = Path(__file__).resolve().parent.parent
needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")


def isa_descriptor(addr: int, lbo: int, sbo: int) -> int:
    """PTX ISA "Matrix Descriptor Format": bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4,
    32-45 stride-dimension byte offset >> 4, 49-51 base offset (0), 62-63 swizzle mode (1: 128-byte)."""
    field = lambda v: (v & 0x3FFFF) >> 4  # noqa: E731 - 14 bits of a 16-byte-aligned byte quantity
    return field(addr) | field(lbo) << 16 | field(sbo) << 32 | 1 << 62


def tma_swizzle128(row: int, col: int) -> int:
    """Byte offset of fp16 element (row, col) of a 64-column box written by TMA with CU_TENSOR_MAP_SWIZZLE_128B:
    rows of 128 bytes; the 16-byte chunk index (address bits 4-6) XORed with the row within its 8-row atom
    (bits 7-9). Boxes of 64 x 64 follow each other 8 KB apart."""
    box, c = divmod(col, 64)
    linear = row * 128 + c * 2
    return box * 8192 + (linear ^ (((linear >> 7) & 7) << 4))


@pytest.fixture(scope="module")
def host_facts(tmp_path_factory):
    exe = tmp_path_factory.mktemp("hopper") / "facts"
    cmd = [toolchain.find_nvcc(), *toolchain.NVCC_FLAGS, toolchain.ARCHS["sm_90a"], f"-I{CSRC}", "-o", str(exe),
           str(ROOT / "tests" / "cuda" / "wgmma_host_facts.cu")]
    subprocess.run(cmd, check=True, capture_output=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()


@needs_nvcc
def test_descriptors_follow_the_isa_field_table(host_facts):
    rows = [line.split()[1:] for line in host_facts if line.startswith("desc")]
    assert len(rows) == 15
    for addr, lbo, sbo, got in (map(int, r) for r in rows):
        assert got == isa_descriptor(addr, lbo, sbo), (addr, lbo, sbo, hex(got))


@needs_nvcc
def test_split_k_plans_fill_one_wave_and_leave_every_part_k_blocks(host_facts):
    """hopper::choose_plan on 132 SMs (120 blocks in clusters of 4): a split launch (sm90/wgmma_splitk.cu, not
    persistent) is one wave of its cluster size with every part >= 4 k-blocks, and only skinny outputs (M or N <= 128)
    or outputs whose best unsplit tile fills less than half the SMs split; forced splits are cut to the k-blocks there are and
    never pass them (a part with no k-blocks would add an unset accumulator)."""
    plans = {}
    for line in host_facts:
        if line.startswith("plan"):
            m, n, k, force, bn, split = map(int, line.split()[1:])
            plans[m, n, k, force] = (bn, split)
    assert len(plans) == 80
    for (m, n, k, force), (bn, split) in plans.items():
        kblocks, tiles = -(-k // 64), -(-m // 128) * -(-n // bn)
        assert bn in (256, 128, 64) and split in (1, 2, 4) and split <= max(kblocks, 1)
        if force == 0 and split > 1:
            units = [-(-m // 128) * -(-n // w) for w in (256, 128, 64)]  # unsplit tiles of each width
            unsplit_fill = max(u / (-(-u // 132) * 132) for u in units)
            assert tiles * split <= (132 if split == 2 else 120) and kblocks >= 4 * split, (m, n, k, bn, split)
            assert m <= 128 or n <= 128 or unsplit_fill < 0.5, (m, n, k)
        if force in (1, 2, 4):
            assert split == min(force, 1 << (kblocks.bit_length() - 1)), (m, n, k, force, split)
    for shape in [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                  (4096, 4096, 1024), (8192, 28672, 4096), (3000, 5000, 2000), (8192, 8192, 64), (128, 8192, 8192)]:
        assert plans[(*shape, 0)][1] == 1, shape  # the unsplit tiles fill the GPU (or one k-block): no split
    assert plans[16, 4096, 4096, 0] == (64, 2)  # 128 x 128 in 4 parts would need 128 of the 120 blocks
    assert plans[16, 4096, 4096, 1] == (64, 1)  # unsplit, the narrowest tile fills the most SMs (64)
    assert plans[4096, 16, 4096, 0] == (64, 2)  # 32 tiles of 128 x 64, the narrowest: least waste past N = 16
    assert plans[64, 8192, 8192, 0] == (64, 1)  # 128 tiles of 128 x 64 fill the GPU unsplit


@needs_nvcc
def test_tall_tile_only_where_it_fills_rounds_the_wide_tile_leaves_empty(host_facts):
    """wgmma_persistent's 256x152 tile (column-major B) is planned where its tiles fill whole rounds that 128x256
    leaves partly empty: 3000x5000 (and the suite's 3001x4999) in 12 x 33 = 396 tiles, exactly 3 rounds of 132,
    against 480 tiles of 128x256 in 4 rounds of 120. Nowhere else in the suites: on the squares and LLM shapes
    128x256 fills its rounds as well, skinny outputs keep their narrow or split plans."""
    plans = {}
    for line in host_facts:
        if line.startswith("tall"):
            m, n, k, aligned, bm, bn, split = map(int, line.split()[1:])
            plans[m, n, k, aligned] = (bm, bn, split)
    assert len(plans) == 48
    tall = {key[:3] for key, plan in plans.items() if plan[:2] == (256, 152)}
    assert tall == {(3000, 5000, 2000), (3001, 4999, 2003)}, tall
    for (m, n, k, aligned), (bm, bn, split) in plans.items():
        if (m, n, k) in tall:
            assert split == 1
            tiles = -(-m // 256) * -(-n // 152)
            assert tiles == 396 and tiles % 132 == 0
        else:
            assert bm == 128 and bn in (256, 192, 128, 64)
    assert plans[3072, 5120, 2048, 1][:2] == (128, 192)  # 128-byte rows: 128x192's 648 tiles fill 4.9 rounds


@needs_nvcc
def test_cut_tiles_only_where_their_rounds_are_fuller(host_facts):
    """wgmma_persistent's cut tiles (hopper::cut_tile, GemmArgs::plan_tile 7-16; compare.sweep.CUT_TILES mirrors
    them): planned unsplit, on outputs that are not skinny, where they score above every tile of the power-of-two
    menu; row-major B (kCutWholeBoxes) takes only the widths of whole 64-column boxes. None on the squares or the
    LLM shapes, where 128 x 256 fills its rounds; 128 x 144 on 8288 x 848 (390 tiles in 3 rounds of 132)."""
    tiles = {int(c): (int(m), int(n)) for _, c, m, n in (line.split() for line in host_facts
                                                          if line.startswith("cuttile"))}
    assert tiles == sweep.CUT_TILES
    plans = {}
    for line in host_facts:
        if line.startswith("cut "):
            *dims, menu, bm, bn, split, cut, score = line.split()[1:]
            plans[(*map(int, dims), int(menu))] = (int(bm), int(bn), int(split), int(cut), float(score))
    assert len(plans) == 3 * 28
    for (m, n, k, menu), (bm, bn, split, cut, score) in plans.items():
        if cut:
            assert menu and split == 1 and m > 128 and n > 128 and tiles[cut] == (bm, bn), (m, n, menu)
            assert menu == 2 or bn % 64 == 0, (m, n, menu, bn)
        else:
            assert (bm, bn) not in tiles.values(), (m, n, menu, bm, bn)
        assert score >= plans[m, n, k, 0][4] - 1e-4, (m, n, menu)  # more tiles offered never score lower
    for shape in [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 28672, 4096), (1024, 1024, 1024)]:
        assert plans[(*shape, 2)][3] == 0, shape
    assert plans[8288, 848, 1816, 2][:4] == (128, 144, 1, sweep.CUT_FIRST_CODE)
    assert plans[8288, 848, 1816, 1][3] == 0  # 144 columns are no whole number of 64-column boxes
    assert sum(plans[key][3] > 0 for key in plans if key[3] == 2) >= 6


@needs_nvcc
def test_swapped_cut_tiles_where_m_is_covered_better(host_facts):
    """wgmma_persistent's swapped cut tiles (hopper::kSwapFirstCode, GemmArgs::plan_tile 17-26; compare.sweep.
    SWAP_TILES mirrors them as C's tiles): every cut tile but 256 x 128, planned unsplit on outputs that are not
    skinny where it scores above every tile unswapped, and only where the swapped form is offered. None on the
    squares or the LLM shapes; M = 160 against a wide N takes 160 columns along M (one row of tiles, where 128-row
    tiles take 256 rows), 4504 x 608 128 x 176 swapped (130 tiles in one round). The 128-row ones also come paired
    in clusters (hopper::kPairFirstCode, compare.sweep.PAIR_TILES), in the same order."""
    cut = sweep.CUT_TILES
    tiles = {int(c): (int(m), int(n)) for _, c, m, n in (line.split() for line in host_facts
                                                          if line.startswith("swaptile"))}
    assert {code: (bn, bm) for code, (bm, bn) in tiles.items()} == sweep.SWAP_TILES
    assert set(tiles) == {sweep.SWAP_FIRST_CODE + i for i, (bm, bn) in enumerate(cut.values()) if bn % 128}
    plans = {}
    for line in host_facts:
        if line.startswith("swap "):
            *dims, offered, bm, bn, split, code, swap, score = line.split()[1:]
            plans[(*map(int, dims), int(offered))] = (int(bm), int(bn), int(split), int(code), int(swap), float(score))
    assert len(plans) == 2 * 36
    for (m, n, k, offered), (bm, bn, split, code, swap, score) in plans.items():
        if swap:
            assert offered and split == 1 and m > 128 and n > 128 and tiles[code] == (bm, bn), (m, n)
            assert score > plans[m, n, k, 0][5], (m, n)
        else:
            assert code < sweep.SWAP_FIRST_CODE and plans[m, n, k, 0] == (bm, bn, split, code, swap, score), (m, n)
    for shape in [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 28672, 4096), (1024, 1024, 1024)]:
        assert not plans[(*shape, 1)][4], shape
    assert plans[160, 24016, 3048, 1][:5] == (128, 160, 1, sweep.SWAP_FIRST_CODE + 1, 1)
    assert plans[4504, 608, 3776, 1][:5] == (128, 176, 1, sweep.SWAP_FIRST_CODE + 2, 1)
    pairs = {int(c): (int(m), int(n)) for _, c, m, n in (line.split() for line in host_facts
                                                          if line.startswith("pairtile"))}
    assert {code: (bn, bm) for code, (bm, bn) in pairs.items()} == sweep.PAIR_TILES  # the 128-row ones, paired
    assert [c - sweep.PAIR_FIRST_CODE for c in pairs] == [c - sweep.SWAP_FIRST_CODE for c in tiles
                                                          if tiles[c][0] == 128]


def test_cut_tile_rings_mirror_the_kernel_file():
    """compare.sweep's cut_stages and cut_epi_cols are the kernel file's (its static_assert's worked cases)."""
    text = (CSRC / "sm90" / "wgmma_persistent.cu").read_text()
    for bn, cols in ((144, 72), (160, 40), (224, 56), (240, 120)):
        assert f"cut_epi_cols({bn}) == {cols}" in text and sweep.cut_epi_cols(bn) == cols
    for bm, bn, stages in ((128, 144, 6), (128, 160, 5), (128, 240, 4), (256, 128, 4), (256, 176, 3)):
        assert f"cut_stages({bm}, {bn}) == {stages}" in text and sweep.cut_stages(bm, bn) == stages


GRID_SUITE_SMALL_OUT = {(256, 256, 65536), (128, 128, 131072), (512, 512, 16384), (256, 1024, 32768)}


@needs_nvcc
def test_grid_split_plans_fill_one_wave_with_slices_of_eight_k_blocks(host_facts):
    """hopper::choose_grid_split on 132 SMs: the widest 128-row tile that covers N with fewer than 64 columns to spare;
    on its own, the most slices that keep tiles x S within one wave with every slice >= 8 k-blocks; forced splits
    taken as given, cut to the k-blocks there are and to 256 (a slice without k-blocks would only add zeros)."""
    rows = [tuple(map(int, line.split()[1:])) for line in host_facts if line.startswith("grid ")]
    assert len(rows) == 5 * sum(line.startswith("route ") for line in host_facts) == 5 * 59
    for m, n, k, force, bn, split in rows:
        kblocks, widest = -(-k // 64), next((w for w in (256, 128) if -(-n // w) * w - n < 64), 64)
        tiles = -(-m // 128) * -(-n // bn)
        assert bn == widest and 1 <= split <= min(kblocks, 256), (m, n, k, force, bn, split)
        if force:
            assert split == min(force, kblocks, 256), (m, n, k, force, split)
        else:
            assert split == max(1, min(132 // tiles, kblocks // 8)), (m, n, k, split)
            assert split == 1 or (tiles * split <= 132 and kblocks // split >= 8)


@needs_nvcc
def test_persistent_splits_over_the_grid_where_its_plan_leaves_sms_idle_or_k_is_long(host_facts):
    """wgmma_persistent's choice (hopper::prefer_grid_split): the grid's split where its own best plan (unsplit or
    split over a cluster) keeps fewer than half of the 132 SMs busy and the grid's fills more; on outputs that are
    not skinny, where the own plan fills at most 0.85 of its SM-rounds, also the grid's split of whichever width
    scores above the own plan, its score (speed x fill x columns inside N) over 1 + kGridFixupK x S / K
    (kGridFixupK = 3200). In the issue's suites that is the small outputs with a long K (each split into >= 16
    slices, one wave of at least 128 blocks); no shape of the mixed, m_sweep or training suites changes plan (m_sweep's
    256 x 4096 x 14336: 128 tiles of 128 x 64 fill 0.97 of a round). A sweep's long-K outputs whose 128 x 64 tiles
    leave SMs idle split, a short K (3,872) does not."""
    routes = {}
    for line in host_facts:
        if line.startswith("route "):
            m, n, k, grid, bn, split = map(int, line.split()[1:7])
            routes[m, n, k] = (bool(grid), bn, split, float(line.split()[7]), float(line.split()[8]))
    candidates, widths = {}, {}  # the grid's own plan of each shape (bn, S) and its score; each width's (S, score)
    for line in host_facts:
        if line.startswith("grid "):
            m, n, k, force, bn, split = map(int, line.split()[1:])
            if force == 0:
                tiles_n = -(-n // bn)
                candidates[m, n, k] = (bn, split, -(-m // 128) * tiles_n * split / 132 * n / (tiles_n * bn))
        if line.startswith("gridw "):
            m, n, k, bn, split = map(int, line.split()[1:6])
            widths.setdefault((m, n, k), []).append((bn, split, float(line.split()[6])))
    speed = {256: 1.0, 128: 0.95, 64: 0.6}
    for (m, n, k), (grid, bn, split, own, fill) in routes.items():
        c_bn, c_split, c_score = candidates[m, n, k]
        if own < 0.5 and c_split > 1 and c_score > own + 1e-4:
            assert grid and (bn, split) == (c_bn, c_split), (m, n, k, own, c_score)
            continue
        scored = [(fill * speed[w] / (1 + 3200 * s / k), w, s) for w, s, fill in widths[m, n, k] if s > 1]
        best = max(scored, default=(0.0, 0, 0))
        wide = m > 128 and n > 128 and fill <= 0.85 and best[0] > own + 1e-4
        assert grid == wide, (m, n, k, own, best)
        if grid:
            assert (bn, split) == best[1:] and -(-m // 128) * -(-n // bn) * split <= 132, (m, n, k)
    for shape in GRID_SUITE_SMALL_OUT:
        m, n, k = shape
        grid, bn, split, *_ = routes[shape]
        assert grid and split >= 16 and -(-m // 128) * -(-n // bn) * split >= 128, (shape, routes[shape])
    suites = [(64, 4096, 4096), (64, 14336, 4096), (64, 4096, 14336), (128, 4096, 4096), (128, 14336, 4096),
              (128, 4096, 14336), (256, 4096, 4096), (256, 14336, 4096), (256, 4096, 14336), (512, 4096, 4096),
              (4096, 4096, 512), (4096, 14336, 4096), (14336, 4096, 4096), (4096, 4096, 14336),
              (16384, 8192, 8192), (8192, 8192, 16384), (1, 4096, 4096), (16, 4096, 4096), (64, 8192, 8192),
              (128, 8192, 8192), (512, 4096, 14336), (1024, 1024, 1024), (4096, 4096, 4096), (3000, 5000, 2000),
              (2048, 2048, 2048), (8192, 8192, 8192), (8192, 28672, 4096), (16384, 16384, 16384)]
    for shape in suites:
        assert not routes[shape][0], (shape, routes[shape])
    for shape in [(192, 3232, 16760), (800, 920, 30128), (384, 1552, 16584), (240, 2232, 22256)]:
        assert routes[shape][0], (shape, routes[shape])  # 128 x 64 tiles over a long K
    assert not routes[1808, 312, 3872][0]
    # the GPU tests' small outputs (tests/test_ptx_hgemm.py) take the grid's split too
    for shape in [(128, 128, 32768), (256, 256, 16384), (200, 130, 20001), (96, 520, 9000), (128, 256, 16384)]:
        assert routes[shape][0] and routes[shape][2] >= 8, (shape, routes[shape])


@needs_nvcc
def test_epilogue_staging_is_the_tma_128b_swizzle(host_facts):
    rows = [tuple(map(int, line.split()[1:])) for line in host_facts if line.startswith("stage")]
    assert rows
    for r, c, got in rows:
        assert got == tma_swizzle128(r, c), (r, c, got)
    # a warp's half2 stores of one 8-column block (rows l/4, columns 2(l%4)) land in 32 different banks
    banks = {(tma_swizzle128(lane // 4, 8 * 3 + 2 * (lane % 4)) // 4) % 32 for lane in range(32)}
    assert len(banks) == 32


def test_generated_wgmma_wrappers_are_current():
    """ptx/wgmma.cuh holds exactly what scripts/gen_wgmma.py prints (m64nNk16 for gen_wgmma.SHAPES: fp16 operands with
    fp32 and fp16 accumulation, bf16 operands with fp32)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_wgmma
    finally:
        sys.path.pop(0)
    text = (CSRC / "ptx" / "wgmma.cuh").read_text()
    assert gen_wgmma.generated() in text
    for n in gen_wgmma.SHAPES:
        assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16" in text
        assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16" in text
        assert f"m64n{n}k16.f16.bf16" not in text  # no bf16 operands with an fp16 accumulator


@needs_nvcc
def test_inspect_shows_the_hopper_study_columns(tmp_path):
    """`compare inspect` on a Hopper variant beside Triton's TMA kernel: wgmma (HGMMA), TMA loads (UTMALDG) and
    mbarriers (SYNCS) on both, and the hand-written kernel's register trade between warpgroups (setmaxnreg)."""
    from compare import disasm

    (target,) = disasm.targets(["wgmma_persistent"])
    row = disasm.inspect_cuda(target, tmp_path)
    assert row.mix["HGMMA"] > 0 and row.mix["UTMALDG"] > 0 and row.mix["UTMASTG"] > 0 and row.mix["SYNCS"] > 0
    assert row.mix["HMMA"] == 0 and row.local_bytes == 0
    assert row.setmaxnreg == [40, 232]  # producer gives, consumers take (sm90/wgmma_persistent.cu)
    assert "setmaxnreg 40 / 232" in disasm.format_markdown([row])


def test_setmaxnreg_targets_read_from_sass():
    sass = ("/*06b0*/ USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8 ;\n"
            "/*7e30*/ USETMAXREG.DEALLOC.CTAPOOL 0x28 ;\n/*7e40*/ EXIT ;\n")
    assert toolchain.setmaxnreg_targets(sass) == [40, 232]
    assert toolchain.setmaxnreg_targets("/*0000*/ HMMA.16816.F32 R0, R4, R8, R0 ;") == []


@needs_nvcc
@pytest.mark.parametrize("header, target, message", [
    ("ptx/wgmma.cuh", "-gencode=arch=compute_90,code=sm_90", "needs the sm_90a target"),
    ("ptx/wgmma.cuh", "-gencode=arch=compute_80,code=sm_80", "needs the sm_90a target"),
    ("ptx/tma.cuh", "-gencode=arch=compute_80,code=sm_80", "needs sm_90 or newer"),
    ("ptx/cluster.cuh", "-gencode=arch=compute_80,code=sm_80", "needs sm_90 or newer"),
])
def test_hopper_wrappers_refuse_a_wrong_target(tmp_path, header, target, message):
    """Each sm_90 wrapper file's one arch guard stops the compile with a message naming the target it needs
    (wgmma and setmaxnreg exist only on sm_90a, not plain sm_90)."""
    src = tmp_path / "use.cu"
    src.write_text(f'#include "{header}"\n__global__ void k() {{}}\n')
    res = subprocess.run([toolchain.find_nvcc(), "-std=c++17", target, f"-I{CSRC}", "-c", "-o",
                          str(tmp_path / "use.o"), str(src)], capture_output=True, text=True)
    assert res.returncode != 0 and message in res.stderr, res.stderr[-800:]


def test_one_storage_row_is_restrided_not_copied():
    """An operand of one row in its storage order (A of one row, as the TN layout's transpose gives it with strides
    (1, 1)) keeps its memory: the same view with a leading dimension of a multiple of 8 (what a TMA descriptor
    takes), nothing copied; a misaligned base is still staged, and two rows of an odd stride too: into a buffer of
    128-byte rows, its copy (source rows, buffer rows) queued for the one staging launch (`_stage`), a column-major
    operand's as its transpose."""
    import torch

    from ptx_kernels.call import _aligned

    base = torch.arange(3 * 4096, dtype=torch.float16)
    one = base[:4093].reshape(4093, 1).t()  # (1, 4093), strides (1, 1)
    copies, staged = [], []
    got = _aligned(one, False, "A", copies, staged)
    assert copies == [] and staged == [] and got.data_ptr() == one.data_ptr() and torch.equal(got, one)
    assert got.stride() == (4096, 1)
    col = base[:4093].reshape(4093, 1)  # column-major, one column
    got = _aligned(col, True, "B", copies, staged)
    assert copies == [] and staged == [] and got.stride() == (1, 4096) and torch.equal(got, col)
    for t, col in ((base[1:4094].reshape(1, 4093), False), (base[:2 * 4093].reshape(2, 4093), False),
                   (base[1:1 + 3 * 301].reshape(3, 301).t(), True)):
        copies, staged = [], []
        got = _aligned(t, col, "A", copies, staged)
        ((src, buf),) = staged
        assert copies == ["A to 16-byte aligned rows"] and src.stride(1) == 1 and buf.stride(1) == 1
        assert buf.shape == src.shape and buf.stride(0) % 64 == 0  # the base: the CUDA allocator aligns it
        assert torch.equal(src.t() if col else src, t) and (got.t() if col else got).data_ptr() == buf.data_ptr()
        buf.copy_(src)  # what the staging launch does on the GPU
        assert torch.equal(got, t)


def test_python_hand_off_to_the_stream_mirrors_handoff_h():
    """ptx_kernels.call launches mma_stream itself where wgmma_persistent would hand the problem to it, so that B's
    misaligned rows are read in place: its rule's constants are handoff.h's; an aligned B stays on the tile kernels
    at any M and size with row-major A, and goes with up to 16 rows of a column-major A against a B of 2^22 elements
    or more; against B's rows off 16 bytes up to 32 rows go at any size (33 and more stage B, in one launch with A);
    never with a pinned tile or split."""
    import re

    from ptx_kernels import call
    from ptx_kernels.variants import BY_NAME

    text = (CSRC / "sm90" / "handoff.h").read_text()
    assert int(re.search(r"kStreamOffRows = (\d+);", text).group(1)) == call.STREAM_OFF_ROWS
    assert int(re.search(r"kStreamRows = (\d+);", text).group(1)) == call.STREAM_ROWS
    assert 1 << int(re.search(r"kStreamMinB = int64_t\(1\) << (\d+);", text).group(1)) == call.STREAM_MIN_B
    stream = (CSRC / "sm90" / "mma_stream.cu").read_text()
    assert int(re.search(r"constexpr int kRows = (\d+);", stream).group(1)) == call.STREAM_ROWS
    wp = BY_NAME["wgmma_persistent"]
    for m, n, k in ((1, 4096, 4096), (16, 64, 65536), (8, 14336, 4096), (16, 28672, 4096), (1, 1, 1)):
        assert not call.hands_to_stream(wp, m, n, k, "auto", None), (m, n, k)  # aligned B: the tile kernels
    # column-major A against an aligned B: up to 16 rows against a B of 2^22 elements or more
    assert call.hands_to_stream(wp, 8, 4096, 4096, "auto", None, False, True)
    assert call.hands_to_stream(wp, 16, 64, 65536, "auto", None, False, True)
    assert not call.hands_to_stream(wp, 17, 4096, 4096, "auto", None, False, True)
    assert not call.hands_to_stream(wp, 16, 1024, 2048, "auto", None, False, True)
    assert not call.hands_to_stream(wp, 8, 4096, 4096, "auto", 1, False, True)
    assert call.hands_to_stream(wp, 1, 4096, 4096, "auto", None, True)
    assert not call.hands_to_stream(wp, 1, 4096, 4096, "large", None, True)
    assert not call.hands_to_stream(wp, 1, 4096, 4096, "auto", 2, True)
    assert not call.hands_to_stream(BY_NAME["wgmma_tma"], 1, 4096, 4096, "auto", None, True)
    # B off the 16-byte grid: up to kStreamOffRows rows at any size of B, never with a pin or past that M
    assert call.hands_to_stream(wp, 32, 12000, 555, "auto", None, True)
    assert call.hands_to_stream(wp, 2, 270, 1015, "auto", None, True)
    assert call.hands_to_stream(wp, 32, 1913, 14747, "auto", None, True)
    for m, n, k in ((33, 12000, 555), (33, 397, 1455), (48, 2048, 2049), (48, 1913, 14747), (40, 4095, 2048)):
        assert not call.hands_to_stream(wp, m, n, k, "auto", None, True), (m, n, k)
    assert not call.hands_to_stream(wp, 48, 1001, 2000, "auto", None, False)
    assert not call.hands_to_stream(wp, 49, 4096, 4096, "auto", None, True)
    assert not call.hands_to_stream(wp, 32, 1913, 14747, "large", None, True)
    assert not call.hands_to_stream(wp, 32, 1913, 14747, "auto", 1, True)


def test_launched_variant_reads_a_as_wgmma_persistent_does():
    """call.launched_variant: the hand-off's a_col is A column-major as wgmma_persistent would read it (unit stride
    down the rows and not along them): up to 16 rows of a column-major A against an aligned B of 2^22 elements go to
    mma_stream, the same rows row-major stay, a single contiguous row is row-major and one cut from a column-major
    matrix (strides (1, lda)) column-major, as _a_layout hands them to the kernel, and B off the grid goes with
    either A."""
    import torch

    from ptx_kernels import call
    from ptx_kernels.variants import BY_NAME

    wp = BY_NAME["wgmma_persistent"]
    b = torch.empty(4096, 4096, dtype=torch.float16)
    off = torch.empty(4096, 4097, dtype=torch.float16)
    col = torch.empty(4096, 8, dtype=torch.float16).t()  # 8 x 4096, column-major
    row = torch.empty(8, 4096, dtype=torch.float16)
    cut = col[:1]  # 1 x 4096, strides (1, 8): column-major
    assert call.launched_variant(wp, 8, 4096, 4096, "auto", None, b, col)[1] == "mma_stream"
    assert call.launched_variant(wp, 8, 4096, 4096, "auto", None, b, row)[1] == "wgmma_persistent"
    assert call.launched_variant(wp, 1, 4096, 4096, "auto", None, b, row[:1])[1] == "wgmma_persistent"
    assert call.launched_variant(wp, 1, 4096, 4096, "auto", None, b, cut)[1] == "mma_stream"
    assert call._a_layout(cut, True, [])[1] and not call._a_layout(row[:1], True, [])[1]
    assert call.launched_variant(wp, 8, 4096, 4096, "large", None, b, col)[1] == "wgmma_persistent"
    assert call.launched_variant(wp, 8, 4097, 4096, "auto", None, off, row)[1] == "mma_stream"


def test_b_rows_off16_reads_b_in_its_storage_order():
    """call.b_rows_off16: B row- or column-major whose base or rows (in storage order) are off 16 bytes, what
    wgmma_persistent's TMA would copy (handoff.h's b_rows_off16); other layouts are copied anyway, into aligned
    rows."""
    import torch

    from ptx_kernels import call

    assert not call.b_rows_off16(torch.empty(64, 128, dtype=torch.float16))  # row-major, 256-byte rows
    assert call.b_rows_off16(torch.empty(64, 131, dtype=torch.float16))  # row-major, 262-byte rows
    assert call.b_rows_off16(torch.empty(64, 136, dtype=torch.float16)[:, 1:])  # base 2 bytes off
    assert not call.b_rows_off16(torch.empty(136, 64, dtype=torch.float16).t())  # column-major, K 136
    assert call.b_rows_off16(torch.empty(128, 63, dtype=torch.float16).t())  # column-major, K 63
    assert not call.b_rows_off16(torch.empty(64, 262, dtype=torch.float16)[:, ::2])  # strided: copied anyway


@needs_nvcc
def test_stream_k_cut_is_the_python_rule(tmp_path):
    """hopper::stream_k_cut (blocks/stream_k.cuh, the PTX stream-K kernel's schedule) is
    hgemm_common.schedules.stream_k_cut, the Triton kernel's, over 0-300 tiles, 0-70 and a few long k-block counts,
    and 1-144 SMs; hopper::stream_k_launch is triton_kernels.streamk.schedule (its grid: one program per slice
    without whole rounds, G with them, the persistent grid where nothing is cut); each cut tile's slices tile its
    k-blocks [0, I) in order, no slice shorter than MIN_SLICE_ITERS; and every tile is one program's, or all of
    its slices are (each once), as the kernel walks them."""
    from hgemm_common import schedules
    from triton_kernels import streamk

    exe = tmp_path / "stream_k_cut"
    subprocess.run([toolchain.find_nvcc(), *toolchain.NVCC_FLAGS, toolchain.ARCHS["sm_90a"], f"-I{CSRC}", "-o",
                    str(exe), str(ROOT / "tests" / "cuda" / "stream_k_cut.cu")], check=True, capture_output=True)
    rows = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(rows) == 13 * 301 * (71 + 7)
    cut_seen = 0
    for line in rows:
        tiles, iters, sms, g, r, s, programs, sk_tiles, slices, *firsts = map(int, line.split()[1:])
        what = (tiles, iters, sms)
        assert (g, r, s) == schedules.stream_k_cut(tiles, iters, sms), what
        assert (programs, sk_tiles, slices) == tuple(streamk.schedule(tiles, iters, sms)), what
        if not sk_tiles:
            assert slices == 1 and not firsts, what
            continue
        cut_seen += 1
        assert sk_tiles * slices <= programs <= sms and 2 <= slices <= schedules.MAX_SLICES, what
        assert firsts == [j * iters // slices for j in range(slices + 1)] and firsts[-1] == iters, what
        assert min(b - a for a, b in zip(firsts, firsts[1:])) >= schedules.MIN_SLICE_ITERS, what
        owners = {}  # the kernel's walk: program p's slice, then tiles sk_tiles + p, + programs, ...
        for p in range(programs):
            if p < sk_tiles * slices:
                owners.setdefault(p // slices, []).append(p % slices)
            for t in range(sk_tiles + p, tiles, programs):
                owners.setdefault(t, []).append(None)
        assert sorted(owners) == list(range(tiles)), what
        assert all(owners[t] == list(range(slices)) for t in range(sk_tiles)), what
        assert all(owners[t] == [None] for t in range(sk_tiles, tiles)), what
    assert cut_seen > 10000


def test_the_stream_copies_a_only_where_its_own_reads_of_a_cost_more():
    """call.stream_copies_a: mma_stream reads A in place, except column-major A past one 16-row block against a B of
    2^23 elements or more, and row-major A off the 16-byte grid against a B of 2^28 or more (copied into aligned
    row-major rows first); aligned row-major A never."""
    import torch

    from ptx_kernels import call

    col = lambda m, k: torch.empty(k, m, dtype=torch.float16).t()  # noqa: E731
    assert call.stream_copies_a(col(17, 8192), 1024) and call.stream_copies_a(col(48, 4096), 2048)
    assert not call.stream_copies_a(col(16, 8192), 1 << 20)  # one 16-row block: read in place
    assert not call.stream_copies_a(col(17, 4096), 2047)  # a B under 2^23 elements
    off = torch.empty(8, 31250, dtype=torch.float16)  # rows 62,500 bytes apart: off the 16-byte grid
    assert call.stream_copies_a(off, 1 << 14) and not call.stream_copies_a(off, 1 << 12)
    assert not call.stream_copies_a(torch.empty(8, 32768, dtype=torch.float16), 1 << 16)  # aligned rows
    assert not call.stream_copies_a(torch.empty(1, 32776, dtype=torch.float16)[:, 8:], 1 << 16)  # one row, aligned base
