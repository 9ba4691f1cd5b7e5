"""Input generation shared by the built-in tasks: seeded distributions and non-contiguous row layouts."""

from __future__ import annotations

import torch

from kernelproof_core.tasks.base import Case


def random_matrix(
    rows: int,
    cols: int,
    dtype: torch.dtype,
    device: torch.device,
    generator: torch.Generator,
    distribution: str = "normal",
    row_stride_pad: int = 0,
) -> torch.Tensor:
    """A rows x cols matrix drawn on the CPU from `generator` (bit-identical on every host), moved to `device`.

    With row_stride_pad > 0 the result is a view into a wider buffer, so its row stride is cols + pad.
    """
    width = cols + row_stride_pad
    base = torch.randn((rows, width), generator=generator, dtype=torch.float32)
    if distribution == "large":
        base = base * 64.0
    elif distribution == "small":
        base = base * 1e-3
    elif distribution == "uniform":
        base = torch.rand((rows, width), generator=generator, dtype=torch.float32) * 2 - 1
    elif distribution != "normal":
        raise ValueError(f"unknown distribution {distribution!r}")
    full = base.to(dtype=dtype).to(device)
    return full[:, :cols] if row_stride_pad else full


def rows_cols(case: Case) -> tuple[int, int]:
    return case.dims["M"], case.dims["N"]
