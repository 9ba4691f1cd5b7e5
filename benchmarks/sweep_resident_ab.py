"""kernel_sweep.py family `softmax_resident_ab`: an ablation of the two instruction cuts in the built-in softmax's
resident kernel, on a copy of that kernel with each cut behind a flag. FOLD: the normalisation folded into the
exponent (2^(x log2 e - (max log2 e + log2 sum)) instead of 2^(x log2 e - max log2 e) * (1 / sum)); LASTMASK: column
masks on the row's last chunk only (every other chunk is whole). Each variant is checked against fp32 before it is
timed, beside the built-in's planned launch (both cuts). H200, bf16 (evidence/h200/2026-12-01_fused_rows/3_*):
+1.4 to +2.7 points for both together at 40000-131072 wide."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from resident_common import _slot
from sweep_common import Trial
from sweep_resident import _correct, inputs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

from kernelproof_core.kernels import softmax
from kernelproof_core.kernels.softmax import _LOG2E

SHAPES = ((1024, 40000), (1024, 65536), (1024, 131072))


@gluon.jit
def _two_pass(x_ptr: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor, stride_x: gl.tensor,
              NCHUNK: gl.constexpr, RES_A: gl.constexpr, RES_B: gl.constexpr, K: gl.constexpr, ALIGN: gl.constexpr,
              FOLD: gl.constexpr, LASTMASK: gl.constexpr) -> None:
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 32 * W
    CHUNK: gl.constexpr = T * K
    NRES: gl.constexpr = RES_A + RES_B
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [W, 1], [1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    smem_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf_a = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [RES_A * T, K], smem_layout)
    buf_b = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [max(RES_B, 1) * T, K], smem_layout)
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    offs = (gl.arange(0, T, layout=rows_layout) * K)[:, None] + gl.arange(0, K, layout=gl.SliceLayout(0, layout))[
        None, :]
    step = gl.num_programs(0)
    row = gl.program_id(0)
    for c in gl.static_range(NRES):
        cols = c * CHUNK + offs
        cp.async_copy_global_to_shared(_slot(buf_a, buf_b, c, RES_A, T), x_ptr + row.to(gl.int64) * stride_x + cols,
                                       mask=(cols < N) & (row < M))
        cp.commit_group()
    while row < M:
        x_row = x_ptr + row.to(gl.int64) * stride_x
        m_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
        s_t = gl.zeros([T], gl.float32, rows_layout)
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            if c < NRES:
                cp.wait_group(NRES - 1 - c)
                x = _slot(buf_a, buf_b, c, RES_A, T).load(layout).to(gl.float32)
                if not LASTMASK or c == NCHUNK - 1:
                    x = gl.where(cols < N, x, float("-inf"))
            else:
                x = gl.load(x_row + cols, mask=cols < N, other=float("-inf"),
                            eviction_policy="evict_last").to(gl.float32)
            m_new = gl.maximum(m_t, gl.max(x, axis=1))
            m_safe = gl.where(m_new == float("-inf"), 0.0, m_new) * _LOG2E
            s_t = s_t * gl.exp2(m_t * _LOG2E - m_safe) + gl.sum(gl.exp2(x * _LOG2E - m_safe[:, None]), axis=1)
            m_t = m_new
        m2 = gl.max(m_t, axis=0) * _LOG2E
        total = gl.sum(s_t * gl.exp2(m_t * _LOG2E - m2), axis=0)
        inv = 1.0 / total
        shift = m2 + gl.log2(total)
        y_row = y_ptr + row.to(gl.int64) * N
        ahead = row + step
        a_row = x_ptr + ahead.to(gl.int64) * stride_x
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            if c < NRES:
                x = _slot(buf_a, buf_b, c, RES_A, T).load(layout).to(gl.float32)
                if not LASTMASK or c == NCHUNK - 1:
                    cp.async_copy_global_to_shared(_slot(buf_a, buf_b, c, RES_A, T), a_row + cols,
                                                   mask=(cols < N) & (ahead < M))
                else:
                    cp.async_copy_global_to_shared(_slot(buf_a, buf_b, c, RES_A, T), a_row + cols, mask=ahead < M)
                cp.commit_group()
            else:
                x = gl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_first").to(gl.float32)
            if FOLD:
                y = gl.exp2(x * _LOG2E - shift)
            else:
                y = gl.exp2(x * _LOG2E - m2) * inv
            gl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)
        row = ahead
    cp.wait_group(0)


def softmax_resident_ab_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """The planned resident launch (both cuts) against the kernel without one or both, at default configs."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    for m, n in SHAPES:
        x, y, ref, moved = inputs(m, n, dtype, device)
        es = x.element_size()
        plan = softmax._resident_plan(m, n, softmax._align(es, n, n), es, sms, smem)
        if plan is None:
            print(f"softmax.resident {m}x{n}: not applicable", flush=True)
            return
        launch, meta = plan
        grid = (min(m, (2 if meta["num_warps"] == 8 else 1) * sms),)
        variants = [("planned", partial(launch, x, y, m, n, n, **meta))]
        # the planned slots in this kernel's two power-of-two buffers (every shape here splits exactly)
        res_a = 1 << (meta["NRES"].bit_length() - 1)
        ab_meta = {"NCHUNK": meta["NCHUNK"], "RES_A": res_a, "RES_B": meta["NRES"] - res_a, "K": meta["K"],
                   "ALIGN": meta["ALIGN"], "num_warps": meta["num_warps"]}
        for fold, lastmask in ((False, False), (False, True), (True, False)):
            variants.append((f"fold={int(fold)} lastmask={int(lastmask)}",
                             partial(_two_pass[grid], x, y, m, n, n, **ab_meta, FOLD=fold, LASTMASK=lastmask)))
        for label, run in variants:
            y.fill_(float("nan"))
            run()
            if _correct(y, ref, f"softmax.resident_ab {m}x{n} {label}"):
                yield ("softmax.resident_ab", (m, n), label, run, moved, label == "planned")
