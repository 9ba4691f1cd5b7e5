"""CUDA-graph replay of a timing sample: the calls as one device program, without the per-launch device gap.

Launched one by one, back to back on a stream (even with the host's cost hidden by the launch gate), consecutive
kernels on the H200 sit 1.2-1.7 us apart: the front end's per-launch work. For a 26 us kernel that is 5% over its
CUPTI duration (benchmarks/kernel_gaps.py, evidence/h200/2026-11-30_graph_replay). Captured in a CUDA graph the same
calls sit 0.26 us apart, so the event time per call agrees with the kernel time within about 1%.

So each implementation's sample (`calls` calls over the ring of input sets) is captured once, after the warm-ups,
and every sample replays it between the events. What this changes for an untrusted candidate:
  * its host code runs only while the graph is captured, never while it is timed: nothing it does on the host can
    depend on sample boundaries, so the random call counts of stream sampling are not needed;
  * it can tell a capture is running (torch.cuda.is_current_stream_capturing) and capture something else than what
    the gates saw. The graph is a fixed device program, so the first replay is verified on fresh inputs before any
    sample (measurement.timing), and audited samples verify again; a capture-only shortcut is `cached_output`, or
    `input_mutated` where it rewrote its inputs to match;
  * a candidate that cannot be captured (it synchronizes, reads a result on the host, autotunes a new key) is timed
    with stream launches instead, and the report says so (Timing.sample_launch, the note). The pair is always
    timed alike: a failed capture of either implementation means both use streams.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

Fn = Callable[..., Any]
_Graph = torch.cuda.CUDAGraph
_graph_context = torch.cuda.graph


@dataclass(frozen=True, slots=True)
class CapturedSample:
    """One implementation's sample as a graph. `out` is the last call's output: graph-pool memory every replay
    rewrites; `last_inputs` the input set that call reads (audits refresh it in place). Captured with every output
    kept (ring audits), `outs` holds each call's and `sets` the ring set each call reads (-1: `last_inputs`)."""

    graph: Any
    calls: int
    last_inputs: Sequence[Any]
    out: Any
    outs: tuple[Any, ...] = ()
    sets: tuple[int, ...] = ()

    def replay(self) -> None:
        self.graph.replay()


def capture(fn: Fn, input_sets: Sequence[Sequence[Any]], calls: int,
            last_inputs: Sequence[Any] | None = None, keep_outputs: bool = False) -> CapturedSample:
    """Capture `calls` calls, call k reading input set k mod len(input_sets); with `last_inputs`, the last call
    reads that set instead (the audit set: no other call computes it, so no earlier output of the replay can pass
    for the audited one, as in stream sampling). Raises what the capture raised.

    Outputs are not kept (except the last), so the graph's private pool hands a freed output's memory to a later
    call: a sample of a 1 GB case costs one output, not `calls` of them. With `keep_outputs` (ring audits) every
    output is kept, each in memory of its own, so that any call's can be verified after a replay (the caller caps
    `calls` by memory)."""
    n = len(input_sets)
    last = last_inputs if last_inputs is not None else input_sets[(calls - 1) % n]
    torch.cuda.synchronize()
    graph = _Graph()
    out = None
    outs: list[Any] = []
    with _graph_context(graph):
        for k in range(calls):
            out = None  # free the previous output inside the capture, so the next call may reuse its memory
            out = fn(*(last if k == calls - 1 else input_sets[k % n]))
            if keep_outputs:
                outs.append(out)
    torch.cuda.synchronize()
    sets = tuple(-1 if k == calls - 1 and last_inputs is not None else k % n for k in range(calls)) \
        if keep_outputs else ()
    return CapturedSample(graph, calls, last, out, tuple(outs), sets)


def capture_pair(candidate: Fn, baseline: Fn, input_sets: Sequence[Sequence[Any]], counts: tuple[int, int],
                 audit_set: Sequence[Any] | None = None, keep_outputs: bool = False,
                 ) -> tuple[CapturedSample | None, CapturedSample | None, str | None]:
    """Both implementations captured, or neither: (candidate, baseline, None), or (None, None, why not). The
    candidate's last call reads `audit_set` where given; the baseline's reads its ring set. `keep_outputs` (ring
    audits): every output of both is kept, so the pair is timed alike (measurement.kept_outputs)."""
    captured: list[CapturedSample] = []
    for name, fn, calls, last, keep in (("candidate", candidate, counts[0], audit_set, keep_outputs),
                                        ("baseline", baseline, counts[1], None, keep_outputs)):
        try:
            captured.append(capture(fn, input_sets, calls, last, keep))
        except Exception as exc:  # not capturable: time both with stream launches
            recover_failed_capture()
            why = f"the {name} could not be captured in a CUDA graph ({type(exc).__name__}: {str(exc)[:300]})"
            log.info("stream timing: %s", why)
            return None, None, why
    return captured[0], captured[1], None


def recover_failed_capture() -> None:
    """After a failed capture: drain the device, and give the default CUDA generator a fresh state. The capture
    registered it (capture mode on), and a capture that ends in an error never turns that off: every later CUDA
    random draw in the process would fail ("Offset increment outside graph capture")."""
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # a sticky error surfaces at the next real use and is judged there
        log.warning("synchronize after a failed capture: %s", exc)
    try:
        generator = torch.cuda.default_generators[torch.cuda.current_device()]
        fresh = torch.Generator(device="cuda")
        fresh.manual_seed(generator.initial_seed())
        generator.graphsafe_set_state(fresh)
    except Exception as exc:
        log.warning("could not reset the CUDA generator after a failed capture: %s", exc)


__all__ = ["CapturedSample", "capture", "capture_pair", "recover_failed_capture"]
