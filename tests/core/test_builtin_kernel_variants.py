"""Launch variants of the built-in row kernels (what benchmarks/kernel_sweep.py sweeps and a plan may pick) compute
the same bits: dropping the masks (EVEN), re-reading the tile instead of holding it (REREAD) or cache hints (EVICT,
STREAM) change how memory is touched, never the result. Runs the kernels themselves (interpreted on the CPU, compiled
on a GPU). The swiglu gather kernel for strided rows matches the flat kernel the same way."""

from __future__ import annotations

import itertools

import pytest
import torch

from kernelproof_core.kernels import rms_norm, softmax, swiglu
from kernelproof_core.tolerances import TOLERANCES
from tests.conftest import HAS_CUDA

DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.mark.parametrize(("m", "n", "block_m"), [(8, 256, 2), (6, 200, 2), (5, 64, 4)])
def test_rms_norm_row_kernel_variants_agree_bit_for_bit(m: int, n: int, block_m: int) -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(m, n, generator=gen).to(torch.bfloat16).to(DEVICE)
    w = (1 + 0.1 * torch.randn(n, generator=gen)).to(torch.bfloat16).to(DEVICE)
    block_n = 1 << (n - 1).bit_length()
    even_ok = block_n == n and m % block_m == 0
    outs = {}
    for even, reread, stream in itertools.product((False, True), (False, True), (False, True)):
        if even and not even_ok:
            continue
        y = torch.full_like(x, float("nan"))
        rms_norm._rms_norm_rows[(-(-m // block_m),)](x, w, y, m, n, n, 1e-6, BLOCK_M=block_m, BLOCK_N=block_n,
                                                      ALIGN=rms_norm._align(2, n), EVEN=even, REREAD=reread,
                                                      STREAM=stream)
        outs[(even, reread, stream)] = y
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float())
    base = outs[(False, False, False)]
    assert (base.float() - ref).abs().max().item() < 0.05
    assert len(outs) == (8 if even_ok else 4)
    for key, y in outs.items():
        assert torch.equal(y, base), key


@pytest.mark.parametrize(("m", "n", "pad"), [(5, 5999, 0), (4, 5999, 3), (3, 2049, 1), (4, 2055, 8), (3, 16377, 0),
                                             (9, 2050, 2), (6, 8185, 0), (9, 1027, 0), (5, 1025, 5), (4, 2041, 0)])
def test_realigned_rms_norm_matches_fp32_and_its_variants(m: int, n: int, pad: int) -> None:
    """Unaligned 16-bit rows (each starts at another place in its vector) through the output's vector window: the
    plan takes it for every row stride, its window in power-of-two parts or one; each variant (x held or re-read;
    parts or one window) is within a bf16 rounding of fp32, held and re-read give the same bits, and nothing is
    written past the output (a guard row after it). Rows at both window bounds, and the narrow rows (1025-2041) whose
    window is 2048 lanes on 2 warps. The weight is read from the table of its shifted copies (WT > 0, 16 bytes wide,
    planned); read from w - shift (WT=-1) or element by element (WT=0) it gives the same bits."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(m, n + pad, generator=gen).to(torch.bfloat16).to(DEVICE)[:, :n]
    w = (1 + 0.1 * torch.randn(n, generator=gen)).to(torch.bfloat16).to(DEVICE)
    _launch, meta = rms_norm._plan(m, n, x.stride(0), 2, DEVICE)  # type: ignore[misc]
    assert "WINDOW" in meta, meta  # only the realigned plan has a window
    parts = (meta["WINDOW"], meta["PART1"], meta["PART2"])
    cuts = {rms_norm._parts(n), (rms_norm._window(n), 0, 0)}
    assert parts in cuts and all(n + 7 <= sum(cut) <= rms_norm._window(n) for cut in cuts)
    ref = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    outs = {}
    for cut, reread in itertools.product(cuts, (False, True)):
        out = torch.full((m + 1, n), 7.0, dtype=torch.bfloat16, device=DEVICE)
        launch, variant = rms_norm._realigned_plan(m, n, x.stride(0), cut, reread=reread)
        assert variant["WT"] == sum(cut), variant
        launch(x, rms_norm._weight_table(w, variant["WT"]), out, m, n, x.stride(0), 1e-6, **variant)
        assert bool((out[m] == 7.0).all()), "wrote past the output"
        torch.testing.assert_close(out[:m].float(), ref, rtol=1.6e-2, atol=1e-2)
        outs[cut, reread] = out[:m]
    for cut in cuts:
        assert torch.equal(outs[cut, False], outs[cut, True])
        launch, variant = rms_norm._realigned_plan(m, n, x.stride(0), cut)
        for wt in (-1, 0):
            out = torch.full((m + 1, n), 7.0, dtype=torch.bfloat16, device=DEVICE)
            launch(x, w, out, m, n, x.stride(0), 1e-6, **{**variant, "WT": wt})
            assert bool((out[m] == 7.0).all()), "wrote past the output"
            assert torch.equal(out[:m], outs[cut, False]), wt
    assert torch.equal(rms_norm.candidate(x, w, 1e-6), outs[parts, False])


@pytest.mark.parametrize(("n", "wt", "z"), [(1000, 1008, 40000), (3000, 4104, 5), (100, 104, 0)])
def test_rms_norm_weight_table_also_zeroes_the_split_counters(n: int, wt: int, z: int) -> None:
    """The table launch writes t[s, p] = w[p - s] (zero outside w) and, given an int32 buffer, zeroes all of it:
    the split path's row counters (40000 of them: more than one pass of the table's programs), with nothing else."""
    w = torch.randn(n, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16).to(DEVICE)
    counters = torch.full((z + 3,), -7, dtype=torch.int32, device=DEVICE)
    table = rms_norm._weight_table(w, wt, counters[:z] if z else None)
    ref = torch.zeros((8, wt), dtype=torch.bfloat16)
    for s in range(8):
        ref[s, s:s + n] = w.cpu()[: wt - s]
    assert torch.equal(table.cpu(), ref)
    assert torch.equal(counters[:z].cpu(), torch.zeros(z, dtype=torch.int32))
    assert torch.equal(counters[z:].cpu(), torch.full((3,), -7, dtype=torch.int32))  # nothing past the buffer


@pytest.mark.parametrize("overlap", [0, 1, 2])
@pytest.mark.parametrize(("m", "n", "pad", "chunk", "rows_b"), [
    (3, 3001, 0, 1024, 1), (5, 2053, 3, 512, 2), (4, 4099, 8, 1024, 4), (7, 1031, 2, 256, 3), (2, 40001, 0, 8192, 1)])
def test_two_phase_rms_norm_matches_fp32_on_any_grid(m: int, n: int, pad: int, chunk: int, rows_b: int,
                                                     overlap: int) -> None:
    """The two-phase path on one program (every partial its own, nothing to wait for), three and one a chunk, and
    with no patience at all (every row's partials recomputed by the program that scales a chunk): the same bits
    every way, within a bf16 rounding of fp32, nothing written past the output (a guard row), each row's counter
    at its chunk count. Under the interpreter programs run one after another, so a program that shares a row with a
    later one gives up waiting and recomputes it: the two ways of getting a row's sum must agree to the bit. Each
    OVERLAP order (which loads are issued before which wait) the same way: only the order differs, never the bits."""
    gen = torch.Generator().manual_seed(17)
    x = torch.randn(m, n + pad, generator=gen).to(torch.bfloat16).to(DEVICE)[:, :n]
    w = (1 + 0.1 * torch.randn(n, generator=gen)).to(torch.bfloat16).to(DEVICE)
    ref = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    plan = rms_norm._two_phase_plan(m, n, x.stride(0), chunk=chunk, warps=4, batch_bytes=2 * n * rows_b,
                                    patience=2 if DEVICE.type == "cpu" else rms_norm._TWO_PHASE_PATIENCE,
                                    overlap=overlap)
    assert plan.rows_b == rows_b
    outs = []
    for grid, patience in ((1, plan.meta["PATIENCE"]), (3, plan.meta["PATIENCE"]),
                           (m * plan.n_parts, plan.meta["PATIENCE"]), (m * plan.n_parts, 0)):
        y = torch.full((m + 1, n), 7.0, dtype=torch.bfloat16, device=DEVICE)
        parts = torch.full((m, plan.n_parts), float("nan"), device=DEVICE)
        counters = torch.full((m,), -7, dtype=torch.int32, device=DEVICE)
        table = rms_norm._weight_table(w, plan.meta["WT"], counters)
        rms_norm._rms_norm_two_phase[(grid,)](x, table, y, parts, counters, m, n, x.stride(0), 1e-6, plan.n_parts,
                                              plan.rows_b, **{**plan.meta, "PATIENCE": patience})
        assert torch.equal(counters.cpu(), torch.full((m,), plan.n_parts, dtype=torch.int32))
        assert bool((y[m] == 7.0).all()), "wrote past the output"
        assert (y[:m].float() - ref).abs().max().item() < 0.05
        outs.append(y[:m])
    assert all(torch.equal(y, outs[0]) for y in outs[1:])


@pytest.mark.parametrize(("n", "pad", "parts"), [
    (9554, 0, (8192, 4096, 0)), (12345, 8, (8192, 4096, 2048)), (8191, 0, (8192, 2048, 0)),
    (11007, 0, (8192, 2048, 1024)), (5999, 0, (4096, 2048, 0)),
    (6608, 0, (4096, 2048, 1024)), (5000, 0, (4096, 1024, 0)), (14329, 0, (8192, 4096, 2048)),
    (14330, 0, (16384, 0, 0)), (14344, 0, None), (15353, 0, (16384, 0, 0)), (16655, 3, (16384, 2048, 0)),
    (12001, 6, (8192, 4096, 0)), (20000, 2, (16384, 4096, 0))])
def test_realigned_softmax_window_parts_match_fp32(n: int, pad: int, parts: tuple[int, int, int] | None) -> None:
    """16-bit rows on the realigned kernel with their window in parts (two, three, and the widths where seven
    eighths would need four parts and one window is taken instead; THREAD_STATS' parts in place of the planned ones:
    8191 on 8192+2048 for 8192+1024, 9554 on 8192+4096 for 8192+2048, 12345 on 8192+4096+2048 for 8192+4096+1024;
    two reductions on 11007's 8192+2048+1024 and 5999's 4096+2048; 14344 is aligned and stays on the row kernel;
    rows padded off the vector grid, x read at most ALIGN_X elements at a time, in parts past 16384 too):
    every element within a bf16 rounding of fp32, rows starting at every offset inside a vector; an output element
    no part covers would be left as the NaN the buffer starts with."""
    x = (torch.randn(9, n + pad, generator=torch.Generator().manual_seed(n)) * 4).to(torch.bfloat16).to(DEVICE)[:, :n]
    x[0, ::5] = float("-inf")
    launch, meta = softmax._plan(9, n, x.stride(0), 2, DEVICE, torch.bfloat16)  # type: ignore[misc]
    assert (None if "WINDOW" not in meta else (meta["WINDOW"], meta["PART1"], meta["PART2"])) == parts, meta
    y = torch.full((9, n), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    launch(x, y, 9, n, x.stride(0), **meta)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1.6e-2, atol=1e-6)
    assert torch.equal(softmax.candidate(x), y)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="PF_L1 prefetches through inline PTX: compiled only")
@pytest.mark.parametrize(("m", "n", "pad", "parts", "per_sm"), [
    (1029, 16655, 3, (16384, 2048, 0), 2), (77, 12001, 6, (8192, 4096, 0), 2), (300, 5001, 1, (4096, 1024, 0), 8),
    (64, 25249, 0, (32768, 0, 0), 2)])
def test_realigned_softmax_prefetching_into_l1_writes_the_same_bits(m: int, n: int, pad: int,
                                                                     parts: tuple[int, int, int],
                                                                     per_sm: int) -> None:
    """PF_L1 (swept, not planned): the next row's lines prefetched into L1 instead of its values held in registers
    writes exactly what the planned prefetch writes, rows padded off the grid and contiguous, more rows than
    programs (so every program walks several), nothing past the output."""
    x = (torch.randn(m, n + pad, device=DEVICE) * 4).to(torch.bfloat16)[:, :n]
    x[1, ::7] = float("-inf")
    launch, meta = softmax._realigned_plan(m, n, n + pad, 2, 16, per_sm, 8, False, parts)
    outs = []
    for pf in (False, True):
        y = torch.full((m + 1, n), 7.0, dtype=torch.bfloat16, device=DEVICE)
        launch(x, y, m, n, n + pad, **{**meta, "PF_L1": pf})
        assert bool((y[m] == 7.0).all()), "wrote past the output"
        outs.append(y[:m])
    torch.testing.assert_close(outs[1].float(), torch.softmax(x.float(), -1), rtol=1.6e-2, atol=1e-6)
    assert torch.equal(outs[0], outs[1])


@pytest.mark.skipif(DEVICE.type != "cuda", reason="PF_L1 prefetches through inline PTX: compiled only")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "warps", "per_sm"), [(300, 32000, 16, 2), (77, 25249, 16, 2), (64, 32768, 32, 1)])
def test_thread_stats_prefetching_into_l1_writes_the_same_bits(m: int, n: int, warps: int, per_sm: int,
                                                               dtype: torch.dtype) -> None:
    """THREAD_STATS with the next row prefetched into L1 (PF_L1, swept in softmax_thread_stats_pf_l1) reads each row
    in the per-thread layout the register prefetch uses, so it writes exactly the same bits: more rows than programs,
    -inf strides, nothing past the output, within the task's tolerance of fp32."""
    x = (torch.randn(m, n, device=DEVICE) * 4).to(dtype)
    x[1, ::7] = float("-inf")
    launch, meta = softmax._realigned_plan(m, n, n, 2, 16, per_sm, warps, False, (32768, 0, 0))
    outs = []
    for pf in (False, True):
        y = torch.full((m + 1, n), 7.0, dtype=dtype, device=DEVICE)
        launch(x, y, m, n, n, **{**meta, "THREAD_STATS": 32 * warps, "PF_L1": pf})
        assert bool((y[m] == 7.0).all()), "wrote past the output"
        outs.append(y[:m])
    _assert_within_task_tolerance(outs[1], torch.softmax(x.float(), -1))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize(("m", "n", "warps", "per_sm"), [
    (21, 25249, 16, 2), (9, 32768, 16, 2), (7, 16377, 16, 2), (12, 8185, 8, 8), (6, 3001, 4, 8), (5, 20001, 8, 1),
    (5, 28518, 16, 2), (5, 12001, 4, 8)])
def test_realigned_softmax_thread_stats_match_fp32_and_replay(m: int, n: int, warps: int, per_sm: int) -> None:
    """THREAD_STATS (each thread's own max and sum, merged in one reduction) on realigned rows, aligned and at every
    offset inside a vector, more rows than programs, on one window and on the window in parts of whole vectors a
    thread (_thread_parts): within a bf16 rounding of fp32 and of the two-reduction form, the same bits on a second
    run, nothing past the output. Rows that exercise the merge's corners: one -inf throughout (NaN, as torch gives),
    one -inf in a stride (threads holding no finite element), one whose max sits in its first edge vector, one of
    large offset logits."""
    gen = torch.Generator().manual_seed(n)
    x = (torch.randn(m, n, generator=gen) * 4).to(torch.bfloat16)
    x[1, :] = float("-inf")
    x[2, ::3] = float("-inf")
    x[3, 0] = 60.0
    x[4] += 3000.0
    x = x.to(DEVICE)
    one = (softmax._window(n, 2), 0, 0)
    cut = softmax._thread_parts(n, 2, 32 * warps)
    assert n + (7 if n % 8 else 0) <= sum(cut) <= sum(one)  # the span: a row can start mid-vector
    ref = torch.softmax(x.float(), -1)
    keep = torch.ones(m, dtype=torch.bool)
    keep[1] = False
    outs: dict[tuple[tuple[int, int, int], int], torch.Tensor] = {}
    for parts, threads in ((one, 0), (one, 32 * warps), (one, 32 * warps), (cut, 32 * warps), (cut, 32 * warps)):
        launch, meta = softmax._realigned_plan(m, n, n, 2, 2, per_sm, warps, False, parts)
        y = torch.full((m + 1, n), 7.0, dtype=torch.bfloat16, device=DEVICE)
        launch(x, y, m, n, n, **{**meta, "THREAD_STATS": threads})
        assert bool((y[m] == 7.0).all()), "wrote past the output"
        assert bool(y[1].isnan().all())
        torch.testing.assert_close(y[:m][keep].float(), ref[keep], rtol=1.6e-2, atol=1e-6)
        if (parts, threads) in outs:
            assert torch.equal(y[:m][keep], outs[parts, threads][keep])
        outs[parts, threads] = y[:m]
    torch.testing.assert_close(outs[one, 32 * warps][keep].float(), outs[one, 0][keep].float(), rtol=8e-3, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("m", "n", "pad", "parts", "threads", "warps", "pf_l1"), [
    (9, 32000, 0, (32768, 0, 0), 512, 16, False), (7, 25249, 2, (32768, 0, 0), 0, 16, False),
    (9, 20001, 0, (16384, 4096, 0), 512, 16, False), (6, 3001, 4, (2048, 1024, 0), 128, 4, False),
    (5, 9554, 0, (8192, 2048, 0), 0, 8, False), (7, 20480, 8, (16384, 4096, 0), 0, 16, False),
    (9, 32000, 0, (32768, 0, 0), 512, 16, True), (5, 16655, 2, (16384, 2048, 0), 0, 16, True)])
def test_realigned_softmax_reading_words_writes_the_same_bits(m: int, n: int, pad: int, parts: tuple[int, int, int],
                                                               threads: int, warps: int, pf_l1: bool,
                                                               dtype: torch.dtype) -> None:
    """WORDS (x's vectors read as int32 words, two elements each, split where used) writes exactly what the 16-bit
    reads write: one window and parts, both forms of the reduction, rows padded by an even count and contiguous, the
    next row held in registers or (GPU only: inline PTX) prefetched into L1; rows at every offset inside a vector,
    more rows than programs; masked vectors read as two -infs (a row of -inf gives NaN, as torch does; one with -inf
    strides), nothing written past the output, within the task's tolerance of fp32."""
    if pf_l1 and DEVICE.type != "cuda":
        pytest.skip("PF_L1 prefetches through inline PTX: compiled only")
    gen = torch.Generator().manual_seed(n + pad)
    x = (torch.randn(m, n + pad, generator=gen) * 4).to(dtype).to(DEVICE)[:, :n]
    x[1] = float("-inf")
    x[2, ::7] = float("-inf")
    x[3, -1] = 40.0
    launch, meta = softmax._realigned_plan(m, n, n + pad, 2, 2, 2, warps, False, parts)
    assert meta["ALIGN_X"] >= 2
    outs = []
    for words in (False, True):
        y = torch.full((m + 1, n), 7.0, dtype=dtype, device=DEVICE)
        launch(x, y, m, n, n + pad, **{**meta, "THREAD_STATS": threads, "PF_L1": pf_l1, "WORDS": words})
        assert bool((y[m] == 7.0).all()), "wrote past the output"
        assert bool(y[1].isnan().all())
        outs.append(y[:m])
    keep = torch.arange(m) != 1
    _assert_within_task_tolerance(outs[1][keep], torch.softmax(x.float(), -1)[keep])
    assert torch.equal(outs[0][keep], outs[1][keep])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("offset", [1, 2])
def test_softmax_reads_words_only_from_views_starting_on_one(offset: int, dtype: torch.dtype) -> None:
    """Plans are cached by shape and stride, not by where x starts: a view starting mid-word (an odd element offset)
    of contiguous rows the plan reads as words is read element by element instead (on a GPU a misaligned word read
    faults), and one starting on a word keeps WORDS; both within the task's tolerance of fp32. (Contiguous rows: padded
    ones of this width prefetch into L1 on a GPU, a plan without WORDS.)"""
    m, n = 5, 20002
    flat = (torch.randn(m * n + 2, generator=torch.Generator().manual_seed(offset)) * 4).to(dtype).to(DEVICE)
    x = flat[offset:offset + m * n].view(m, n)
    assert (x.data_ptr() % 4 == 0) == (offset % 2 == 0)
    _launch, meta = softmax._plan(m, n, x.stride(0), 2, DEVICE, dtype)  # type: ignore[misc]
    assert meta["WORDS"] and not meta.get("PF_L1"), meta
    y = softmax.candidate(x)
    _assert_within_task_tolerance(y, torch.softmax(x.float(), -1))


def _assert_within_task_tolerance(y: torch.Tensor, ref: torch.Tensor) -> None:
    """y against the fp32 softmax by the task's own policy for y's dtype: every element and the relative L2."""
    policy = TOLERANCES["softmax"][y.dtype]
    torch.testing.assert_close(y.float(), ref, rtol=policy.rtol, atol=policy.atol)
    assert float((y.float() - ref).norm() / ref.norm()) <= policy.max_rel_l2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad", "fp16_too"), [
    (37, 16377, 0, True), (19, 18001, 0, True), (11, 22001, 0, True), (7, 20480, 8, True), (9, 25249, 0, True),
    (13, 8191, 0, False), (21, 3001, 0, False), (6, 6608, 0, True), (9, 3185, 0, True), (5, 20001, 0, True),
    (3, 24577, 0, True), (4, 16383, 0, True)])
def test_planned_thread_stats_softmax_matches_fp32(m: int, n: int, pad: int, fp16_too: bool,
                                                   dtype: torch.dtype) -> None:
    """The built-in on rows it plans with THREAD_STATS (bf16: 16, 8 and 4 warps; fp16: one 32768-lane window, one
    16384-lane window, 16384+8192 and 16384+4096 lanes, and two 4-warp windows), x read as words, and on the same rows
    where it does not: within the task's tolerance of fp32, more rows than programs on the GPU's grid too, the same
    bits on a second call."""
    x = (torch.randn(m, n + pad, generator=torch.Generator().manual_seed(n)) * 4).to(dtype).to(DEVICE)[:, :n]
    x[2, ::3] = float("-inf")
    _launch, meta = softmax._plan(m, n, x.stride(0), 2, DEVICE, dtype)  # type: ignore[misc]
    assert bool(meta.get("THREAD_STATS")) == (dtype == torch.bfloat16 or fp16_too), meta
    assert not meta.get("HALF_EXPS") and meta["WORDS"], meta
    y = softmax.candidate(x)
    _assert_within_task_tolerance(y, torch.softmax(x.float(), -1))
    assert torch.equal(softmax.candidate(x), y)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("m", "n", "parts"), [(9, 20001, (16384, 4096, 0)), (7, 18001, (16384, 4096, 0)),
                                               (6, 16377, (16384, 0, 0)), (6, 22001, (16384, 8192, 0))])
def test_realigned_softmax_half_exps_match_fp32_and_replay(m: int, n: int, parts: tuple[int, int, int],
                                                           dtype: torch.dtype) -> None:
    """HALF_EXPS (THREAD_STATS' exponentials held in fp16 until the row's max and sum are merged): within the task's
    tolerance of fp32 for the output dtype (fp16: rtol 2e-3, relative L2 1.5e-3), within a rounding or two of the
    fp32-held form, the same bits on a second run, nothing past the output. Rows at the corners the extra rounding
    meets: one -inf throughout (NaN, as torch gives), one -inf in a stride, one whose max sits in its first edge
    vector, one of large offset logits, one spread so wide that most exponentials fall into fp16's subnormals or
    flush to zero (y under 2^-24 there, inside atol), one constant (every exponential exactly 1)."""
    gen = torch.Generator().manual_seed(n)
    x = (torch.randn(m, n, generator=gen) * 4).to(dtype)
    x[1, :] = float("-inf")
    x[2, ::3] = float("-inf")
    x[3, 0] = 60.0
    x[4] += 3000.0 if dtype == torch.bfloat16 else 30000.0
    x[5] = (torch.randn(n, generator=gen) * 12).to(dtype)
    if m > 6:
        x[6] = 1.5
    x = x.to(DEVICE)
    ref = torch.softmax(x.float(), -1)
    keep = torch.ones(m, dtype=torch.bool)
    keep[1] = False
    launch, meta = softmax._realigned_plan(m, n, n, 2, 2, 2, 16, False, parts)
    outs = []
    for half in (False, True, True):
        y = torch.full((m + 1, n), 7.0, dtype=dtype, device=DEVICE)
        launch(x, y, m, n, n, **{**meta, "THREAD_STATS": 512, "HALF_EXPS": half})
        assert bool((y[m] == 7.0).all()), "wrote past the output"
        assert bool(y[1].isnan().all())
        _assert_within_task_tolerance(y[:m][keep], ref[keep])
        outs.append(y[:m][keep])
    assert torch.equal(outs[1], outs[2])
    ulp = 2.0 ** (-10 if dtype == torch.float16 else -7)  # two roundings of the output format
    torch.testing.assert_close(outs[1].float(), outs[0].float(), rtol=ulp, atol=2.0 ** -24)


@pytest.mark.parametrize(("m", "n", "block_m"), [(8, 256, 2), (6, 200, 4)])
def test_softmax_row_kernel_with_and_without_masks_agree_bit_for_bit(m: int, n: int, block_m: int) -> None:
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16).to(DEVICE)
    block_n = 1 << (n - 1).bit_length()
    outs = []
    evens = (False, True) if block_n == n and m % block_m == 0 else (False,)
    for even, reread, evict, stream in itertools.product(evens, (False, True), (False, True), (False, True)):
        y = torch.full_like(x, float("nan"))
        softmax._softmax_rows[(-(-m // block_m),)](x, y, m, n, n, BLOCK_M=block_m, BLOCK_N=block_n,
                                                   ALIGN=softmax._align(2, n), EVEN=even, REREAD=reread,
                                                   EVICT=evict, STREAM=stream)
        outs.append(y)
    assert (outs[0].float() - torch.softmax(x.float(), -1)).abs().max().item() < 0.01
    assert all(torch.equal(y, outs[0]) for y in outs)


# (M, N, row stride, block): the gather kernel for strided swiglu rows against the flat kernel on contiguous copies.
# Strides that allow 8-, 4-, 2- and 1-element vectors; a ragged last block; a block wider than a row.
@pytest.mark.parametrize(("m", "n", "stride", "block"), [(9, 40, 64, 64), (7, 100, 124, 128), (5, 30, 32, 64),
                                                          (6, 33, 57, 64), (3, 5000, 5024, 1024), (4, 16, 17, 256)])
@pytest.mark.parametrize("wide", [False, True])
def test_swiglu_gather_matches_flat_kernel_bit_for_bit(m: int, n: int, stride: int, block: int, wide: bool) -> None:
    gen = torch.Generator().manual_seed(5)
    base = torch.randn(m, 2 * stride, generator=gen).to(torch.bfloat16).to(DEVICE)
    g, u = base[:, :n], base[:, stride:stride + n]
    vec = swiglu._align(2, n, g.stride(0))
    y = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    swiglu._swiglu_gather[(-(-m * n // block),)](g, u, y, m * n, n, g.stride(0), u.stride(0), BLOCK=block, VEC=vec,
                                                 WIDE=wide)
    flat = torch.full_like(y, float("nan"))
    swiglu._swiglu_flat[(-(-m * n // 64),)](g.contiguous(), u.contiguous(), flat, m * n, BLOCK=64)
    ref = torch.nn.functional.silu(g.float()) * u.float()
    assert (flat.float() - ref).abs().max().item() < 0.05
    assert torch.equal(y, flat)
    if n % 8 == 0 and stride % 8 == 0:
        assert vec == 8  # aligned rows take full 16-byte vectors
    assert swiglu.candidate(g, u).equal(flat)  # the planned launch for these views agrees too


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("m", "n", "pad_g", "pad_u"), [
    (37, 23, 3, 1),  # odd width, odd paddings: most vectors straddle a row end
    (5, 8, 1, 0),  # one vector a row, g padded, u contiguous
    (3, 1001, 5, 2),  # the last block partial
    (2, 4, 1, 1),  # narrower than a 16-bit vector: the gather kernel
    (7, 42, 2, 4),  # even width and paddings: inputs in pairs (IN_VEC=2) as well
    (6, 44, 4, 8),  # width and paddings multiples of 4: IN_VEC=4 as well
    (9, 23, 8, 16),  # odd width, paddings whole vectors: inputs in vectors co-aligned with y's (SHIFTED)
    (11, 1001, 2, 6),  # odd width, even paddings: SHIFTED in pairs; the last block partial
    (7, 13, 4, 0),  # u contiguous (padding 0), g padded by 4
    (4, 30, 24, 8),  # even width (pairs) under paddings of whole vectors: SHIFTED over IN_VEC
])
def test_swiglu_rows_off_the_vector_grid_match_the_flat_kernel(m: int, n: int, pad_g: int, pad_u: int,
                                                               dtype: torch.dtype) -> None:
    """Rows off the 16-byte grid take the output-vector kernel (vectors straddling row ends included) and write
    bit-for-bit what the flat kernel writes on contiguous copies, and nothing past the output; so does its form that
    reads the inputs one at a time (IN_VEC=1); where the width and strides allow, the plan reads them in groups of 2
    or 4 (IN_VEC), and where the paddings allow wider groups than the width, in groups co-aligned with the output's
    vectors, a straddling vector's tail read from the next row (SHIFTED; also run in groups of one)."""
    g = torch.randn(m, n + pad_g, device=DEVICE).to(dtype)[:, :n]
    u = torch.randn(m, n + pad_u, device=DEVICE).to(dtype)[:, :n]
    full = 16 // g.element_size()
    if swiglu._align(g.element_size(), n, n + pad_g, n + pad_u) == full:
        pytest.skip("on the 16-byte grid in this dtype (the gather kernel's case)")
    launch, meta, flat_path = swiglu._plan(m, n, g.stride(0), u.stride(0), g.element_size(), g.device)
    vec = full if n >= full else swiglu._align(g.element_size(), n, n + pad_g, n + pad_u)
    assert not flat_path and meta.get("VEC", full) == vec, meta
    in_vec = swiglu._align(g.element_size(), n, g.stride(0), u.stride(0))
    shift = swiglu._align(g.element_size(), pad_g, pad_u)  # what divides both paddings
    funnel = n >= full and g.element_size() == 2 and max(in_vec, shift) == 1  # odd paddings: test_swiglu_funnel.py
    if funnel:
        launch = launch.args[0]  # partial(_launch_funnel, kernel[grid])
    kernels = [c.cell_contents for c in launch.__closure__ or ()]  # kernel[grid] closes over its JITFunction
    assert (swiglu._swiglu_funnel in kernels) == funnel
    assert (swiglu._swiglu_out_vectors in kernels) == (n >= full and not funnel)
    assert (swiglu._swiglu_gather in kernels) == (n < full)
    shifted = n >= full and shift > in_vec
    if not funnel:
        assert meta.get("IN_VEC", in_vec) == (shift if shifted else in_vec), meta  # inputs read in groups of this
    assert meta.get("SHIFTED", False) == shifted, meta
    flat = torch.full((m, n), float("nan"), dtype=dtype, device=DEVICE)
    swiglu._swiglu_flat[(-(-m * n // 64),)](g.contiguous(), u.contiguous(), flat, m * n, BLOCK=64)
    assert swiglu.candidate(g, u).equal(flat)
    ref = torch.nn.functional.silu(g.float()) * u.float()
    torch.testing.assert_close(flat.float(), ref, rtol=1e-2 if dtype != torch.float32 else 1e-5, atol=1e-5)
    forms = {(1, False), (in_vec, False), (1, True), (shift, True)}  # (IN_VEC, SHIFTED)
    for wide, (grouped, by_shift) in itertools.product((False, True) if n >= full else (), forms):  # 32/64-bit
        out = torch.full((m * n + 16,), 7.0, dtype=dtype, device=DEVICE)  # a guard after the output
        swiglu._swiglu_out_vectors[(-(-m * n // 64),)](g, u, out, m * n, n, g.stride(0), u.stride(0), BLOCK=64,
                                                       VEC=full, WIDE=wide, IN_VEC=grouped, SHIFTED=by_shift)
        assert torch.equal(out[:m * n].view(m, n), flat) and bool((out[m * n:] == 7.0).all()), (wide, grouped,
                                                                                                 by_shift)


@pytest.mark.parametrize(("m", "n", "stride", "shifted"), [
    (9, 23, 15, False),  # rows overlapping by 8: a negative padding of whole vectors
    (7, 101, 93, False),
    (6, 23, 0, False),  # every row the same storage (stride 0)
    (6, 23, 31, True),  # the same width padded by 8: SHIFTED
])
def test_swiglu_overlapping_rows_match_the_flat_kernel(m: int, n: int, stride: int, shifted: bool) -> None:
    """Views whose rows overlap or repeat (as_strided, expand) are read element by element where they lie, never
    SHIFTED (its reads past a row's end and before the next row's start would leave the storage); bit for bit the
    flat kernel on contiguous copies."""
    g = torch.randn(m * stride + n + 64, device=DEVICE).to(torch.bfloat16).as_strided((m, n), (stride, 1))
    u = torch.randn(m * stride + n + 64, device=DEVICE).to(torch.bfloat16).as_strided((m, n), (stride, 1))
    _launch, meta, _flat = swiglu._plan(m, n, stride, stride, 2, g.device)
    assert meta.get("SHIFTED", False) == shifted, meta
    flat = torch.empty((m, n), dtype=torch.bfloat16, device=DEVICE)
    swiglu._swiglu_flat[(-(-m * n // 64),)](g.contiguous(), u.contiguous(), flat, m * n, BLOCK=64)
    assert swiglu.candidate(g, u).equal(flat)


# (N, dtype): one shape per softmax path that folds the max into the exponent, or sits next to one: the realigned
# kernel with FAST (fp32 rows of 16385-32768), the row kernel, the realigned 16-bit kernel, and on a GPU the resident
# kernel (aligned, REALIGN, streamed chunks).
@pytest.mark.parametrize(("n", "dtype"), [(20000, torch.float32), (30000, torch.float32), (8192, torch.bfloat16),
                                          (25249, torch.bfloat16), (40000, torch.bfloat16), (65536, torch.bfloat16),
                                          (33508, torch.bfloat16), (131072, torch.bfloat16)])
def test_softmax_is_right_for_logits_near_the_top_of_the_float_range(n: int, dtype: torch.dtype) -> None:
    """Logits whose magnitude passes FLT_MAX / log2(e) (2.36e38; bfloat16 and fp32 reach it): max * log2(e) would be
    inf, so a kernel folding the max into one multiply-add writes NaN. One huge logit (one-hot), a row of hugely
    negative spread logits (the softmax of their differences), several near the top among ordinary ones; and a row
    offset by 1e6, where a shift of max * log2(e) + log2(sum) rounded to fp32 is off by up to 1/16 (4% of y)."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(4, n, generator=gen) * 4
    x[0, n // 2] = 3e38
    x[1] = -2.5e38 + torch.randn(n, generator=gen) * 1e37
    x[2, ::3] = 2.5e38
    x[3] += 1e6
    x = x.to(dtype).to(DEVICE)
    y = softmax.candidate(x)
    assert bool(torch.isfinite(y).all())
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), -1), rtol=2e-2, atol=1e-6)


@pytest.mark.parametrize("offset", [0.0, 50.0, 300.0, 1000.0, 1e6])
def test_fp32_softmax_holds_its_tolerance_with_offset_logits(offset: float) -> None:
    """fp32 rows of 16385-32768 take the realigned kernel with FAST (the max folded into one multiply-add). Unfused
    (the interpreter), x log2 e is rounded at its own size, which fp32's tolerance (rtol 2e-5, relative L2 1e-5)
    noticed from |max| of a few hundred (4.5e-5 of y at 1000): the fold is taken only under |max| 64."""
    from kernelproof_core.tolerances import policy_for

    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(3, 20000, generator=gen, dtype=torch.float64) * 3 + offset).float().to(DEVICE)
    y, ref = softmax.candidate(x).double(), torch.softmax(x.double(), -1)
    policy = policy_for("softmax", torch.float32)
    assert bool(((y - ref).abs() <= policy.atol + policy.rtol * ref.abs()).all())
    assert float((y - ref).norm() / ref.norm()) <= policy.max_rel_l2


@pytest.mark.parametrize(("m", "n", "pad", "parts", "threads", "warps"), [
    (67, 3001, 0, (2048, 1024, 0), 0, 4), (65, 9554, 0, (8192, 2048, 0), 0, 8),
    (66, 13130, 0, (8192, 4096, 2048), 0, 8), (65, 13130, 0, (8192, 4096, 2048), 256, 8),
    (33, 9554, 2, (8192, 2048, 0), 0, 8), (9, 20001, 0, (32768, 0, 0), 512, 16)])
def test_realigned_softmax_windows_on_lines_stay_within_a_step_of_windows_on_vectors(
        m: int, n: int, pad: int, parts: tuple[int, int, int], threads: int, warps: int) -> None:
    """LINE on the realigned register kernel (experiment: windows start on a 128-byte line, a row up to 63 elements
    into its window; the first edge vector is the one holding the row's start): rows at every offset inside a line
    (64 rows of an odd width), parts and one window, both forms of the reduction, padded x; each output within one
    16-bit step of windows on vectors (the sums are added in another order), within the task's tolerance of fp32, the
    same bytes on a second call, a row of -inf NaN as torch gives, nothing written past the output. A window too
    small for the wider span is refused."""
    gen = torch.Generator().manual_seed(n + pad + threads)
    x = (torch.randn(m, n + pad, generator=gen) * 4).to(torch.bfloat16).to(DEVICE)[:, :n]
    x[1] = float("-inf")
    x[2, ::7] = float("-inf")
    x[3, -1] = 40.0
    plain = softmax._realigned_plan(m, n, n + pad, 2, 2, 2, warps, False, parts)
    plain = (plain[0], {**plain[1], "THREAD_STATS": threads})
    lines = softmax._realigned_on_lines(plain, n, 2)
    assert lines[1]["LINE"] == 64 and "LINE" not in plain[1]
    want = torch.empty((m, n), dtype=torch.bfloat16, device=DEVICE)
    plain[0](x, want, m, n, n + pad, **plain[1])
    outs = []
    for _ in range(2):
        y = torch.full((m + 1, n), 7.0, dtype=torch.bfloat16, device=DEVICE)
        lines[0](x, y, m, n, n + pad, **lines[1])
        assert bool((y[m] == 7.0).all()), "wrote past the output"
        outs.append(y[:m])
    keep = torch.ones(m, dtype=torch.bool)
    keep[1] = False
    assert torch.equal(outs[0][keep], outs[1][keep])
    got = outs[0]
    assert bool(got[1].isnan().all()) and bool(want[1].isnan().all())
    steps = (got[keep].view(torch.int16).int() - want[keep].view(torch.int16).int()).abs()
    assert int(steps.max()) <= 1, "more than one 16-bit step from windows on vectors"
    _assert_within_task_tolerance(got[keep], torch.softmax(x.float(), -1)[keep])
    with pytest.raises(ValueError, match="does not cover"):
        softmax._realigned_on_lines(softmax._realigned_plan(m, 3020, 3020, 2, 2, 2, 4, False, (2048, 1024, 0)),
                                    3020, 2)
