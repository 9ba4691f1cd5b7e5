"""Why a few-MB built-in call sometimes takes 20-30 us by do_bench's CUDA events where its kernel takes 3 us.

bandwidth.py's rounds (evidence/h200/2026-12-04_padded_words/4_*) showed the built-ins' event medians at 1-7 MB in
two modes, about 5 us or 20-33 us, switching between rounds of one process, while eager stayed put and CUPTI kernel
times held. This times one such call (softmax 16384 x 100 and swiglu 4095 x 127, fp16) in rounds of do_bench under
conditions that could explain it: a fresh process before any CUPTI session, after one (bandwidth.py times kernels
with torch.profiler between rounds), with the garbage collector off, and with torch's sync debug mode on (a
synchronising torch call inside the wrapper would warn). Also the host cost per call (back-to-back calls, no sync).

    python benchmarks/event_modes.py
"""

from __future__ import annotations

import gc
import sys
import time
import warnings
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelproof_core.kernels import softmax, swiglu
from kernelproof_core.measurement.device_time import kernel_times


def _rounds(label: str, fns: dict[str, object], rounds: int = 3) -> None:
    for name, fn in fns.items():
        times = [triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median") * 1000 for _ in range(rounds)]
        print(f"{label:<22} {name:<16} " + " ".join(f"{t:6.1f}" for t in times) + " us", flush=True)


def _host_us(fn: object, calls: int = 2000) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()  # type: ignore[operator]
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main() -> None:
    dev = torch.device("cuda")
    x = torch.randn(16384, 100, dtype=torch.float16, device=dev)
    gate, up = (torch.randn(4095, 127, dtype=torch.float16, device=dev) for _ in range(2))
    fns = {"kp softmax": lambda: softmax.candidate(x), "eager softmax": lambda: torch.softmax(x, -1),
           "kp swiglu": lambda: swiglu.candidate(gate, up), "copy": lambda: x.clone()}
    for fn in fns.values():
        fn()
    for name, fn in fns.items():
        print(f"host per call {name:<16} {_host_us(fn):6.1f} us", flush=True)
    _rounds("fresh", fns)
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
    print("kernel_times:", {k: round(v, 2) for k, v in kernel_times(fns["kp softmax"], [()], 5).items()}, flush=True)
    _rounds("after CUPTI", fns)
    for name, fn in fns.items():
        print(f"host per call {name:<16} {_host_us(fn):6.1f} us (after CUPTI)", flush=True)
    _rounds("after CUPTI, again", fns)


if __name__ == "__main__":
    main()
