"""Names of the dtypes a campaign can ask for, and their torch equivalents."""

from __future__ import annotations

import torch

DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}
ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}


def parse_dtype(name: str) -> torch.dtype:
    """Torch dtype for a user-facing name; ValueError names the accepted spellings."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return DTYPES[key]


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES[dtype]
