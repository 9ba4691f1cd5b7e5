"""Launch plans of the built-in kernels that must hold on any host: which wide-row softmax path runs where.

The split path makes a row's programs wait for each other, which only works when they run at the same time: on a
GPU, compiled. The interpreter runs programs one after another, so it must never be chosen there, whatever device
the tensors claim.
"""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.kernels import softmax


@pytest.mark.parametrize("n", [32769, 65536, 131072])
def test_wide_softmax_takes_the_staged_path_off_the_gpu(n: int) -> None:
    assert isinstance(softmax._plan(64, n, n, 2, torch.device("cpu")), softmax._Staged)


def test_interpreted_kernels_never_take_the_split_path() -> None:
    if isinstance(softmax._softmax_split, softmax.triton.JITFunction):
        pytest.skip("kernels are compiled in this process (GPU run): tests/gpu/test_gpu_builtin_kernels.py covers it")
    # No CUDA needed: the plan is decided before any device query.
    assert isinstance(softmax._plan(64, 65536, 65536, 2, torch.device("cuda")), softmax._Staged)


def test_split_plan_covers_the_row_with_a_power_of_two_partials_block() -> None:
    plan = softmax._split_plan(3, 33508, 2, softmax._align(2, 33508))
    assert plan.meta["CHUNK"] * plan.n_parts >= 33508 > plan.meta["CHUNK"] * (plan.n_parts - 1)
    assert plan.meta["BLOCK_S"] >= plan.n_parts and plan.meta["BLOCK_S"] & (plan.meta["BLOCK_S"] - 1) == 0
