# mypy: ignore-errors
# ruff: noqa: F821
# GPU verification only: fails when anything is built into this process's Triton cache after the module loaded (a
# kernel or its C launcher); with compile-ahead both were built by the precompile child and installed before load.
import os
import time

LOADED_NS = time.time_ns()


def candidate(x, weight, eps):
    out = honest(x, weight, eps)
    if not x.is_cuda:  # the precompile child (CPU inputs): compiling is its job
        return out
    cache = os.environ["TRITON_CACHE_DIR"]
    fresh = [f"{d}/{f}" for d in os.listdir(cache) for f in os.listdir(os.path.join(cache, d))
             if os.stat(os.path.join(cache, d, f)).st_mtime_ns >= LOADED_NS]
    if fresh:
        raise RuntimeError(f"compiled after load: {sorted(fresh)[:4]}")
    return out
