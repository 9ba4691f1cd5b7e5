"""rms_norm(x[M,N], weight[N], eps) -> y[M,N]: y = x / sqrt(mean(x^2) + eps) * weight, in x's dtype."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelproof_core.tasks.base import Case, CaseKind, CaseSet, HiddenProfile, OutputSpec, Task, TaskInfo
from kernelproof_core.tasks.common import random_matrix, rows_cols
from kernelproof_core.tolerances import TolerancePolicy, policy_for

EPS = 1e-6

# (case_id, kind, M full, M interpreter, N, description, extra)
_CASES: list[tuple[str, CaseKind, int, int, int, str, dict[str, Any]]] = [
    ("n1", CaseKind.EDGE, 4096, 8, 1, "single column: mean of one square", {}),
    ("tail127", CaseKind.EDGE, 4096, 8, 127, "127 columns: masked tail, not a power of two", {}),
    ("n1024", CaseKind.EDGE, 4096, 8, 1024, "power-of-two width", {}),
    ("strided", CaseKind.EDGE, 4096, 8, 1000, "non-contiguous rows (row stride N+24)", {"row_stride_pad": 24}),
    ("large_values", CaseKind.EDGE, 2048, 4, 4096, "inputs ~N(0, 64^2): squares must not overflow",
     {"distribution": "large"}),
    ("gpt_oss_2880", CaseKind.PRODUCTION, 8192, 4, 2880, "gpt-oss residual width", {}),
    ("llama_4096", CaseKind.PRODUCTION, 8192, 4, 4096, "Llama-class hidden size", {}),
    ("llama_8192", CaseKind.PRODUCTION, 8192, 2, 8192, "70B-class hidden size", {}),
    ("big_4096", CaseKind.THROUGHPUT, 65536, 0, 4096, "512 MB bf16 working set", {}),
    ("big_8192", CaseKind.THROUGHPUT, 32768, 0, 8192, "1 GB bf16 working set", {}),
]

# Per-run hidden cases (one per profile): widths (full, interpreter), rows (full, interpreter), distribution.
_HIDDEN = (
    HiddenProfile("tiny", "tiny width, not a published one", (2, 16), (2, 16), (1, 4096), (1, 8)),
    HiddenProfile("odd", "odd width with a random row padding", (17, 6000), (17, 6000), (1, 4096), (1, 4),
                  distribution="uniform", strided=True),
    HiddenProfile("wide", "rows wider than any published case", (8193, 65536), (8193, 40000), (1, 512), (1, 2)),
    HiddenProfile("huge", "values ~N(0, 1000^2): x^2 overflows FP16 arithmetic", (256, 8192), (256, 4096),
                  (1, 2048), (1, 2), distribution="huge"),
    HiddenProfile("mixed_rows", "row magnitudes from 1e-3 to 1e3: eps and overflow in one tensor", (17, 8192),
                  (17, 4096), (2, 2048), (2, 4), distribution="mixed_rows"),
    HiddenProfile("constant", "all-equal rows", (17, 8192), (17, 4096), (1, 2048), (1, 4), distribution="constant"),
)


class RmsNorm(Task):
    info = TaskInfo(
        name="rms_norm",
        signature="candidate(x: Tensor[M, N], weight: Tensor[N], eps: float) -> Tensor[M, N]",
        math="y[i, j] = x[i, j] * rsqrt(mean_j(x[i, :]^2) + eps) * weight[j]; square-and-mean in FP32, cast on store",
        output="same shape and dtype as x, contiguous or not",
        dtypes=("bfloat16", "float16", "float32"),
        notes=f"eps={EPS}; x may have a row stride larger than N.",
    )
    hidden_profiles = _HIDDEN

    def cases(self, case_set: CaseSet, seed: int) -> list[Case]:
        out = []
        for cid, kind, m_full, m_interp, n, desc, extra in _CASES:
            m = m_full if case_set is CaseSet.FULL else m_interp
            if m == 0:
                continue
            out.append(Case(cid, kind, {"M": m, "N": n}, desc, in_interpreter_set=m_interp > 0, **extra))
        rng = random.Random(seed)
        for i in range(3):
            n = rng.randint(2, 6000)
            m = rng.randint(1, 3000) if case_set is CaseSet.FULL else rng.randint(1, 6)
            out.append(Case(f"random{i}", CaseKind.RANDOM, {"M": m, "N": n}, f"seeded random shape #{i}"))
        return out

    def make_inputs(
        self, case: Case, dtype: torch.dtype, device: torch.device, generator: torch.Generator
    ) -> tuple[Any, ...]:
        m, n = rows_cols(case)
        x = random_matrix(m, n, dtype, device, generator, case.distribution, case.row_stride_pad)
        weight = (1.0 + 0.1 * torch.randn((n,), generator=generator)).to(dtype=dtype).to(device)
        return (x, weight, EPS)

    def output_spec(self, case: Case, dtype: torch.dtype) -> OutputSpec:
        return OutputSpec(tuple(case.dims[d] for d in ("M", "N")), dtype)

    def oracle(self, inputs: Sequence[Any]) -> torch.Tensor:
        x, weight, eps = inputs
        xf = x.double()
        inv = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps)
        return xf * inv * weight.double()

    def baseline(self) -> Callable[..., torch.Tensor]:
        def eager_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
            # What a user writes without a fused kernel: FP32 statistics, native-dtype output.
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight

        return eager_rms_norm

    def min_bytes(self, case: Case, dtype: torch.dtype) -> int:
        m, n = rows_cols(case)
        size = torch.empty((), dtype=dtype).element_size()
        return (2 * m * n + n) * size

    def flops(self, case: Case) -> int:
        m, n = rows_cols(case)
        return 4 * m * n

    def tolerance(self, dtype: torch.dtype) -> TolerancePolicy:
        return policy_for(self.name, dtype)
