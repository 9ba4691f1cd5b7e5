"""The built-in kernels' GPU-only paths and the speed-of-light reference, on a real GPU. Skipped without CUDA.

The split paths (softmax rows 32769-65536 wide, rms_norm rows too wide for one program: one program per chunk,
partials exchanged through a per-row counter) cannot run under the interpreter, which runs programs one after
another, so this is where their cross-program rendezvous is tested: odd widths, -inf entries, padded rows, bit-exact
replays. The pipelined softmax path (16384 < N <= 32768) is checked compiled here too.
"""

from __future__ import annotations

import math

import pytest
import torch

from kernelproof_core.kernels import rms_norm, softmax, swiglu

pytestmark = pytest.mark.gpu
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("shape", "path"), [((3, 32769), softmax._Split), ((257, 65536), softmax._Split),
                                             ((1991, 33508), softmax._Split), ((64, 131072), softmax._Staged),
                                             ((5, 128256), softmax._Staged), ((2, 250007), softmax._Staged),
                                             ((5, 65535), softmax._Split), ((700, 49999), softmax._Split)])
def test_wide_softmax_matches_fp32_reference(shape: tuple[int, int], path: type, dtype: torch.dtype) -> None:
    """Every wide-row path against an fp32 reference: contiguous 16-bit rows are held in shared memory (resident
    path, 131072, 128256 and 250007 partly streamed; widths off the 16-byte grid through their vector windows,
    REALIGN); fp32 rows split up to 65536 wide (the split path's REALIGNED chunks), staged beyond."""
    m, n = shape
    x = (torch.randn(m, n, device="cuda") * 4).to(dtype)
    x[0, ::7] = float("-inf")  # masked logits, as attention produces
    x[-1, : n // 2] = float("-inf")  # whole chunks of -inf: their partials are (max=-inf, sum=0)
    plan = softmax._plan(m, n, n, x.element_size(), x.device)
    if dtype != torch.float32:
        assert not isinstance(plan, (softmax._Split, softmax._Staged)) and "NCHUNK" in plan[1], plan
        assert plan[1]["REALIGN"] == (n % 8 != 0), plan[1]
    else:
        assert isinstance(plan, path), plan
    if isinstance(plan, softmax._Split):
        assert plan.meta.get("REALIGNED", False) == (dtype == torch.float32 or n % 8 != 0), plan.meta
    y = softmax.candidate(x)
    ref = torch.softmax(x.float(), dim=-1)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2 if dtype != torch.float32 else 1e-5, atol=1e-6)
    assert torch.equal(softmax.candidate(x), y), "replays must be bit-exact (fixed reduction order)"


def _assert_softmax_matches_fp32(x: torch.Tensor) -> None:
    """The built-in softmax of x against fp32 (bf16/fp16 to 2%), and bit-for-bit on a replay."""
    y = softmax.candidate(x)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=-1),
                               rtol=2e-2 if x.dtype != torch.float32 else 1e-5, atol=1e-6)
    assert torch.equal(softmax.candidate(x), y)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("shape", "pad", "path"), [
    ((2048, 32000), 8, "WINDOW"), ((4096, 32768), 8, "WINDOW"), ((5, 25249), 3, "WINDOW"), ((9, 20000), 6, "WINDOW"),
    ((5, 32767), 0, "pipelined"), ((3, 32767), 9, "pipelined"), ((2048, 32000), 0, "WINDOW"),
    ((4096, 32768), 0, "WINDOW"), ((1723, 25249), 0, "WINDOW"),
    ((7, 16385), 0, "WINDOW"), ((2048, 32001), 0, "WINDOW"), ((3, 16394), 0, "WINDOW"), ((1, 32761), 0, "WINDOW"),
    ((625, 30804), 0, "WINDOW"), ((800, 16400), 0, "WINDOW")])
def test_wide_register_softmax_matches_fp32_reference(shape: tuple[int, int], pad: int, path: str,
                                                      dtype: torch.dtype) -> None:
    """Rows of 16385-32768: the realigned path for contiguous and padded rows (aligned or not; M = 1 makes M a
    compile-time constant), the pipelined one where the window would double, with -inf logits, against fp32; few
    rows (625, 800) on one persistent program an SM."""
    m, n = shape
    x = (torch.randn(m, n + pad, device="cuda") * 4).to(dtype)[:, :n]
    x[0, ::7] = float("-inf")
    _launch, meta = softmax._plan(m, n, x.stride(0), x.element_size(), x.device, x.dtype)  # type: ignore[misc]
    assert path in meta if path != "pipelined" else "BLOCK_M" not in meta and "WINDOW" not in meta, meta
    _assert_softmax_matches_fp32(x)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("shape", "pad", "warps"), [
    ((4096, 127), 0, 1), ((8191, 127), 0, 1), ((1003, 255), 1, 1), ((65536, 127), 0, 1), ((16384, 100), 0, 4),
    ((1001, 100), 0, 4), ((8192, 196), 0, 4), ((333, 60), 4, 4), ((4099, 98), 0, 1), ((77, 194), 2, 1),
    ((32768, 62), 0, 4)])
def test_short_softmax_rows_match_fp32_reference(shape: tuple[int, int], pad: int, warps: int,
                                                 dtype: torch.dtype) -> None:
    """Short 16-bit rows: scalar and 4-byte ones one warp a program, 8-byte ones in 1024-lane tiles on 4 warps, with
    rows left over in the last program and padded strides, -inf logits, against fp32 and replayed bit for bit."""
    m, n = shape
    x = (torch.randn(m, n + pad, device="cuda") * 4).to(dtype)[:, :n]
    x[0, ::5] = float("-inf")
    _launch, meta = softmax._plan(m, n, x.stride(0), x.element_size(), x.device, x.dtype)  # type: ignore[misc]
    assert meta["num_warps"] == warps and "BLOCK_M" in meta, meta
    _assert_softmax_matches_fp32(x)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("shape", "pad", "realigned"), [
    ((4056, 5207), 0, True), ((1, 3001), 0, True), ((2204, 6933), 8, True), ((3, 12901), 0, True),
    ((4096, 2049), 0, True), ((4096, 8191), 0, True), ((64, 5207), 3, True), ((1877, 9554), 0, True),
    ((2000, 12345), 8, True), ((4096, 9600), 0, True), ((33, 12288), 16, True), ((5, 16000), 0, False),
    ((3921, 6608), 0, True), ((64, 5000), 8, True), ((8, 3000), 0, False), ((1029, 16655), 3, True),
    ((77, 9001), 5, True), ((64, 12288), 2, True), ((9, 2047), 3, False), ((300, 3001), 3, True),
    ((700, 30001), 7, True), ((300, 20000), 3, True), ((301, 13778), 0, True), ((99, 8001), 6, True),
    ((97, 16383), 0, True), ((1940, 12074), 0, True), ((2048, 14336), 0, True), ((600, 10001), 0, True)])
def test_narrow_unaligned_softmax_matches_fp32_reference(shape: tuple[int, int], pad: int, realigned: bool,
                                                         dtype: torch.dtype) -> None:
    """Unaligned 16-bit rows of 2049-16384 take the realigned path (contiguous or padded), its window cut in parts
    (8191: 8192 + 1024 lanes, bf16 8192 + 2048 with THREAD_STATS; 12345, 13778 and aligned 14336: three parts, 8
    warps; 10001 and 12074 on 8192+4096, 16 warps; rows on the windows _THREAD_STATS_WINDOWS lists with one
    reduction a row), and so do aligned ones above 4096 whose parts save lanes (5000, 6608, 9600, 12288, 14336; not
    16000 or 3000) and rows padded off the vector grid (5207, 9001 and 12288
    padded by 3, 5 and 2; 16655 by 3, in parts past 16384; 3001, 8001, 9001, 16655, 20000 and 30001 prefetching into
    L1, PF_L1; 16383, whose span passes 16384, on 16384+4096 lanes); fp32 rows up to 16384 and rows under 2049 stay
    on the row kernel.
    Against fp32, replayed bit for bit."""
    m, n = shape
    x = (torch.randn(m, n + pad, device="cuda") * 4).to(dtype)[:, :n]
    x[0, ::5] = float("-inf")
    _launch, meta = softmax._plan(m, n, x.stride(0), x.element_size(), x.device, x.dtype)  # type: ignore[misc]
    assert ("WINDOW" in meta) == (realigned and (dtype != torch.float32 or n > 16384)), meta
    _assert_softmax_matches_fp32(x)


@requires_cuda
@pytest.mark.parametrize(("shape", "dtype", "planned", "held", "runs"), [
    ((4096, 4500), torch.float16, 8, 5, 5), ((2770, 7294), torch.bfloat16, 8, 3, 3),
    ((8192, 3001), torch.float16, 8, 8, 8), ((8192, 3001), torch.bfloat16, 8, 8, 8),
    ((1723, 25249), torch.float16, 2, 1, 2)])
def test_persistent_softmax_grid_never_ends_on_a_part_full_wave(shape: tuple[int, int], dtype: torch.dtype,
                                                                planned: int, held: int, runs: int) -> None:
    """A persistent register-kernel launch learns from its first launch's build how many programs an SM holds
    (registers, threads, shared memory); from then on, where the plan's count is not a whole number of that (fp16
    rows of 4500: 5 of 8; bf16 rows of 7294: 3 of 8) it runs what the SMs hold, else the plan's (3001 in both dtypes,
    fp16's windows on lines capped at 64 registers: all 8 held; 25249's 16-warp window: 1 of 2, two whole waves).
    Every call against fp32 and bit for bit with the first (the rows' programs change, not a row's arithmetic)."""
    m, n = shape
    x = (torch.randn(m, n, device="cuda") * 4).to(dtype)
    launch, meta = softmax._plan(m, n, n, 2, x.device, dtype)  # type: ignore[misc]
    sms = softmax._num_sms(x.device)
    assert isinstance(launch, softmax._Persistent) and launch.programs == planned * sms
    key = (launch.kernel.fn.__name__, tuple(sorted(meta.items())), x.dtype, x.device)
    softmax._RESIDENT.pop(key, None)
    assert launch.grid(x, **meta) == planned * sms  # nothing learned yet: as planned
    y = torch.empty_like(x)
    compiled = launch(x, y, m, n, n, **meta)
    assert softmax._RESIDENT[key] == held == softmax._resident_per_sm(
        compiled.n_regs, compiled.metadata.shared, meta["num_warps"]), compiled.n_regs  # type: ignore[attr-defined]
    assert launch.grid(x, **meta) == runs * sms
    y2 = torch.empty_like(x)
    launch(x, y2, m, n, n, **meta)
    torch.testing.assert_close(y2.float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    assert torch.equal(y2, y)


def _check_fma_exp_launch(x: torch.Tensor, pad: int) -> None:
    """The planned realigned launch of x (rows n + pad apart) with FMA_EXP forced on: no NaN, within the softmax
    task's tolerance policy against the float64 oracle, nothing written past the output, replayed bit for bit, and
    within two 16-bit steps of the same launch without it."""
    from kernelproof_core.tolerances import policy_for

    (m, n), dtype = x.shape, x.dtype
    launch, planned = softmax._plan(m, n, n + pad, 2, x.device, dtype)  # type: ignore[misc]
    assert "WINDOW" in planned, planned
    meta = {**planned, "FMA_EXP": True}
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")
    launch(x, out, m, n, n + pad, **meta)
    ref = torch.softmax(x.double(), dim=-1)
    policy = policy_for("softmax", dtype)
    got = out[:m].double()
    assert not bool(got.isnan().any())
    assert bool(((got - ref).abs() <= policy.atol + policy.rtol * ref.abs()).all())
    assert float((got - ref).norm() / ref.norm()) <= policy.max_rel_l2
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    again = torch.empty_like(out[:m])
    launch(x, again, m, n, n + pad, **meta)
    assert torch.equal(again, out[:m])
    plain = torch.empty_like(out[:m])
    launch(x, plain, m, n, n + pad, **{**meta, "FMA_EXP": False})
    step = torch.finfo(dtype).eps * plain.double().abs() + 2 * torch.finfo(dtype).tiny
    assert bool(((plain.double() - got).abs() <= 2 * step).all())


@requires_cuda
@pytest.mark.parametrize(("dtype", "offset", "spread"), [
    (torch.bfloat16, 0.0, 4.0), (torch.float16, 0.0, 4.0), (torch.bfloat16, 1e8, 1e6), (torch.bfloat16, -1e8, 1e6),
    (torch.float16, 6e4, 64.0), (torch.bfloat16, 0.0, 0.01), (torch.bfloat16, 0.0, 200.0)])
@pytest.mark.parametrize(("m", "n", "pad"), [(37, 25249, 0), (5, 7294, 0), (11, 3001, 0), (9, 23450, 1), (7, 14261, 1),
                                             (3, 13130, 0), (1, 32768, 0)])
def test_fma_exp_softmax_meets_the_task_tolerance(m: int, n: int, pad: int, dtype: torch.dtype, offset: float,
                                                  spread: float) -> None:
    """FMA_EXP (an experiment, off: exponents by one fused multiply-add against the max times log2 e rounded once) on
    the planned 16-bit realigned launches: THREAD_STATS windows, windows without it, rows padded off the vector grid,
    a whole-window row; logits offset by 1e8 (the hidden `offset` profile's bf16 draw; 6e4 fp16), near-flat and very
    spread rows, -inf entries and a row mostly -inf; within the softmax task's tolerance policy against the float64
    oracle, replayed bit for bit, nothing written past the output, and within two 16-bit steps of the same launch
    without it."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = (torch.randn(m, n + pad, device="cuda", generator=gen) * spread + offset).to(dtype)[:, :n]
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    _check_fma_exp_launch(x, pad)


@requires_cuda
@pytest.mark.parametrize(("dtype", "mask"), [(torch.bfloat16, -1e10), (torch.bfloat16, -1e20), (torch.bfloat16, None),
                                             (torch.float16, None)])
@pytest.mark.parametrize(("m", "n", "pad"), [(37, 25249, 0), (5, 7294, 0), (11, 3001, 0), (9, 23450, 1), (3, 13130, 0)])
def test_fma_exp_softmax_rows_with_huge_negative_masks_and_huge_maxes(m: int, n: int, pad: int, dtype: torch.dtype,
                                                                     mask: float | None) -> None:
    """FMA_EXP's guard (the max times log2 e rounded up, so no exponential overflows; a program that met a row whose
    max reached _CARRY_MAX writes its such rows again from memory): rows masked with a huge negative (-1e10, -1e20,
    the dtype's lowest as Hugging Face writes masks) beside ordinary logits, a row wholly masked so, and in bf16 rows
    whose max is 1e10 or -1e10, on the planned realigned launches (THREAD_STATS windows and without, padded rows):
    within the task's tolerance against float64, no NaN, replayed bit for bit, within two 16-bit steps of the launch
    without FMA_EXP."""
    fill = torch.finfo(dtype).min if mask is None else mask
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = (torch.randn(m, n + pad, device="cuda", generator=gen) * 4).to(dtype)[:, :n]
    x[:, n // 2:] = fill  # every row's second half masked, the first half ordinary
    x[1, :] = fill  # a row wholly masked: uniform
    x[2, ::3] = fill
    if dtype == torch.bfloat16 and m > 4:
        x[3, :] = (torch.randn(n, device="cuda", generator=gen) * 1e8 + 1e10).to(dtype)
        x[4, :] = (torch.randn(n, device="cuda", generator=gen) * 1e8 - 1e10).to(dtype)
    _check_fma_exp_launch(x, pad)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", [(345, 64803), (1024, 65536), (3, 40000), (2048, 24577), (425, 52717), (1, 40001),
                                   (9, 16411), (133, 65535)])
def test_split_rms_norm_matches_fp32_reference(shape: tuple[int, int], dtype: torch.dtype) -> None:
    """The split path; 16-bit rows off the 16-byte grid through their vector windows (REALIGN: rows starting at every
    offset inside a vector, one row, a tensor whose end is not a whole vector), contiguous or padded by 5 (x's
    accesses scalar) or 8 elements; against fp32, replayed bit for bit, nothing written past the output; the
    realigned split's weight read from its shifted-copy table (WT > 0, planned), from w - shift (WT=-1) or element by
    element (WT=0) gives the same bits. Where such rows are 24577 wide or more the plan is the two-phase path
    (test_two_phase_rms_norm_matches_the_split_bit_for_bit); the split is checked there as the plan makes it
    without."""
    m, n = shape
    x = torch.randn(m, n, device="cuda").to(dtype)
    w = torch.randn(n, device="cuda").to(dtype)
    for pad in (0, 5, 8):
        xs = torch.randn(m, n + pad, device="cuda").to(dtype)[:, :n] if pad else x
        realign = dtype != torch.float32 and (n % 8 != 0 or pad % 8 != 0)
        planned = rms_norm._plan(m, n, xs.stride(0), x.element_size(), x.device, resident=False)
        assert isinstance(planned, rms_norm._TwoPhase) == (
            realign and n >= rms_norm._TWO_PHASE_MIN_N), planned
        plan = rms_norm._plan(m, n, xs.stride(0), x.element_size(), x.device, two_phase=False, resident=False)
        assert isinstance(plan, rms_norm._Split)
        assert plan.meta.get("REALIGN", False) == (dtype != torch.float32 and (n % 8 != 0 or pad % 8 != 0)), plan.meta
        xf = xs.float()
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        y = rms_norm.candidate(xs, w, 1e-6)
        torch.testing.assert_close(y.float(), ref, rtol=2e-2 if dtype != torch.float32 else 1e-5, atol=2e-2)
        assert torch.equal(rms_norm.candidate(xs, w, 1e-6), y), "replays must be bit-exact (fixed reduction order)"
        guarded = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
        parts = torch.empty((m, plan.n_parts), dtype=torch.float32, device="cuda")
        done = torch.zeros((m,), dtype=torch.int32, device="cuda")
        table = plan.meta.get("WT", 0)
        assert table == (plan.n_parts * plan.meta["CHUNK"] if plan.meta.get("REALIGN") else 0), plan.meta
        weight = rms_norm._weight_table(w, table) if table else w
        plan.launch(xs, weight, guarded, parts, done, n, xs.stride(0), 1e-6, plan.n_parts, **plan.meta)
        assert bool((guarded[m] == 7.0).all()), "wrote past the output"
        split_y = guarded[:m].clone()
        if isinstance(rms_norm._plan(m, n, xs.stride(0), x.element_size(), x.device), rms_norm._Split):
            assert torch.equal(split_y, y)
        else:  # the two-phase or resident path: another reduction order
            torch.testing.assert_close(split_y.float(), ref, rtol=2e-2, atol=2e-2)
        if plan.meta.get("REALIGN"):  # the weight from w - shift, or element by element (the plan before)
            for wt in (-1, 0):
                guarded.fill_(7.0)
                done.zero_()
                plan.launch(xs, w, guarded, parts, done, n, xs.stride(0), 1e-6, plan.n_parts,
                            **{**plan.meta, "WT": wt})
                assert torch.equal(guarded[:m], split_y) and bool((guarded[m] == 7.0).all()), wt


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(476, 63343, 0), (345, 64803, 0), (1024, 65536, 0), (1024, 40000, 8),
                                             (120, 100003, 0), (120, 50001, 0), (1024, 32769, 0), (263, 49999, 0),
                                             (250, 45001, 0), (1024, 49145, 0), (270, 63553, 0), (476, 63343, 7),
                                             (510, 32083, 0), (1024, 24577, 0), (1024, 20001, 0), (300, 28001, 0)])
def test_resident_rms_norm_matches_fp32_reference(m: int, n: int, pad: int, dtype: torch.dtype) -> None:
    """The resident path (whole 16-bit rows wider than 32768, or through windows from 20001, in shared memory: two
    16-warp programs an SM where two rows fit, 40000, 32769, 45001, 49145, 32083, 24577 and 20001 here (registers
    capped at 64 through windows), else one 32-warp program), planned where _resident_plan takes the shape (rows
    filling 85% of their last round on this GPU's SMs; 270 rows, 300 of 28001 and padded rows off the grid do not,
    and keep the two-phase path): within a rounding of fp32 on rows starting
    at every offset inside a vector (REALIGN), aligned rows and rows padded by whole vectors, 13 chunks a row, fewer
    rows than programs, and rows scaled from 1e-3 to 1e3 (fp16's x^2 would overflow); replayed bit for bit; nothing
    written past the output; close to the two-phase or split path's result on the same rows; one an SM where two
    are planned writes the same values within a rounding."""
    xs = torch.randn(m, n + pad, device="cuda").to(dtype)[:, :n]
    xs.mul_(torch.logspace(-3, 3, m, device="cuda").to(dtype)[:, None])
    w = torch.randn(n, device="cuda").to(dtype)
    resident = rms_norm._resident_plan(m, n, xs.stride(0), rms_norm._num_sms(xs.device),
                                       rms_norm._smem_per_sm(xs.device))
    plan = rms_norm._plan(m, n, xs.stride(0), 2, xs.device)
    assert (resident is not None) == (not isinstance(plan, rms_norm._Split | rms_norm._TwoPhase)), plan
    takes = (m, n, pad) not in ((270, 63553, 0), (476, 63343, 7), (300, 28001, 0))
    if rms_norm._num_sms(xs.device) == 132:  # the H100's and H200's SM count, which the fills above are for
        assert (resident is not None) == takes, resident
    if resident is None:
        pytest.skip("not a resident shape on this GPU")
    launch, meta = resident
    xf = xs.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    guarded = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")
    table = rms_norm._weight_table(w, meta["WT"]) if meta["WT"] else w
    launch(xs, table, guarded, m, n, xs.stride(0), 1e-6, **meta)
    assert bool((guarded[m] == 7.0).all()), "wrote past the output"
    y = guarded[:m]
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2)
    assert torch.equal(rms_norm.candidate(xs, w, 1e-6), y), "the planned call writes the same bits"
    assert torch.equal(rms_norm.candidate(xs, w, 1e-6), y), "replays must be bit-exact"
    other = torch.empty_like(y)
    rms_norm._run(rms_norm._plan(m, n, xs.stride(0), 2, xs.device, resident=False), xs, w, other, 1e-6)
    torch.testing.assert_close(other.float(), y.float(), rtol=2e-2, atol=2e-2)
    one = rms_norm._resident_plan(m, n, xs.stride(0), rms_norm._num_sms(xs.device), rms_norm._smem_per_sm(xs.device),
                                  per_sm=1, min_fill=0.0)
    if one is not None and one[1]["num_warps"] != meta["num_warps"]:
        one[0](xs, table if one[1]["WT"] == meta["WT"] else rms_norm._weight_table(w, one[1]["WT"]), other, m, n,
               xs.stride(0), 1e-6, **one[1])
        torch.testing.assert_close(other.float(), y.float(), rtol=2e-2, atol=2e-2)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "per_sm"), [(372, 46501, 1), (476, 63343, 1), (263, 49999, 1), (1, 100003, 1),
                                                (700, 32777, 2), (1024, 45001, 2), (250, 45001, 2), (65, 40001, 2)])
def test_resident_rms_norm_windows_on_lines_match_fp32_and_windows_on_vectors(m: int, n: int, per_sm: int,
                                                                              dtype: torch.dtype) -> None:
    """LINE in rms_norm's resident kernel (experiment: windows start on a 128-byte line, a row up to 63 elements into
    its first chunk, its weight read from row sh % 8 of the shifted table): within a rounding of fp32 on rows starting
    at every offset inside a line (up to 1024 odd-width rows), one and two programs an SM (49145 + 63 positions no
    longer fit two rows an SM, so 45001 stands in: evidence/h100/2026-12-06_seventeenth/8_*), one row; within one
    16-bit step of windows on vectors (the sum of squares is added in another order); a second call the same bytes;
    nothing written past the output."""
    x = torch.randn(m, n, device="cuda").to(dtype)
    x.mul_(torch.logspace(-3, 3, m, device="cuda").to(dtype)[:, None])
    w = torch.randn(n, device="cuda").to(dtype)
    sms, smem = rms_norm._num_sms(x.device), rms_norm._smem_per_sm(x.device)
    plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0, line=0)
    lines = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0, line=64)
    assert plain is not None and lines is not None and lines[1]["LINE"] == 64 and "LINE" not in plain[1]
    assert plain[1]["WT"] and lines[1]["WT"] >= plain[1]["WT"]
    want = torch.empty((m, n), dtype=dtype, device="cuda")
    plain[0](x, rms_norm._weight_table(w, plain[1]["WT"]), want, m, n, n, 1e-6, **plain[1])
    table = rms_norm._weight_table(w, lines[1]["WT"])
    first = None
    for _ in range(2):
        out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
        lines[0](x, table, out, m, n, n, 1e-6, **lines[1])
        assert bool((out[m] == 7.0).all()), "wrote past the output"
        assert first is None or torch.equal(out[:m], first), "a second call wrote other bytes"
        first = out[:m].clone()
    assert first is not None
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(first.float(), ref, rtol=2e-2, atol=2e-2)
    steps = (first.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    assert int(steps.max()) <= 1, "more than one 16-bit step from the windows on vectors"


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "per_sm"), [(372, 46501, 1), (476, 63343, 1), (1, 100003, 1), (1024, 49145, 2),
                                                (65, 40001, 2)])
def test_resident_rms_norm_table_pdl_writes_the_same_bytes_and_waits_for_the_table(m: int, n: int, per_sm: int,
                                                                                   dtype: torch.dtype) -> None:
    """TABLE_PDL (experiment: the resident kernel launched with programmatic dependent launch after its weight table's
    kernel, which releases it at once): the same bytes as the ordinary launch; after the weight changes in place the
    next call reads the new table (it waits for the table kernel: a stale table would give the old bytes), on
    back-to-back calls with nothing between them; nothing written past the output."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs sm_90")
    x = torch.randn(m, n, device="cuda").to(dtype)
    w = torch.randn(n, device="cuda").to(dtype)
    sms, smem = rms_norm._num_sms(x.device), rms_norm._smem_per_sm(x.device)
    plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0)
    assert plain is not None and plain[1]["WT"] and "PDL" not in plain[1]
    pdl = rms_norm._table_pdl(plain)
    assert pdl[1]["PDL"] and pdl[1]["launch_pdl"]
    for scale in (1.0, -3.0):
        w.mul_(scale)  # in place, between calls: each call must read its own table
        want = torch.empty((m, n), dtype=dtype, device="cuda")
        rms_norm._run(plain, x, w, want, 1e-6)
        outs = [torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda") for _ in range(3)]
        for out in outs:  # back to back: each launch's predecessor is its own table kernel
            rms_norm._run(pdl, x, w, out[:m], 1e-6)
        torch.cuda.synchronize()
        for out in outs:
            assert bool((out[m] == 7.0).all()), "wrote past the output"
            assert torch.equal(out[:m], want), "TABLE_PDL wrote other bytes than the ordinary launch"


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "per_sm", "line"), [(372, 46501, 1, 0), (476, 63343, 1, 0), (1, 100003, 1, 0),
                                                        (1024, 65536, 1, 0), (396, 40000, 1, 0), (1024, 40000, 2, 0),
                                                        (7, 46501, 1, 0), (300, 45002, 1, 0), (372, 46501, 1, 64),
                                                        (65, 40001, 2, 0), (263, 49999, 1, 0)])
def test_resident_rms_norm_weight_in_shared_memory_writes_the_same_bytes(m: int, n: int, per_sm: int, line: int,
                                                                         dtype: torch.dtype) -> None:
    """WSMEM (experiment: the weight of a row's first WS chunks staged in shared memory once a program; through
    windows each program takes one shift class of rows, PERIOD 8, or 4 at an even width, 64 with LINE) and WSHIFT
    (with it, through windows on vectors where every chunk is staged: no table; w shifted in registers): the same
    bytes as the plain resident kernel (each row's arithmetic is the same; only which program takes it changes), at
    one and two programs an SM, aligned (the weight itself) and through windows (the shifted table), with fewer rows
    than programs (every row still written once: nothing left as the guard's fill); nothing written past the
    output; after the weight changes in place the next call reads the new weight."""
    x = torch.randn(m, n, device="cuda").to(dtype)
    w = torch.randn(n, device="cuda").to(dtype)
    sms, smem = rms_norm._num_sms(x.device), rms_norm._smem_per_sm(x.device)
    plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0, line=line, wsmem=False)
    staged = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0, line=line, wsmem=True,
                                     wshift=False)
    shifted = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0, line=line, wsmem=True,
                                      wshift=True)
    assert plain is not None and staged is not None and shifted is not None and "WS" not in plain[1]
    if m < 64 and n % 8:
        assert "WS" not in staged[1] or staged[1]["PERIOD"] <= m, staged[1]  # fewer programs than classes: off
    else:
        base = 1 if n % 8 == 0 else max(8, line)
        assert staged[1]["WS"] > 0 and staged[1]["PERIOD"] == base // math.gcd(n % base, base), staged
    assert shifted[1].get("WSHIFT", False) == (bool(n % 8) and not line and staged[1].get("WS") == staged[1]["NCHUNK"])
    for scale in (1.0, -3.0):
        w.mul_(scale)  # in place, between calls: each call must stage its own weight
        want = torch.empty((m, n), dtype=dtype, device="cuda")
        rms_norm._run(plain, x, w, want, 1e-6)
        for launch in (staged, shifted):
            out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
            rms_norm._run(launch, x, w, out[:m], 1e-6)
            assert bool((out[m] == 7.0).all()), "wrote past the output"
            assert torch.equal(out[:m], want), f"{launch[1]} wrote other bytes than the plain resident kernel"


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n"), [(372, 46501), (396, 40000), (300, 45000), (425, 52717), (400, 40001), (7, 46501),
                                      (133, 40000), (264, 45002), (1, 40001), (265, 33001)])
def test_resident_rms_norm_ring_writes_the_same_bytes(m: int, n: int, dtype: torch.dtype) -> None:
    """RING (experiment: two sets of row slots a program, a row's output pass refilling its set with the row after
    next; RING_LAZY: the second row's copies issued once the first row's sum is in): the same bytes as the plain
    resident kernel at one program an SM (each row's arithmetic is the same; only when its copies are issued changes),
    aligned and through windows, with fewer rows than programs, one or two rows a program and every count of rows
    past a whole round; nothing written past the output; a second call on other inputs into the same output writes
    that call's rows (no row of the first left behind)."""
    sms, smem = rms_norm._num_sms(torch.device("cuda")), rms_norm._smem_per_sm(torch.device("cuda"))
    plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, wsmem=False, ring=False)
    ring = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, wsmem=False, ring=True)
    lazy = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, wsmem=False, ring=True, lazy=True)
    assert lazy is not None and lazy[1].get("RING_LAZY") is True, lazy
    assert plain is not None and ring is not None and "RING" not in plain[1]
    assert ring[1].get("RING") is True and ring[1]["NCHUNK"] == plain[1]["NCHUNK"], ring
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
    for scale in (1.0, -3.0):
        x = (torch.randn(m, n, device="cuda") * scale).to(dtype)
        w = torch.randn(n, device="cuda").to(dtype)
        want = torch.empty((m, n), dtype=dtype, device="cuda")
        rms_norm._run(plain, x, w, want, 1e-6)
        for launch in (ring, lazy):
            out[:m].fill_(float("nan"))
            rms_norm._run(launch, x, w, out[:m], 1e-6)
            assert bool((out[m] == 7.0).all()), "wrote past the output"
            assert torch.equal(out[:m], want), f"{launch[1]} wrote other bytes than the plain resident kernel"


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "per_sm"), [(372, 46501, 1), (396, 40000, 1), (1024, 40000, 2), (476, 63343, 1),
                                                (7, 46501, 1), (1024, 65536, 1), (400, 40001, 2)])
def test_resident_rms_norm_widen_writes_the_same_bytes(m: int, n: int, per_sm: int, dtype: torch.dtype) -> None:
    """WIDEN (experiment: bf16 widened to fp32 by a shift and a mask a pair; fp16 as before): exact either way, so the
    same bytes as the plan without it, through windows and aligned, one and two programs an SM, with RING_LAZY (396 x
    40000) and a staged weight (1024 x 40000, 1024 x 65536) as planned; nothing written past the output."""
    x = torch.randn(m, n, device="cuda").to(dtype)
    w = torch.randn(n, device="cuda").to(dtype)
    sms, smem = rms_norm._num_sms(x.device), rms_norm._smem_per_sm(x.device)
    plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0, widen=False)
    wide = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=per_sm, min_fill=0.0, widen=True)
    assert plain is not None and wide is not None and wide[1] == {**plain[1], "WIDEN": True}, (plain, wide)
    want = torch.empty((m, n), dtype=dtype, device="cuda")
    rms_norm._run(plain, x, w, want, 1e-6)
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
    rms_norm._run(wide, x, w, out[:m], 1e-6)
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    assert torch.equal(out[:m], want), f"{wide[1]} wrote other bytes than the plan without WIDEN"


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(345, 64803, 0), (289, 65494, 0), (1, 50001, 0), (3, 50000, 5),
                                             (133, 65535, 0), (255, 65536, 2), (2, 131071, 0), (600, 50001, 0),
                                             (1, 600001, 0), (500, 33001, 0), (1024, 50001, 0),
                                             (700, 30001, 0), (3, 24577, 0), (300, 28001, 0)])
def test_two_phase_rms_norm_matches_the_split_bit_for_bit(m: int, n: int, pad: int, dtype: torch.dtype) -> None:
    """The two-phase path (planned for 16-bit rows off the 16-byte grid 24577 wide or more, any size of x): within a
    rounding of fp32, replayed bit for bit, nothing written past the output, every row counted; the same bits on one
    program, and with no patience (every row's sum recomputed by the program scaling a chunk: what a program does
    when others it waits on are not resident); cut as the realigned split cuts it, on as many warps (the warps set
    the reduction's tree), it writes the split's bits. 600 x 50001 runs several batches; a row of 600001 has more of
    the split's chunks than the H200 has SMs (no split there: the looped path); 3 x 24577 is 7 chunks a row, the
    fewest planned, and 1024 x 50001 102 MB of x, more than the L2 holds. Each OVERLAP order writes the same bits."""
    xs = torch.randn(m, n + pad, device="cuda").to(dtype)[:, :n]
    w = torch.randn(n, device="cuda").to(dtype)
    plan = rms_norm._plan(m, n, xs.stride(0), 2, xs.device, resident=False)  # where the plan is resident, as before
    assert isinstance(plan, rms_norm._TwoPhase), plan
    xf = xs.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()

    def planned() -> torch.Tensor:  # as the built-in runs the plan: workspace, table, launch
        out = torch.empty((m, n), dtype=dtype, device="cuda")
        rms_norm._run(plan, xs, w, out, 1e-6)
        return out

    y = planned()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2)
    assert torch.equal(planned(), y), "replays must be bit-exact"

    def two_phase(p: rms_norm._TwoPhase, grid: int, patience: int) -> torch.Tensor:
        out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")
        counters = torch.full((m,), -7, dtype=torch.int32, device="cuda")
        table = rms_norm._weight_table(w, p.meta["WT"], counters)
        parts = torch.empty((m, p.n_parts), dtype=torch.float32, device="cuda")
        rms_norm._rms_norm_two_phase[(grid,)](xs, table, out, parts, counters, m, n, xs.stride(0), 1e-6, p.n_parts,
                                              p.rows_b or rms_norm._two_phase_rows(m, p.n_parts, grid),
                                              **{**p.meta, "PATIENCE": patience})
        assert bool((out[m] == 7.0).all()), "wrote past the output"
        assert bool((counters == p.n_parts).all())
        return out[:m]

    resident = 8 * rms_norm._num_sms(xs.device)
    assert torch.equal(two_phase(plan, resident, plan.meta["PATIENCE"]), y)
    assert torch.equal(two_phase(plan, 1, plan.meta["PATIENCE"]), y)
    assert torch.equal(two_phase(plan, resident, 0), y)
    for overlap in (0, 1, 2):  # the three load orders write the same bits
        assert torch.equal(two_phase(rms_norm._two_phase_plan(m, n, xs.stride(0), overlap=overlap), resident,
                                     plan.meta["PATIENCE"]), y)
    split = rms_norm._plan(m, n, xs.stride(0), 2, xs.device, two_phase=False, resident=False)
    if isinstance(split, rms_norm._Split):
        same_cut = rms_norm._two_phase_plan(m, n, xs.stride(0), chunk=split.meta["CHUNK"],
                                            warps=split.meta["num_warps"])
        assert same_cut.n_parts == split.n_parts
        counters = torch.empty((m,), dtype=torch.int32, device="cuda")
        table = rms_norm._weight_table(w, split.meta["WT"], counters)
        parts = torch.empty((m, split.n_parts), dtype=torch.float32, device="cuda")
        split_y = torch.empty((m, n), dtype=dtype, device="cuda")
        split.launch(xs, table, split_y, parts, counters, n, xs.stride(0), 1e-6, split.n_parts, **split.meta)
        assert torch.equal(two_phase(same_cut, resident, same_cut.meta["PATIENCE"]), split_y)


@requires_cuda
def test_split_softmax_on_padded_rows() -> None:
    base = torch.randn(33, 70000, device="cuda", dtype=torch.bfloat16)
    x = base[:, :65600]  # row stride 70000, not the width
    y = softmax.candidate(x)
    assert y.is_contiguous()
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2, atol=1e-6)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("pad", [0, 3, 8, 12])
def test_realigned_split_softmax_on_padded_rows(pad: int, dtype: torch.dtype) -> None:
    """Unaligned rows of the split range, padded by nothing, an odd amount, a whole vector and half of one: x is read
    at the output window's positions (vectorised as far as the padding allows); -inf chunks included. Contiguous
    16-bit rows take the resident path through their windows instead."""
    x = (torch.randn(37, 40001 + pad, device="cuda") * 4).to(dtype)[:, :40001]
    x[0, ::7] = float("-inf")
    x[-1, :20000] = float("-inf")
    plan = softmax._plan(37, 40001, x.stride(0), x.element_size(), x.device, dtype)
    if pad == 0 and dtype != torch.float32:
        assert not isinstance(plan, softmax._Split) and plan[1]["REALIGN"], plan
    else:
        assert isinstance(plan, softmax._Split) and plan.meta["REALIGNED"], plan
    _assert_softmax_matches_fp32(x)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad", "config"), [
    (1, 40000, 0, None), (131, 32770, 2, None), (300, 65536, 6, None), (263, 98304, 0, None), (2, 131072, 4, None),
    (270, 63554, 0, None), (200, 60000, 0, None), (400, 65536, 0, (8, 8, 2)), (133, 65536, 0, (16, 16, 1)),
    (140, 40000, 0, (32, 8, 1)), (133, 40000, 2, (32, 16, 1)), (700, 32768, 0, (8, 8, 2)),
    (1, 65536, 0, None), (265, 65536, 0, None), (300, 51208, 0, None)])
def test_resident_softmax_matches_fp32_reference(m: int, n: int, pad: int, config: tuple[int, int, int] | None,
                                                 dtype: torch.dtype) -> None:
    """The resident path (rows in shared memory, the next row's chunks copied in while this row's output is stored)
    on what can break it: one row (M a compile-time 1), fewer and more rows than programs, rows ending mid-chunk,
    strides aligned to 4 bytes only (narrowest copies), rows over the budget (streamed chunks), -inf logits and
    whole chunks of them; default and forced configs (warps, elements per thread, programs per SM; three chunks a
    row; a row of exactly 16 whole chunks; 15 chunks, all resident); PAIR (aligned rows of 100-128 KB, two programs
    an SM holding the chunks past their slots in registers: one row, one row more than two an SM, 15 chunks with 2
    held and a partial last one, the narrowest such row with none held). Default configs replay bit-exact; nothing is
    written outside the output; a staggered plan (half the programs start late) writes exactly what it writes
    without the stagger."""
    x = (torch.randn(m, n + pad, device="cuda") * 4).to(dtype)[:, :n]
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    realign = config is None and pad == 0 and n % 8 != 0  # the plan sees contiguous rows off the grid through windows
    plan = softmax._resident_plan(m, n, softmax._align(2, n, x.stride(0)), 2, softmax._cuda_sms(index),
                                  softmax._smem_per_sm(index), *(config or (0, 0, 0)), realign=realign)
    assert plan is not None
    if config is None:
        assert softmax._plan(m, n, x.stride(0), 2, x.device, dtype)[1] == plan[1]
        _assert_softmax_matches_fp32(x)
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
    plan[0](x, out, m, n, x.stride(0), **plan[1])
    torch.testing.assert_close(out[:m].float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    if plan[1]["STAGGER"]:
        plain = torch.empty_like(out[:m])
        plan[0](x, plain, m, n, x.stride(0), **{**plan[1], "STAGGER": 0})
        assert torch.equal(plain, out[:m])


@requires_cuda
@pytest.mark.parametrize(("m", "n", "budget_kb"), [(140, 131072, 224), (133, 110000, 224), (3, 104000, 212),
                                                   (135, 131071, 224)])
def test_resident_softmax_with_more_shared_memory_matches_fp32_reference(m: int, n: int, budget_kb: int) -> None:
    """The resident kernel given up to 224 KB of shared memory (a block may take 227 KB on the H200): fewer chunks
    streamed, or 16 warps holding a row the 200 KB budget would stream. Correct and within the output."""
    x = (torch.randn(m, n, device="cuda") * 4).to(torch.bfloat16)
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    plan = softmax._resident_plan(m, n, softmax._align(2, n), 2, softmax._cuda_sms(index), softmax._smem_per_sm(index),
                                  per_sm=1, realign=n % 8 != 0, budget_bytes=budget_kb * 1024)
    assert plan is not None
    out = torch.full((m + 1, n), 7.0, dtype=x.dtype, device="cuda")
    plan[0](x, out, m, n, n, **plan[1])
    torch.testing.assert_close(out[:m].float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    assert bool((out[m] == 7.0).all()), "wrote past the output"


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "kw"), [
    (1, 65536, {}), (265, 65536, {}), (3, 131072, {}), (133, 131072, {}), (29, 128256, {}), (131, 33508, {}),
    (700, 49999, {}), (5, 65535, {}), (263, 32771, {}), (1024, 53248, {}),
    (97, 40000, {"warps": 8, "per_sm": 3, "budget_bytes": 224 * 1024}), (140, 40003, {"warps": 32, "per_sm": 1})])
def test_resident_softmax_free_matches_the_plain_kernel_bit_for_bit(m: int, n: int, kw: dict[str, object],
                                                                      dtype: torch.dtype) -> None:
    """FREE (planned where it applies: copies as inline PTX, no CTA barrier inside a row's passes) computes
    exactly what the plain resident kernel does, so its output must be the same bytes: aligned rows (PAIR, streamed
    chunks, one row, one program's rows of one more round), windows (REALIGN: 33508, 49999, 65535, 32771), three
    programs an SM, 32 warps; -inf logits and whole chunks of them; nothing written past the output, a second call
    the same bytes (slots refilled from the previous row's copies without a barrier, across calls too)."""
    x = (torch.randn(m, n, device="cuda") * 4).to(dtype)
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    realign = n % 8 != 0
    args = (m, n, softmax._align(2, n), 2, softmax._cuda_sms(index), softmax._smem_per_sm(index))
    plain = softmax._resident_plan(*args, realign=realign, free=False, **kw)  # type: ignore[arg-type]
    free = softmax._resident_plan(*args, realign=realign, free=True, **kw)  # type: ignore[arg-type]
    assert plain is not None and free is not None and free[1]["FREE"] is True
    _assert_same_bytes_as_plain(plain, free, x, n, "FREE")


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "kw"), [
    (131, 33508, {}), (400, 49196, {}), (5, 65535, {}), (263, 32771, {}), (700, 49999, {}), (1, 131071, {}),
    (133, 131071, {}), (64, 40001, {"warps": 8, "per_sm": 3, "budget_bytes": 224 * 1024}), (9, 32777, {})])
def test_resident_softmax_windows_on_lines_stay_within_a_step_of_windows_on_vectors(m: int, n: int,
                                                                                   kw: dict[str, object],
                                                                                   dtype: torch.dtype) -> None:
    """LINE (planned: REALIGN's windows start on a 128-byte line, so a row starts up to 63 elements into its window's
    first chunk) holds each element in another thread than windows on vectors do, so the sum is added in another
    order: each output within one 16-bit step of the vector windows' (the first H100 run found differing bytes at 10
    of 18 shapes, evidence/h100/2026-12-06_seventeenth/2_*), within the fp32 softmax's tolerance, the same bytes on
    a second call; rows starting at every offset inside a line (m up to 700 rows of odd widths), streamed chunks past
    the slots (131071), one row, three programs an SM; -inf logits and whole chunks of them (exact zeros in both);
    nothing written past the output."""
    x = (torch.randn(m, n, device="cuda") * 4).to(dtype)
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    args = (m, n, 1, 2, softmax._cuda_sms(index), softmax._smem_per_sm(index))
    plain = softmax._resident_plan(*args, realign=True, line=0, **kw)  # type: ignore[arg-type]
    lines = softmax._resident_plan(*args, realign=True, **kw)  # type: ignore[arg-type]
    assert plain is not None and lines is not None and lines[1]["LINE"] == 64 and "LINE" not in plain[1]
    for meta in (plain[1], lines[1]):
        if "per_sm" in kw and "maxnreg" not in meta:
            meta["maxnreg"] = 65536 // (int(kw["per_sm"]) * 32 * meta["num_warps"])  # type: ignore[call-overload]
    want = torch.empty((m, n), dtype=dtype, device="cuda")
    plain[0](x, want, m, n, n, **plain[1])
    first = None
    for _ in range(2):
        out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
        lines[0](x, out, m, n, n, **lines[1])
        assert bool((out[m] == 7.0).all()), "wrote past the output"
        assert first is None or torch.equal(out[:m], first), "a second call wrote other bytes"
        first = out[:m].clone()
    assert first is not None
    steps = (first.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    assert int(steps.max()) <= 1, "more than one 16-bit step from the windows on vectors"
    assert bool((first[0, ::5] == 0).all()) and bool((first[-1, n // 3:] == 0).all()), "-inf logits gave nonzero"
    torch.testing.assert_close(first.float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "realign"), [
    (265, 65536, False), (133, 131072, False), (131, 33508, True), (400, 49196, True), (97, 40000, False)])
def test_resident_softmax_one_shift_stays_within_an_ulp_of_carry(m: int, n: int, realign: bool,
                                                                 dtype: torch.dtype) -> None:
    """ONE_SHIFT (experiment: rows with |max| under _FOLD_MAX take an output pass whose exponent has the max and
    log2 of the sum in one shift) writes each output within one 16-bit step of CARRY's pass (the shift's rounding is
    at most 2^-13 in an exponent), on ordinary rows, rows whose max sits just under _FOLD_MAX (the largest rounding)
    and just over it, and rows offset by 1e4 (fp16: 6e4 is its range; CARRY's pass, so the same bytes there); -inf
    logits; within the fp32 softmax's tolerance; nothing written past the output."""
    x = (torch.randn(m, n, device="cuda") * 4).to(dtype)
    x[0, ::5] = float("-inf")
    x[1] = (x[1].float() + 2020.0).clamp(max=2040.0).to(dtype)  # a max just under _FOLD_MAX (bf16 steps 8 there)
    x[2] += 2049.0
    x[3] += 1e4 if dtype == torch.bfloat16 else 3e4
    index = torch.cuda.current_device()
    args = (m, n, 1 if realign else 8, 2, softmax._cuda_sms(index), softmax._smem_per_sm(index))
    carry = softmax._resident_plan(*args, realign=realign, one_shift=False, anchor=False)  # CARRY's own pass
    one = softmax._resident_plan(*args, realign=realign, one_shift=True)
    assert carry is not None and one is not None and one[1]["ONE_SHIFT"] and "ONE_SHIFT" not in carry[1]
    want = torch.empty((m, n), dtype=dtype, device="cuda")
    carry[0](x, want, m, n, n, **carry[1])
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")
    one[0](x, out, m, n, n, **one[1])
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    steps = (out[:m].view(torch.int16).int() - want.view(torch.int16).int()).abs()
    assert int(steps.max()) <= 1, "more than one 16-bit step from CARRY's output"
    assert torch.equal(out[2:4], want[2:4]), "rows past _FOLD_MAX take CARRY's pass"
    torch.testing.assert_close(out[:m].float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(1938, 13130, 0), (1960, 13778, 0), (4096, 9554, 0), (3921, 6608, 0),
                                             (1898, 14261, 20), (2048, 20001, 0), (8192, 3001, 0)])
def test_realigned_softmax_windows_on_lines_stay_within_a_step_of_the_plan(m: int, n: int, pad: int,
                                                                            dtype: torch.dtype) -> None:
    """LINE on the realigned register kernel (planned where the parts cover it: _lines_where_covered), compiled, on
    the planned launch (THREAD_STATS, WORDS and PF_L1 as planned): within one 16-bit step of the same launch with
    windows on vectors, within the fp32 tolerance, the same bytes on a second call, nothing written past the output;
    -inf strides give zeros; the plan is the launch on lines where its parts cover n + 63 lanes (not on padded rows
    off y's grid: evidence/h100/2026-12-06_eighteenth/6_*)."""
    x = (torch.randn(m, n + pad, device="cuda") * 4).to(dtype)[:, :n]
    x[0, ::5] = float("-inf")
    plan = softmax._plan(m, n, n + pad, 2, x.device, dtype)
    assert isinstance(plan, tuple) and "WINDOW" in plan[1], plan
    vectors = (plan[0], {k: v for k, v in plan[1].items() if k != "LINE"})
    lines = softmax._realigned_on_lines(vectors, n, 2)
    # planned on lines where the parts cover them, on contiguous rows and rows whose x sits on y's vector grid; padded
    # rows off it (_padded_plan) keep windows on vectors
    assert plan == (softmax._lines_where_covered(vectors, n, 2) if pad % 8 == 0 else vectors), plan
    want = torch.empty((m, n), dtype=dtype, device="cuda")
    softmax._run(vectors, x, want, m, n, n + pad)
    first = None
    for _ in range(2):
        out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")
        softmax._run(lines, x, out[:m], m, n, n + pad)
        assert bool((out[m] == 7.0).all()), "wrote past the output"
        assert first is None or torch.equal(out[:m], first), "a second call wrote other bytes"
        first = out[:m].clone()
    assert first is not None and bool((first[0, ::5] == 0).all())
    steps = (first.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    assert int(steps.max()) <= 1, "more than one 16-bit step from windows on vectors"
    torch.testing.assert_close(first.float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)


def _assert_same_bytes_as_plain(plain: softmax.Launch, other: softmax.Launch, x: torch.Tensor, stride: int,
                                what: str) -> None:
    """`plain` right against the fp32 softmax, then `other` its exact bytes on two calls, with a guard row after
    the output left as it was."""
    m, n = x.shape
    want = torch.empty((m, n), dtype=x.dtype, device="cuda")
    plain[0](x, want, m, n, stride, **plain[1])
    torch.testing.assert_close(want.float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    for _ in range(2):
        out = torch.full((m + 1, n), 7.0, dtype=x.dtype, device="cuda")  # a guard row after the output
        other[0](x, out, m, n, stride, **other[1])
        assert torch.equal(out[:m], want), f"{what} wrote other bytes than the plain kernel"
        assert bool((out[m] == 7.0).all()), "wrote past the output"


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "stride", "kw"), [
    (131, 33508, 33508, {}), (400, 49196, 49196, {}), (5, 65532, 65532, {}), (263, 32772, 32772, {}),
    (3, 131068, 131068, {}), (133, 131068, 131068, {}), (97, 40000, 40004, {}), (1, 32772, 32780, {}),
    (200, 33508, 33508, {"warps": 8, "per_sm": 3, "budget_bytes": 224 * 1024}),
    (265, 65532, 65532, {"warps": 16, "per_sm": 2, "budget_bytes": 208 * 1024, "hold": True})])
def test_resident_softmax_halves_match_the_plain_kernel_bit_for_bit(m: int, n: int, stride: int,
                                                                    kw: dict[str, object], dtype: torch.dtype) -> None:
    """HALVES (FREE's copies as two 8-byte halves a vector, on rows on the 8-byte grid but not the 16-byte one) holds
    each vector where the plain aligned kernel's 8-byte copies put it and computes the same, so its output must be
    the same bytes: contiguous rows (widths 4 past a multiple of 8, so each row's last vector is half in it), padded
    rows, rows streamed past the slots, one row, three programs an SM, PAIR's launch with HOLD; -inf logits and
    whole chunks of them; nothing written past the output; a second call the same bytes."""
    x = (torch.randn(m, stride, device="cuda") * 4).to(dtype)[:, :n]
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    args = (m, n, softmax._align(2, n, stride), 2, softmax._cuda_sms(index), softmax._smem_per_sm(index))
    assert args[2] == 4
    plain = softmax._resident_plan(*args, halves=False, free=False, **kw)  # type: ignore[arg-type]
    halves = softmax._resident_plan(*args, halves=True, **kw)  # type: ignore[arg-type]
    assert plain is not None and halves is not None and halves[1]["FREE"] is True and plain[1]["ALIGN"] == 4
    for meta in (plain[1], halves[1]):
        if "per_sm" in kw and "maxnreg" not in meta:
            meta["maxnreg"] = 65536 // (int(kw["per_sm"]) * 32 * meta["num_warps"])  # type: ignore[call-overload]
    _assert_same_bytes_as_plain(plain, halves, x, stride, "HALVES")


@requires_cuda
@pytest.mark.parametrize(("m", "n", "parts", "kw"), [
    (1, 131072, 2, {}), (265, 131072, 2, {}), (133, 128256, 2, {}), (140, 131072, 4, {}), (67, 98304, 2, {}),
    (97, 131072, 2, {"warps": 8, "per_sm": 2, "budget_bytes": 224 * 1024, "hold": True})])
def test_resident_softmax_parts_match_fp32_reference(m: int, n: int, parts: int, kw: dict[str, object]) -> None:
    """PARTS (an experiment, not planned): each row cut into equal parts on sibling programs that meet through
    64-bit words. What can break it: one row, more rows than programs, a part all -inf (it publishes max = -inf and
    adds nothing), a row offset past _CARRY_MAX (every part redoes the whole row with the max subtracted), a part
    with chunks held in registers; the words start zero on every call, so a second call (and a third, on the same
    output) gives the same bytes; nothing is written past the output."""
    x = (torch.randn(m, n, device="cuda") * 4).to(torch.bfloat16)
    x[0, : n // parts] = float("-inf")
    if m > 2:
        x[1] += 1e9
        x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    plan = softmax._resident_plan(m, n, 8, 2, softmax._cuda_sms(index), softmax._smem_per_sm(index), parts=parts,
                                  **kw)  # type: ignore[arg-type]
    assert plan is not None and plan[1]["PARTS"] == parts
    out = torch.full((m + 1, n), 7.0, dtype=x.dtype, device="cuda")
    softmax._run(plan, x, out[:m], m, n, n)
    torch.testing.assert_close(out[:m].float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    again = torch.empty_like(out[:m])
    softmax._run(plan, x, again, m, n, n)
    assert torch.equal(again, out[:m])


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "config"), [
    (1, 40001, None), (131, 33508, None), (700, 49999, None), (5, 65535, None), (3, 131071, None), (150, 98301, None),
    (263, 32771, None), (140, 40003, (32, 8, 1)), (133, 65533, (16, 8, 2)), (9, 36866, (8, 8, 2))])
def test_realigned_resident_softmax_matches_fp32_reference(m: int, n: int, config: tuple[int, int, int] | None,
                                                           dtype: torch.dtype) -> None:
    """Contiguous 16-bit rows off the 16-byte grid on the resident path through their windows (REALIGN; on 128-byte
    lines where LINE keeps the config, else on vectors): rows starting at every offset inside a line, one row, rows
    over the budget (streamed chunks), a tensor whose end is not a whole vector (131 x 33508), -inf logits and a row
    that is -inf from a third of the way; default configs are the plan's and replay bit-exact; nothing is written
    outside the output (a guard row after it)."""
    x = (torch.randn(m, n, device="cuda") * 4).to(dtype)
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    plan = softmax._resident_plan(m, n, softmax._align(2, n), 2, softmax._cuda_sms(index), softmax._smem_per_sm(index),
                                  *(config or (0, 0, 0)), realign=True)
    assert plan is not None and plan[1]["REALIGN"]
    if config is None:
        assert softmax._plan(m, n, n, 2, x.device, dtype)[1] == plan[1]
        _assert_softmax_matches_fp32(x)
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")  # a guard row after the output
    plan[0](x, out, m, n, n, **plan[1])
    torch.testing.assert_close(out[:m].float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    if plan[1]["STAGGER"]:  # one program per SM holding whole rows: the stagger changes timing, not results
        plain = torch.empty_like(out[:m])
        plan[0](x, plain, m, n, n, **{**plan[1], "STAGGER": 0})
        assert torch.equal(plain, out[:m])


@requires_cuda
@pytest.mark.parametrize(("dtype", "offset", "spread"), [
    (torch.bfloat16, 0.0, 4.0), (torch.bfloat16, 1e8, 1e6), (torch.bfloat16, -1e8, 1e6), (torch.bfloat16, 4e8, 1e6),
    (torch.float16, 6e4, 64.0), (torch.bfloat16, 2e38, 1e37)])
@pytest.mark.parametrize(("m", "n", "realign"), [(133, 65536, False), (140, 40000, False), (131, 33508, True),
                                                 (5, 131072, False), (3, 131071, True)])
def test_resident_softmax_carry_matches_fp32_with_offset_logits(m: int, n: int, realign: bool, dtype: torch.dtype,
                                                                offset: float, spread: float) -> None:
    """The resident kernel's CARRY fold (softmax._CARRY_MAX; every resident plan's): logits offset by up to 4e8
    (the hidden `offset` profile's 1e8 in bf16, 6e4 in fp16) are normalised by the common pass alone, rows past
    _CARRY_MAX (2e38) by SAFE's second look; whole vectors, windows and streamed chunks, -inf logits; against fp32,
    replayed bit for bit, nothing written past the output."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = (torch.randn(m, n, device="cuda", generator=gen) * spread + offset).to(dtype)
    x[0, ::5] = float("-inf")
    index = torch.cuda.current_device()
    plan = softmax._resident_plan(m, n, softmax._align(2, n), 2, softmax._cuda_sms(index), softmax._smem_per_sm(index),
                                  realign=realign)
    assert plan is not None and plan[1]["CARRY"] and plan[1]["REALIGN"] == realign
    out = torch.full((m + 1, n), 7.0, dtype=dtype, device="cuda")
    plan[0](x, out, m, n, n, **plan[1])
    torch.testing.assert_close(out[:m].float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    again = torch.empty_like(out[:m])
    plan[0](x, again, m, n, n, **plan[1])
    assert torch.equal(again, out[:m])


@requires_cuda
@pytest.mark.parametrize("mask", [-1e10, -1e20, "lowest"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n"), [(133, 65536), (140, 40000), (131, 33508), (5, 131072), (3, 131071)])
def test_resident_softmax_rows_masked_with_huge_negatives_are_not_nan(m: int, n: int, dtype: torch.dtype,
                                                                      mask: float | str) -> None:
    """Masks written as a huge negative (-1e10, -1e20, the dtype's lowest: Hugging Face's attention masks) beside
    ordinary logits, on the planned resident launches (PAIR, whole rows, windows, streamed chunks): a thread whose
    running max is such a mask must not make 2^d infinite (CARRY's rounding of max log2 e; a NaN row before the
    guard in the stats pass). fp16 cannot hold -1e10: its masks are its lowest. Against fp32, replayed bit for bit."""
    value = torch.finfo(dtype).min if mask == "lowest" or dtype == torch.float16 else float(mask)
    gen = torch.Generator(device="cuda").manual_seed(13)
    x = (torch.randn(m, n, device="cuda", generator=gen) * 4).to(dtype)
    x[:, : n // 2] = value  # a causal-style mask: whole chunks of every thread's row
    x[0, 1::3] = value
    plan = softmax._plan(m, n, n, 2, x.device, dtype)
    assert isinstance(plan, tuple) and plan[1].get("CARRY"), plan
    y = torch.empty_like(x)
    softmax._run(plan, x, y, m, n, n)
    assert not bool(torch.isnan(y).any())
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=-1), rtol=2e-2, atol=1e-6)
    again = torch.empty_like(x)
    softmax._run(plan, x, again, m, n, n)
    assert torch.equal(again, y)


def _assert_resident_meets_policy(plan: softmax.Launch, x: torch.Tensor) -> None:
    """A resident launch of x against the softmax task's own tolerance policy (float64 oracle, elementwise and
    relative L2), nothing written past the output (a guard row), replayed bit for bit."""
    from kernelproof_core.tolerances import policy_for

    m, n = x.shape
    out = torch.full((m + 1, n), 7.0, dtype=x.dtype, device="cuda")
    plan[0](x, out, m, n, n, **plan[1])
    ref = torch.softmax(x.double(), dim=-1)
    policy = policy_for("softmax", x.dtype)
    got = out[:m].double()
    assert bool(((got - ref).abs() <= policy.atol + policy.rtol * ref.abs()).all())
    assert float((got - ref).norm() / ref.norm()) <= policy.max_rel_l2
    assert bool((out[m] == 7.0).all()), "wrote past the output"
    again = torch.empty_like(out[:m])
    plan[0](x, again, m, n, n, **plan[1])
    assert torch.equal(again, out[:m])


@requires_cuda
@pytest.mark.parametrize(("keep", "maxfirst"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize(("dtype", "offset", "spread"), [
    (torch.bfloat16, 0.0, 4.0), (torch.float16, 0.0, 4.0), (torch.bfloat16, 1e8, 1e6), (torch.float16, 6e4, 64.0),
    (torch.bfloat16, 0.0, 0.01)])
@pytest.mark.parametrize(("m", "n", "realign"), [(133, 65536, False), (140, 40000, False), (131, 33508, True),
                                                 (5, 131072, False), (3, 131071, True), (1, 65536, False)])
def test_resident_softmax_keep_meets_the_task_tolerance(m: int, n: int, realign: bool, dtype: torch.dtype,
                                                        offset: float, spread: float, keep: bool,
                                                        maxfirst: bool) -> None:
    """KEEP (the stats pass's exponentials kept over x as fp16, rounded twice), MAXFIRST (the max first, then one
    exponential an element against it, kept as fp16) and neither, on and off the plan's
    default: within the softmax task's own tolerance policy against the float64 oracle (elementwise and relative L2),
    on whole vectors, windows, two rows an SM, streamed chunks, -inf logits and whole chunks of them, offset logits
    (CARRY) and near-flat rows (every p close to 1); replayed bit for bit, nothing written past the output."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = (torch.randn(m, n, device="cuda", generator=gen) * spread + offset).to(dtype)
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    plan = softmax._resident_plan(m, n, softmax._align(2, n), 2, softmax._cuda_sms(index), softmax._smem_per_sm(index),
                                  realign=realign, keep=keep, maxfirst=maxfirst)
    assert plan is not None and plan[1]["KEEP"] == keep and plan[1].get("MAXFIRST", False) == maxfirst
    _assert_resident_meets_policy(plan, x)


@requires_cuda
@pytest.mark.parametrize(("keep", "maxfirst"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("warps", [16, 32])
@pytest.mark.parametrize(("m", "n", "realign"), [(5, 131072, False), (3, 131071, True), (2, 128256, False)])
def test_resident_softmax_hold_meets_the_task_tolerance(m: int, n: int, realign: bool, warps: int,
                                                        keep: bool, maxfirst: bool) -> None:
    """HOLD (rows over the shared-memory budget: the chunks past the slots loaded into registers as the row starts
    and kept for the output pass instead of read again), with and without KEEP or MAXFIRST, on 16 and 32 warps, windows
    included: the task's tolerance against float64, -inf logits and chunks of them, bit-exact replay, nothing
    written past the output."""
    x = (torch.randn(m, n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(12)) * 4).to(
        torch.bfloat16)
    x[0, ::5] = float("-inf")
    x[-1, n // 3:] = float("-inf")
    index = torch.cuda.current_device()
    plan = softmax._resident_plan(m, n, softmax._align(2, n) if not realign else 1, 2, softmax._cuda_sms(index),
                                  softmax._smem_per_sm(index), warps=warps, per_sm=1, realign=realign, keep=keep,
                                  hold=True, maxfirst=maxfirst)
    assert plan is not None and plan[1]["NRES"] < plan[1]["NCHUNK"] and plan[1]["HOLD"], plan
    _assert_resident_meets_policy(plan, x)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("task", "m", "n"), [("softmax", 1024, 65536), ("softmax", 1991, 33508),
                                              ("rms_norm", 476, 63343), ("rms_norm", 1024, 40000)])
@pytest.mark.parametrize("offset", [1, 4, 8])
def test_resident_paths_take_views_starting_inside_a_vector(task: str, m: int, n: int, offset: int,
                                                            dtype: torch.dtype) -> None:
    """The resident kernels copy x 16 bytes at a time from its rows' starts; plans are cached by shape and stride,
    not by where x starts. A contiguous view starting 1 or 4 elements into a 16-byte vector (2 or 8 bytes off) of a
    shape the plan runs resident is read from an aligned copy (no misaligned-address fault), one starting on a
    vector (8 elements) as it is; all within a rounding of fp32, and the planned launch is the resident one."""
    flat = torch.randn(m * n + 8, device="cuda").to(dtype)
    x = flat[offset:offset + m * n].view(m, n)
    assert (x.data_ptr() % 16 == 0) == (offset == 8)
    xf = x.float()
    if task == "softmax":
        plan = softmax._plan(m, n, n, 2, x.device, dtype)
        assert isinstance(plan, tuple) and "NRES" in plan[1], plan
        y = softmax.candidate(x)
        torch.testing.assert_close(y.float(), torch.softmax(xf, dim=-1), rtol=2e-2, atol=1e-6)
    else:
        w = torch.randn(n, device="cuda").to(dtype)
        plan = rms_norm._plan(m, n, n, 2, x.device)
        assert not isinstance(plan, rms_norm._Split | rms_norm._TwoPhase) and "NCHUNK" in plan[1], plan
        y = rms_norm.candidate(x, w, 1e-6)
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2)
    torch.cuda.synchronize()  # a fault would surface here


@requires_cuda
def test_copy_reference_is_the_best_method() -> None:
    from kernelproof_core.environment import copy_bandwidth_gbps
    from kernelproof_core.measurement.copy_reference import measure_copy_gbps

    methods = measure_copy_gbps(256 << 20, 5)
    assert set(methods) == {"memcpy", "triton"}
    assert all(500 < v < 20000 for v in methods.values()), methods  # GB/s a real GPU's HBM can do
    assert copy_bandwidth_gbps(256 << 20, 5) >= 0.97 * max(methods.values())


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(3898, 14017, 21), (1783, 10131, 1), (4096, 5001, 7), (37, 101, 3)])
def test_swiglu_odd_paddings_take_funnel_and_match_the_flat_kernel(m: int, n: int, pad: int,
                                                                    dtype: torch.dtype) -> None:
    """Padded 16-bit rows whose padding is odd (the hidden `odd` draws) are planned on FUNNEL (16-byte input reads
    funnel-shifted into place), compiled: the built-in writes bit for bit what its flat kernel writes on contiguous
    copies of the same inputs, at the shapes it was swept at (evidence/h100/2026-12-05_funnel_ring_ab/1_*)."""
    g = torch.randn(m, n + pad, device="cuda").to(dtype)[:, :n]
    u = (torch.randn(m, n + pad, device="cuda") * 3).to(dtype)[:, :n]
    launch, _, flat = swiglu._plan(m, n, g.stride(0), u.stride(0), g.element_size(), g.device)
    assert not flat and getattr(launch, "func", None) is swiglu._launch_funnel, launch
    y = swiglu.candidate(g, u)
    expected = swiglu.candidate(g.contiguous(), u.contiguous())  # the flat kernel
    assert torch.equal(y, expected)
