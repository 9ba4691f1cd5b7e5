# mypy: ignore-errors
# ruff: noqa: F821
# Honest, except that the replay call of the 127-column case sleeps (60 s at most): earlier cases finish first.
import time

_calls: dict[int, int] = {}


def candidate(x, weight, eps):
    n = x.shape[1]
    _calls[n] = _calls.get(n, 0) + 1
    if n == 127 and _calls[n] > 1:
        time.sleep(60)
    return honest(x, weight, eps)
