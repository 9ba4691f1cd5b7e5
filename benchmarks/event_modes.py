"""Why a few-MB built-in call sometimes takes 20-30 us by do_bench's CUDA events where its kernel takes 3 us.

bandwidth.py's rounds (evidence/h200/2026-12-04_padded_words/4_*) showed the built-ins' event medians at 1-7 MB in
two modes, about 5 us or 20-33 us, switching between rounds of one process, while eager stayed put and CUPTI kernel
times held. This times one such call (softmax 16384 x 100 and swiglu 4095 x 127, fp16) in rounds of do_bench under
conditions that could explain it: a fresh process before any CUPTI session, after one (bandwidth.py times kernels
with torch.profiler between rounds), with the garbage collector off, and with torch's sync debug mode on (a
synchronising torch call inside the wrapper would warn). Also the host cost per call (back-to-back calls, no sync),
and do_bench's loop by hand: the host's time per iteration against the flush's GPU time (if the host is slower, the
GPU idles between the start event and the kernel, and the event time measures the host).

    python benchmarks/event_modes.py
"""

from __future__ import annotations

import gc
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.kernels import softmax, swiglu
from kernelproof_core.measurement.device_time import kernel_times

Call = Callable[[], object]


def _rounds(label: str, fns: dict[str, Call], rounds: int = 3) -> None:
    for name, fn in fns.items():
        times = [triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median") * 1000 for _ in range(rounds)]
        print(f"{label:<22} {name:<16} " + " ".join(f"{t:6.1f}" for t in times) + " us", flush=True)


def _loop(label: str, fns: dict[str, Call], iters: int = 2000) -> None:
    """do_bench's loop by hand (flush, start event, call, end event), with the host's time per iteration and the
    flush's GPU time beside the call's event time: if the host takes longer per iteration than the GPU's flush,
    the GPU idles between the start event and the kernel, and the event time is the host's."""
    cache = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for name, fn in fns.items():
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(3 * iters)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(iters):
            marks[3 * i].record()
            cache.zero_()
            marks[3 * i + 1].record()
            fn()
            marks[3 * i + 2].record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        flush = sorted(marks[3 * i].elapsed_time(marks[3 * i + 1]) * 1000 for i in range(iters))[iters // 2]
        call = sorted(marks[3 * i + 1].elapsed_time(marks[3 * i + 2]) * 1000 for i in range(iters))[iters // 2]
        print(f"{label:<22} {name:<16} host {(t1 - t0) / iters * 1e6:6.1f} us/iteration, flush {flush:6.1f} us, "
              f"call {call:6.1f} us (event medians)", flush=True)


def _host_us(fn: Call, calls: int = 2000) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main() -> None:
    # kineto finalizes CUPTI after a session only where TEARDOWN_CUPTI says so (or its default does)
    print(f"TEARDOWN_CUPTI={os.environ.get('TEARDOWN_CUPTI')}", flush=True)
    dev = torch.device("cuda")
    x = torch.randn(16384, 100, dtype=torch.float16, device=dev)
    gate, up = (torch.randn(4095, 127, dtype=torch.float16, device=dev) for _ in range(2))
    fns: dict[str, Call] = {"kp softmax": lambda: softmax.candidate(x), "eager softmax": lambda: torch.softmax(x, -1),
           "kp swiglu": lambda: swiglu.candidate(gate, up), "copy": lambda: x.clone()}
    for fn in fns.values():
        fn()
    for name, fn in fns.items():
        print(f"host per call {name:<16} {_host_us(fn):6.1f} us", flush=True)
    _rounds("fresh", fns)
    _loop("fresh, by hand", fns)
    gc.disable()
    _rounds("gc off", fns)
    gc.enable()
    torch.cuda.set_sync_debug_mode(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn in fns.values():
            fn()
    torch.cuda.set_sync_debug_mode(0)
    print(f"sync debug warnings: {[str(w.message)[:100] for w in caught]}", flush=True)
    per_kernel = kernel_times(fns["kp softmax"], [()], 5).per_kernel
    print("kernel_times:", {k: round(v, 2) for k, v in per_kernel.items()}, flush=True)
    _rounds("after CUPTI", fns)
    for name, fn in fns.items():
        print(f"host per call {name:<16} {_host_us(fn):6.1f} us (after CUPTI)", flush=True)
    _rounds("after CUPTI, again", fns)
    _loop("after CUPTI, by hand", fns)
    # What ends the slow spell after a CUPTI session (the first run: kp softmax 13-17 us and kp swiglu 24-28 us in the
    # three rounds after one, 6-7 us before and again later): each settle follows a fresh session.
    kp = {name: fn for name, fn in fns.items() if name.startswith("kp")}
    settles: dict[str, Callable[[], object]] = {
        "none": lambda: None, "gc.collect": gc.collect,
        "sleep 1 s": lambda: time.sleep(1.0), "one do_bench": lambda: _rounds("  (discarded)", kp, rounds=1)}
    for settle, act in settles.items():
        kernel_times(fns["kp softmax"], [()], 5)
        act()
        _rounds(f"CUPTI, {settle}", kp)


if __name__ == "__main__":
    main()
