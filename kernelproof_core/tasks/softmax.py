"""softmax(x[M,N]) -> y[M,N]: row-wise softmax over the last dim; max-subtracted, FP32 exp and sum."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelproof_core.tasks.base import Case, CaseKind, CaseSet, HiddenProfile, OutputSpec, Task, TaskInfo
from kernelproof_core.tasks.common import random_matrix, rows_cols
from kernelproof_core.tolerances import TolerancePolicy, policy_for

NEG_INF_FRACTION = 0.25  # share of entries set to -inf by the "neg_inf" distribution
CONSTANT_SCALE = 40.0  # "constant" rows repeat one value ~N(0, 40^2): exp(value) alone would overflow FP32
SPIKE_VALUE = 100.0  # "spike": one entry per row is this large; exp(100) overflows FP32 unless max-subtracted
# "offset": logits offset by a large constant (per dtype: offset, spread). Softmax is shift-invariant, but a kernel that
# folds the max into each exponent (2^(x log2 e - max log2 e), a common speed trick) rounds max log2 e (and, unfused,
# each x log2 e) to fp32 at its own size. fp32 at 1e6 (input ulp 1/16, so rows keep many logits near their max):
# exponents off by up to 1/16, y by 4%. bfloat16 holds 8 bits, so near-max logits tie; at 1e8 a fused fold is off by
# up to 8 in every exponent. fp16 cannot hold such logits (65504 at most): 6e4, where a fold is off by 0.27% at most.
OFFSETS = {torch.float32: (1e6, 4.0), torch.bfloat16: (1e8, 1e6), torch.float16: (6e4, 64.0)}
_OWN_DISTRIBUTIONS = ("neg_inf", "constant", "spike", "offset", "lowest_mask")

# (case_id, kind, M full, M interpreter, N, description, extra). M interpreter = 0: FULL set only.
_CASES: list[tuple[str, CaseKind, int, int, int, str, dict[str, Any]]] = [
    ("n1", CaseKind.EDGE, 4096, 8, 1, "single column: every output is exactly 1", {}),
    ("tail127", CaseKind.EDGE, 4096, 8, 127, "127 columns: masked tail, rows not vector-aligned", {}),
    ("tail1023", CaseKind.EDGE, 4096, 8, 1023, "one short of a power of two: one masked lane per row", {}),
    ("strided", CaseKind.EDGE, 4096, 8, 1000, "non-contiguous rows (row stride N+24)",
     {"row_stride_pad": 24}),
    ("neg_inf", CaseKind.EDGE, 4096, 8, 1000, "~25% of entries -inf (attention masks), never a whole row",
     {"distribution": "neg_inf"}),
    ("large_values", CaseKind.EDGE, 2048, 4, 4096, "inputs ~N(0, 64^2): exp overflows unless max-subtracted",
     {"distribution": "large"}),
    ("constant", CaseKind.EDGE, 4096, 8, 3000, "each row one repeated large value: output exactly 1/N",
     {"distribution": "constant"}),
    ("attn_4096", CaseKind.PRODUCTION, 16384, 4, 4096, "attention-score rows over a 4k context", {}),
    ("attn_8192", CaseKind.PRODUCTION, 8192, 2, 8192, "attention-score rows over an 8k context", {}),
    ("vocab_32000", CaseKind.PRODUCTION, 2048, 2, 32000, "Llama-2 vocabulary logits", {}),
    ("long_32768", CaseKind.EDGE, 2048, 2, 32768, "32k-wide rows: widest row a register kernel holds", {}),
    ("long_65536", CaseKind.EDGE, 1024, 1, 65536, "64k-wide rows: needs a chunked (online) reduction", {}),
    ("long_131072", CaseKind.PRODUCTION, 1024, 0, 131072, "128k-context attention rows", {}),
    ("vocab_128256", CaseKind.PRODUCTION, 512, 0, 128256, "Llama-3 vocabulary logits", {}),
    ("big_8192", CaseKind.THROUGHPUT, 32768, 0, 8192, "512 MB bf16 input, one row per program", {}),
    ("big_1024", CaseKind.THROUGHPUT, 262144, 0, 1024, "512 MB bf16 input of short rows", {}),
]

# Per-run hidden cases (one per profile): widths (full, interpreter), rows (full, interpreter), distribution.
_HIDDEN = (
    HiddenProfile("tiny", "tiny width, not a published one", (2, 16), (2, 16), (1, 4096), (1, 8)),
    HiddenProfile("odd", "odd width with a random row padding", (17, 50000), (17, 20000), (1, 2048), (1, 2),
                  distribution="uniform", strided=True),
    # Wider rows would make every fp16 output subnormal, where even exact rounding misses the fp16 policy.
    HiddenProfile("flat_wide", "near-equal values in wide rows: a 16-bit running sum loses the output's digits",
                  (16384, 40000), (16384, 40000), (1, 256), (1, 1), distribution="flat"),
    HiddenProfile("neg_inf", "-inf entries at a random width", (2, 8192), (2, 4096), (1, 4096), (1, 4),
                  distribution="neg_inf"),
    HiddenProfile("constant", "all-equal rows of large values", (2, 8192), (2, 4096), (1, 4096), (1, 4),
                  distribution="constant"),
    HiddenProfile("spike", "one entry of 100 per row: exp overflows unless max-subtracted", (2, 16384),
                  (2, 8192), (1, 2048), (1, 2), distribution="spike"),
    HiddenProfile("offset", "logits offset by 1e6-1e8 (6e4 in fp16): a max folded into exponents is lost to rounding",
                  (2, 50000), (2, 16384), (1, 1024), (1, 2), distribution="offset"),
    # Wide enough for the kernels that hold a row in chunks: a thread whose elements are all masked then has the mask
    # as its running max, which a reference folded into the exponents turns into inf or NaN.
    HiddenProfile("lowest_mask", "masks written as the dtype's lowest value (Hugging Face's attention masks), a row "
                  "wholly masked: huge finite negatives, not -inf", (2, 140000), (2, 4096), (2, 64), (2, 2),
                  distribution="lowest_mask"),
)


def softmax_input(
    rows: int,
    cols: int,
    dtype: torch.dtype,
    device: torch.device,
    generator: torch.Generator,
    distribution: str = "normal",
    row_stride_pad: int = 0,
) -> torch.Tensor:
    """random_matrix plus the softmax-only distributions "neg_inf", "constant", "spike", "offset" and
    "lowest_mask".
    """
    if distribution not in _OWN_DISTRIBUTIONS:
        return random_matrix(rows, cols, dtype, device, generator, distribution, row_stride_pad)
    # Built on the CPU at full (padded) width, then moved, so a padded layout survives the transfer.
    full = random_matrix(rows, cols + row_stride_pad, torch.float32, torch.device("cpu"), generator)
    body = full[:, :cols]
    if distribution == "neg_inf":
        drop = torch.rand((rows, cols), generator=generator) < NEG_INF_FRACTION
        keep = torch.randint(0, cols, (rows,), generator=generator)
        drop[torch.arange(rows), keep] = False  # a row of only -inf has no softmax
        body.masked_fill_(drop, float("-inf"))
    elif distribution == "spike":
        body[torch.arange(rows), torch.randint(0, cols, (rows,), generator=generator)] = SPIKE_VALUE
    elif distribution == "offset":
        offset, spread = OFFSETS.get(dtype, OFFSETS[torch.float32])
        body.mul_(spread).add_(offset)
    elif distribution == "lowest_mask":
        # each row's tail masked from a random start (as a causal mask is) and about NEG_INF_FRACTION of the rest,
        # one entry before the start kept; the last row wholly masked, whose softmax is uniform (all values equal)
        start = torch.randint(1, cols + 1, (rows,), generator=generator)
        drop = torch.arange(cols)[None, :] >= start[:, None]
        drop |= torch.rand((rows, cols), generator=generator) < NEG_INF_FRACTION
        keep = (torch.rand(rows, generator=generator) * start).long()
        drop[torch.arange(rows), keep] = False
        drop[-1] = True
        body.masked_fill_(drop, torch.finfo(dtype).min)
    else:
        body.copy_((torch.randn((rows, 1), generator=generator) * CONSTANT_SCALE).expand(rows, cols))
    full = full.to(dtype=dtype).to(device)
    return full[:, :cols] if row_stride_pad else full


class Softmax(Task):
    info = TaskInfo(
        name="softmax",
        signature="candidate(x: Tensor[M, N]) -> Tensor[M, N]",
        math="y[i, j] = exp(x[i, j] - max_j x[i, :]) / sum_j exp(x[i, :] - max_j x[i, :]); FP32 exp and sum, "
        "cast on store",
        output="same shape and dtype as x, contiguous or not",
        dtypes=("bfloat16", "float16", "float32"),
        notes="x may have a row stride larger than N and may contain -inf (never a whole row).",
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
            n = rng.randint(2, 50000)
            m = rng.randint(1, 3000) if case_set is CaseSet.FULL else rng.randint(1, 2)
            out.append(Case(f"random{i}", CaseKind.RANDOM, {"M": m, "N": n}, f"seeded random shape #{i}"))
        return out

    def make_inputs(
        self, case: Case, dtype: torch.dtype, device: torch.device, generator: torch.Generator
    ) -> tuple[Any, ...]:
        m, n = rows_cols(case)
        return (softmax_input(m, n, dtype, device, generator, case.distribution, case.row_stride_pad),)

    def output_spec(self, case: Case, dtype: torch.dtype) -> OutputSpec:
        return OutputSpec(tuple(case.dims[d] for d in ("M", "N")), dtype)

    def oracle(self, inputs: Sequence[Any]) -> torch.Tensor:
        (x,) = inputs
        return torch.softmax(x.double(), dim=-1)

    def baseline(self) -> Callable[..., torch.Tensor]:
        def eager_softmax(x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x, dim=-1)

        return eager_softmax

    def min_bytes(self, case: Case, dtype: torch.dtype) -> int:
        m, n = rows_cols(case)
        return 2 * m * n * torch.empty((), dtype=dtype).element_size()

    def flops(self, case: Case) -> int:
        m, n = rows_cols(case)
        return 5 * m * n  # max, subtract, exp, sum, scale

    def tolerance(self, dtype: torch.dtype) -> TolerancePolicy:
        return policy_for(self.name, dtype)
