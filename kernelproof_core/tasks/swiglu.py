"""swiglu(gate[M,N], up[M,N]) -> y[M,N]: y = silu(gate) * up, in FP32, cast once to the inputs' dtype."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelproof_core.tasks.base import Case, CaseKind, CaseSet, HiddenProfile, OutputSpec, Task, TaskInfo
from kernelproof_core.tasks.common import random_matrix, rows_cols
from kernelproof_core.tolerances import TolerancePolicy, policy_for

# (case_id, kind, M full, M interpreter, N, description, extra). M interpreter = 0: FULL set only.
_CASES: list[tuple[str, CaseKind, int, int, int, str, dict[str, Any]]] = [
    ("n1", CaseKind.EDGE, 4096, 8, 1, "single column: every row is one element", {}),
    ("tail127", CaseKind.EDGE, 4095, 7, 127, "odd M*N: a flat kernel's last block is partial, unaligned", {}),
    ("tail1000", CaseKind.EDGE, 4096, 8, 1000, "1000 columns: not a multiple of any power-of-two block", {}),
    ("tail5000", CaseKind.EDGE, 2048, 4, 5000, "5000 columns: wider than one tile, ragged last tile", {}),
    ("strided", CaseKind.EDGE, 4096, 4, 5000, "non-contiguous rows (row stride N+24), two column tiles",
     {"row_stride_pad": 24}),
    ("large_values", CaseKind.EDGE, 2048, 4, 4096, "gate ~N(0, 64^2): exp(-gate) overflows for gate << 0",
     {"distribution": "large"}),
    ("gpt_oss_2880", CaseKind.PRODUCTION, 8192, 8, 2880, "gpt-oss expert intermediate width", {}),
    ("llama_11008", CaseKind.PRODUCTION, 4096, 4, 11008, "Llama-7B MLP intermediate width", {}),
    ("llama3_14336", CaseKind.PRODUCTION, 4096, 4, 14336, "Llama-3-8B MLP intermediate width", {}),
    ("big_8192", CaseKind.THROUGHPUT, 32768, 0, 8192, "1.5 GB bf16 traffic (2 x 512 MB in, 512 MB out)", {}),
    ("big_14336", CaseKind.THROUGHPUT, 16384, 0, 14336, "1.4 GB bf16 traffic at the Llama-3 MLP width", {}),
]

# Per-run hidden cases (one per profile): widths (full, interpreter), rows (full, interpreter), distribution.
_HIDDEN = (
    HiddenProfile("tiny", "tiny width, not a published one", (2, 16), (2, 16), (1, 4096), (1, 8)),
    HiddenProfile("odd", "odd width with a random row padding", (17, 16000), (17, 8000), (1, 4096), (1, 4),
                  distribution="uniform", strided=True),
    HiddenProfile("wide", "rows wider than any published case", (16385, 65536), (16385, 40000), (1, 512), (1, 2)),
    HiddenProfile("mixed_rows", "gate row magnitudes from 1e-3 to 1e3", (17, 8192), (17, 4096), (2, 2048), (2, 4),
                  distribution="mixed_rows"),
    HiddenProfile("large", "gate ~N(0, 64^2) at a random width", (17, 8192), (17, 4096), (1, 2048), (1, 4),
                  distribution="large"),
)


class Swiglu(Task):
    info = TaskInfo(
        name="swiglu",
        signature="candidate(gate: Tensor[M, N], up: Tensor[M, N]) -> Tensor[M, N]",
        math="y[i, j] = gate[i, j] * sigmoid(gate[i, j]) * up[i, j]; computed in FP32, cast on store",
        output="same shape and dtype as gate, contiguous or not",
        dtypes=("bfloat16", "float16", "float32"),
        notes="gate and up may have a row stride larger than N (e.g. halves of a fused [M, 2N] projection).",
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
            n = rng.randint(1, 16000)
            m = rng.randint(1, 4000) if case_set is CaseSet.FULL else rng.randint(1, 6)
            out.append(Case(f"random{i}", CaseKind.RANDOM, {"M": m, "N": n}, f"seeded random shape #{i}"))
        return out

    def make_inputs(
        self, case: Case, dtype: torch.dtype, device: torch.device, generator: torch.Generator
    ) -> tuple[Any, ...]:
        m, n = rows_cols(case)
        gate = random_matrix(m, n, dtype, device, generator, case.distribution, case.row_stride_pad)
        # The distribution applies to gate only (that is where exp overflows); a large `up` as well would push
        # products past FP16's 65504, where the exact answer itself is not representable.
        up = random_matrix(m, n, dtype, device, generator, "normal", case.row_stride_pad)
        return (gate, up)

    def output_spec(self, case: Case, dtype: torch.dtype) -> OutputSpec:
        return OutputSpec(tuple(case.dims[d] for d in ("M", "N")), dtype)

    def oracle(self, inputs: Sequence[Any]) -> torch.Tensor:
        gate, up = inputs
        return torch.nn.functional.silu(gate.double()) * up.double()

    def baseline(self) -> Callable[..., torch.Tensor]:
        def eager_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
            # What a user writes without a fused kernel: two native-dtype ops, an intermediate in memory.
            return torch.nn.functional.silu(gate) * up

        return eager_swiglu

    def min_bytes(self, case: Case, dtype: torch.dtype) -> int:
        m, n = rows_cols(case)
        return 3 * m * n * torch.empty((), dtype=dtype).element_size()

    def flops(self, case: Case) -> int:
        m, n = rows_cols(case)
        return 5 * m * n  # negate, exp, add, divide, multiply

    def tolerance(self, dtype: torch.dtype) -> TolerancePolicy:
        return policy_for(self.name, dtype)
