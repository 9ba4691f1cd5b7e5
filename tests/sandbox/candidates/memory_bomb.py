# mypy: ignore-errors
# ruff: noqa: F821
# Touches host memory in 64 MiB blocks; stops at 3 GiB (the test's cgroup limit is far lower).
def candidate(x, weight, eps):
    blocks = []
    for _ in range(48):
        blocks.append(b"\x01" * (64 * 1024 * 1024))
    return honest(x, weight, eps)
