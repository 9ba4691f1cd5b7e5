# mypy: ignore-errors
# ruff: noqa: F821
# Writes 64 MiB to stdout (bounded), far past the test's output cap.
import os


def candidate(x, weight, eps):
    chunk = b"flood " * 10000 + b"\n"
    for _ in range(64 * 1024 * 1024 // len(chunk)):
        os.write(1, chunk)
    return honest(x, weight, eps)
