# mypy: ignore-errors
# ruff: noqa: F821
# Hunts for a secret the test put in the worker's environment: its own environment, every /proc/*/environ it can
# read, and the parent's. Raises naming what it found.
import os

FOUND = [k for k, v in os.environ.items() if "s3cr3t" in v or "SECRET" in k]
for _pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        with open(f"/proc/{_pid}/environ", "rb") as _f:
            if b"s3cr3t" in _f.read():
                FOUND.append(f"/proc/{_pid}/environ")
    except OSError:
        pass


def candidate(x, weight, eps):
    y = honest(x, weight, eps)
    if FOUND:
        raise RuntimeError(f"secret visible: {FOUND}")
    return y
