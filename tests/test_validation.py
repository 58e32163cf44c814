"""Bad input gets a clear error naming the problem; empty problems return without a launch."""
import pytest
import torch

import triton_kernels
from hgemm_common.validation import check_acc, check_dtype_offered, max_element_offset, needs_int64_indexing, validate

from conftest import DEVICE


def h(*shape, dtype=torch.float16, device=DEVICE):
    return torch.ones(*shape, dtype=dtype, device=device)


@pytest.mark.parametrize("a_dtype,b_dtype", [(torch.float32, torch.float16), (torch.float16, torch.bfloat16),
                                             (torch.float32, torch.float32), (torch.int8, torch.float16)])
def test_dtype_error_names_both_dtypes(a_dtype, b_dtype):
    with pytest.raises(TypeError, match=rf"float16.*mat1 {a_dtype}.*mat2 {b_dtype}"):
        triton_kernels.hgemm(h(3, 4, dtype=a_dtype), h(4, 5, dtype=b_dtype))


def test_bf16_problem_allocates_bf16_and_names_its_dtype():
    p = validate(h(3, 4, dtype=torch.bfloat16), h(4, 5, dtype=torch.bfloat16), allow_cpu=True)
    assert p.dtype == "bf16" and p.out.dtype == torch.bfloat16 and p.out.shape == (3, 5)
    assert validate(h(3, 4), h(4, 5), allow_cpu=True).dtype == "fp16"
    with pytest.raises(TypeError, match=r"out must be torch.bfloat16 like the inputs, got torch.float16"):
        validate(h(3, 4, dtype=torch.bfloat16), h(4, 5, dtype=torch.bfloat16), out=h(3, 5), allow_cpu=True)


def test_accumulation_and_offered_dtype_errors_name_the_choices():
    check_acc("fp16", "fp16")
    check_acc("bf16", "fp32")
    with pytest.raises(ValueError, match=r"^hgemm: bf16 inputs accumulate in fp32 only .*got acc='fp16'$"):
        check_acc("bf16", "fp16")
    with pytest.raises(ValueError, match=r"acc must be one of \('fp32', 'fp16'\) for fp16 inputs, got 'fp64'"):
        check_acc("fp16", "fp64")
    check_dtype_offered("bf16", ("fp16", "bf16"), "variant 'x'")
    with pytest.raises(TypeError, match=r"^variant 'wmma_naive' takes fp16 inputs, got torch.bfloat16$"):
        check_dtype_offered("bf16", ("fp16",), "variant 'wmma_naive'")


def test_shape_mismatch_uses_torch_mm_words():
    with pytest.raises(ValueError, match=r"^mat1 and mat2 shapes cannot be multiplied \(3x4 and 5x6\)$"):
        triton_kernels.hgemm(h(3, 4), h(5, 6))


@pytest.mark.parametrize("shape_a,shape_b,which,dims", [((3,), (3, 4), "mat1", 1), ((2, 3, 4), (4, 5), "mat1", 3),
                                                        ((3, 4), (4,), "mat2", 1), ((3, 4), (1, 4, 5), "mat2", 3)])
def test_not_a_matrix(shape_a, shape_b, which, dims):
    with pytest.raises(ValueError, match=rf"{which} must be a 2-D matrix, got a {dims}-D tensor"):
        triton_kernels.hgemm(h(*shape_a), h(*shape_b))


def test_not_a_tensor():
    with pytest.raises(TypeError, match="mat1 must be a torch.Tensor, got list"):
        triton_kernels.hgemm([[1.0]], h(1, 1))


def test_zero_tensors_are_named_even_after_a_cached_plan():
    """A ZeroTensor (torch._efficientzerotensor: no memory, data_ptr 0) is refused with its name, also when a plan for
    a real tensor of the same shape and strides is cached (the plan key keeps null pointers apart), in both packages
    (the PTX wrapper names it before the device check, so this runs on the CPU too)."""
    import ptx_kernels

    triton_kernels.hgemm(h(3, 4), h(4, 5))  # caches the plan of this kind of call
    z = torch._efficientzerotensor((3, 4), dtype=torch.float16, device=DEVICE)
    with pytest.raises(ValueError, match=r"mat1 is a ZeroTensor"):
        triton_kernels.hgemm(z, h(4, 5))
    with pytest.raises(ValueError, match=r"mat2 is a ZeroTensor"):
        triton_kernels.hgemm(h(3, 4), torch._efficientzerotensor((4, 5), dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match=r"out is a ZeroTensor"):
        triton_kernels.hgemm(h(3, 4), h(4, 5), out=torch._efficientzerotensor((3, 5), dtype=torch.float16,
                                                                                device=DEVICE))
    with pytest.raises(ValueError, match=r"mat1 is a ZeroTensor"):
        ptx_kernels.hgemm(z, h(4, 5), kernel="wgmma_persistent")
    from ptx_kernels import sparse

    values, meta = sparse.compress(sparse.prune_2to4(h(16, 32)))
    with pytest.raises(ValueError, match=r"values is a ZeroTensor"):
        ptx_kernels.sparse_hgemm(torch._efficientzerotensor(values.shape, dtype=values.dtype), meta, h(32, 8))


@pytest.mark.parametrize("shape,strides", [((3, 5), (1, 1)), ((4, 4), (2, 1)), ((4, 4), (1, 3)), ((2, 6), (5, 1))])
def test_out_with_internally_overlapping_strides_rejected(shape, strides):
    """An out whose strides map two elements to one address (the kernels' stores would race): refused by name by the
    validation both packages run (the PTX wrapper on every call); Triton never caches a plan for such strides."""
    out = torch.empty(64, dtype=torch.float16, device=DEVICE).as_strided(shape, strides)
    m, n = shape
    for _ in range(2):
        with pytest.raises(ValueError, match=r"make some of its elements share memory"):
            triton_kernels.hgemm(h(m, 3), h(3, n), out=out)
    with pytest.raises(ValueError, match=r"make some of its elements share memory"):
        validate(h(m, 3), h(3, n), out=out, allow_cpu=True)


@pytest.mark.parametrize("shape,strides", [((3, 5), (5, 1)), ((3, 5), (1, 3)), ((3, 5), (8, 1)), ((1, 5), (1, 1)),
                                           ((4, 1), (1, 1)), ((2, 3), (1, 2))])
def test_out_with_distinct_elements_accepted(shape, strides):
    out = torch.full((64,), float("nan"), dtype=torch.float16, device=DEVICE).as_strided(shape, strides)
    m, n = shape
    assert torch.equal(triton_kernels.hgemm(h(m, 3), h(3, n), out=out).float(), torch.full(shape, 3.0, device=DEVICE))


def test_cpu_tensors_rejected_outside_interpreter():
    with pytest.raises(ValueError, match=r"inputs are on cpu; these kernels need CUDA tensors"):
        validate(h(2, 3, device="cpu"), h(3, 4, device="cpu"), allow_cpu=False)


def test_two_devices_named():
    a = h(2, 3, device="cpu")
    b = h(3, 4, device="meta")
    with pytest.raises(ValueError, match=r"found at least two devices, cpu and meta"):
        validate(a, b, allow_cpu=True)


def test_out_wrong_shape_dtype_device():
    a, b = h(3, 4), h(4, 5)
    with pytest.raises(ValueError, match=r"out has shape \(5x3\), expected \(3x5\)"):
        triton_kernels.hgemm(a, b, out=h(5, 3))
    with pytest.raises(TypeError, match=r"out must be torch.float16 like the inputs, got torch.float32"):
        triton_kernels.hgemm(a, b, out=h(3, 5, dtype=torch.float32))
    with pytest.raises(ValueError, match=r"two devices"):
        validate(a, b, out=h(3, 5, device="meta"), allow_cpu=True)


def test_out_aliasing_rejected():
    a = h(8, 8)
    with pytest.raises(ValueError, match="out overlaps an input"):
        triton_kernels.hgemm(a, h(8, 8), out=a)
    big = h(16, 8)
    with pytest.raises(ValueError, match="out overlaps an input"):
        triton_kernels.hgemm(big[:8], h(8, 8), out=big[4:12])
    with pytest.raises(ValueError, match="zero stride"):
        triton_kernels.hgemm(h(2, 8), h(8, 3), out=h(1, 3).expand(2, 3))


def test_bad_acc_and_config():
    with pytest.raises(ValueError, match=r"acc must be one of \('fp32', 'fp16'\), got 'tf32'"):
        triton_kernels.hgemm(h(2, 2), h(2, 2), acc="tf32")
    with pytest.raises(ValueError, match=r"block_k=24 must be a power of two >= 16"):
        triton_kernels.hgemm(h(2, 2), h(2, 2), config=triton_kernels.Config(32, 32, 24))
    with pytest.raises(ValueError, match=r"num_warps=3"):
        triton_kernels.hgemm(h(2, 2), h(2, 2), config=triton_kernels.Config(32, 32, 32, num_warps=3))


@pytest.mark.parametrize("m,n", [(0, 5), (5, 0), (0, 0)])
def test_empty_output_no_launch(m, n):
    c = triton_kernels.hgemm(h(m, 4), h(4, n))
    assert c.shape == (m, n) and c.dtype == torch.float16


def test_k_zero_gives_zeros():
    out = torch.full((3, 5), float("nan"), dtype=torch.float16, device=DEVICE)
    c = triton_kernels.hgemm(h(3, 0), h(0, 5), out=out)
    assert c is out
    assert torch.equal(c, torch.zeros(3, 5, dtype=torch.float16, device=DEVICE))


def test_int64_indexing_decision():
    small = torch.empty(0, dtype=torch.float16)
    assert max_element_offset(small) == 0
    # A meta tensor has strides but no storage: a matrix past int32 offsets without allocating 4 GB.
    huge = torch.empty_strided((2, 1), (2**31, 1), dtype=torch.float16, device="meta")
    assert max_element_offset(huge) == 2**31
    assert needs_int64_indexing(huge)
    assert not needs_int64_indexing(torch.empty(1024, 1024, dtype=torch.float16))


@pytest.mark.skipif(DEVICE == "cuda", reason="the CPU-tensor error")
def test_ptx_cpu_error_does_not_point_at_the_interpreter_when_it_is_on():
    """Under TRITON_INTERPRET=1 the PTX kernels' CPU-tensor error says the interpreter runs only Triton kernels,
    instead of telling the user to set what is already set."""
    import ptx_kernels

    with pytest.raises(ValueError, match="need CUDA tensors") as e:
        ptx_kernels.hgemm(h(4, 4), h(4, 4))
    assert "TRITON_INTERPRET=1" not in str(e.value) and "runs only the Triton kernels" in str(e.value)


def test_grad_with_out_is_a_clear_error():
    """Inputs that require grad: an `out=` (or the PTX `tile=`) cannot be recorded by autograd; both packages say
    so instead of returning a result without a grad_fn."""
    import ptx_kernels

    a = h(4, 4).requires_grad_()
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        triton_kernels.hgemm(a, h(4, 4), out=h(4, 4))
    with pytest.raises(RuntimeError, match="not recorded by autograd"):
        ptx_kernels.hgemm(a, h(4, 4), out=h(4, 4))


@pytest.mark.parametrize("out_kind", ["leaf", "non-leaf"])
def test_out_that_requires_grad_is_refused(out_kind):
    """An out= that requires grad (a leaf, or a tensor with a history) would be overwritten behind autograd's back:
    its grad_fn would describe values it no longer holds. torch.mm refuses it; so do both packages."""
    import ptx_kernels

    def out():
        x = h(4, 4).requires_grad_()
        return x if out_kind == "leaf" else x * 1

    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        triton_kernels.hgemm(h(4, 4), h(4, 4), out=out())
    with pytest.raises(RuntimeError, match="not recorded by autograd"):
        ptx_kernels.hgemm(h(4, 4), h(4, 4), out=out())
    with torch.no_grad():  # torch.mm's rule too: without grad mode there is no history to protect
        o = h(4, 4).requires_grad_()
        assert triton_kernels.hgemm(h(4, 4), h(4, 4), out=o) is o and float(o[0, 0]) == 4.0


def test_sparse_hgemm_refuses_to_drop_gradients():
    """sparse_hgemm has no autograd formula: an argument that requires grad is refused (the result would have no
    grad_fn and the gradient would be lost silently); under torch.no_grad() the check does not apply."""
    import ptx_kernels
    from ptx_kernels import sparse

    values, meta = sparse.compress(sparse.prune_2to4(h(16, 32)))
    with pytest.raises(RuntimeError, match="not differentiable, but an argument requires grad"):
        ptx_kernels.sparse_hgemm(values, meta, h(32, 8).requires_grad_())
    with pytest.raises(RuntimeError, match="not differentiable, but an argument requires grad"):
        ptx_kernels.sparse_hgemm(values.clone().requires_grad_(), meta, h(32, 8))
    with torch.no_grad():
        if DEVICE == "cpu":  # past the grad check, the CPU tensors are what is refused
            with pytest.raises(ValueError, match="need CUDA tensors"):
                ptx_kernels.sparse_hgemm(values, meta, h(32, 8).requires_grad_())
        else:
            assert ptx_kernels.sparse_hgemm(values, meta, h(32, 8).requires_grad_()).shape == (16, 8)
