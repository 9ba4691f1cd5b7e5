"""Input generation shared by the built-in tasks: seeded distributions and non-contiguous row layouts."""

from __future__ import annotations

import torch

from kernelproof_core.tasks.base import Case

# Scales of the value distributions (documented in docs/TASKS.md and METHODOLOGY.md).
LARGE_SCALE = 64.0  # "large": squares and exponentials overflow unless computed in FP32 / max-subtracted
HUGE_SCALE = 1000.0  # "huge": x^2 overflows FP16 arithmetic (65504) for every |x| > 256
SMALL_SCALE = 1e-3  # "small": mean(x^2) ~ 1e-6, the size of rms_norm's eps
FLAT_SCALE = 1e-2  # "flat": near-equal values; a 16-bit sum of ~N ones cannot resolve 1/N
MIXED_DECADES = 3.0  # "mixed_rows": each row scaled by 10^U(-3, 3)
CONSTANT_ROW_SCALE = 4.0  # "constant": each row repeats one value ~N(0, 4^2)


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
        base = base * LARGE_SCALE
    elif distribution == "huge":
        base = base * HUGE_SCALE
    elif distribution == "small":
        base = base * SMALL_SCALE
    elif distribution == "flat":
        base = base * FLAT_SCALE
    elif distribution == "mixed_rows":
        decades = (torch.rand((rows, 1), generator=generator) * 2 - 1) * MIXED_DECADES
        base = base * torch.pow(10.0, decades)
    elif distribution == "constant":
        base = (torch.randn((rows, 1), generator=generator) * CONSTANT_ROW_SCALE).expand(rows, width).clone()
    elif distribution == "uniform":
        base = torch.rand((rows, width), generator=generator, dtype=torch.float32) * 2 - 1
    elif distribution != "normal":
        raise ValueError(f"unknown distribution {distribution!r}")
    full = base.to(dtype=dtype).to(device)
    return full[:, :cols] if row_stride_pad else full


def rows_cols(case: Case) -> tuple[int, int]:
    return case.dims["M"], case.dims["N"]
