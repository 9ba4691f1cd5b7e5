"""Kernel designs under evaluation: swept by kernel_sweep.py on the H200, not shipped until they win there.

`rms_norm_split`: the built-in rms_norm's split path (kernelproof_core/kernels/rms_norm.py) with explicit chunk
and warps, for the sweep.

`rms_norm_split_persistent`: the split path on a persistent grid, for rows too wide for one program (the split
path reaches 63-67% of copy at 40000-65536 wide, where one program per 8192-wide row reaches 93-96%). In the split
path every chunk's program waits for the row's last chunk to be dispatched and loaded, and it is dispatched only when
an earlier program leaves: residency stretches and fewer bytes are in flight. Here groups of n_parts programs, all
resident from the start, walk rows g, g + G, ...; each program keeps its chunk of the weight and, with PREFETCH,
issues its next row's loads before publishing and waiting on the current one, so HBM reads stay in flight through
the rendezvous. The grid never exceeds what the compiled kernel's registers let be resident at once (a program that
is never scheduled would leave its group spinning forever). `softmax_split_persistent` is the same walk for the
softmax split path (65-72% of copy at 65536-131072 wide): each chunk publishes (max, sum of exp) per row.

`rms_norm_split_realigned`: the split path for contiguous rows whose length is not a multiple of a 16-byte vector
(40-43% of copy at 64803 and 24577 wide: every access scalar, since neither row starts nor masks line up). Chunks are
cut at 16-byte boundaries of the whole tensor rather than of the row, so a chunk wholly inside its row loads and
stores x and y with full-width unmasked vectors; only the two chunks a row boundary crosses use masked scalar
accesses. The weight, indexed by column, is read with scalar loads; with `shifted_weight`, a small kernel first
writes VEC copies of it, copy s starting s elements late, so that the chunks of a row of shift s read copy s with
vectors too (one more launch and VEC x N elements written per call).

`softmax_pipelined`, `rms_norm_pipelined`: for rows of 4K-32K elements, where the built-ins hold one row per program
and only one or two programs fit per SM, so each SM alternates loads, a reduction and stores with nothing overlapping
(softmax 72-77% of copy bandwidth at 16K-32K wide, rms_norm 89% at 4096). A persistent grid (programs_per_sm x SMs
programs) walks rows pid, pid + P, ...; each program issues its next row's loads before reducing and storing the
current one, so HBM reads stay in flight through the reduction. PREFETCH=False is the same walk without it (the A/B);
PACKED moves 16-bit rows as int32 pairs so the prefetched words stay untouched until their turn (ptxas otherwise
unpacks them, waiting on the loads, inside the current row's reduction at some widths).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelproof_core.kernels import rms_norm
from kernelproof_core.kernels.rms_norm import _align, _num_sms, _rms_norm_split
from kernelproof_core.kernels.swiglu import _halves  # int32 lanes of two 16-bit values -> the two as fp32

_MAX_PIPELINED_N = 32768  # widest row the pipelined kernels hold in registers


# The built-in softmax's pipelined kernel with its A/B switches: PREFETCH=False (no look-ahead) and PACKED. The
# built-in keeps only the shipped form (PREFETCH on, PACKED off).
@triton.jit
def _pack(lo: tl.tensor, hi: tl.tensor, DTYPE: tl.constexpr) -> tl.tensor:
    """Inverse of _halves: two fp32 tensors rounded to the 16-bit DTYPE, packed into int32 lanes."""
    lo16 = lo.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    hi16 = hi.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) << 16
    return lo16 | hi16


@triton.jit
def _softmax_pipelined(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                       BLOCK_N: tl.constexpr, PREFETCH: tl.constexpr, PACKED: tl.constexpr,
                       ALIGN: tl.constexpr) -> None:
    # Persistent: program p takes rows p, p + P, ... With PREFETCH the next row's loads are issued before the current
    # row is reduced and stored, kept in the input dtype until its turn (one or two programs fit per SM: without it
    # each SM idles HBM through every reduction and store). PACKED (16-bit, even N and stride; swept, not shipped):
    # rows move as int32 lanes of two elements, so nothing unpacks the prefetched row (waiting on its loads) early.
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    PER: tl.constexpr = 2 if PACKED else 1  # elements per lane
    src = x_ptr.to(tl.pointer_type(tl.int32)) if PACKED else x_ptr
    dst = y_ptr.to(tl.pointer_type(tl.int32)) if PACKED else y_ptr
    fill = 0 if PACKED else float("-inf")  # packed: masked lanes are set to -inf once unpacked
    lanes = tl.arange(0, BLOCK_N // PER)
    n_lanes = (N // ALIGN) * (ALIGN // PER)
    lane_stride = (stride_x // ALIGN) * (ALIGN // PER)
    mask = lanes < n_lanes
    step = tl.num_programs(0)
    row = tl.program_id(0)
    if PREFETCH:
        nxt = tl.load(src + row.to(tl.int64) * lane_stride + lanes, mask=mask & (row < M), other=fill)
    # while, not range(): Triton 3.6's interpreter cannot iterate range() over a runtime bound under NumPy 2.x.
    while row < M:
        if PREFETCH:
            v = nxt
            ahead = row + step
            # past the last row: fully masked, so no memory traffic; the values are never used
            nxt = tl.load(src + ahead.to(tl.int64) * lane_stride + lanes, mask=mask & (ahead < M), other=fill)
        else:
            v = tl.load(src + row.to(tl.int64) * lane_stride + lanes, mask=mask, other=fill)
        if PACKED:
            lo, hi = _halves(v, x_ptr.dtype.element_ty)
            lo = tl.where(mask, lo, float("-inf"))
            hi = tl.where(mask, hi, float("-inf"))
            m = tl.max(tl.maximum(lo, hi), axis=0)
            e_lo = tl.exp(lo - m)
            e_hi = tl.exp(hi - m)
            inv = 1.0 / tl.sum(e_lo + e_hi, axis=0)
            out = _pack(e_lo * inv, e_hi * inv, y_ptr.dtype.element_ty)
        else:
            x = v.to(tl.float32)
            e = tl.exp(x - tl.max(x, axis=0))
            out = (e * (1.0 / tl.sum(e, axis=0))).to(y_ptr.dtype.element_ty)
        tl.store(dst + row.to(tl.int64) * n_lanes + lanes, out, mask=mask)
        row += step


def rms_norm_split(x: torch.Tensor, weight: torch.Tensor, eps: float, chunk: int, warps: int,
                   y: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm over the last dim of a 2-D x with unit column stride, `chunk` elements per program."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    n_parts = triton.cdiv(n, chunk)
    partials = torch.empty((m, n_parts), dtype=torch.float32, device=x.device)
    done = torch.zeros((m,), dtype=torch.int32, device=x.device)
    _rms_norm_split[(m * n_parts,)](x, weight, y, partials, done, n, x.stride(0), eps, n_parts, CHUNK=chunk,
                                    BLOCK_S=triton.next_power_of_2(n_parts),
                                    ALIGN=_align(x.element_size(), n, x.stride(0)), num_warps=warps)
    return y


@triton.jit
def _rms_norm_pipelined(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor,
                        stride_x: tl.tensor, eps: tl.tensor, BLOCK_N: tl.constexpr, PREFETCH: tl.constexpr,
                        PACKED: tl.constexpr, ALIGN: tl.constexpr) -> None:
    # The walk, prefetch and packing of _softmax_pipelined; the weight is loaded once per program, before the loop.
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    PER: tl.constexpr = 2 if PACKED else 1  # elements per lane
    src = x_ptr.to(tl.pointer_type(tl.int32)) if PACKED else x_ptr
    dst = y_ptr.to(tl.pointer_type(tl.int32)) if PACKED else y_ptr
    lanes = tl.arange(0, BLOCK_N // PER)
    n_lanes = (N // ALIGN) * (ALIGN // PER)
    lane_stride = (stride_x // ALIGN) * (ALIGN // PER)
    mask = lanes < n_lanes
    if PACKED:  # any weight dtype: its even and odd elements, once per program
        w_lo = tl.load(w_ptr + 2 * lanes, mask=mask, other=0.0).to(tl.float32)
        w_hi = tl.load(w_ptr + 2 * lanes + 1, mask=mask, other=0.0).to(tl.float32)
    else:
        w = tl.load(w_ptr + lanes, mask=mask, other=0.0).to(tl.float32)
    step = tl.num_programs(0)
    row = tl.program_id(0)
    if PREFETCH:
        nxt = tl.load(src + row.to(tl.int64) * lane_stride + lanes, mask=mask & (row < M), other=0)
    while row < M:
        if PREFETCH:
            v = nxt
            ahead = row + step
            nxt = tl.load(src + ahead.to(tl.int64) * lane_stride + lanes, mask=mask & (ahead < M), other=0)
        else:
            v = tl.load(src + row.to(tl.int64) * lane_stride + lanes, mask=mask, other=0)
        if PACKED:
            lo, hi = _halves(v, x_ptr.dtype.element_ty)
            inv = tl.rsqrt(tl.sum(lo * lo + hi * hi, axis=0) / N + eps)
            out = _pack(lo * inv * w_lo, hi * inv * w_hi, y_ptr.dtype.element_ty)
        else:
            x = v.to(tl.float32)
            inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
            out = (x * inv * w).to(y_ptr.dtype.element_ty)
        tl.store(dst + row.to(tl.int64) * n_lanes + lanes, out, mask=mask)
        row += step


def _pipelined_meta(x: torch.Tensor, programs_per_sm: int, warps: int, prefetch: bool,
                    packed: bool) -> tuple[int, dict[str, int | bool]]:
    """(programs, launch meta) for a pipelined kernel over a 2-D x with unit column stride."""
    m, n = x.shape
    if n > _MAX_PIPELINED_N:
        raise ValueError(f"the pipelined kernels hold a row in registers: N <= {_MAX_PIPELINED_N}, got {n}")
    align = _align(x.element_size(), n, x.stride(0))
    if packed and (x.element_size() != 2 or align < 2):
        raise ValueError("packed rows need a 16-bit dtype and an even row length and stride")
    programs = min(m, programs_per_sm * _num_sms(x.device))
    return programs, {"BLOCK_N": triton.next_power_of_2(n), "PREFETCH": prefetch, "PACKED": packed, "ALIGN": align,
                      "num_warps": warps}


def softmax_pipelined(x: torch.Tensor, programs_per_sm: int, warps: int, prefetch: bool = True,
                      y: torch.Tensor | None = None, packed: bool = False) -> torch.Tensor:
    """Softmax over the last dim of a 2-D x (any row stride, N <= 32768) on a persistent grid of
    programs_per_sm x SMs programs (at most one per row); the result is a new contiguous tensor, or y."""
    if x.stride(1) != 1:
        x = x.contiguous()
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    if m == 0 or n == 0:
        return y
    programs, meta = _pipelined_meta(x, programs_per_sm, warps, prefetch, packed)
    _softmax_pipelined[(programs,)](x, y, m, n, x.stride(0), **meta)
    return y


def rms_norm_pipelined(x: torch.Tensor, weight: torch.Tensor, eps: float, programs_per_sm: int, warps: int,
                       prefetch: bool = True, y: torch.Tensor | None = None, packed: bool = False) -> torch.Tensor:
    """RMSNorm over the last dim of a 2-D x (any row stride, N <= 32768) on a persistent grid of
    programs_per_sm x SMs programs (at most one per row); the result is a new contiguous tensor, or y."""
    if x.stride(1) != 1:
        x = x.contiguous()
    if weight.stride(0) != 1:
        weight = weight.contiguous()
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    if m == 0 or n == 0:
        return y
    programs, meta = _pipelined_meta(x, programs_per_sm, warps, prefetch, packed)
    _rms_norm_pipelined[(programs,)](x, weight, y, m, n, x.stride(0), eps, **meta)
    return y


@triton.jit
def _rms_norm_split_persistent(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor,
                               count_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor, eps: tl.tensor,
                               n_parts: tl.tensor, n_groups: tl.tensor, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
                               ALIGN: tl.constexpr, PREFETCH: tl.constexpr) -> None:
    # The rendezvous of _rms_norm_split (publish the chunk's sum of squares, release; wait for the row's count,
    # acquire), per row of a persistent walk. Compiled GPUs only: the interpreter runs programs one after another.
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    pid = tl.program_id(0)
    part = pid % n_parts
    cols = part * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    slots = tl.arange(0, BLOCK_S)
    row = pid // n_parts
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask & (row < M), other=0.0)
    while row < M:
        ahead = row + n_groups
        if PREFETCH:
            x_next = tl.load(x_ptr + ahead.to(tl.int64) * stride_x + cols, mask=mask & (ahead < M), other=0.0)
        xf = x.to(tl.float32)
        at = part_ptr + row.to(tl.int64) * n_parts
        tl.store(at + part, tl.sum(xf * xf, axis=0))
        tl.debug_barrier()
        tl.atomic_add(count_ptr + row, 1, sem="release")
        while tl.atomic_add(count_ptr + row, 0, sem="acquire") < n_parts:
            pass
        tl.debug_barrier()
        sq = tl.load(at + slots, mask=slots < n_parts, other=0.0, cache_modifier=".cg")
        inv = tl.rsqrt(tl.sum(sq, axis=0) / N + eps)
        tl.store(y_ptr + row.to(tl.int64) * N + cols, (xf * inv * w).to(y_ptr.dtype.element_ty), mask=mask)
        if PREFETCH:
            x = x_next
        else:
            x = tl.load(x_ptr + ahead.to(tl.int64) * stride_x + cols, mask=mask & (ahead < M), other=0.0)
        row = ahead


def _resident_per_sm(compiled: object, warps: int) -> int:
    """Programs of a compiled kernel that fit on one SM at once (rms_norm._resident_per_sm's count), after loading
    its module: compiled by warmup(), not launched, its registers are not known before."""
    load = getattr(compiled, "_init_handles", None)
    if callable(load):  # Triton loads a module lazily; benchmarks are not candidates, so the private call is allowed
        load()
    return rms_norm._resident_per_sm(compiled, warps)


def rms_norm_split_persistent(x: torch.Tensor, weight: torch.Tensor, eps: float, chunk: int, warps: int,
                              programs_per_sm: int = 1, prefetch: bool = True,
                              y: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm over the last dim of a 2-D x with unit column stride on a persistent grid of groups of
    cdiv(N, chunk) programs, at most `programs_per_sm` x SMs programs and never more than can be resident."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    n_parts = triton.cdiv(n, chunk)
    partials = torch.empty((m, n_parts), dtype=torch.float32, device=x.device)
    done = torch.zeros((m,), dtype=torch.int32, device=x.device)
    meta: dict[str, int | bool] = {"CHUNK": chunk, "BLOCK_S": triton.next_power_of_2(n_parts),
                                   "ALIGN": _align(x.element_size(), n, x.stride(0)), "PREFETCH": prefetch,
                                   "num_warps": warps}
    args = (x, weight, y, partials, done, m, n, x.stride(0), eps, n_parts)
    n_groups = _persistent_groups(_rms_norm_split_persistent, args, meta, m, n_parts, warps, programs_per_sm,
                                  x.device)
    _rms_norm_split_persistent[(n_groups * n_parts,)](*args, n_groups, **meta)
    return y


@triton.jit
def _softmax_split_persistent(x_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor,
                              M: tl.tensor, N: tl.tensor, stride_x: tl.tensor, n_parts: tl.tensor, n_groups: tl.tensor,
                              CHUNK: tl.constexpr, BLOCK_S: tl.constexpr, ALIGN: tl.constexpr,
                              PREFETCH: tl.constexpr) -> None:
    # The rendezvous of the built-in _softmax_split, per row of a persistent walk (see _rms_norm_split_persistent).
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    pid = tl.program_id(0)
    part = pid % n_parts
    cols = part * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    slots = tl.arange(0, BLOCK_S)
    part_mask = slots < n_parts
    row = pid // n_parts
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask & (row < M), other=float("-inf"))
    while row < M:
        ahead = row + n_groups
        if PREFETCH:
            x_next = tl.load(x_ptr + ahead.to(tl.int64) * stride_x + cols, mask=mask & (ahead < M),
                             other=float("-inf"))
        xf = x.to(tl.float32)
        m_loc = tl.max(xf, axis=0)
        m_safe = tl.where(m_loc == float("-inf"), 0.0, m_loc)  # an all -inf chunk: (max=-inf, sum=0)
        e = tl.exp(xf - m_safe)
        at = part_ptr + row.to(tl.int64) * n_parts
        tl.store(at + part, m_loc)
        tl.store(at + M * n_parts + part, tl.sum(e, axis=0))
        tl.debug_barrier()
        tl.atomic_add(count_ptr + row, 1, sem="release")
        while tl.atomic_add(count_ptr + row, 0, sem="acquire") < n_parts:
            pass
        tl.debug_barrier()
        m_part = tl.load(at + slots, mask=part_mask, other=float("-inf"), cache_modifier=".cg")
        s_part = tl.load(at + M * n_parts + slots, mask=part_mask, other=0.0, cache_modifier=".cg")
        m = tl.max(m_part, axis=0)
        scale = tl.exp(m_safe - m) / tl.sum(s_part * tl.exp(m_part - m), axis=0)
        tl.store(y_ptr + row.to(tl.int64) * N + cols, (e * scale).to(y_ptr.dtype.element_ty), mask=mask)
        if PREFETCH:
            x = x_next
        else:
            x = tl.load(x_ptr + ahead.to(tl.int64) * stride_x + cols, mask=mask & (ahead < M), other=float("-inf"))
        row = ahead


def _persistent_groups(kernel: triton.JITFunction, args: tuple[object, ...], meta: dict[str, int | bool],
                       m: int, n_parts: int, warps: int, programs_per_sm: int, device: torch.device) -> int:
    """Groups of n_parts programs for a persistent split kernel: at most programs_per_sm x SMs programs, never more
    than the compiled kernel lets be resident at once, at most one group per row."""
    sms = _num_sms(device)
    if isinstance(kernel, triton.JITFunction):  # compiled: cap at what can be resident
        compiled = kernel.warmup(*args, 1, grid=(1,), **meta)
        resident = min(programs_per_sm, _resident_per_sm(compiled, warps)) * sms
    else:  # the interpreter runs programs in turn: only one program per row can meet its row (tests)
        resident = programs_per_sm * sms
    n_groups = min(m, resident // n_parts)
    if n_groups < 1:
        raise ValueError(f"{n_parts} programs per row do not fit on the device at once ({resident} resident)")
    return n_groups


def softmax_split_persistent(x: torch.Tensor, chunk: int, warps: int, programs_per_sm: int = 1,
                             prefetch: bool = True, y: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dim of a 2-D x with unit column stride on a persistent grid (see
    rms_norm_split_persistent)."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    n_parts = triton.cdiv(n, chunk)
    partials = torch.empty((2, m, n_parts), dtype=torch.float32, device=x.device)
    done = torch.zeros((m,), dtype=torch.int32, device=x.device)
    meta: dict[str, int | bool] = {"CHUNK": chunk, "BLOCK_S": triton.next_power_of_2(n_parts),
                                   "ALIGN": _align(x.element_size(), n, x.stride(0)), "PREFETCH": prefetch,
                                   "num_warps": warps}
    args = (x, y, partials, done, m, n, x.stride(0), n_parts)
    n_groups = _persistent_groups(_softmax_split_persistent, args, meta, m, n_parts, warps, programs_per_sm,
                                  x.device)
    _softmax_split_persistent[(n_groups * n_parts,)](*args, n_groups, **meta)
    return y


@triton.jit
def _rms_norm_split_realigned(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor,
                              count_ptr: tl.tensor, N: tl.tensor, eps: tl.tensor, n_parts: tl.tensor,
                              w_pitch: tl.tensor, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr, VEC: tl.constexpr,
                              SHIFTED_W: tl.constexpr) -> None:
    # Contiguous rows (x and y share offsets). Program `part` of a row covers the tensor's elements
    # [aligned row start + part * CHUNK, + CHUNK), the aligned row start being the row's first element rounded down
    # to a multiple of VEC; columns outside the row are masked off (only where a chunk crosses a row boundary).
    pid = tl.program_id(0)
    row = pid // n_parts
    part = pid % n_parts
    base = row.to(tl.int64) * N
    shift = (base % VEC).to(tl.int32)
    start = tl.multiple_of(base - shift + part * CHUNK, VEC)
    lanes = tl.arange(0, CHUNK)
    col0 = part * CHUNK - shift  # the row column of lane 0
    if SHIFTED_W:  # copy `shift` holds w[c] at c + shift: this chunk's weights start on a vector boundary
        w_at = w_ptr + tl.multiple_of(shift * w_pitch + part * CHUNK, VEC)
    else:
        w_at = w_ptr + col0
    interior = (col0 >= 0) & (col0 + CHUNK <= N)
    if interior:
        x = tl.load(x_ptr + start + lanes).to(tl.float32)
        w = tl.load(w_at + lanes).to(tl.float32)
    else:
        edge = (col0 + lanes >= 0) & (col0 + lanes < N)
        x = tl.load(x_ptr + start + lanes, mask=edge, other=0.0).to(tl.float32)
        w = tl.load(w_at + lanes, mask=edge, other=0.0).to(tl.float32)
    at = part_ptr + row.to(tl.int64) * n_parts
    tl.store(at + part, tl.sum(x * x, axis=0))
    tl.debug_barrier()
    tl.atomic_add(count_ptr + row, 1, sem="release")
    while tl.atomic_add(count_ptr + row, 0, sem="acquire") < n_parts:
        pass
    tl.debug_barrier()
    slots = tl.arange(0, BLOCK_S)
    sq = tl.load(at + slots, mask=slots < n_parts, other=0.0, cache_modifier=".cg")
    y = (x * tl.rsqrt(tl.sum(sq, axis=0) / N + eps) * w).to(y_ptr.dtype.element_ty)
    if interior:
        tl.store(y_ptr + start + lanes, y)
    else:
        tl.store(y_ptr + start + lanes, y, mask=(col0 + lanes >= 0) & (col0 + lanes < N))


@triton.jit
def _shift_weight(w_ptr: tl.tensor, out_ptr: tl.tensor, N: tl.tensor, w_pitch: tl.tensor, BLOCK: tl.constexpr) -> None:
    # Program (s, b): copy s of the weight, elements b * BLOCK ..., written s elements late (out[s, c + s] = w[c]).
    s = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    tl.store(out_ptr + s * w_pitch + s + cols, tl.load(w_ptr + cols, mask=mask, other=0.0), mask=mask)


def rms_norm_split_realigned(x: torch.Tensor, weight: torch.Tensor, eps: float, chunk: int, warps: int,
                             y: torch.Tensor | None = None, shifted_weight: bool = False) -> torch.Tensor:
    """RMSNorm over the last dim of a contiguous 2-D x, chunks cut at 16-byte boundaries of the whole tensor."""
    if not x.is_contiguous() or not weight.is_contiguous():
        raise ValueError("the realigned split path needs contiguous rows (x and y share element offsets)")
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    vec = 16 // x.element_size()
    n_parts = triton.cdiv(n + vec - 1, chunk)  # a row starting up to vec - 1 past a boundary spans one more chunk
    partials = torch.empty((m, n_parts), dtype=torch.float32, device=x.device)
    done = torch.zeros((m,), dtype=torch.int32, device=x.device)
    pitch = triton.cdiv(n + vec, vec) * vec  # a copy's length, a whole number of vectors
    w = weight
    if shifted_weight:
        w = torch.empty((vec, pitch), dtype=weight.dtype, device=x.device)
        _shift_weight[(vec, triton.cdiv(n, 1024))](weight, w, n, pitch, BLOCK=1024)
    _rms_norm_split_realigned[(m * n_parts,)](x, w, y, partials, done, n, eps, n_parts, pitch, CHUNK=chunk,
                                              BLOCK_S=triton.next_power_of_2(n_parts), VEC=vec,
                                              SHIFTED_W=shifted_weight, num_warps=warps)
    return y
