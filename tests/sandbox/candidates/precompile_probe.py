# mypy: ignore-errors
# ruff: noqa: F821
# Precompile tests: what a candidate's call can reach in a precompile child (no /dev listing, no CUDA).
import os


def candidate(x, weight, eps):
    try:
        os.listdir("/dev")
        dev = "listed"
    except PermissionError:
        dev = "denied"
    raise RuntimeError(f"probe dev={dev} cuda={torch.cuda.is_available()} device={x.device.type}")
