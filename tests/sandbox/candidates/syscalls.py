# mypy: ignore-errors
# ruff: noqa: F821
# Calls what the seccomp deny-list forbids and an unprivileged process could otherwise do (become traced, create a
# user or mount namespace); passes only if every call failed.
import ctypes

_libc = ctypes.CDLL(None, use_errno=True)
ALLOWED = []
for _name, _args in (("ptrace", (0, 0, 0, 0)), ("unshare", (0x10000000,)), ("unshare", (0x00020000,)),
                     ("mount", (b"none", b"/tmp", b"tmpfs", 0, None))):
    if getattr(_libc, _name)(*_args) != -1:
        ALLOWED.append(_name)


def candidate(x, weight, eps):
    y = honest(x, weight, eps)
    if ALLOWED:
        raise RuntimeError(f"allowed: {ALLOWED}")
    return y
