"""The experimental kernels the sweep evaluates compute the right thing before any timing of them means anything.

Under the interpreter programs run one after another, so a row's programs can only meet when there is one per row:
these tests run the split rms_norm with one chunk per row (its arithmetic, masks, strides and the counter path);
the many-chunk rendezvous runs on the GPU, checked by benchmarks/kernel_sweep.py before it is timed. The pipelined
(persistent, prefetching) kernels have no cross-program dependence and run whole here, with the SM count cut to 4 so
that each program walks several rows and prefetches past the last one; so does the persistent split rms_norm with
one chunk per row.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import experimental_kernels
import experimental_looped
import experimental_rms_two_phase
import experimental_wide
import resident_common

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1000, 1001])  # aligned and unaligned rows
def test_split_rms_norm_matches_the_reference(n: int, dtype: torch.dtype) -> None:
    base = torch.randn(5, n + 24, device=DEVICE).to(dtype)
    x = base[:, :n]  # padded rows: stride n + 24
    w = torch.randn(n, device=DEVICE).to(dtype)
    y = experimental_kernels.rms_norm_split(x, w, 1e-6, chunk=1024, warps=4)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-5)
    assert torch.equal(experimental_kernels.rms_norm_split(x, w, 1e-6, chunk=1024, warps=4), y)


def _rms_norm_ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()


@pytest.fixture
def four_sms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grids of programs_per_sm x 4 programs: fewer than the rows, so every program loops."""
    monkeypatch.setattr(experimental_kernels, "_num_sms", lambda device: 4)


PIPELINED_CASES = [  # (dtype, prefetch, packed)
    (torch.float32, True, False), (torch.float32, False, False),
    (torch.bfloat16, True, False), (torch.bfloat16, False, False), (torch.bfloat16, True, True),
    (torch.bfloat16, False, True), (torch.float16, True, True),
]


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize(("dtype", "prefetch", "packed"), PIPELINED_CASES)
@pytest.mark.parametrize(("m", "n", "pad", "per_sm"), [
    (37, 1000, 24, 2),  # 8 programs of 4-5 rows, padded row stride
    (5, 300, 0, 1),  # 4 programs: one walks 2 rows, three walk 1
    (9, 998, 2, 16),  # more programs than rows: capped at one row each
])
def test_pipelined_kernels_match_the_reference(m: int, n: int, pad: int, per_sm: int, dtype: torch.dtype,
                                               prefetch: bool, packed: bool) -> None:
    base = torch.randn(m, n + pad, device=DEVICE).to(dtype)
    x = base[:, :n]
    w = torch.randn(n, device=DEVICE).to(dtype)
    wide = dtype != torch.float32
    softmax = experimental_kernels.softmax_pipelined(x, per_sm, 4, prefetch, packed=packed)
    assert softmax.shape == (m, n) and softmax.stride() == (n, 1) and softmax.dtype == dtype
    torch.testing.assert_close(softmax.float(), torch.softmax(x.float(), -1), rtol=1e-2 if wide else 1e-5,
                               atol=1e-5 if wide else 1e-7)
    rms = experimental_kernels.rms_norm_pipelined(x, w, 1e-6, per_sm, 4, prefetch, packed=packed)
    assert rms.shape == (m, n) and rms.stride() == (n, 1) and rms.dtype == dtype
    torch.testing.assert_close(rms.float(), _rms_norm_ref(x, w), rtol=2e-2 if wide else 1e-5, atol=1e-5)


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize(("prefetch", "packed"), [(True, False), (False, False), (True, True)])
def test_pipelined_kernels_are_bit_exact_across_calls(prefetch: bool, packed: bool) -> None:
    x = torch.randn(37, 1024, device=DEVICE).to(torch.bfloat16)[:, :1000]
    w = torch.randn(1000, device=DEVICE).to(torch.bfloat16)
    runs: list[Callable[..., torch.Tensor]] = [
        partial(experimental_kernels.softmax_pipelined, x, 2, 4, prefetch, packed=packed),
        partial(experimental_kernels.rms_norm_pipelined, x, w, 1e-6, 2, 4, prefetch, packed=packed),
    ]
    for run in runs:
        first = run()
        # the replay writes over NaNs: every element is written, and to the same bits
        assert torch.equal(run(y=torch.full_like(first, float("nan"))), first)

def test_pipelined_kernels_write_into_y_and_refuse_what_they_cannot_hold() -> None:
    x = torch.randn(3, 64, device=DEVICE)
    w = torch.randn(64, device=DEVICE)
    y = torch.full_like(x, float("nan"))
    assert experimental_kernels.softmax_pipelined(x, 1, 4, y=y) is y
    torch.testing.assert_close(y, torch.softmax(x, -1))
    assert experimental_kernels.rms_norm_pipelined(x, w, 1e-6, 1, 4, y=y) is y
    torch.testing.assert_close(y, _rms_norm_ref(x, w))
    assert experimental_kernels.softmax_pipelined(x[:0], 1, 4).shape == (0, 64)
    with pytest.raises(ValueError, match="16-bit"):
        experimental_kernels.softmax_pipelined(x, 1, 4, packed=True)  # fp32
    with pytest.raises(ValueError, match="16-bit"):
        experimental_kernels.rms_norm_pipelined(x.half()[:, :63], w.half()[:63], 1e-6, 1, 4, packed=True)  # odd N
    with pytest.raises(ValueError, match="N <= 32768"):
        experimental_kernels.softmax_pipelined(torch.empty(1, 32769, device=DEVICE), 1, 4)


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_persistent_split_rms_norm_walks_rows_and_matches_the_reference(prefetch: bool, dtype: torch.dtype) -> None:
    base = torch.randn(37, 1001 + 24, device=DEVICE).to(dtype)
    x = base[:, :1001]  # unaligned rows, padded stride: 8 programs of one chunk each walk 4-5 rows
    w = torch.randn(1001, device=DEVICE).to(dtype)
    y = experimental_kernels.rms_norm_split_persistent(x, w, 1e-6, chunk=1024, warps=4, programs_per_sm=2,
                                                       prefetch=prefetch)
    wide = dtype != torch.float32
    torch.testing.assert_close(y.float(), _rms_norm_ref(x, w), rtol=2e-2 if wide else 1e-5, atol=1e-5)
    again = experimental_kernels.rms_norm_split_persistent(x, w, 1e-6, 1024, 4, 2, prefetch,
                                                           y=torch.full_like(y, float("nan")))
    assert torch.equal(again, y)  # every element written, to the same bits


@pytest.mark.usefixtures("four_sms")
@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_persistent_split_softmax_walks_rows_and_matches_the_reference(prefetch: bool, dtype: torch.dtype) -> None:
    base = torch.randn(37, 1001 + 24, device=DEVICE).to(dtype)
    x = base[:, :1001]
    x[3, :] = float("-inf")  # an all -inf row: (max=-inf, sum=0) must not poison the merge ...
    x[3, 7] = 0.0  # ... except for the one finite entry, which takes all the mass
    y = experimental_kernels.softmax_split_persistent(x, chunk=1024, warps=4, programs_per_sm=2, prefetch=prefetch)
    wide = dtype != torch.float32
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=1e-2 if wide else 1e-5,
                               atol=1e-5 if wide else 1e-7)
    again = experimental_kernels.softmax_split_persistent(x, 1024, 4, 2, prefetch, y=torch.full_like(y, float("nan")))
    assert torch.equal(again, y)


@pytest.mark.parametrize("shifted_weight", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_realigned_split_rms_norm_loads_the_right_columns(shifted_weight: bool, dtype: torch.dtype) -> None:
    """Rows of 1001 elements start at every offset within a vector, so chunks cut at the tensor's vector boundaries
    are interior on some rows and cross row ends on others. Programs run one after another here, so each row's
    counter starts one short of complete and the other chunks' partial sums are filled in from the host: every
    program proceeds at once, and what is tested is which columns each chunk loads, scales and stores."""
    m, n, chunk = 9, 1001, 256
    x = torch.randn(m, n, device=DEVICE).to(dtype)
    w = torch.randn(n, device=DEVICE).to(dtype)
    vec = 16 // x.element_size()
    n_parts = -(-(n + vec - 1) // chunk)
    tail = torch.zeros(chunk * n_parts, device=DEVICE)
    flat = torch.cat([torch.zeros(vec, device=DEVICE), x.float().reshape(-1), tail])
    partials = torch.empty((m, n_parts), dtype=torch.float32, device=DEVICE)
    for r in range(m):
        start = r * n - (r * n) % vec  # the row's first element rounded down to a vector boundary
        for p in range(n_parts):
            lo, hi = max(start + p * chunk, r * n), min(start + (p + 1) * chunk, (r + 1) * n)
            partials[r, p] = flat[vec + lo: vec + hi].pow(2).sum() if hi > lo else 0.0
    done = torch.full((m,), n_parts - 1, dtype=torch.int32, device=DEVICE)
    pitch = -(-(n + vec) // vec) * vec
    weights = w
    if shifted_weight:
        weights = torch.empty((vec, pitch), dtype=dtype, device=DEVICE)
        experimental_kernels._shift_weight[(vec, -(-n // 1024))](w, weights, n, pitch, BLOCK=1024)
    y = torch.full_like(x, float("nan"))
    experimental_kernels._rms_norm_split_realigned[(m * n_parts,)](
        x, weights, y, partials, done, n, 1e-6, n_parts, pitch, CHUNK=chunk, BLOCK_S=4, VEC=vec,
        SHIFTED_W=shifted_weight)
    wide = dtype != torch.float32
    torch.testing.assert_close(y.float(), _rms_norm_ref(x, w), rtol=2e-2 if wide else 1e-5, atol=1e-5)


@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize(("m", "n"), [(5, 1000), (3, 4097)])  # ragged last chunk; padded rows below
def test_looped_kernels_match_the_reference(m: int, n: int, stages: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experimental_looped, "_num_sms", lambda device: 2)  # each program walks several rows
    base = (torch.randn(m, n + 24, device=DEVICE) * 4).to(torch.bfloat16)
    x = base[:, :n]
    x[0, ::3] = float("-inf")  # masked logits: lanes that see only -inf for a while
    w = torch.randn(n, device=DEVICE).to(torch.bfloat16)
    y = experimental_looped.softmax_looped(x, chunk=256, warps=4, stages=stages, programs_per_sm=1)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2, atol=1e-5)
    x = (torch.randn(m, n + 24, device=DEVICE) * 4).to(torch.bfloat16)[:, :n]
    y = experimental_looped.rms_norm_looped(x, w, 1e-6, chunk=256, warps=4, stages=stages, programs_per_sm=1)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=1e-5)


@pytest.mark.parametrize("bound", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("shape", [(5, 1001), (3, 1003), (4, 1000)])  # odd and 8-aligned rows
def test_realigned_softmax_variants_match_the_reference(bound: int, shape: tuple[int, int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bounds variant the sweep times (experimental_realigned.py), on a grid of 2 programs that walk several
    rows and prefetch past the last one: the right softmax, and the same bits on a replay."""
    import experimental_realigned

    from kernelproof_core.kernels import softmax

    monkeypatch.setattr(softmax, "_num_sms", lambda device: 2)
    x = (torch.randn(*shape, device=DEVICE) * 4).to(torch.bfloat16)
    x[0, ::7] = float("-inf")
    ref = torch.softmax(x.float(), -1)
    y = torch.full_like(x, float("nan"))
    experimental_realigned.softmax_realigned_x(x, y, bound, True, 1, 4)
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=1e-5)
    again = torch.empty_like(y)
    experimental_realigned.softmax_realigned_x(x, again, bound, True, 1, 4)
    assert torch.equal(again, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(7, 1001, 3), (5, 1000, 1), (4, 1001, 0), (3, 999, 8)])
def test_reread_softmax_matches_the_reference(m: int, n: int, pad: int, dtype: torch.dtype,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Padded rows whose x and y windows are shifted against each other by every amount (odd padding), or not at all:
    the reductions read x's window, the output pass re-reads x at y's window positions. Two "SMs": programs walk
    rows and prefetch past the last."""
    monkeypatch.setattr(experimental_wide.softmax, "_num_sms", lambda device: 2)
    x = (torch.randn(m, n + pad, device=DEVICE) * 4).to(dtype)[:, :n]
    x[0, ::3] = float("-inf")
    y = torch.full((m, n), float("nan"), dtype=dtype, device=DEVICE)
    experimental_wide.softmax_reread(x, y, programs_per_sm=1, warps=4)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2 if dtype != torch.float32 else 1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("n", "pad", "chunk_bytes"), [(1001, 0, 4096), (1001, 8, 4096), (1001, 0, 512),
                                                       (1000, 0, 512), (1001, 8, 512)])
def test_split_realigned_softmax_loads_the_right_columns(n: int, pad: int, chunk_bytes: int,
                                                         dtype: torch.dtype) -> None:
    """Rows start at every offset within a vector, so chunks cut from each row's vector window hold interior
    vectors, a row's edge vectors, or nothing of the row. With one chunk per row (4096 bytes) the kernel runs whole;
    with several, programs run one after another here, so each row's counter starts one short of complete and the
    partials are filled in from the host (what is tested is which elements each chunk loads, reduces and stores)."""
    m = 9
    x = (torch.randn(m, n + pad, device=DEVICE) * 4).to(dtype)[:, :n]
    x[0, ::3] = float("-inf")
    y = torch.full((m, n), float("nan"), dtype=dtype, device=DEVICE)
    vec, chunk = 16 // x.element_size(), chunk_bytes // x.element_size()
    n_parts = -(-(n + vec - 1) // chunk)
    if n_parts == 1:
        experimental_wide.softmax_split_realigned(x, y, chunk_bytes, warps=4)
    else:
        partials = torch.empty((2, m, n_parts), dtype=torch.float32, device=DEVICE)
        xf = x.float()
        for r in range(m):
            shift = (r * n) % vec  # the row's first element within its first window vector
            for p in range(n_parts):
                part = xf[r, max(0, p * chunk - shift): max(0, (p + 1) * chunk - shift)]
                mx = part.max() if part.numel() else torch.tensor(float("-inf"))
                partials[0, r, p] = mx
                partials[1, r, p] = (part - (0.0 if mx == float("-inf") else mx)).exp().sum()
        done = torch.full((m,), n_parts - 1, dtype=torch.int32, device=DEVICE)
        plan = experimental_wide.softmax._split_realigned_plan(m, n, x.stride(0), x.element_size(), chunk_bytes, 4)
        assert plan.n_parts == n_parts
        plan.launch(x, y, partials, done, m, n, x.stride(0), n_parts, **plan.meta)
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), rtol=2e-2 if dtype != torch.float32 else 1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("n_chunks", range(1, 40))
def test_resident_experiments_slots_are_two_power_of_two_buffers_within_budget(n_chunks: int) -> None:
    """The earlier slot layout the warp-specialised and ablation experiments keep (resident_common.py): two
    power-of-two buffers holding at least three quarters of what fits, never more; a chunk over the budget is
    refused."""
    chunk_bytes, budget = 8192, 200 * 1024
    a, b = resident_common._resident_chunks(n_chunks, chunk_bytes, budget)
    fit = min(n_chunks, budget // chunk_bytes)
    assert a & (a - 1) == 0 and a >= 1 and (b == 0 or b & (b - 1) == 0)
    assert fit * 3 // 4 <= a + b <= fit
    with pytest.raises(ValueError, match="does not fit"):
        resident_common._resident_chunks(n_chunks, budget + 1, budget)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("m", "n", "pad"), [(5, 9001, 0), (4, 9001, 24), (3, 8200, 0), (3, 9003, 6)])
@pytest.mark.parametrize(("chunk", "warps", "batches", "reverse", "hints"),
                         [(4096, 4, 1, True, True), (2048, 2, 2, False, False), (8192, 8, 3, True, False)])
def test_two_phase_rms_norm_matches_the_reference_and_replays(m: int, n: int, pad: int, dtype: torch.dtype,
                                                               chunk: int, warps: int, batches: int, reverse: bool,
                                                               hints: bool) -> None:
    """rms_norm in two launches a batch (experimental_rms_two_phase): unaligned rows through their vector windows
    (contiguous, and padded by whole and half vectors), aligned rows in plain chunks, rows in batches, the scaling
    launch walking chunks in reverse: within bf16/fp16 rounding of fp32, the same bits on a second call."""
    x = (torch.randn(m, n + pad, device=DEVICE) * 3).to(dtype)[:, :n]
    w = torch.randn(n, device=DEVICE).to(dtype)
    y = torch.empty((m, n), dtype=dtype, device=DEVICE)
    out = experimental_rms_two_phase.rms_norm_two_phase(x, w, 1e-6, y, chunk, warps, batches, reverse, hints).clone()
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
    assert torch.equal(out, experimental_rms_two_phase.rms_norm_two_phase(x, w, 1e-6, y, chunk, warps, batches,
                                                                          reverse, hints))


def test_close_twice_needs_two_right_launches_and_survives_a_failing_one(capsys: pytest.CaptureFixture[str]) -> None:
    """The sweeps' check before timing (sweep_common.close_twice): both launches must write the reference (the
    second is how a workspace left dirty by the first shows), and a launch that raises is reported, not fatal."""
    from sweep_common import close_twice

    ref = torch.softmax(torch.randn(4, 64), dim=-1)
    y = torch.empty_like(ref)
    calls: list[int] = []

    def right_once() -> None:
        calls.append(1)
        y.copy_(ref if len(calls) == 1 else torch.zeros_like(ref))

    def raises() -> None:
        raise RuntimeError("out of resource: shared memory")

    assert close_twice(partial(y.copy_, ref), y, ref, "right")
    assert not close_twice(right_once, y, ref, "once") and len(calls) == 2
    assert not close_twice(raises, y, ref, "broken")
    out = capsys.readouterr().out
    assert "once (again): WRONG" in out and "broken: ERROR RuntimeError: out of resource" in out


def test_close_in_graph_checks_each_replay_and_survives_a_failed_capture(capsys: pytest.CaptureFixture[str]) -> None:
    """The sweeps' graph check (sweep_common.close_in_graph, before the TMA parts are timed): on a GPU a right launch
    passes every replay of its three-call graph; without one (or where capture fails) the config is reported, not
    fatal."""
    from sweep_common import close_in_graph

    ref = torch.softmax(torch.randn(4, 64, device=DEVICE), dim=-1)
    y = torch.empty_like(ref)
    right = close_in_graph(partial(y.copy_, ref), y, ref, "right")
    out = capsys.readouterr().out
    if DEVICE == "cuda":
        assert right and out == ""
    else:
        assert not right and "right (graph): ERROR" in out
