"""Shared fixtures. Tests run kernels under the Triton interpreter unless CUDA is present (GPU suite)."""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.interpreter import enable_interpreter

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Before any @triton.jit decorator runs; on a GPU host everything runs compiled.
    enable_interpreter()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (run scripts/gpu-check on the H200)")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def device() -> str:
    return "cuda" if HAS_CUDA else "interpreter"
