"""The speed-of-light reference: the best device-to-device copy bandwidth this GPU delivers right now.

A memory-bound kernel cannot move its bytes faster than the memory system copies them, so the fraction of this
number a kernel reaches is how close it is to the speed of light. One copy method can under-report: the driver's
memcpy left the H200 at 3.7-3.9 TB/s in some worker processes while a plain Triton kernel (and our rms_norm) moved
4.1-4.2 TB/s, which put built-ins above 100% of "the speed of light". So the reference is the best of the driver's
memcpy and a vectorised Triton copy, each timed after a warm-up long enough for clocks to settle, as the median of
batches of back-to-back copies (one event pair per batch, so launch gaps are amortised).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable

import torch
import triton
import triton.language as tl

log = logging.getLogger(__name__)

WARMUP_S = 0.2  # long enough for the SM and memory clocks to leave any idle state
COPIES_PER_BATCH = 5
_BLOCK = 4096  # int32 per program: 16 KB, 32 per thread at 4 warps (eight 16-byte vectors)


@triton.jit
def _copy(src_ptr: tl.tensor, dst_ptr: tl.tensor, n: tl.tensor, BLOCK: tl.constexpr) -> None:
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _methods(src: torch.Tensor, dst: torch.Tensor, use_triton: bool) -> dict[str, Callable[[], object]]:
    methods: dict[str, Callable[[], object]] = {"memcpy": lambda: dst.copy_(src)}
    if use_triton:
        s32, d32 = src.view(torch.int32), dst.view(torch.int32)
        grid = (triton.cdiv(s32.numel(), _BLOCK),)
        methods["triton"] = lambda: _copy[grid](s32, d32, s32.numel(), BLOCK=_BLOCK, num_warps=4)
    return methods


def _median_batch_s(copy: Callable[[], object], repeats: int, warmup_s: float) -> float:
    deadline = time.perf_counter() + warmup_s
    for i in itertools.count():
        copy()
        torch.cuda.synchronize()
        if i >= 2 and time.perf_counter() >= deadline:
            break
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(COPIES_PER_BATCH):
            copy()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0 / COPIES_PER_BATCH)
    times.sort()
    return times[len(times) // 2]


def measure_copy_gbps(nbytes: int, repeats: int, use_triton: bool = True,
                      warmup_s: float = WARMUP_S) -> dict[str, float]:
    """GB/s (bytes read plus written) per copy method on the current CUDA device, after at least three warm-up
    copies and `warmup_s` seconds of them."""
    nbytes -= nbytes % 16
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    result = {}
    for name, copy in _methods(src, dst, use_triton).items():
        try:
            result[name] = 2 * nbytes / _median_batch_s(copy, repeats, warmup_s) / 1e9
        except Exception as exc:  # a method that cannot run here is left out, not fatal
            log.warning("copy bandwidth: %s unavailable: %s", name, exc)
    log.info("copy bandwidth (GB/s, read+write): %s", {k: round(v) for k, v in result.items()})
    return result
