"""Diagnostic: where rms_norm's SPREAD (resident kernel, the rows past the last whole round cut over every program)
spends its time. Times the resident launch as the built-in calls it (CUDA events over 50 calls after warm-up, the
weight table built every call) plain, with SPREAD (the tail last; first: SPREAD 2), with SPREAD and no patience
(every tail sum recomputed), without STAGGER, and SPREAD's build on whole rounds (an empty tail: its row loop
alone); then prints per-program phase times from the kernel's TRACE stamps (%globaltimer, us from the first
program's start, min / median / max): s0 start, s1 whole rows done, s2 tail published, s3 tail met, s4 end. Needs
CUDA; run on the device as gpu-check runs scripts (wheels installed, PYTHONPATH set)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from kernelproof_core.kernels import rms_norm


def timed(fn: Callable[[], object], reps: int = 50) -> float:
    """Mean microseconds a call, by CUDA events around `reps` back-to-back calls after 5 warm-up calls."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1000


def traced(plan: rms_norm.Launch, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, programs: int) -> str:
    """The launch with TRACE on (third call of three): each phase stamp's min / median / max over the programs."""
    launch, meta = plan
    m, n = x.shape
    trace = torch.zeros((programs, 8), dtype=torch.int64, device="cuda")
    extra: dict[str, object] = {}
    if meta.get("SPREAD"):
        words = torch.empty((m * meta["SLOTS"],), dtype=torch.int64, device="cuda")
        table = rms_norm._weight_table(w, meta["WT"], words.view(torch.int32))
        extra["s_ptr"] = words
    else:
        table = rms_norm._weight_table(w, meta["WT"])
    for _ in range(3):
        trace.zero_()
        launch(x, table, y, m, n, n, 1e-6, trace_ptr=trace, TRACE=True, **extra, **meta)
    torch.cuda.synchronize()
    stamps = trace.cpu().double()
    t0 = stamps[:, 0].min()
    out = []
    for slot in range(5):
        col = stamps[:, slot]
        col = col[col > 0]
        if len(col):
            rel = (col - t0) / 1000
            out.append(f"s{slot} {rel.min():6.1f}/{rel.median():6.1f}/{rel.max():6.1f}")
    return "  ".join(out)


def main() -> None:
    device = torch.device("cuda")
    sms, smem = rms_norm._num_sms(device), rms_norm._smem_per_sm(device)
    for m, n in ((372, 46501), (256, 65531), (264, 46501)):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, spread=False)
        spread = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, spread=1)
        first = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, spread=2)
        assert plain is not None and spread is not None and first is not None
        rows: dict[str, rms_norm.Launch] = {"plain": plain, "plain_nostagger": (plain[0], {**plain[1], "STAGGER": 0})}
        if spread[1].get("SPREAD"):
            rows["spread"] = spread
            rows["spread_patience0"] = (spread[0], {**spread[1], "PATIENCE": 0})
            rows["spread_nostagger"] = (spread[0], {**spread[1], "STAGGER": 0})
            if first[1].get("SPREAD") == 2:
                rows["spread_first"] = first
        else:  # whole rounds: SPREAD's build with an empty tail
            rows["spread_build_no_tail"] = (plain[0], {**plain[1], "SPREAD": True, "SPAN": 16, "SLOTS": 4,
                                                       "PATIENCE": 1 << 20})
        moved = 2 * m * n * 2
        for name, launch in rows.items():
            us = timed(functools.partial(rms_norm._run, launch, x, w, y, 1e-6))
            print(f"{m}x{n} {name:22s} {us:7.1f} us {moved / us / 1e3:7.0f} GB/s", flush=True)
        for name in ("plain", "spread", "spread_first"):
            if name in rows:
                print(f"trace {m}x{n} {name:8s}", traced(rows[name], x, w, y, min(m, sms)), flush=True)


if __name__ == "__main__":
    main()
