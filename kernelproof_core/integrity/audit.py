"""Checks between timing samples: fresh data, verified outputs, an intact harness. Never inside a timed region.

A candidate that behaves during the gates and cheats while it is timed (phase detection, caching by pointer, a
no-op returning memory that still holds an earlier result, deferred or batched launches) is caught here:
  * each stream-launched sample makes a random number of calls (in [fraction x n, n]), so a batcher cannot align its
    flushes with the end of a sample. A graph-replayed sample makes the calls it captured: no candidate host code
    runs during a replay, and the graph's first replay is verified on fresh inputs before any sample
    (measurement.replay);
  * on `audits` randomly chosen samples, the input set read by the sample's last call gets new contents in place
    (same pointer, never seen before) before the L2 flush, and that call's output is checked against the oracle
    after the sample: stale, deferred or wrong output is `cached_output`; inputs that no longer hold those contents
    are `input_mutated` (the oracle of rewritten inputs could agree with a shortcut's output);
  * with ring audits (`KERNELPROOF_TIMING_RING_AUDITS`), the same for one randomly chosen earlier call of the sample,
    on its ring set: the last call reads a set no other call reads, so a candidate keyed on input addresses could
    skip ring calls and still pass the first check; every output of the sample is kept, so no two calls may return
    one buffer (`cached_output`) and the candidate cannot learn which output is checked;
  * after every sample the harness, Triton's launch path and the thread set are checked (`tampering`) and, on a
    GPU, the persisting-L2 limit must still be zero.
The choices come from an RNG seeded from os.urandom, so the candidate cannot predict which sample is audited.
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Sequence
from typing import Any

import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity.guard import CallGuard, bitwise_equal
from kernelproof_core.integrity.plausibility import PersistingL2
from kernelproof_core.metrics import describe_failure, error_metrics, within_tolerance
from kernelproof_core.tasks.base import Case, OutputSpec, Task
from kernelproof_core.verdicts import Verdict


class SampleAuditor:
    """Implements measurement.sampler's SampleAuditor protocol for one case."""

    def __init__(self, task: Task, case: Case, dtype: torch.dtype, spec: OutputSpec, guard: CallGuard,
                 samples: int, audits: int, min_call_fraction: float, l2: PersistingL2 | None = None) -> None:
        self.task, self.case, self.dtype, self.spec = task, case, dtype, spec
        self.guard = guard
        self.l2 = l2 if l2 is not None and l2.arm() else None  # checked wherever a driver is
        self.rng = random.Random(secrets.randbits(63))
        self.audited = frozenset(self.rng.sample(range(samples), min(audits, samples)))
        self.min_call_fraction = min_call_fraction
        self.checked = 0
        self._refreshed: dict[int, list[torch.Tensor]] = {}  # id of a set refreshed this sample -> its contents

    def calls(self, sample: int, invocations: int) -> int:
        """How many calls this sample makes."""
        return self.rng.randint(max(1, math.ceil(invocations * self.min_call_fraction)), invocations)

    def audit(self, sample: int) -> bool:
        return sample in self.audited

    def refresh(self, inputs: Sequence[Any]) -> None:
        """New contents for one input set, in place (outside the timed region); a copy is kept until the sample's
        checks are done, so that `verify` can tell the set still holds them."""
        self.task.perturb_inputs(self.case, self.dtype, inputs, torch.Generator().manual_seed(self.rng.getrandbits(62)))
        self._refreshed[id(inputs)] = [x.clone() for x in inputs if isinstance(x, torch.Tensor)]

    def pick_call(self, calls: int) -> int:
        """Which of a sample's first `calls` calls a ring audit checks: drawn here, so the candidate cannot know."""
        return self.rng.randrange(calls)

    def verify_ring(self, outs: Sequence[Any], call: int, inputs: Sequence[Any]) -> None:
        """Ring audit of a sample whose every output was kept: no storage returned twice (a call that hands back an
        earlier call's output did not compute its own), and call `call`'s output right for its refreshed ring set."""
        seen: set[int] = set()
        for out in outs:
            if type(out) is torch.Tensor:
                ptr = out.untyped_storage().data_ptr()
                if ptr in seen:
                    raise CandidateFailure(Verdict.CACHED_OUTPUT, "two timed calls returned the same buffer: a "
                                           "call handed back an earlier output instead of computing its own")
                seen.add(ptr)
        self.verify(outs[call], inputs)

    def before_flush(self) -> None:
        if self.l2 is not None:
            self.l2.reset()

    def after_sample(self, out: Any, inputs: Sequence[Any], audited: bool) -> None:
        """Harness intact; and, for an audited sample, the last call's output right for the refreshed inputs. Ends
        the sample's checks: the refreshed contents are dropped."""
        self.guard.check()
        if self.l2 is not None:
            self.l2.verify_disabled()
        try:
            if audited:
                self.verify(out, inputs)
        finally:
            self._refreshed.clear()

    def verify(self, out: Any, inputs: Sequence[Any]) -> None:
        """The output is right for the inputs, which hold what `refresh` put there: a timed call that rewrote them
        (say, zeroed input and output alike while a graph was captured, so that the oracle of the rewritten input
        agrees) is `input_mutated`, as in the gates."""
        refreshed = self._refreshed.get(id(inputs))
        if refreshed is not None:
            now = [x for x in inputs if isinstance(x, torch.Tensor)]
            if not all(map(bitwise_equal, now, refreshed)):
                raise CandidateFailure(Verdict.INPUT_MUTATED, "a timed call modified its inputs (the gates saw them "
                                       "unchanged): the candidate behaves differently while timed")
        if type(out) is not torch.Tensor or vars(out) or tuple(out.shape) != self.spec.shape \
                or out.dtype != self.spec.dtype:
            raise CandidateFailure(Verdict.CACHED_OUTPUT, "a timed call returned something other than the "
                                   f"documented output ({type(out).__qualname__}); the gates saw a proper tensor")
        reference = self.task.oracle(inputs)
        policy = self.task.tolerance(self.dtype)
        metrics = error_metrics(out, reference, policy)
        if not within_tolerance(metrics, policy):
            raise CandidateFailure(
                Verdict.CACHED_OUTPUT,
                "a timed call returned output that is wrong for its (fresh) inputs, though the gates passed: "
                "the candidate behaves differently while timed (stale, cached or deferred output): "
                + describe_failure(metrics, policy),
            )
        self.checked += 1
