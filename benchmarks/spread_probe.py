"""Diagnostic (ad hoc): where SPREAD's time goes. Times the resident rms_norm launch (events, 50 calls after warm-up,
table built every call) plain, with SPREAD, with SPREAD and no patience, and with SPREAD forced on whole rounds
(no tail: the build's row loop alone)."""

import functools

import torch

from kernelproof_core.kernels import rms_norm


def timed(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps * 1000


sms, smem = rms_norm._num_sms(torch.device("cuda")), rms_norm._smem_per_sm(torch.device("cuda"))
for m, n in ((372, 46501), (256, 65531), (264, 46501)):
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    plain = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, spread=False)
    spread = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, spread=True)
    rows = {"plain": plain}
    if spread is not None and spread[1].get("SPREAD"):
        rows["spread"] = spread
        rows["spread_p0"] = (spread[0], {**spread[1], "PATIENCE": 0})
        rows["spread_nostagger"] = (spread[0], {**spread[1], "STAGGER": 0})
        rows["plain_nostagger"] = (plain[0], {**plain[1], "STAGGER": 0})
    else:  # whole rounds: SPREAD's build with an empty tail
        rows["spread_build_no_tail"] = (plain[0], {**plain[1], "SPREAD": True, "SPAN": 16, "SLOTS": 4,
                                                   "PATIENCE": 1 << 20})
    moved = 2 * m * n * 2
    for name, plan in rows.items():
        us = timed(functools.partial(rms_norm._run, plan, x, w, y, 1e-6))
        print(f"{m}x{n} {name:22s} {us:7.1f} us {moved / us / 1e3:7.0f} GB/s", flush=True)



def traced(plan, x, w, y):
    """Per-program phase times (us from the first program's start): min / median / max of each stamp."""
    launch, meta = plan
    m, n = x.shape
    programs = min(m, (meta["num_warps"] == 16 and 2 * sms) or sms)
    trace = torch.zeros((programs, 8), dtype=torch.int64, device="cuda")
    extra = {}
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
    t = trace.cpu().double()
    t0 = t[:, 0].min()
    out = []
    for slot in (0, 1, 2, 3, 4):
        col = t[:, slot]
        col = col[col > 0]
        if len(col):
            rel = (col - t0) / 1000
            out.append(f"s{slot} {rel.min():6.1f}/{rel.median():6.1f}/{rel.max():6.1f}")
    return "  ".join(out)


for m, n in ((372, 46501), (256, 65531)):
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    for spread in (False, True):
        plan = rms_norm._resident_plan(m, n, n, sms, smem, per_sm=1, min_fill=0.0, spread=spread)
        for stagger in (2500, 0):
            print(f"trace {m}x{n} spread={int(spread)} stagger={stagger}:",
                  traced((plan[0], {**plan[1], "STAGGER": stagger}), x, w, y), flush=True)
