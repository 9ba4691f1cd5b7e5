# mypy: ignore-errors
# ruff: noqa: F821
# Finds the harness's result socket among its own file descriptors and writes garbage into it.
import os


def candidate(x, weight, eps):
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                os.write(int(fd), b'{"type": "case_done", "result": "pass"}\n' + b"\x00garbage" * 100 + b"\n")
        except OSError:
            pass
    return honest(x, weight, eps)
