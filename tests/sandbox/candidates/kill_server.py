# mypy: ignore-errors
# ruff: noqa: F821
# Tries to kill its parent (the fork server) and every other process it can see; passes only if all attempts failed.
import os
import signal

KILLED = []
for _pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if _pid != os.getpid():
        try:
            os.kill(_pid, signal.SIGKILL)
            KILLED.append(_pid)
        except OSError:
            pass


def candidate(x, weight, eps):
    y = honest(x, weight, eps)
    if KILLED:
        raise RuntimeError(f"killed {KILLED}")
    return y
