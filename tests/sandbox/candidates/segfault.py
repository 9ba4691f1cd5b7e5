# mypy: ignore-errors
# ruff: noqa: F821
# Dereferences NULL through ctypes: SIGSEGV.
import ctypes


def candidate(x, weight, eps):
    ctypes.string_at(0)
    return honest(x, weight, eps)
