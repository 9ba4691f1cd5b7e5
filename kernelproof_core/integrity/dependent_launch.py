"""The dependent-launch probe: a candidate must be correct when the kernel just before it wrote its inputs.

Hopper's programmatic dependent launch (PDL: a launch with the programmatic-stream-serialization attribute, Triton's
`launch_pdl=True`) lets a kernel start before the kernel ahead of it on the stream has finished, once every program of
that one has called `griddepcontrol.launch_dependents` (or exited). A kernel that does so must execute
`griddepcontrol.wait` (Triton's `gdc_wait`) before it reads memory the earlier kernel writes; otherwise it reads
whatever was there before. The timed calls cannot see that mistake: their inputs were written long before, so a
candidate launched with PDL, releasing its successor at once and never waiting, runs each call on top of the one
before it, hides its ramp and tail, and still returns correct outputs. It is fast and wrong in any real model, where
the kernel before it produces its input. The kernel-time check does not bound it: it counts each stream's busy
time (integrity.profiled.covered_us), so that honest PDL, whose early programs wait inside the GPU, passes it.

So the probe recreates the real situation. The case's inputs are copied into memory filled with NaN (every byte
0xFF), and a harness kernel that releases its dependents as it starts, waits `delay_ms`, then writes the true values
is launched just before the candidate is called, with nothing in between on the stream. A candidate that waits (or
uses no PDL: then the stream orders it after the writer, as always) computes from the true values; one that does not
reads NaN. Twice: from the caller's stream, and captured in a CUDA graph with the writer (how the timed calls run:
host time then plays no part). A wrong output is `stale_input` if the same call form on inputs written before it
began is right, else `cached_output` (_judge). The writer runs on a few SMs (`WRITER_PROGRAMS`),
so the candidate's programs find room beside it. GPUs without PDL (before sm_90) and the interpreter skip the probe.

Gate 7 probes fresh copies of a case's inputs, before any timing. A candidate can tell tensors apart (by object or
address) and wait only on those it has not seen before: then it waits in gate 7, where every input is new, and
skips the wait in its timed calls, which reuse the ring's input sets. So the probe runs a second time after the
timed samples, in place on a ring set the timed calls used (`LateInputs(..., in_place=True)`: the set's own tensors
spoilt and rewritten late, its values restored afterwards; measurement-phase delay from the timed median,
`timed_delay_ms`). Its graph also calls the candidate on other ring sets first (`ahead_sets`: a random number of
calls, up to a timed sample's), so the probed call sits where a timed sample's later calls do: a candidate that
skips the wait only from a capture's second call on waits in a one-call graph.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.measurement.replay import recover_failed_capture
from kernelproof_core.report.models import DependentLaunchProbe

__all__ = ["DependentLaunchProbe", "LateInputs", "ahead_sets", "probe", "supported", "timed_delay_ms", "warm_up"]
from kernelproof_core.verdicts import Verdict

WRITER_PROGRAMS = 8  # programs of the late writer: one SM each at most, the rest of the GPU free for the candidate
MAX_TENSORS = 3
_BLOCK = 4096  # bytes a writer program copies per step


@triton.jit
def _globaltimer() -> tl.tensor:
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _copy_bytes(src: tl.tensor, dst: tl.tensor, n: tl.tensor, BLOCK: tl.constexpr) -> None:
    for start in range(tl.program_id(0).to(tl.int64) * BLOCK, n, tl.num_programs(0) * BLOCK):  # inputs past 2 GB
        offs = start + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


# The writer's sizes and delay are not specialised on (divisibility by 16, equality to 1), so warm_up's builds, one per
# COUNT, serve every input: no probe compiles inside a candidate's run (a fresh build there would cost the candidate's
# process a compile and show as a compile after load; only sizes or delays past 2^31 take another, as int64).
@triton.jit(do_not_specialize=["n0", "n1", "n2", "delay_ns"])
def _late_write(src0: tl.tensor, dst0: tl.tensor, n0: tl.tensor, src1: tl.tensor, dst1: tl.tensor, n1: tl.tensor,
                src2: tl.tensor, dst2: tl.tensor, n2: tl.tensor, delay_ns: tl.tensor, COUNT: tl.constexpr,
                BLOCK: tl.constexpr) -> None:
    # Release dependents first, then wait, then write: a dependent that does not wait reads the stale bytes.
    tl.extra.cuda.gdc_launch_dependents()
    start = _globaltimer()
    now = start
    while now - start < delay_ns:
        now = _globaltimer()
    _copy_bytes(src0, dst0, n0, BLOCK)
    if COUNT > 1:
        _copy_bytes(src1, dst1, n1, BLOCK)
    if COUNT > 2:
        _copy_bytes(src2, dst2, n2, BLOCK)


def supported(device: torch.device) -> bool:
    """PDL exists from sm_90 on; the interpreter has none (its @jit functions are not JITFunctions)."""
    return (device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9
            and isinstance(_late_write, triton.JITFunction))


def warm_up() -> None:
    """Build and run the writer for each count of tensor inputs (no delay), before the harness snapshot and any
    candidate code: the probe's first use then compiles nothing inside a candidate's run
    (integrity.run.warm_up_process)."""
    device = torch.device("cuda", torch.cuda.current_device())
    if supported(device):
        for count in range(1, MAX_TENSORS + 1):
            LateInputs([torch.zeros(16 + i, device=device) for i in range(count)]).write(0.0)
        torch.cuda.synchronize(device)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of `t` (allocated by us at offset 0) as bytes."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _empty_like(t: torch.Tensor) -> torch.Tensor:
    """Same sizes and strides (torch.empty_like makes a padded view contiguous), storage at offset 0."""
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)


def _like(t: torch.Tensor) -> torch.Tensor:
    out = _empty_like(t)
    out.copy_(t)
    return out


def _view_into(storage_bytes: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """`t`'s view (dtype, offset, sizes, strides) of another storage: where a copy of t's storage holds t's values."""
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(storage_bytes.untyped_storage(), t.storage_offset(),
                                                               t.size(), t.stride())


class LateInputs:
    """The case's inputs twice: `truth` (the values) and `stale` (same layout, every byte 0xFF after `spoil`: NaN in
    every float format) that `write` fills with the truth from a kernel releasing its dependents before it does.

    By default both are copies, so the caller's tensors are never touched. `in_place`: `stale` is the given tensors
    themselves (the same objects, at the same addresses) and `truth` a copy of their storages; tensors sharing a
    storage (views of one buffer) are written once, as the buffer; `restore` puts the values back."""

    def __init__(self, inputs: Sequence[Any], in_place: bool = False) -> None:
        if in_place:
            storages: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # storage address: (truth, stale) bytes
            for x in inputs:
                if isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() not in storages:
                    stale_bytes = _bytes(x)
                    storages[x.untyped_storage().data_ptr()] = (stale_bytes.clone(), stale_bytes)
            self.stale = list(inputs)
            self.truth = [_view_into(storages[x.untyped_storage().data_ptr()][0], x) if isinstance(x, torch.Tensor)
                          else x for x in inputs]
            self.pairs = list(storages.values())
        else:
            self.truth = [_like(x) if isinstance(x, torch.Tensor) else x for x in inputs]
            self.stale = [_empty_like(x) if isinstance(x, torch.Tensor) else x for x in self.truth]
            self.pairs = [(_bytes(t), _bytes(s)) for t, s in zip(self.truth, self.stale, strict=True)
                          if isinstance(t, torch.Tensor)]
        if not 0 < len(self.pairs) <= MAX_TENSORS:
            raise ValueError(f"the probe writes 1-{MAX_TENSORS} tensor inputs, not {len(self.pairs)}")

    def spoil(self) -> None:
        for _, stale in self.pairs:
            stale.fill_(0xFF)

    def restore(self) -> None:
        """The true values back in `stale`, on the stream (in place: the caller's tensors hold their values again)."""
        for truth, stale in self.pairs:
            stale.copy_(truth)

    def write(self, delay_ms: float) -> None:
        """Launch the late writer on the current stream (the candidate's launch must come right after it)."""
        args: list[Any] = []
        for src, dst in self.pairs + [self.pairs[0]] * (MAX_TENSORS - len(self.pairs)):
            args += [src, dst, src.numel()]
        _late_write[(WRITER_PROGRAMS,)](*args, int(delay_ms * 1e6), COUNT=len(self.pairs), BLOCK=_BLOCK,
                                        num_warps=4)


Check = Callable[[Any, Sequence[Any], Sequence[Any]], str | None]
Call = Callable[[Sequence[Any]], Any]


def _judge(out: Any, late: LateInputs, check: Check, how: str, control: Call) -> None:
    """A wrong output is `stale_input` only if the same call form, on inputs written before it began (`control`,
    given copies of the truth), is right; otherwise the candidate is wrong on fresh inputs whoever wrote them (a
    shortcut it captures, work it batches across calls): `cached_output`, as the timing's checks would call it."""
    problem = check(out, late.truth, late.stale)
    if problem is None:
        return
    given = [_like(x) if isinstance(x, torch.Tensor) else x for x in late.truth]
    torch.cuda.synchronize()
    try:
        again = check(control(given), late.truth, given)
    except CandidateFailure:
        raise
    except Exception as exc:  # the same call form failed outright this time: it behaves differently between calls
        again = f"{type(exc).__name__}: {exc}"[:300]
    if again is not None:
        raise CandidateFailure(Verdict.CACHED_OUTPUT, f"wrong output on fresh inputs ({how}), whoever wrote them: "
                               f"{again}")
    raise CandidateFailure(
        Verdict.STALE_INPUT,
        f"wrong output when the kernel before it on the stream writes its inputs ({how}): {problem}; right when they "
        "were written before it began. A kernel launched with programmatic dependent launch (launch_pdl) must "
        "execute griddepcontrol.wait (triton.language.extra.cuda.gdc_wait) before it reads them")


def _replayed(raw_call: Call, given: Sequence[Any], late: LateInputs | None, delay_ms: float,
              before: Sequence[Sequence[Any]] = ()) -> tuple[Any, Any]:
    """Capture the candidate on each set of `before` (outputs dropped), (the late writer, when given, then) the
    candidate on `given`; replay once: (graph, output). Raises what the capture raised."""
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for ahead in before:  # the calls of the capture ahead of the probed one, as in a timed sample's graph
            raw_call(ahead)
        if late is not None:
            late.write(delay_ms)
        out = raw_call(given)
    graph.replay()
    torch.cuda.synchronize()
    return graph, out


def timed_delay_ms(call_median_us: float, gate_delay_ms: float) -> float:
    """The late writer's wait for the probe after the timed samples: five timed calls' worth (a call's reads end
    within its own duration; five allow for calls that overlapped while timed), at least 1 ms, at most gate 7's
    delay (the setting), which gate 7 waits in full: it has no timing yet."""
    return min(gate_delay_ms, max(1.0, 5 * call_median_us / 1e3))


def ahead_sets(ring: Sequence[Sequence[Any]], calls: int) -> list[Sequence[Any]]:
    """The sets the post-timing probe's graph calls the candidate on before the probed call (the ring's last set):
    1 to `calls` - 1 of them, at random (unpredictable to the candidate), taken round the rest of the ring (the
    probed set itself where the ring has one set: those calls read its NaN and their outputs are dropped). None for
    samples of one call. The probed call's place 1 is gate 7's one-call graph."""
    if calls < 2:
        return []
    others = list(ring[:-1]) or [ring[-1]]
    return [others[i % len(others)] for i in range(1 + secrets.randbelow(calls - 1))]


def probe(call: Call, raw_call: Call, inputs: Sequence[Any], check: Check, delay_ms: float,
          in_place: bool = False, before: Sequence[Sequence[Any]] = ()) -> DependentLaunchProbe:
    """Run both probes on copies of `inputs` (`in_place`: on `inputs` themselves, their values restored after); in
    the graph, the candidate is first called on each set of `before`, so the probed call is not a capture's first.
    `call` is an observed gate call (it synchronizes); `raw_call` is the candidate itself, captured as the timing
    captures it (whatever it raises there means "not capturable"); `check(out, true_inputs, given_inputs)` says what
    is wrong with an output, or None (or raises the verdict of a broken contract). Returns "stream_only" when the
    candidate cannot be captured (its timed calls then run from the stream too)."""
    late = LateInputs(inputs, in_place)
    try:
        return _probe(call, raw_call, late, check, delay_ms, before)
    finally:
        if in_place:
            late.restore()
            torch.cuda.synchronize()


def _probe(call: Call, raw_call: Call, late: LateInputs, check: Check, delay_ms: float,
           before: Sequence[Sequence[Any]]) -> DependentLaunchProbe:
    late.spoil()
    late.write(delay_ms)
    _judge(call(late.stale), late, check, "called from the stream", call)
    late.spoil()
    try:
        graph, out = _replayed(raw_call, late.stale, late, delay_ms, before)
    except Exception:  # not capturable (it synchronizes, reads a result on the host): timed from the stream too
        recover_failed_capture()
        return "stream_only"
    graphs = [graph]  # kept until judged: the outputs live in their graphs' memory pools

    def control(given: Sequence[Any]) -> Any:
        kept, again = _replayed(raw_call, given, None, 0.0, before)
        graphs.append(kept)
        return again

    _judge(out, late, check, "replayed from a CUDA graph", control)
    return "passed"
