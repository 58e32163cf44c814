"""Every CUDA source compiles with plain nvcc (no Torch, no GPU) for sm_80 and sm_90a, without spills, with the
shared memory its tiles imply, and its SASS holds the instructions its design promises."""
import os
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hgemm_common.record import ACCS_FOR
from ptx_kernels import build, toolchain
from ptx_kernels.variants import (BY_NAME, CSRC, LAB_SOURCES, STAGE_COPY_SOURCE, VARIANTS, a_col_in_place,
                                  any_strides, registered_operands, source)

pytestmark = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")

ARCHS = tuple(toolchain.ARCHS)


def arch_number(target: str) -> int:
    """"sm_90a" -> 90: the compute capability x 10 a record's min_arch is compared with."""
    return int(re.match(r"sm_(\d+)", target).group(1))


# (variant, target) pairs to compile: each record on the targets that offer it (an sm_90a-only kernel is not built
# for sm_80, where its wrappers' arch guards reject it)
TARGETS = [(v.name, arch) for v in VARIANTS for arch in ARCHS if v.offered_on(arch_number(arch))]
WRAPPERS = Path(__file__).parent / "cuda" / "wrappers.cu"


@pytest.fixture(scope="session")
def compiled():
    """All variants for both archs, built one per CPU at a time (two at least, eight at most: CI has 2 cores, the
    GPU machine 16 shared with the gate's other test processes)."""
    jobs = [(BY_NAME[name], arch) for name, arch in TARGETS]
    with ThreadPoolExecutor(max_workers=max(2, min(8, len(os.sched_getaffinity(0))))) as pool:
        results = list(pool.map(lambda j: toolchain.compile_cubin(source(j[0]), j[1]), jobs))
    return {(v.name, arch): r for (v, arch), r in zip(jobs, results)}


def main_loop(cubin, name) -> list[str]:
    """The main loop of kernel `name`: of its SASS loops, the one with the most HMMAs."""
    loops = toolchain.loop_bodies(toolchain.disassemble(cubin, name))
    return max(loops, key=lambda b: toolchain.instruction_mix("\n".join(b))["HMMA"])


def dtype_accs(v) -> list[tuple[str, str]]:
    """The (dtype, accumulation) pairs a record offers, each one instantiation per B layout (bf16: fp32 only)."""
    return [(d, a) for d in v.dtypes for a in v.accs if a in ACCS_FOR[d]]


@pytest.mark.parametrize("variant, arch", TARGETS)
def test_compiles_without_spills(compiled, variant, arch):
    """Every instance the kernel file compiles to (listed from the cubin, `toolchain.instances`: tiles, epilogues
    and element types as its launchers instantiate them) without spills, with the static shared memory its record's
    design implies (`Variant.static_smem`, worked out from the tiles, not read from ptxas); and the instances are
    exactly the record's (dtype, accumulation) pairs x B layouts (one kernel reads any strides: no B-layout
    parameter), each with at least one instance and none beyond them (bf16: fp32 accumulation only)."""
    c = compiled[(variant, arch)]
    v = BY_NAME[variant]
    usage = {f.name: f for f in c.functions}
    instances = c.instances()
    gemms = [i for i in instances if i.acc is not None]  # the rest: helpers such as a split-K reduction
    b_layouts = (None,) if any_strides(v) else (False, True)
    assert {(i.dtype, i.acc, i.b_col_major) for i in gemms} == \
        {(d, a, b) for d, a in dtype_accs(v) for b in b_layouts}, [i.template for i in instances]
    for i in instances:
        f = usage[i.name]
        assert f.spill_stores == 0 and f.spill_loads == 0 and f.stack_bytes == 0, f
        assert 0 < f.registers <= 255, f
        if i.acc is not None:
            assert f.smem_bytes == v.static_smem(i.acc, bool(i.b_col_major)), (i.template, f.smem_bytes)


def test_instances_are_named_by_their_template_arguments(compiled):
    """toolchain.instances reads each instance's template arguments from the cubin and names them after the
    kernel's declaration (`template <typename E, typename T, Acc ACC, bool B_COL, bool TMA_STORE, bool A_COL,
    bool C_T = false, int CL = 1>`: defaulted arguments are named too)."""
    # parsed (`Instance.arg`), so that any demangler's spelling of them compares (tests/test_template_args.py)
    want = {"E": "__half", "T": "Tile<256, 4, 1, 128, 64>", "ACC": 1, "B_COL": True, "TMA_STORE": False, "A_COL": True,
            "C_T": False, "CL": 1}
    got = [{k: i.arg(k) for k in i.args} for i in compiled[("wgmma_persistent", "sm_90a")].instances()]
    assert want in got, got
    (simt,) = [i for i in compiled[("simt_naive", "sm_80")].instances() if i.acc == "fp16"]
    assert (simt.kernel, list(simt.args), simt.arg("ACC"), simt.dtype, simt.b_col_major) == \
        ("kernel", ["ACC"], 1, "fp16", None)


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_inspect_names_one_instance_per_dtype_and_accumulation(compiled, variant):
    """The record's `inspect` (template arguments by name) picks an instance for every (dtype, accumulation) it
    offers: `compare inspect` never falls back to a guess."""
    from compare.disasm import instance

    v = BY_NAME[variant]
    arch = "sm_90a"
    for d, a in dtype_accs(v):
        i = instance(compiled[(variant, arch)].instances(), d, a, v.inspect)
        assert (i.dtype, i.acc, i.b_col_major) == (d, a, None if any_strides(v) else False) and i.matches(v.inspect)


@pytest.mark.parametrize("variant, dtype, acc", [("mma_multistage", "bf16", "fp32"),
                                                 ("wgmma_persistent", "fp16", "fp16")])
def test_inspect_compile_shows_the_whole_files_instance(variant, dtype, acc):
    """`compare inspect` compiles a kernel file with only the instantiations it chooses among (the element type and
    accumulation macros; wgmma_persistent: its A layout too): the instance it shows is the one the whole file's
    compile holds, to the SASS."""
    from compare.disasm import compile_for_inspect, instance

    v = BY_NAME[variant]
    whole, part = toolchain.compile_cubin(source(v), "sm_90a"), compile_for_inspect(v, dtype, acc)
    assert len(part.instances()) < len(whole.instances())
    i, j = (instance(c.instances(), dtype, acc, v.inspect) for c in (whole, part))
    assert i.template == j.template
    body = lambda c, fn: [line for line in toolchain.disassemble(c.cubin, fn).splitlines()  # noqa: E731
                          if "Function" not in line]  # the name differs: an anonymous namespace's hash
    assert body(whole, i.name) == body(part, j.name)


@pytest.mark.parametrize("variant, arch", TARGETS)
def test_sass_has_the_promised_instructions(compiled, variant, arch):
    """The record's promises (`Variant.promises`) are in the variant's SASS (its instantiations together) and its
    forbidden opcodes (`Variant.forbids`) nowhere in it."""
    v = BY_NAME[variant]
    mix = toolchain.instruction_mix(compiled[(variant, arch)].sass())
    assert v.promised(arch), f"{variant}: the record promises nothing for {arch}"
    missing = [op for op in v.promised(arch) if mix[op] == 0]
    present = [op for op in v.forbids.get(arch, ()) if mix[op] > 0]
    assert not missing and not present, (missing, present, dict(mix))


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_record_facts_agree(variant):
    """Facts the records state twice agree: rows16 alignment is what a kernel loading 16 bytes a thread from global
    memory needs (cp.async, LDGSTS; or straight into registers, LDG); tensor-core variants are scored by the
    mma.sync ceiling; a kernel reading any strides reads every layout in place; one that reads column-major A in
    place reads B both ways too and needs 16-byte aligned rows (TMA-describable operands: the Hopper kernels; rows16:
    the bandwidth path, which reads A through its strides)."""
    v = BY_NAME[variant]
    for arch in (a for a in ARCHS if v.offered_on(arch_number(a))):
        assert bool({"LDGSTS", "LDG"} & set(v.promised(arch))) == (v.alignment == "rows16"), arch
        assert ("HMMA" in v.promised(arch)) == (v.ceiling in ("mma.sync", "mma.sp")) == \
            (v.isa in ("wmma", "mma.sync", "mma.sp")), arch
    assert v.package == "ptx" and source(v).is_file() and v.static_smem is not None
    assert set(v.native_layouts) in ({"NN", "NT"}, {"NN", "NT", "TN", "TT"}), v.native_layouts
    assert any_strides(v) == (set(v.native_layouts) == {"NN", "NT", "TN", "TT"} and v.alignment == "none")
    assert a_col_in_place(v) == (set(v.native_layouts) == {"NN", "NT", "TN", "TT"})
    assert not a_col_in_place(v) or any_strides(v) or (v.isa == "wgmma" and v.alignment == "tma") or \
        (v.isa == "mma.sync" and v.alignment == "rows16" and v.min_arch == 90)
    # every dtype a record lists has an accumulation it offers (bf16: fp32), and the sparse kernels stay fp16
    assert v.dtypes[0] == "fp16" and set(v.dtypes) <= set(ACCS_FOR) and all(
        any(a in ACCS_FOR[d] for a in v.accs) for d in v.dtypes), v.dtypes
    assert v.kind == "dense" or v.dtypes == ("fp16",)


def function_sass(sass: str) -> dict[str, str]:
    """A whole cubin's SASS (cuobjdump -sass) cut into its functions: {mangled name: listing}."""
    parts = re.split(r"^\s*Function : (\S+)\s*$", sass, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS if v.isa == "wgmma"])
def test_column_major_a_reads_through_the_transpose_bit(compiled, variant):
    """The variants that read column-major A in place (`a_col_in_place`: wgmma_persistent and the kernels it hands
    problems to) hold both A layouts of every instantiation (the kernel template's last bool, A_COL): each HGMMA of
    the column-major ones reads A through the transpose bit (SASS `.tnspA`: M-major stages), none of the row-major
    ones does, and `.tnspB` follows B's layout as before. The Hopper variants that copy column-major A have no
    `.tnspA` at all. wgmma_persistent's cut tiles (`Cut<I>`) are built for row-major A alone, and swapped (C_T: A' =
    B^T, either layout) for both, each swapped tile once per A' layout."""
    v = BY_NAME[variant]
    c = compiled[(variant, "sm_90a")]
    funcs = function_sass(c.sass())
    gemms = [i for i in c.instances() if i.acc is not None]  # not a split-K reduction
    seen = set()
    for i in gemms:
        hgmma = [line for line in funcs[i.name].splitlines() if re.search(r"\bHGMMA\.", line)]
        assert hgmma, i.template
        a_col = bool(i.flag("A_COL"))
        assert not a_col or a_col_in_place(v), i.template
        seen.add(a_col)
        assert all((".tnspA" in line) == a_col for line in hgmma), (i.template, hgmma[:2])
        assert all((".tnspB" in line) == (not i.b_col_major) for line in hgmma), (i.template, hgmma[:2])
    assert seen == ({False, True} if a_col_in_place(v) else {False})
    cut = [i for i in gemms if "Cut<" in i.template and not i.flag("C_T")]
    assert not any(i.flag("A_COL") for i in cut) and (variant == "wgmma_persistent") == bool(cut)
    swapped = [i for i in gemms if i.flag("C_T")]
    assert (variant == "wgmma_persistent") == bool(swapped) and all("Cut<" in i.template for i in swapped)
    assert sum(i.flag("A_COL") for i in swapped) == sum(not i.flag("A_COL") for i in swapped)
    paired = [i for i in gemms if i not in cut and i not in swapped]
    if a_col_in_place(v):  # the same instantiations for each A layout
        assert sum(i.flag("A_COL") for i in paired) == sum(not i.flag("A_COL") for i in paired) \
            == len(paired) // 2


def test_mma_stream_keeps_a_whole_step_of_b_in_flight(compiled):
    """mma_stream (the bandwidth path) loads B straight into registers: in every instance's main loop (the loop with
    the HMMAs), a run of the step's 8 streaming 16-byte loads (ld.global.nc.L1::no_allocate.L2::256B:
    LDG.E.NA.LTC256B.128) with no HMMA and no branch among them (the fast path: a warp's whole step in flight before
    it waits), 16 HMMAs a step (4 KB of B: 32 columns' or 64 columns' worth of k16 MMAs against A's two n8 tiles;
    32 against the 32-row units' four, ROWS) on the fast and the edge path; row-major B pairs its rows with PRMT (at
    least 32 a loop more than column-major B's instance, whose PRMTs are the realign of A's rows off 16 bytes,
    ARead::kShifted), and nothing goes through shared memory in the loop but column-major A's staging
    (ARead::kColumns: 16-byte stores, turned by ldmatrix.trans, LDSM.16.MT88.4, one per k32 chunk and n8 tile of a
    step on each path, no barrier but the warp's own) and the warps' partial sums after it. (Aligned B's instances;
    B_SHIFT's below.)"""
    c = compiled[("mma_stream", "sm_90a")]
    gemms = [i for i in c.instances() if i.acc is not None]
    assert len(gemms) == 24 and sum(i.flag("B_SHIFT") for i in gemms) == 12, [i.template for i in gemms]
    assert sorted(i.arg("ROWS") for i in gemms) == [16] * 12 + [32] * 12, [i.template for i in gemms]
    prmt = {}  # (dtype, accumulation, B column-major, rows) -> PRMTs in the main loop
    for i in (i for i in gemms if not i.flag("B_SHIFT")):
        body = toolchain.sass_instructions("\n".join(main_loop(c.cubin, i.name)))
        ops, tiles = [x.op for x in body], i.arg("ROWS") // 8  # the n8 tiles of A against each piece of B
        assert sum(x.base == "HMMA" for x in body) == 16 * tiles, (i.template,
                                                                   toolchain.instruction_mix("\n".join(ops)))
        assert not any(x.base in ("LDS", "BAR", "LDL", "STL") for x in body), i.template
        ldsm = [x.op for x in body if x.base == "LDSM"]
        assert ldsm and all(op.startswith("LDSM.16.MT88.4") for op in ldsm), (i.template, ldsm)
        sts = [x.op for x in body if x.base == "STS"]  # the staging stores: one of 16 bytes a lane per LDSM at least
        assert len(ldsm) == 2 * tiles * (2 if i.b_col_major else 1) and len(sts) >= len(ldsm) and all(
            ".128" in op for op in sts), (i.template, ldsm, sts)
        stream = [n for n, x in enumerate(body) if x.op.startswith("LDG.E.NA.LTC256B.128")]
        runs = [stream[j:j + 8] for j in range(len(stream) - 7)
                if not any(body[n].base in ("HMMA", "BRA") for n in range(stream[j], stream[j + 7]))]
        assert runs, (i.template, ops)
        prmt[i.dtype, i.acc, i.b_col_major, tiles] = sum(x.base == "PRMT" for x in body)
    assert len(prmt) == 12 and all(prmt[d, a, False, t] >= prmt[d, a, True, t] + 32 for d, a, _, t in prmt), prmt


def test_mma_stream_reads_b_rows_off_16_bytes_in_full_loads(compiled):
    """mma_stream's B_SHIFT instances (B's base or leading dimension off 16 bytes) still load B in 16-byte streaming
    loads only: in the main loop a run of 9 of them (a step's 8 and the one extra chunk a lane) with no HMMA and no
    branch among them, no streaming load (B's: A's loads are the cached kind) narrower than 16 bytes, the chunks
    rebuilt by shuffles (two a register: 64 a step, on the fast and the edge path) and byte permutes (realign's,
    plus row-major B's pairing: the same for 16- and 32-row units, which rebuild each piece of B once); no local
    memory, the same HMMAs (32, 64 for 32-row units)."""
    c = compiled[("mma_stream", "sm_90a")]
    shifted = [i for i in c.instances() if i.acc is not None and i.flag("B_SHIFT")]
    assert len(shifted) == 12, [i.template for i in c.instances()]
    for i in shifted:
        body = toolchain.sass_instructions("\n".join(main_loop(c.cubin, i.name)))
        ops = [x.op for x in body]
        assert sum(x.base == "HMMA" for x in body) == 32 * (i.arg("ROWS") // 16), i.template
        assert not any(x.base in ("LDL", "STL", "LDS", "STS", "BAR") for x in body), i.template
        streaming = [n for n, x in enumerate(body) if x.base == "LDG" and ".NA." in x.op]
        assert streaming and all(".128" in body[n].op for n in streaming), (i.template, ops)
        runs = [streaming[j:j + 9] for j in range(len(streaming) - 8)
                if not any(body[n].base in ("HMMA", "BRA") for n in range(streaming[j], streaming[j + 8]))]
        assert runs, (i.template, ops)
        assert sum(x.base == "SHFL" for x in body) == 128, i.template
        assert sum(x.base == "PRMT" for x in body) >= (64 if i.b_col_major else 128), i.template


def pipelined_hmma(variant: str) -> int:
    """HMMA.16816 (HMMA.SP.16832 for mma_sp, a k32 step each) a pipelined kernel's SASS should hold: the main loop
    unrolled over a tile's k16-steps (and, where the record says `unrolled_stages` (wmma_multistage), the
    fp32 tile's loop over the ring's stages too; its fp16 tile's loop is rolled), emitted once per instantiation; each
    k16-step of a warp is (warp tile) / (16 x 8) MMAs (a 16x16x16 WMMA is two), for 8 warps; two B layouts per
    accumulation."""
    v = BY_NAME[variant]
    total = 0
    # fp32 tile for fp32 and for fp16 accumulation, the large tile for fp16; bf16: the fp32 tile once more
    runs = [(v.block, v.stages, False), (v.block, v.stages, False), (v.block_fp16, v.stages_fp16, True)]
    runs += [(v.block, v.stages, False)] * ("bf16" in v.dtypes)
    kstep = 32 if v.kind == "sparse" else 16  # mma.sp m16n8k32 does a dense k32 step
    for (bm, bn, bk), stages, large in runs:
        copies = stages if v.unrolled_stages and not large else 1
        total += 2 * copies * (bk // kstep) * (bm * bn) // (8 * 16 * 8)
    return total


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS if v.block_fp16])
def test_pipelined_mma_count(compiled, variant):
    mix = toolchain.instruction_mix(compiled[(variant, "sm_90a")].sass())
    assert mix["HMMA"] == pipelined_hmma(variant), dict(mix)


def sass_forms(sass: str, prefix: str) -> Counter:
    """The whole forms of an instruction in SASS, each with how often it appears: 'HMMA.16816.F32',
    'HMMA.16816.F32.BF16', 'HGMMA.64x256x16.F16' (one pass: a search per form over a large cubin's SASS is slow)."""
    return Counter(re.findall(rf"\b({re.escape(prefix)}\.[\w.]+)\s", sass))


@pytest.mark.parametrize("variant, arch", [(n, a) for n, a in TARGETS if BY_NAME[n].mma_forms])
def test_tensor_core_forms_per_dtype(compiled, variant, arch):
    """Each dtype a record lists compiles to its tensor-core forms (`Variant.mma_forms`: bf16 is HMMA.16816.F32.BF16
    / HGMMA.64xNx16.F32.BF16, fp32 accumulation only), and the SASS holds no other form: no bf16 form with fp16
    accumulation, none of a dtype the record does not list. For the bf16 share: as many bf16 MMAs as fp16's fp32
    ones (one fp32-accumulation instantiation of the same tiles per B layout)."""
    v = BY_NAME[variant]
    forms = v.mma_forms
    assert set(forms) == set(v.dtypes), (forms, v.dtypes)
    sass = compiled[(variant, arch)].sass()
    prefix = "HGMMA" if v.isa.startswith("wgmma") else "HMMA"
    expected = {f for d in v.dtypes for f in forms[d]}
    count = sass_forms(sass, prefix)
    assert set(count) == expected, set(count) ^ expected
    if "bf16" in v.dtypes:
        for f16, bf16 in zip([f for f in forms["fp16"] if ".F32" in f], forms["bf16"]):
            assert count[bf16] == count[f16] > 0, (bf16, count[bf16], f16, count[f16])


@pytest.mark.parametrize("variant, arch", [(n, a) for n, a in TARGETS if BY_NAME[n].kind == "sparse"])
def test_sparse_instruction_forms(compiled, variant, arch):
    """The sparse kernels' tensor-core instruction is the sparse form (HMMA.SP.16832, HGMMA.SP..., their
    `mma_forms`), in each accumulation, and no dense form of it (a kernel that fell back to dense MMAs would pass
    the HMMA promise)."""
    sass = compiled[(variant, arch)].sass()
    forms = BY_NAME[variant].mma_forms["fp16"]
    assert all(f in sass for f in forms), [f for f in forms if f not in sass]
    assert not re.search(r"HMMA\.16816|HGMMA\.64x\d+x16\b", sass)


def test_wmma_multistage_folds_fragment_offsets(compiled):
    """ptx::wmma_load_* puts each fragment's stage and k-step offset in the address's immediate: the LDSM the
    loads lower to carry constant offsets ([R+0x...]), and the main loop needs no integer instruction per
    fragment to form them (nvcuda::wmma::load_matrix_sync costs two)."""
    sass = compiled[("wmma_multistage", "sm_90a")].sass()
    ldsm = [line for line in sass.splitlines() if "LDSM" in line]
    with_imm = [line for line in ldsm if "+0x" in line]
    assert len(with_imm) > len(ldsm) // 2, ldsm[:8]


def test_wrappers_all_instructions_on_sm90a():
    c = toolchain.compile_cubin(WRAPPERS, "sm_90a", extra_flags=["-DWITH_STMATRIX"])
    sass = c.sass()
    mix = toolchain.instruction_mix(sass)
    # 6 ldmatrix forms + 3 wmma.load forms (each one LDSM.x4)
    assert mix["LDSM"] == 9 and mix["STSM"] == 6 and mix["HMMA"] == 3 and mix["LDGSTS"] == 3, dict(mix)
    for form in ("LDSM.16.M88 ", "LDSM.16.M88.2", "LDSM.16.M88.4", "LDSM.16.MT88 ", "LDSM.16.MT88.2",
                 "LDSM.16.MT88.4", "HMMA.16816.F32 ", "HMMA.16816.F32.BF16 ", "HMMA.16816.F16 ",
                 # mbarrier init, arrive, try_wait (Hopper's SYNCS unit) and cp.async's arrival on completion
                 "SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "ARRIVES.LDGSTSBAR.64"):
        assert form in sass, form


def test_wrappers_sm80_without_stmatrix():
    sass = toolchain.compile_cubin(WRAPPERS, "sm_80").sass()
    mix = toolchain.instruction_mix(sass)
    assert mix["LDSM"] == 9 and mix["STSM"] == 0 and mix["HMMA"] == 3 and mix["SYNCS"] == 0
    assert "HMMA.16816.F32.BF16 " in sass  # mma.sync .bf16 is sm_80's too
    # sm_80 has no SYNCS unit: the mbarrier arrival is a shared-memory atomic, test_wait a load loop
    assert "ATOMS.ARRIVE.64" in sass and "ARRIVES.LDGSTSBAR.64" in sass


@pytest.mark.parametrize("arch", ARCHS)
def test_mbarrier_pipelines_have_no_block_barrier_in_the_main_loop(compiled, arch):
    """Tile<..., MBARRIERS=true> (tile::StageBarriers, timed by the tile sweeps): the main loop waits on the
    stage's mbarrier and the copies arrive on it as they land, with no bar.sync; the shipped tiles (tile::BlockSync)
    meet at one bar.sync per tile instead."""
    c = toolchain.compile_cubin(Path(__file__).parent / "cuda" / "mbarrier_pipeline.cu", arch)
    mbar = [f for f in c.functions if re.search(r"ELi\d+ELb1E", f.name)]  # Tile's first bool, MBARRIERS, is true
    assert {f.name.split("6kernel")[0] for f in mbar} == {"_ZN12mma_pipeline", "_ZN15wmma_multistage"}, mbar

    for f in mbar:
        assert f.spill_stores == 0 and f.spill_loads == 0 and f.stack_bytes == 0 and f.registers <= 255, f
        loop = "\n".join(main_loop(c.cubin, f.name))
        mix = toolchain.instruction_mix(loop)
        assert mix["HMMA"] > 0 and mix["BAR"] == 0, (f.name, dict(mix))
        assert "ARRIVES.LDGSTSBAR.64" in loop  # cp.async.mbarrier.arrive.noinc: a full barrier
        # the waits (full and empty barriers) and the warp's arrival on an empty one
        assert ("SYNCS.PHASECHK.TRANS64.TRYWAIT" in loop and "SYNCS.ARRIVE" in loop) if arch == "sm_90a" \
            else "ATOMS.ARRIVE.64" in loop
    shipped = compiled[("mma_stmatrix", arch)]
    name = next(f.name for f in shipped.functions if "ELb0EEEL3Acc1" in f.name)
    assert toolchain.instruction_mix("\n".join(main_loop(shipped.cubin, name)))["BAR"] == 1


def test_wmma_fp16_tile_loads_operands_ahead_of_its_mmas(compiled):
    """FRAGS_A2B1 (two buffers of A fragments, one of B, MMAs column by column): in the shipped fp16 tile's main
    loop (sm_90a, B row- and column-major) every LDSM is issued at least 16 instructions before the first MMA that
    reads it. With one buffer (the tile before; the sweep measured it 3-7% slower), the loop's first MMAs read
    fragments loaded within the last 4 instructions, as the previous k-step's last MMAs had to free those
    registers first."""
    shipped = compiled[("wmma_multistage", "sm_90a")]
    names = [f.name for f in shipped.functions if re.search(r"ELi1ELi3ELb0ELb1EEEL3Acc1ELb[01]E", f.name)]
    assert len(names) == 2, names
    for name in names:
        assert toolchain.operand_lead(main_loop(shipped.cubin, name)) >= 16, name
    one = toolchain.compile_cubin(Path(__file__).parent / "cuda" / "wmma_fragment_buffers.cu", "sm_90a")
    (f,) = [f for f in one.functions if "ELi1ELi1ELb0ELb1EEEL3Acc1ELb0E" in f.name]
    assert f.spill_stores == 0 and toolchain.operand_lead(main_loop(one.cubin, f.name)) <= 4


def test_operand_lead_counts_around_the_loop():
    body = """        /*0100*/                   HMMA.16816.F16 R20, R8, R12, R20 ;
        /*0110*/                   HMMA.16816.F16 R22, R8, R14, R22 ;
        /*0120*/                   IADD3 R2, R2, 0x40, RZ ;
        /*0130*/                   LDSM.16.MT88.4 R12, [R2+0x100] ;
        /*0140*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0150*/                   HMMA.16816.F16 R24, R4, R16, R24 ;""".splitlines()
    # R8 (A of the first MMA) is loaded 2 instructions before it around the loop, R12 (B) 3
    assert toolchain.operand_lead(body) == 2
    assert toolchain.operand_lead(body[:3]) is None


def test_stmatrix_guard_fails_loudly_below_sm90():
    import subprocess
    with pytest.raises(subprocess.CalledProcessError) as e:
        toolchain.compile_cubin(WRAPPERS, "sm_80", extra_flags=["-DWITH_STMATRIX"])
    assert "stmatrix needs sm_90" in e.value.stderr


def test_resource_usage_parser():
    log = """ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90a'
ptxas info    : Function properties for _Z3fooPf
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
"""
    (f,) = toolchain.parse_resource_usage(log)
    assert (f.name, f.registers, f.smem_bytes, f.stack_bytes, f.spill_stores, f.barriers) == \
        ("_Z3fooPf", 40, 1024, 8, 4, 1)


def test_instruction_mix_counts_predicated_and_dotted():
    sass = """        /*0040*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0050*/              @!P0 LDGSTS.E.BYPASS.128 [R2], desc[UR4][R6.64] ;
        /*0060*/                   LDSM.16.M88.4 R8, [R3] ;
        /*0070*/                   HMMA.16816.F32 R16, R8, R14, R16 ;"""
    mix = toolchain.instruction_mix(sass)
    assert (mix["HMMA"], mix["LDGSTS"], mix["LDSM"]) == (2, 1, 1)


def _host_objects(sources, out_dir, includes=(CSRC,)):
    """nvcc -c (host and device code, sm_90a) of each source, two at a time; the `nm -C` of each object."""
    import subprocess

    def one(src):
        obj = out_dir / (src.stem + ".o")
        cmd = [toolchain.find_nvcc(), *toolchain.NVCC_FLAGS, toolchain.ARCHS["sm_90a"],
               *(f"-I{d}" for d in includes), "-c", "-o", str(obj), str(src)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, (src, res.stderr[-3000:])
        return subprocess.run(["nm", "-C", str(obj)], capture_output=True, text=True, check=True).stdout

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(sources, pool.map(one, sources)))


def test_lab_translation_units_compile_host_and_device(tmp_path):
    """The extension compiles each kernel file as its own translation unit (build.kernel_sources): the lab
    sources and the staging copy must build alone, host launchers included (-cubin above compiles device code
    only). The variants' host code: test_registration_builds_from_the_records."""
    syms = "".join(_host_objects([CSRC / f for f in (*LAB_SOURCES, STAGE_COPY_SOURCE)], tmp_path).values())
    for launcher in ("launch_stage_copy", "launch_mma_ceiling", "launch_wgmma_ceiling", "launch_wgmma_random_ceiling",
                     "launch_probe_ldmatrix", "launch_probe_stmatrix", "launch_probe_mma", "launch_probe_wmma",
                     "launch_probe_asm"):
        assert f" T {launcher}(" in syms, launcher


REGISTRATION = re.compile(r"^HGEMM_VARIANT(_FP16_BF16)?\((\w+), (\w+), (\w+)\);", re.MULTILINE)


def registrations(text: str) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(name, launcher, operands, dtypes) of each HGEMM_VARIANT (fp16) / HGEMM_VARIANT_FP16_BF16 line of a kernel
    file."""
    return [(name, launcher, operands, ("fp16", "bf16") if both else ("fp16",))
            for both, name, launcher, operands in REGISTRATION.findall(text)]


def test_registrations_and_records_agree():
    """CPU, no GPU: the variants the kernel files register (HGEMM_VARIANT, read from the sources) are the
    records, each registered once, in its record's own file, with the operands its record says it reads and the
    dtypes it lists; and every kernel file under csrc/sm*/ belongs to a record."""
    found = {}
    for path in sorted(CSRC.glob("sm*/*.cu")):
        for name, launcher, operands, dtypes in registrations(path.read_text()):
            assert name not in found, f"{name} registered twice"
            found[name] = (path.relative_to(CSRC).as_posix(), operands, dtypes)
    assert set(found) == set(BY_NAME), set(found) ^ set(BY_NAME)
    for v in VARIANTS:
        assert found[v.name] == (v.file, registered_operands(v), v.dtypes), \
            (v.name, found[v.name])
    assert {v.file for v in VARIANTS} == {p.relative_to(CSRC).as_posix() for p in CSRC.glob("sm*/*.cu")}
    # the extension build names each object after its file's base name: no two translation units may share one
    names = [p.name for p in build.kernel_sources()]
    assert len(names) == len(set(names)), names


def test_registry_of_every_kernel_file_is_the_records(tmp_path):
    """CPU, no GPU: the kernel files of every record the extension holds (all but those marked on_demand), compiled
    as the extension compiles them (one translation unit each, or one per part of a file built in parts,
    `build.units`) and linked into one program, register exactly those records, each with the operands its record
    reads: every launcher one part calls, another part holds."""
    held = [v for v in VARIANTS if not v.on_demand]
    assert [source(v) for v in held] + [CSRC / STAGE_COPY_SOURCE] == \
        [f for f in build.kernel_sources() if "lab" not in f.parts]
    got = registry_of([source(v) for v in held], tmp_path)
    assert got == {v.name: (registered_operands(v), v.dtypes) for v in held}


def test_on_demand_library_registers_the_on_demand_records(tmp_path):
    """CPU, no GPU: the records marked on_demand (nothing dispatches to them) build into a library of their own
    (build.kernel_sources(on_demand=True): their kernel files and the entry point host/on_demand.cu), which, linked
    as the build links it (build.link_command) and opened as the binding opens it (dlopen, then
    hgemm_on_demand_export into the opener's registry), registers exactly those records."""
    on_demand = [v for v in VARIANTS if v.on_demand]
    assert on_demand and build.kernel_sources(on_demand=True) == [source(v) for v in on_demand] + [build.ON_DEMAND_ENTRY]
    assert build.kernel_sources(80, on_demand=True) == []  # sm_90a kernels: nothing to build on an sm_80 GPU
    got = registry_of(build.kernel_sources(on_demand=True), tmp_path, on_demand=True)
    assert got == {v.name: (registered_operands(v), v.dtypes) for v in on_demand}


def test_no_variant_names_outside_kernel_files():
    """The binding's and the shared headers' code names no variant (comments may point a reader at one): every
    name lives in its kernel file and its record."""
    shared = [CSRC / "binding.cpp", CSRC / "hgemm.cuh", *CSRC.glob("host/*"), *CSRC.glob("blocks/*"),
              *CSRC.glob("ptx/*")]
    for path in shared:
        text = re.sub(r"//.*", "", path.read_text())
        for v in VARIANTS:
            assert not re.search(rf"\b{v.name}\b", text), (path.name, v.name)


@pytest.mark.gpu
def test_extension_holds_the_records_offered_here():
    import torch

    import ptx_kernels

    major, minor = torch.cuda.get_device_capability()
    offered = {v.name for v in VARIANTS if v.offered_on(major * 10 + minor)}
    held = {name for name in offered if not BY_NAME[name].on_demand}
    assert held <= set(ptx_kernels.load().hgemm_variants()) <= offered  # the on-demand ones once a call loaded them
    assert set(ptx_kernels.load(on_demand=True).hgemm_variants()) == offered


def test_no_measured_figures_in_sources():
    """Measured numbers live in docs/ (docs/design/); kernel sources keep the design and the reasons, so a results
    commit touches no source."""
    patterns = [re.compile(r"\d+(\.\d+)?\s*TFLOPS"), re.compile(r"\d\.\d+x\s*(of\s*)?(cuBLAS|torch)"),
                re.compile(r"\d+(\.\d+)?\s*%\s*of the (mma\.sync )?ceiling")]
    root = CSRC.parent.parent
    files = [p for p in CSRC.rglob("*") if p.suffix in (".cu", ".cuh", ".h", ".cpp")]
    files += [p for p in (root / "scripts").glob("*") if p.suffix in (".cu", ".cuh")]
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for pat in patterns:
                assert not pat.search(line), f"{path.relative_to(root)}:{i}: {line.strip()}"


def registry_of(kernel_files, out_dir, csrc=CSRC, on_demand: bool = False) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{name: (operands, dtypes)} the registry holds once the kernel files (separate translation units, a file built
    in parts one per part, as the extension builds them) are linked into one host program: the registrars run at
    load, no GPU needed. on_demand: the files are linked into a shared library as the on-demand library is
    (build.link_command), which the program opens and copies into its own registry as the binding does. Host code
    unoptimized (-O0: only the registrars have to run) and device code as unoptimized PTX only (cicc -O0, no ptxas:
    the cubins are the compile fixture's business); for compute_90a, the target every kernel file builds for (the
    sm_90a-only ones included)."""
    import subprocess

    main = out_dir / "print_registry.cu"
    opener = ('  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);\n'
              '  if (!lib) { std::fprintf(stderr, "%s\\n", dlerror()); return 1; }\n'
              '  auto entry = reinterpret_cast<int (*)(void*, void*)>(dlsym(lib, "hgemm_on_demand_export"));\n'
              '  if (!entry || entry(&hgemm::registry(), &hgemm::ceilings()) < 0) return 2;\n')
    main.write_text('#include <dlfcn.h>\n#include <cstdio>\n#include "host/registry.h"\n'
                    'int main(int argc, char** argv) {\n' + (opener if on_demand else "") +
                    '  for (const auto& kv : hgemm::registry())\n'
                    '    std::printf("%s %d %d\\n", kv.first.c_str(), int(kv.second.operands),\n'
                    '                int(kv.second.launch_bf16 != nullptr));\n}\n')
    nvcc = [toolchain.find_nvcc(), "-std=c++17", f"-I{csrc}"]

    def obj(unit):
        src, part = unit
        out = out_dir / (f"{src.stem}.o" if part is None else f"{src.stem}.part{part}.o")
        defines = [] if part is None else [f"-DHGEMM_PART={part}"]
        subprocess.run([*nvcc, "-O0", "-Xcicc", "-O0", "-gencode=arch=compute_90a,code=compute_90a", "-Xcompiler",
                        "-fPIC", *defines, "-c", "-o", str(out), str(src)], check=True, capture_output=True)
        return str(out)

    with ThreadPoolExecutor(max_workers=2) as pool:
        objs = list(pool.map(obj, [*build.units(kernel_files), (main, None)]))
    exe, args = out_dir / "print_registry", []
    if on_demand:
        lib = out_dir / "on_demand.so"
        linked = subprocess.run(build.link_command(objs[:-1], lib, nvcc[0]), capture_output=True, text=True)
        assert linked.returncode == 0, linked.stderr[-3000:]  # an undefined launcher: no part holds it
        objs, args = objs[-1:], [str(lib)]
    linked = subprocess.run([*nvcc, "-o", str(exe), *objs], capture_output=True, text=True)
    assert linked.returncode == 0, linked.stderr[-3000:]  # an undefined launcher: no part holds it
    out = subprocess.run([str(exe), *args], check=True, capture_output=True, text=True).stdout
    kinds = ("RowMajorA", "AnyStrides", "AnyMajor")  # hgemm::Operands, in order
    return {name: (kinds[int(k)], ("fp16", "bf16") if int(bf16) else ("fp16",))
            for name, k, bf16 in (line.split() for line in out.splitlines())}


def test_probe_kernels_compile_with_the_instructions_they_probe():
    for arch in ARCHS:
        c = toolchain.compile_cubin(CSRC / "lab" / "probes.cu", arch)
        mix = toolchain.instruction_mix(c.sass())
        assert mix["LDSM"] >= 6 and mix["HMMA"] >= 2, (arch, dict(mix))
        assert (mix["STSM"] >= 6) == (arch == "sm_90a"), (arch, mix["STSM"])
        assert all(f.spill_stores == 0 for f in c.functions)


def test_mma_ladder_mma_counts(compiled):
    """HMMA per instantiation: mma_naive 1 per k-step; mma_tiled 4x4 tiles x 2 k16-steps per 32-wide K step = 32
    (the main loop body appears once). The pipelined steps: test_pipelined_mma_count."""
    for name, per in (("mma_naive", 1), ("mma_tiled", 32)):
        mix = toolchain.instruction_mix(compiled[(name, "sm_90a")].sass())
        assert mix["HMMA"] % 4 == 0 and mix["HMMA"] >= 4 * per, (name, mix["HMMA"])


def test_stmatrix_epilogue_only_on_sm90a(compiled):
    """STSM in mma_stmatrix for sm_90a: two m16n8 tiles per stmatrix.x4, so a warp's 1/8 of the block tile is
    BM x BN / (8 x 16 x 16) of them — 16 for the 64x64 warp tiles of the fp32 tile (run with fp32 and with fp16
    accumulators), 32 for the large fp16 tile's 64x128; 2 B layouts each. For sm_80 it falls back to plain stores,
    and no other variant has any (the records' forbids: test_sass_has_the_promised_instructions)."""
    v = BY_NAME["mma_stmatrix"]
    tiles = (v.block, v.block, v.block_fp16) + (v.block,) * ("bf16" in v.dtypes)  # bf16: the fp32 tile
    expected = sum(2 * bm * bn // (8 * 16 * 16) for bm, bn, _ in tiles)
    assert expected == 2 * 16 + 2 * 16 + 2 * 32 + 2 * 16
    assert toolchain.instruction_mix(compiled[(v.name, "sm_90a")].sass())["STSM"] == expected
    assert "STSM" in v.forbids["sm_80"] and "STSM" in v.promised("sm_90a")


def test_xor_swizzle_is_a_conflict_free_permutation(tmp_path):
    """The C++ tile::Xor layout (host-callable constexpr), printed by a host program: within each row the 16-byte
    chunks are permuted, and the 8 rows of any ldmatrix (same logical chunk) land in 8 different bank groups."""
    import subprocess

    prog = tmp_path / "xor.cu"
    prog.write_text("""#include <cstdio>
#include "blocks/swizzle.cuh"
template <int CH> void dump() {
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < CH; ++c) std::printf("%d %d %d %d\\n", CH, r, c, tile::Xor<CH>::off(r, c * 8, CH * 8));
}
int main() { dump<2>(); dump<4>(); dump<16>(); }
""")
    exe = tmp_path / "xor"
    subprocess.run([toolchain.find_nvcc(), "-std=c++17", "-arch=sm_80", f"-I{CSRC}", "-o", str(exe), str(prog)],
                   check=True, capture_output=True)
    rows = [tuple(map(int, line.split())) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                                     check=True).stdout.splitlines()]
    table = {}
    for ch, r, c, off in rows:
        table.setdefault(ch, {})[(r, c)] = off
    for ch, offs in table.items():
        for r in range(32):
            assert sorted((offs[(r, c)] - r * ch * 8) // 8 for c in range(ch)) == list(range(ch)), (ch, r)
        for c in range(ch):
            for r0 in range(0, 32, 8):
                banks = {(offs[(r, c)] // 8) % 8 for r in range(r0, r0 + 8)}
                assert len(banks) == 8, (ch, c, r0, banks)


def test_the_extension_is_built_by_load_inline(monkeypatch, tmp_path):
    """build.load() hands the Torch glue (csrc/binding.cpp, as text) to torch.utils.cpp_extension.load_inline,
    with every kernel file of the GPU compiled to its own object (`compile_objects`) and linked in; the file-based
    `load` is not used."""
    import torch
    import torch.utils.cpp_extension as cpp

    seen = {}
    monkeypatch.setattr(build, "_module", None)
    monkeypatch.setattr(build, "_check_toolchain", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setenv("TENSORCORE_HGEMM_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(build, "nvcc_path", lambda: "nvcc")

    def objects(sources, flags, out_dir, nvcc, jobs=None, times=None):
        seen["sources"], seen["flags"] = sources, flags
        return [out_dir / f"{s.stem}.o" for s in sources]

    def load_inline(**kwargs):
        seen["kwargs"] = kwargs
        return "the module"

    class Glue:
        def wait(self):
            seen["glue waited"] = True

    def start_glue(name, build_dir):
        seen["glue"] = (name, build_dir)
        return Glue()

    monkeypatch.setattr(build, "compile_objects", objects)
    monkeypatch.setattr(build, "_start_glue", start_glue)
    monkeypatch.setattr(cpp, "load_inline", load_inline)
    monkeypatch.setattr(cpp, "load", lambda **kw: pytest.fail("file-based load used"))
    try:
        assert build.load() == "the module"
    finally:
        build._module = None
    kw = seen["kwargs"]
    assert kw["cpp_sources"] == [build.BINDING.read_text()] and kw["with_cuda"]
    assert kw["extra_ldflags"] == [str(tmp_path / kw["name"] / "objects" / f"{s.stem}.o") for s in seen["sources"]]
    assert seen["sources"] == build.kernel_sources(90) and "-gencode=arch=compute_90a,code=sm_90a" in seen["flags"]
    assert kw["name"] == build.module_name(seen["flags"]) and kw["build_directory"] == str(tmp_path / kw["name"])
    # the glue compiled beside the objects, by the same load_inline call without them, in a child process
    assert seen["glue"] == (kw["name"], tmp_path / kw["name"]) and seen["glue waited"]
    assert {k: v for k, v in kw.items() if k not in ("name", "extra_ldflags", "verbose")} == \
        build._glue_args(tmp_path / kw["name"])


def test_kernel_objects_compile_in_parallel_and_are_kept(tmp_path, monkeypatch):
    """compile_objects: one object per kernel file, named by the csrc/ hash and flags, reused when present; an
    nvcc error names the file."""
    flags = [*build.BASE_CUDA_FLAGS, "-gencode=arch=compute_80,code=sm_80"]
    srcs = [CSRC / "sm80/simt_naive.cu", CSRC / "lab/mma_ceiling.cu"]
    objs = build.compile_objects(srcs, flags, tmp_path, toolchain.find_nvcc(), jobs=2)
    assert [o.name.split("-")[0] for o in objs] == ["simt_naive", "mma_ceiling"] and all(o.stat().st_size for o in objs)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(o.name for o in objs)  # no temporary left
    monkeypatch.setattr(build.subprocess, "run", lambda *a, **k: pytest.fail("compiled again"))
    assert build.compile_objects(srcs, flags, tmp_path, toolchain.find_nvcc()) == objs
    monkeypatch.undo()
    bad = tmp_path / "bad.cu"
    bad.write_text("this is not C++")
    with pytest.raises(build.BuildError, match="nvcc failed on .*bad.cu"):
        build.compile_objects([bad], flags, tmp_path / "b", toolchain.find_nvcc())


def test_a_file_built_in_parts_compiles_to_one_object_per_part(tmp_path):
    """A file that marks parts (csrc/host/parts.h) compiles to one object per part, each with HGEMM_PART set to its
    number and only its part's code, in the sources' order beside a whole file; each unit's nvcc seconds are
    reported under its name."""
    import subprocess

    src = tmp_path / "split.cu"
    src.write_text('#include "host/parts.h"\n'
                   "#if HGEMM_IN_PART(0)\nint in_part_zero() { return 0; }\n#endif\n"
                   "#if HGEMM_IN_PART(1)\nint in_part_one() { return HGEMM_PART; }\n#endif\n")
    whole = tmp_path / "whole.cu"
    whole.write_text("int whole() { return 2; }\n")
    assert build.build_parts(src) == (0, 1) and build.build_parts(whole) == ()
    times = {}
    flags = [*build.BASE_CUDA_FLAGS, "-gencode=arch=compute_80,code=sm_80"]
    objs = build.compile_objects([whole, src], flags, tmp_path / "o", toolchain.find_nvcc(), times=times)
    assert [o.name.split("-")[0] for o in objs] == ["whole", "split.part0", "split.part1"]
    syms = [subprocess.run(["nm", str(o)], capture_output=True, text=True, check=True).stdout for o in objs[1:]]
    assert "in_part_zero" in syms[0] and "in_part_one" not in syms[0]
    assert "in_part_one" in syms[1] and "in_part_zero" not in syms[1]
    assert sorted(times) == sorted([str(whole), f"{src} part 0", f"{src} part 1"])
    assert all(t > 0 for t in times.values())
    assert build.format_times(times).splitlines()[0].endswith(max(times, key=times.get))


def test_the_heaviest_units_start_first():
    """The build's translation units (`build.units`: a file built in parts is one per part, HGEMM_IN_PART) start
    with the parts of split files, then the Hopper files, the other kernel files, the lab sources and the staging
    copy, so that the pool does not end on a long unit; every split file numbers its parts from 0 (part 0: its
    registration)."""
    sources = build.kernel_sources(90)
    todo = build.units(sources)
    order = build.heaviest_first(todo)
    assert sorted(order, key=str) == sorted(todo, key=str)
    split = {src for src, part in todo if part is not None}
    assert {CSRC / "sm90" / "wgmma_persistent.cu", CSRC / "sm90" / "wgmma_splitk.cu",
            CSRC / "sm90" / "wgmma_cluster.cu"} <= split
    for src in split:
        assert build.build_parts(src) == tuple(range(len(build.build_parts(src)))), src
        assert '#include "host/parts.h"' in src.read_text(), src
    kinds = ["part" if part is not None else src.parent.name for src, part in order]
    assert kinds == sorted(kinds, key=["part", "sm90", "sm80", "lab", "host"].index), kinds


def test_the_binding_builds_on_its_own_headers(tmp_path):
    """load_inline is told not to put <torch/extension.h> in front of binding.cpp (where torch has the option), and
    binding.cpp names every header it needs; the fallback (load_inline's default) is the same call without it."""
    import inspect

    from torch.utils.cpp_extension import load_inline

    own, default = build._glue_args(tmp_path), build._glue_args(tmp_path, own_headers=False)
    assert "no_implicit_headers" not in default
    assert {k: v for k, v in own.items() if k != "no_implicit_headers"} == default
    if "no_implicit_headers" in inspect.signature(load_inline).parameters:
        assert own["no_implicit_headers"] is True
    text = build.BINDING.read_text()
    assert "torch/extension.h>" not in re.sub(r"//.*", "", text) and "#include <torch/csrc/utils/pybind.h>" in text
