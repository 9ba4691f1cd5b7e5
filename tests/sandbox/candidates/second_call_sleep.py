# mypy: ignore-errors
# ruff: noqa: F821
# Correct on the first (compile) call, then sleeps in the replay call: the execution deadline's span.
import time

_calls = [0]


def candidate(x, weight, eps):
    _calls[0] += 1
    if _calls[0] > 1:
        time.sleep(60)
    return honest(x, weight, eps)
