"""Experimental swiglu kernels, timed by `kernel_sweep.py`:
- the 2-D tile kernel the built-in swiglu ran on strided rows before the gather kernel, kept for the A/B in
  `--only swiglu`: BLOCK_M rows x BLOCK_N columns per program, masked on both. At widths that are not a multiple of
  BLOCK_N its last column tile is mostly masked (5000-wide rows in 4096-column tiles: 39% of the lanes idle), which
  held it near 80% of copy bandwidth on the H200 (benchmarks/NOTES.md);
- `--only swiglu_odd`: rows off the 16-byte grid, the built-in's planned launch (the output-vector kernel,
  `swiglu._swiglu_out_vectors`, shipped after this family measured it) beside the gather kernel that took them
  before, over block sizes and warps, and where width and padding allow, its inputs read 2 or 4 elements at a time
  (IN_VEC, planned after this family measured it: H200, bf16, CUPTI, 79-85% of copy to 94-99% at three even widths,
  evidence/h200/2026-12-02_in_vec_table/1_*);
- `--only swiglu_shifted`: odd widths under paddings that are multiples of 2, 4 or 8 (SHIFTED: the inputs read in
  groups co-aligned with the output's vectors, a straddling vector's tail from the next row), beside the plan before
  it (IN_VEC from width and strides, 1 at every odd width) and over block sizes and warps. H200, bf16, CUPTI
  (evidence/h200/2026-12-02_pf_l1_plan/6_*, the planned launch then on 1024 elements, 4 warps): ahead at four of six
  shapes (2048 x 14335 padded by 2 45.8 us against 52.6), behind at 3899 x 3047 padded by 32 and 4005 x 14385
  padded by 6 (1.8-2.5% on 512 elements, 2.8-4.8% on 1024); 512 elements on 2 warps the best of five configs at
  all six, planned since (docs/TASKS.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

import torch
import triton
import triton.language as tl
from sweep_common import Trial

from kernelproof_core.kernels import swiglu
from kernelproof_core.kernels.swiglu import _shifted_cells, _silu_mul, _swiglu_funnel, _swiglu_out_vectors


@triton.jit
def _swiglu_rows(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor,
                 stride_g: tl.tensor, stride_u: tl.tensor, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 ALIGN: tl.constexpr) -> None:
    # The host guarantees ALIGN divides N and both strides; rewriting them as multiples of ALIGN lets the
    # compiler prove that masks and row starts are vector-aligned even when N is not a multiple of 16.
    N = (N // ALIGN) * ALIGN
    stride_g = (stride_g // ALIGN) * ALIGN
    stride_u = (stride_u // ALIGN) * ALIGN
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M - row0)[:, None] & (cols < N)[None, :]
    g = tl.load(g_ptr + row0 * stride_g + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0)
    u = tl.load(u_ptr + row0 * stride_u + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0)
    y = _silu_mul(g.to(tl.float32), u.to(tl.float32))
    tl.store(y_ptr + row0 * N + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


# then rows whose width and padding are even (the inputs readable in groups of 2 or 4: IN_VEC)
ODD_SHAPES = ((1322, 10725, 3), (1583, 13937, 3), (1783, 10131, 1), (4096, 5001, 7), (2048, 14335, 2), (4096, 11008, 1),
              (4005, 14386, 6), (3000, 9002, 2), (2048, 14388, 4))


def _odd_inputs(m: int, n: int, pad: int, dtype: torch.dtype, device: torch.device
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """gate and up (rows padded by `pad`), an output, the fp32 reference and the bytes moved."""
    g = torch.randn(m, n + pad, dtype=dtype, device=device)[:, :n]
    u = torch.randn(m, n + pad, dtype=dtype, device=device)[:, :n]
    ref = torch.nn.functional.silu(g.float()) * u.float()
    return g, u, torch.empty((m, n), dtype=dtype, device=device), ref, 3 * m * n * g.element_size()


def swiglu_odd_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `swiglu_odd`: rows off the 16-byte grid (odd widths, odd row padding: the campaign's hidden `odd`
    draws) on _swiglu_out_vectors over block sizes and warps, beside the built-in's planned launch and the gather
    kernel such rows took before, after an fp32 check of each config."""
    from sweep_parity import _checked

    for m, n, pad in ODD_SHAPES:
        g, u, y, ref, moved = _odd_inputs(m, n, pad, dtype, device)
        yield ("swiglu.planned", (m, n), "planned", partial(swiglu.candidate, g, u), moved, True)
        vec = 16 // g.element_size()
        wide = (m - 1) * (n + pad) + n >= 2**31 - 4096
        gather = partial(swiglu._swiglu_gather[(-(-m * n // 1024),)], g, u, y, m * n, n, n + pad, n + pad, BLOCK=1024,
                         VEC=swiglu._align(g.element_size(), n, n + pad), WIDE=wide, num_warps=4)
        if _checked(gather, y, ref, f"swiglu.gather {m}x{n}"):
            yield ("swiglu.gather", (m, n), "before: block=1024 warps=4", gather, moved, False)
        in_vec = swiglu._align(g.element_size(), n, n + pad)
        for block, warps, grouped in itertools.product((512, 1024, 2048, 4096), (2, 4, 8), sorted({1, in_vec})):
            if not 4 <= block // (warps * 32) <= 16:
                continue
            launch = partial(_swiglu_out_vectors[(-(-m * n // block),)], g, u, y, m * n, n, n + pad, n + pad,
                             BLOCK=block, VEC=vec, WIDE=wide, IN_VEC=grouped, num_warps=warps)
            label = f"block={block} warps={warps}" + (f" in_vec={grouped}" if grouped > 1 else "")
            if _checked(launch, y, ref, f"swiglu.out_vectors {m}x{n} {label}"):
                yield ("swiglu.out_vectors", (m, n), label, launch, moved, False)


# odd widths under paddings of whole vectors, 4 and 2 elements: the campaign's hidden `odd` draw of
# evidence/h200/2026-12-02_pf_l1_plan/4_* (3899 x 3047 padded by 32, 80-82% of copy) first
SHIFTED_SHAPES = ((3899, 3047, 32), (2048, 11007, 8), (4096, 5001, 16), (1322, 10725, 4), (2048, 14335, 2),
                  (4005, 14385, 6))


def swiglu_shifted_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    from sweep_parity import _checked

    for m, n, pad in SHIFTED_SHAPES:
        g, u, y, ref, moved = _odd_inputs(m, n, pad, dtype, device)
        yield ("swiglu.planned", (m, n), f"planned pad={pad}", partial(swiglu.candidate, g, u), moved, True)
        vec, wide = 16 // g.element_size(), (m - 1) * (n + pad) + n >= 2**31 - 4096
        in_vec, shift = swiglu._align(g.element_size(), n, n + pad), swiglu._align(g.element_size(), pad)
        forms = [(in_vec, False, "before")] + [(shift, True, f"shifted in_vec={shift}")] * (shift > in_vec)
        for (grouped, shifted, name), (block, warps) in itertools.product(
                forms, ((1024, 4), (512, 2), (1024, 2), (2048, 4), (2048, 8))):
            if name == "before" and (block, warps) != (1024, 4):
                continue  # the plan before: one config
            launch = partial(_swiglu_out_vectors[(-(-m * n // block),)], g, u, y, m * n, n, n + pad, n + pad,
                             BLOCK=block, VEC=vec, WIDE=wide, IN_VEC=grouped, SHIFTED=shifted, num_warps=warps)
            label = f"{name} block={block} warps={warps}"
            if _checked(launch, y, ref, f"swiglu.out_vectors {m}x{n} {label}"):
                yield ("swiglu.out_vectors", (m, n), label, launch, moved, False)


@triton.jit
def _silu_mul_approx(g: tl.tensor, u: tl.tensor) -> tl.tensor:
    # silu(g) * u on ex2.approx.ftz and rcp.approx.ftz (no denormal or range fix-ups around the two MUFU ops, which
    # ex2.approx.f32 and div.full.f32 carry): to price the arithmetic, timed only. Inline PTX: GPU only.
    e = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [g * -1.4426950408889634], dtype=tl.float32,
                                  is_pure=True, pack=1)
    r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [1.0 + e], dtype=tl.float32, is_pure=True,
                                  pack=1)
    return g * r * u


@triton.jit
def _shifted_no_tail(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, N: tl.tensor, stride_g: tl.tensor,
                     stride_u: tl.tensor, BLOCK: tl.constexpr, VEC: tl.constexpr, IN_VEC: tl.constexpr,
                     SELECT: tl.constexpr, APPROX: tl.constexpr = False) -> None:
    # swiglu._out_vectors_shifted without its second read (a straddling vector's tail from the next row), full
    # blocks only: WRONG at row ends, timed only, to price that read. SELECT keeps its select (against zeros);
    # APPROX computes silu on _silu_mul_approx.
    first, col, lane, _pad_g, _pad_u, at_g, at_u = _shifted_cells(tl.program_id(0) * BLOCK, N, stride_g, stride_u,
                                                                   BLOCK, VEC, IN_VEC)
    g = tl.load(g_ptr + at_g)
    u = tl.load(u_ptr + at_u)
    if SELECT:
        in_row = col[:, None] + lane < N
        g = tl.where(in_row, g, 0.0)
        u = tl.where(in_row, u, 0.0)
    if APPROX:
        y = _silu_mul_approx(g.to(tl.float32), u.to(tl.float32))
    else:
        y = _silu_mul(g.to(tl.float32), u.to(tl.float32))
    tl.store(y_ptr + tl.multiple_of(first, VEC)[:, None] + lane, y.to(y_ptr.dtype.element_ty))


# odd paddings (the campaigns' hidden `odd` draws of 2026-12-05_cluster_rows/4_* (87% of copy), 2026-12-03_prefetch_l2
# (pad 1), 2026-12-02_owed_checks/4_* first), then even ones on SHIFTED (2- and 6-element runs) and 32 (16-byte runs)
FUNNEL_SHAPES = ((3898, 14017, 21), (2849, 14880, 1), (3399, 14367, 3), (1783, 10131, 1), (4096, 5001, 7),
                 (2048, 14335, 2), (4005, 14385, 6), (3899, 3047, 32))


def swiglu_funnel_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `swiglu_funnel`: padded 16-bit rows on _swiglu_funnel (FUNNEL: 16-byte input reads at any padding,
    funnel shifts where a run starts on an odd element) over block sizes and warps, beside the planned launch (FUNNEL
    at odd paddings, SHIFTED at even ones), the plan before FUNNEL at odd paddings (element reads, 1024 on 4 warps)
    and the flat kernel on contiguous copies (the ceiling); each config checked against fp32 first."""
    from sweep_parity import _checked

    if dtype not in (torch.float16, torch.bfloat16):
        return
    for m, n, pad in FUNNEL_SHAPES:
        g, u, y, ref, moved = _odd_inputs(m, n, pad, dtype, device)
        yield ("swiglu.planned", (m, n), f"planned pad={pad}", partial(swiglu.candidate, g, u), moved, True)
        wide = (m - 1) * (n + pad) + n >= 2**31 - 4096
        if pad % 2:
            before = partial(_swiglu_out_vectors[(-(-m * n // 1024),)], g, u, y, m * n, n, n + pad, n + pad,
                             BLOCK=1024, VEC=8, WIDE=wide, IN_VEC=1, num_warps=4)
            if _checked(before, y, ref, f"swiglu.out_vectors {m}x{n} before"):
                yield ("swiglu.out_vectors", (m, n), f"before: element reads pad={pad}", before, moved, False)
        for block, warps in ((512, 2), (1024, 4), (1024, 2), (2048, 4), (256, 1)):
            launch = partial(swiglu._launch_funnel, _swiglu_funnel[(-(-m * n // block),)], g, u, y, m * n, n,
                             n + pad, n + pad, BLOCK=block, WIDE=wide, num_warps=warps)
            label = f"funnel pad={pad} block={block} warps={warps}"
            if _checked(launch, y, ref, f"swiglu.funnel {m}x{n} {label}"):
                yield ("swiglu.funnel", (m, n), label, launch, moved, False)
        gc, uc = g.contiguous(), u.contiguous()
        yield ("swiglu.flat", (m, n), "contiguous (flat)", partial(swiglu.candidate, gc, uc), moved, False)


# odd widths under paddings of 8 and 2 (SHIFTED planned), each beside an aligned padded shape of about its size (the
# gather kernel) and its contiguous form (the flat kernel)
SHIFTED_PARTS_SHAPES = ((2048, 11007, 8), (3899, 3047, 32), (2048, 14335, 2))


def swiglu_shifted_parts_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `swiglu_shifted_parts`: where SHIFTED's time goes (evidence/h200/2026-12-02_pf_l1_plan/6_*: 16-byte
    runs at 68-80% of copy where the gather kernel reads aligned padded rows at 96%). For each shape: the planned
    SHIFTED launch; the same without its second read, with and without its select, and without both on a cheaper
    silu (ex2/rcp .approx.ftz: an sm_90 build has 144 instructions against 200, 240 with the select; timing only:
    wrong at row ends);
    the gather kernel on rows one element wider, padded to the 16-byte grid; the flat kernel on contiguous rows.
    Written, not yet run."""
    for m, n, pad in SHIFTED_PARTS_SHAPES:
        g, u, y, _ref, moved = _odd_inputs(m, n, pad, dtype, device)
        yield ("swiglu.planned", (m, n), f"planned pad={pad} (shifted)", partial(swiglu.candidate, g, u), moved, True)
        _launch, meta, _flat = swiglu._plan(m, n, n + pad, n + pad, g.element_size(), device)
        block, warps, in_vec = meta["BLOCK"], meta["num_warps"], meta["IN_VEC"]
        full = m * n // block * block  # full blocks only
        for select, approx in ((True, False), (False, False), (False, True)):
            label = f"no second read{', select' if select else ''}{', approx silu' if approx else ''} (wrong)"
            yield ("swiglu.shifted_no_tail", (m, n), label,
                   partial(_shifted_no_tail[(full // block,)], g, u, y, n, n + pad, n + pad, BLOCK=block,
                           VEC=16 // g.element_size(), IN_VEC=in_vec, SELECT=select, APPROX=approx,
                           num_warps=warps), full * 3 * g.element_size(), False)
        wide_n = n + -n % 8  # rounded up to whole vectors, padded by one
        ga, ua, _ya, _ra, moved_a = _odd_inputs(m, wide_n, 8, dtype, device)
        yield ("swiglu.gather", (m, wide_n), f"aligned rows padded by {ga.stride(0) - wide_n} (planned: gather)",
               partial(swiglu.candidate, ga, ua), moved_a, False)
        gc, uc = g.contiguous(), u.contiguous()
        yield ("swiglu.flat", (m, n), "contiguous (planned: flat)", partial(swiglu.candidate, gc, uc), moved, False)
