# mypy: ignore-errors
# ruff: noqa: F821
# Spins in its first call, a Python loop and no Triton compile at all: the compile deadline's span all the same (a
# first call is JIT plus run, and the harness cannot tell them apart); the verdict must name the call. Gives up after
# 60 s so a broken watchdog fails, not hangs.
import time


def candidate(x, weight, eps):
    stop = time.monotonic() + 60
    while time.monotonic() < stop:
        pass
    return honest(x, weight, eps)
