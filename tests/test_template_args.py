"""Kernel instances read from demangled names in every demangler's spelling (ptx_kernels/toolchain.py): the same
cubin entry is `wgmma_persistent_kernel<..., (Acc)0, false, true, false>` to GNU c++filt and llvm-cxxfilt and
`<..., (Acc)0, (bool)0, (bool)1, (bool)0>` to the CUDA toolkit's cu++filt, and `compare inspect` must read both.
No nvcc needed: the names are fed as text, and any demangler installed here is run on the mangled names too."""
import shutil
import subprocess

import pytest

from ptx_kernels import toolchain
from ptx_kernels.variants import BY_NAME, source

# Entry names from real cubins (compile_cubin of each source at sm_90a / sm_80), and the sparse kernel's template
# with its `int CLUSTER` (hand-mangled: the Itanium form nvcc writes).
MANGLED = {
    "wgmma_persistent": "_ZN57_GLOBAL__N__8d5baf3d_19_wgmma_persistent_cu_66c49648_663623wgmma_persistent_kernel"
                        "I13__nv_bfloat16NS_4TileILi64ELi8ELi1ELi64ELi64EEEL3Acc0ELb0ELb1ELb0EEEv14CUtensorMap_st"
                        "S5_S5_PT_liiib",
    "simt_naive": "_ZN10simt_naive6kernelIL3Acc1EEEv10GemmArgsOfI6__halfE",
    "wgmma_cluster": "_ZN54_GLOBAL__N__a79a9163_16_wgmma_cluster_cu_66c49648_786520wgmma_cluster_kernelI13__nv_"
                     "bfloat16L3Acc0ELb0ELb1ELb0EEEv14CUtensorMap_stS3_S3_PT_liiib",
    "wgmma_sp": "_Z15wgmma_sp_kernelIL3Acc1ELb1ELb0ELi2EEvv",
}
_PERSISTENT_PARAMS = "(CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, __nv_bfloat16*, long, int, int, int, bool)"
# What each demangler prints for them. GNU c++filt (2.40 here, 2.42 on the GPU image) and llvm-cxxfilt 14 agree;
# cu++filt writes every literal as a cast and an anonymous namespace as `<unnamed>`. "qualified": the same names
# with a namespaced enum (`(hgemm::Acc)1`, as every tool writes an enum declared in a namespace), suffixed integers
# (GNU's `64u` for unsigned) and bools as bare 0/1.
SPELLINGS = {
    "c++filt": {
        "wgmma_persistent": "void (anonymous namespace)::wgmma_persistent_kernel<__nv_bfloat16, (anonymous namespace)::"
                            "Tile<64, 8, 1, 64, 64>, (Acc)0, false, true, false>" + _PERSISTENT_PARAMS,
        "simt_naive": "void simt_naive::kernel<(Acc)1>(GemmArgsOf<__half>)",
        "wgmma_cluster": "void (anonymous namespace)::wgmma_cluster_kernel<__nv_bfloat16, (Acc)0, false, true, false>"
                         + _PERSISTENT_PARAMS,
        "wgmma_sp": "void wgmma_sp_kernel<(Acc)1, true, false, 2>()",
    },
    "cu++filt": {  # CUDA 13.0's (cuda_13.0.r13.0/compiler.36424714_0) on the GPU machines' image, verbatim
        "wgmma_persistent": "void <unnamed>::wgmma_persistent_kernel<__nv_bfloat16, <unnamed>::Tile<(int)64, (int)8, "
                            "(int)1, (int)64, (int)64>, (Acc)0, (bool)0, (bool)1, (bool)0>(CUtensorMap_st, "
                            "CUtensorMap_st, CUtensorMap_st, T1 *, long, int, int, int, bool)",
        "simt_naive": "void simt_naive::kernel<(Acc)1>(GemmArgsOf<__half>)",
        "wgmma_cluster": "void <unnamed>::wgmma_cluster_kernel<__nv_bfloat16, (Acc)0, (bool)0, (bool)1, (bool)0>("
                         "CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, T1 *, long, int, int, int, bool)",
        "wgmma_sp": "void wgmma_sp_kernel<(Acc)1, (bool)1, (bool)0, (int)2>()",
    },
    "qualified": {
        "wgmma_persistent": "void hgemm::wgmma_persistent_kernel<__nv_bfloat16, hgemm::Tile<64u, 8u, 1u, 64u, 64u>, "
                            "(hgemm::Acc)0, (bool)0, (bool)1, (bool)0>" + _PERSISTENT_PARAMS,
        "simt_naive": "void simt_naive::kernel<(hgemm::Acc)1>(hgemm::GemmArgsOf<__half>)",
        "wgmma_cluster": "void hgemm::wgmma_cluster_kernel<__nv_bfloat16, (hgemm::Acc)0, 0, 1, 0>" + _PERSISTENT_PARAMS,
        "wgmma_sp": "void hgemm::wgmma_sp_kernel<(hgemm::Acc)1, 1, 0, 2l>()",
    },
}
# The parsed arguments every spelling must give.
EXPECTED = {
    "wgmma_persistent": ("wgmma_persistent_kernel", "bf16", "fp32", False,
                         {"T": "Tile<64, 8, 1, 64, 64>", "TMA_STORE": True, "A_COL": False}),
    "simt_naive": ("kernel", "fp16", "fp16", None, {}),
    "wgmma_cluster": ("wgmma_cluster_kernel", "bf16", "fp32", False, {"TMA_STORE": True, "A_COL": False}),
    "wgmma_sp": ("wgmma_sp_kernel", "fp16", "fp16", True, {"TMA_STORE": False, "CLUSTER": 2}),
}


def templates() -> dict[str, list[str]]:
    """The kernel templates' parameter names, read from the sources as `toolchain.instances` reads them."""
    out = {}
    for name in MANGLED:
        out.update(toolchain.kernel_templates(source(BY_NAME[name])))
    return out


def check(inst: toolchain.Instance, name: str):
    kernel, dtype, acc, b_col, args = EXPECTED[name]
    assert inst is not None, name
    assert (inst.kernel, inst.dtype, inst.acc, inst.b_col_major) == (kernel, dtype, acc, b_col), (name, inst.args)
    # a bool through `flag` (some demanglers spell one as a plain 0/1), anything else as parsed
    got = {k: inst.flag(k) if isinstance(v, bool) else inst.arg(k) for k, v in args.items()}
    assert got == args and all(type(got[k]) is type(v) for k, v in args.items()), (name, inst.args)


@pytest.mark.parametrize("style", SPELLINGS)
def test_every_demangler_spelling_gives_the_same_instance(style):
    """Each style's names parse to the same kernel, dtype, accumulation, B layout and remaining arguments; the
    records' `inspect` choices (written in GNU c++filt's spelling) match in every style."""
    found = {name: toolchain.instance_of(MANGLED[name], plain, templates()) for name, plain in SPELLINGS[style].items()}
    for name, inst in found.items():
        check(inst, name)
    assert found["wgmma_persistent"].matches({"T": "Tile<64, 8, 1, 64, 64>", "TMA_STORE": "true", "A_COL": "false"})
    assert found["wgmma_persistent"].matches({"TMA_STORE": "(bool)1", "ACC": "(hgemm::Acc)0"})
    assert not found["wgmma_persistent"].matches({"TMA_STORE": "false"})
    assert not found["wgmma_persistent"].matches({"T": "Tile<128, 6>"})
    assert not found["wgmma_persistent"].matches({"CLUSTER": "1"})  # no such parameter
    assert found["wgmma_sp"].matches({"CLUSTER": "2", "B_COL": "true"})
    assert not found["wgmma_sp"].matches({"CLUSTER": "1"})


@pytest.mark.parametrize("tool", ["cu++filt", "c++filt", "llvm-cxxfilt"])
def test_installed_demanglers_output_parses(tool):
    """Whatever this machine's demanglers print for the real mangled names parses to the expected instances (the
    path `toolchain.instances` takes after `demangle`)."""
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not installed")
    out = subprocess.run([path], input="\n".join(MANGLED.values()) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    for (name, mangled), plain in zip(MANGLED.items(), out):
        check(toolchain.instance_of(mangled, plain, templates()), name)


@pytest.mark.parametrize("text, value", [
    ("true", True), ("false", False), ("(bool)1", True), ("(bool)0", False),
    ("(Acc)1", 1), ("(hgemm::Acc)0", 0), ("(enum hgemm::Acc)1", 1),
    ("128", 128), ("-5", -5), ("128u", 128), ("4ul", 4), ("5ll", 5), ("6ull", 6), ("7l", 7), ("8U", 8),
    ("(int)128", 128), ("(unsigned int)128", 128), ("(short)8", 8), ("(unsigned char)1", 1), ("(char)97", 97),
    ("(int)-5", -5), ("(unsigned long)4", 4), ("(long long)5", 5), ("(unsigned long long)6", 6), ("(signed char)2", 2),
    ("__half", "__half"), ("Tile<256, 4, 1, 128, 64>", "Tile<256, 4, 1, 128, 64>"),
    ("hgemm::Tile<(int)256, 4u, 1, 128, 64>", "Tile<256, 4, 1, 128, 64>"), ("Tile<128,6>", "Tile<128, 6>"),
    ("Flags<(bool)1, false>", "Flags<true, false>"),
])
def test_template_value_reads_each_literal_form(text, value):
    got = toolchain.template_value(text)
    assert got == value and type(got) is type(value), (text, got)


def test_a_bad_spelling_is_refused_by_name():
    """A bool literal other than 0/1, or a type where a bool or an Acc belongs, is refused naming the argument."""
    with pytest.raises(ValueError, match=r"\(bool\)2"):
        toolchain.template_value("(bool)2")
    inst = toolchain.Instance("_Z1k", "k", {"B_COL": "Tile<1>", "ACC": "(Acc)7"})
    with pytest.raises(ValueError, match="B_COL"):
        inst.b_col_major
    with pytest.raises(ValueError, match="ACC"):
        inst.acc
