# mypy: ignore-errors
# ruff: noqa: F821
# GPU only: may see exactly one GPU device node (the assigned one), whatever CUDA_VISIBLE_DEVICES says.
import os
import re

NODES = sorted(n for n in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", n))


def candidate(x, weight, eps):
    if len(NODES) != 1 or torch.cuda.device_count() != 1:
        raise RuntimeError(f"visible GPUs: nodes={NODES} device_count={torch.cuda.device_count()}")
    return honest(x, weight, eps)
