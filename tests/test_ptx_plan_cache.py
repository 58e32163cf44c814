"""ptx_kernels.hgemm's plan cache on the CPU: a call whose operands have the shapes, strides, dtypes, devices and
alignment of an earlier call that launched without copies skips validation and the layout decisions; everything
else (another layout, a copy, a negative view, out= overlapping an input, bad input) takes the full path. The
extension is replaced by a fake that computes C in fp32 and counts launches, and validation is counted."""
import pytest
import torch

import ptx_kernels
from hgemm_common import validation
from helpers import ints
from ptx_kernels import call


class FakeExt:
    """hgemm_launch as the binding's signature has it: writes C = A @ B, reports a launch (grid, block, smem, limit,
    tile_m, tile_n, split) and the kernel that ran."""

    def __init__(self):
        self.launches, self.sms, self.staged = [], [], []

    def hgemm_launch(self, variant, a, b, c, a_col, b_col, acc_fp16, tile, split, sms=0):
        self.launches.append((variant, tuple(a.stride()), tuple(b.stride()), b_col, c.data_ptr(), a_col))
        self.sms.append(sms)
        c.copy_((a.float() @ b.float()).to(c.dtype))
        return (1, 1, 384, 0, 0, 128, 256, 0), ""

    def stage_copy(self, srcs, bufs):
        """The staging launch (one for A and B), as torch copies."""
        self.staged.append(len(srcs))
        for src, buf in zip(srcs, bufs):
            buf.copy_(src)


@pytest.fixture
def fake(monkeypatch):
    ext = FakeExt()
    calls = []

    def counted_validate(a, b, out=None, *, allow_cpu=None):
        calls.append(1)
        return validation.validate(a, b, out, allow_cpu=True)

    monkeypatch.setattr(call, "load_for", lambda v: ext)
    monkeypatch.setattr(call, "validate", counted_validate)
    monkeypatch.setattr(call, "_arch", lambda device: 90)
    monkeypatch.setattr(call, "_PLANS", call.LRU(256))
    ext.validations = calls
    return ext


def test_repeated_call_skips_validation_and_launches_the_same(fake):
    a, b = ints(33, 40), ints(40, 24, seed=1)
    want = (a.float() @ b.float()).half()
    c1 = ptx_kernels.hgemm(a, b, kernel="wgmma_persistent")
    c2 = ptx_kernels.hgemm(a.clone(), b.clone(), kernel="wgmma_persistent")  # new addresses, same facts
    assert torch.equal(c1, want) and torch.equal(c2, want)
    assert len(fake.validations) == 1 and len(fake.launches) == 2
    assert fake.launches[0][:4] == fake.launches[1][:4]
    assert ptx_kernels.last_launch()["tile"] == (128, 256) and ptx_kernels.last_launch()["copies"] == []
    out = torch.full((33, 24), float("nan"), dtype=torch.float16)
    assert ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", out=out) is out and torch.equal(out, want)
    assert ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", out=out) is out
    assert len(fake.validations) == 2  # out= is another kind of call: validated once, then cached too


def test_other_facts_take_the_full_path(fake):
    a, b = ints(33, 40), ints(40, 24, seed=1)
    ptx_kernels.hgemm(a, b, kernel="wgmma_persistent")
    n = len(fake.validations)
    ptx_kernels.hgemm(a, b.t().contiguous().t(), kernel="wgmma_persistent")  # B column-major: another key
    ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", acc="fp16")
    ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", split=1)
    ptx_kernels.hgemm(a[:, :39], b[:39], kernel="wgmma_persistent")  # another K
    assert len(fake.validations) == n + 4
    assert fake.launches[1][3] is True  # column-major B read in place


def test_sms_reaches_the_launch_and_keys_the_plan(fake):
    """hgemm(sms=...) (the SM count a stream-K schedule sees) reaches the binding on the first call and on the cached
    plan's, and another count is another kind of call; without it the binding gets 0 (the device's)."""
    a, b = ints(33, 40), ints(40, 24, seed=1)
    for sms in (None, 3, 3, 5, None):
        ptx_kernels.hgemm(a, b, kernel="wgmma_streamk", sms=sms)
    assert fake.sms == [0, 3, 3, 5, 0] and len(fake.validations) == 3


def test_calls_with_copies_are_never_cached(fake):
    a, b = ints(8, 30), ints(30, 16, seed=1)
    a_odd = torch.zeros(8, 31, dtype=torch.float16)[:, 1:]  # rows 62 bytes apart: A is copied for TMA
    a_odd.copy_(a)
    want = (a.float() @ b.float()).half()
    for _ in range(2):
        assert torch.equal(ptx_kernels.hgemm(a_odd, b, kernel="wgmma_persistent"), want)
        assert ptx_kernels.last_launch()["copies"] == ["A to 16-byte aligned rows"]
    assert len(fake.validations) == 2


def test_negative_view_and_overlapping_out_after_a_cached_call(fake):
    a, b = ints(16, 32), ints(32, 16, seed=1)
    want = (a.float() @ b.float()).half()
    ptx_kernels.hgemm(a, b, kernel="wgmma_persistent")
    assert torch.equal(ptx_kernels.hgemm(a, b._neg_view(), kernel="wgmma_persistent"), -want)  # not the cached plan
    out = torch.empty(16, 16, dtype=torch.float16)
    ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", out=out)  # caches the out= plan
    n = len(fake.launches)
    big = torch.zeros(16 * 32, dtype=torch.float16)
    a2, out2 = big.view(16, 32), big[256:].view(16, 16)  # the cached call's strides and alignment; out2 inside A
    a2.copy_(a)
    with pytest.raises(ValueError, match="out overlaps an input"):
        ptx_kernels.hgemm(a2, b, kernel="wgmma_persistent", out=out2)
    assert len(fake.launches) == n and torch.equal(a2, a)  # refused before any launch, A untouched


def test_bad_input_after_a_cached_call_still_gets_its_error(fake):
    a, b = ints(16, 32), ints(32, 16, seed=1)
    ptx_kernels.hgemm(a, b, kernel="wgmma_persistent")
    with pytest.raises(ValueError, match="supports acc in"):
        ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", acc="fp8")
    with pytest.raises(ValueError, match="split"):
        ptx_kernels.hgemm(a, b, variant="wgmma_persistent", split=300)
    with pytest.raises(ValueError, match=r"split=\[2\]"):  # unhashable: no plan key, the full path's error
        ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", split=[2])
    with pytest.raises(TypeError, match="float16"):
        ptx_kernels.hgemm(a.float(), b, variant="wgmma_persistent")


def test_column_major_a_in_place_where_the_record_reads_it(fake):
    """Column-major A reaches the kernels that read it in place (the records listing TN: wgmma_persistent) as it is,
    with a_col_major set, and such a call is cached like any other; a kernel that reads row-major A only
    (wgmma_ws) gets a row-major copy; columns off 16-byte boundaries get one aligned copy, still column-major."""
    a, b = ints(40, 32).t(), ints(40, 24, seed=1)  # A 32 x 40, column-major, columns 64 bytes apart
    want = (a.float() @ b.float()).half()
    for _ in range(2):
        assert torch.equal(ptx_kernels.hgemm(a, b, variant="wgmma_persistent"), want)
        launch = ptx_kernels.last_launch()
        assert launch["copies"] == [] and launch["a_col_major"] and not launch["b_col_major"]
    assert len(fake.validations) == 1 and fake.launches[-1][1] == (1, 32) and fake.launches[-1][5] is True
    assert torch.equal(ptx_kernels.hgemm(a, b.t().contiguous().t(), variant="wgmma_persistent"), want)  # TT
    assert ptx_kernels.last_launch()["a_col_major"] and ptx_kernels.last_launch()["b_col_major"]
    assert torch.equal(ptx_kernels.hgemm(a, b, variant="wgmma_ws"), want)
    assert ptx_kernels.last_launch()["copies"] == ["A to row-major"] and not ptx_kernels.last_launch()["a_col_major"]
    assert fake.launches[-1][1] == (40, 1) and fake.launches[-1][5] is False
    odd = ints(40, 33).t()  # columns 66 bytes apart
    assert torch.equal(ptx_kernels.hgemm(odd, b, variant="wgmma_persistent"), (odd.float() @ b.float()).half())
    assert ptx_kernels.last_launch()["copies"] == ["A to 16-byte aligned rows"]
    assert ptx_kernels.last_launch()["a_col_major"] and fake.launches[-1][1] == (1, 64)


def test_column_major_a_is_copied_where_a_pinned_split_goes_over_the_grid(fake):
    """wgmma_persistent reads a column-major A in place, and keeps it so for the splits over a cluster (1, 2, 4); a
    split it hands to wgmma_splitk_grid (3, 8, 64), which reads row-major A only, gets A copied to row-major first
    (left in place, the grid kernel waited on boxes that never filled its stages: a hang)."""
    a, b = ints(16, 40).t(), ints(16, 24, seed=1)  # A (40 x 16) column-major, columns 80 bytes apart
    want = (a.float() @ b.float()).half()
    for split, in_place in ((None, True), (1, True), (2, True), (4, True), (3, False), (8, False), (64, False)):
        assert torch.equal(ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", split=split), want)
        launch = ptx_kernels.last_launch()
        assert launch["a_col_major"] == fake.launches[-1][5] == in_place, (split, launch)
        assert launch["copies"] == ([] if in_place else ["A to row-major"]), (split, launch)
