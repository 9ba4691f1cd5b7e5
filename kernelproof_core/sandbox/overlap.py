"""Several candidates verified at once on one GPU, with every timed phase still exclusive.

One candidate at a time leaves the GPU mostly idle: a quick verification on the H200 spends 1.3 s compiling and
0.65 s in correctness checks per candidate, against 0.5 s of timing (benchmarks/NOTES.md). `OverlappedExecutors`
runs `width` verifications concurrently, each in its own SandboxExecutor (its own fork server and standby
children), all under one GpuArbiter: a run's compile and checks go on while another run is timed, and a timed
phase (or the copy-bandwidth probe at arming) starts only when every other run is stopped at a phase boundary with
an empty GPU queue (sandbox/arbiter.py). Isolation is unchanged: every candidate is still a fresh, single-use child.

On CUDA each job's kernels are also built ahead, from the moment it is submitted, by a GPU-less precompile child
(precompiler.py) that runs outside the arbiter, through other runs' timed phases; the job's verification waits for
its own precompile and then finds its kernels in its cache.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from kernelproof_core.campaign import Campaign, CandidateJob, Device
from kernelproof_core.candidate import source_sha256
from kernelproof_core.pipeline import PipelineEvents
from kernelproof_core.sandbox.arbiter import GpuArbiter
from kernelproof_core.sandbox.executor import SandboxExecutor
from kernelproof_core.sandbox.precompiler import Precompiled, Precompiler, gpu_target
from kernelproof_core.sandbox.protocol import GpuTarget
from kernelproof_core.settings import Settings
from kernelproof_core.verify import Execution

log = logging.getLogger(__name__)
PRECOMPILE_LOG_LENGTH = 256


class OverlappedExecutors:
    """`width` sandbox executors sharing one GPU arbiter; jobs go to whichever executor is free."""

    def __init__(self, width: int, settings: Settings | None = None, precompile: bool | None = None) -> None:
        if width < 1:
            raise ValueError("width must be at least 1")
        self.width = width
        self.arbiter = GpuArbiter()
        self.executors = [SandboxExecutor(settings, arbiter=self.arbiter) for _ in range(width)]
        use = self.executors[0].settings.sandbox_precompile if precompile is None else precompile
        self.precompiler = Precompiler(width, self.executors[0].settings) if use else None
        # (source sha256, what its precompile did, without the bytes) of the latest jobs: benchmarks and tests.
        self.precompiled: deque[tuple[str, Precompiled]] = deque(maxlen=PRECOMPILE_LOG_LENGTH)
        self._free: queue.Queue[SandboxExecutor] = queue.Queue()
        for executor in self.executors:
            self._free.put(executor)
        self._threads = ThreadPoolExecutor(max_workers=width, thread_name_prefix="kp-overlap")
        self._probe_lock = threading.Lock()
        self._probed: dict[Device, GpuTarget | None] = {}

    def submit(self, job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None) -> Future[Execution]:
        target = self._probe(campaign.device)
        ahead = None
        if self.precompiler is not None and target is not None:
            ahead = self.precompiler.submit(job, campaign, target)
        return self._threads.submit(self._execute, job, campaign, events, ahead)

    def _probe(self, device: Device) -> GpuTarget | None:
        """Each executor's environment probe (it measures copy bandwidth) runs outside the arbiter, so all of them
        run here, one after another, before any job of this device can be timed; the precompile servers start here
        too. Cached after the first time. Returns the GPU's compile target (None: nothing to precompile)."""
        with self._probe_lock:  # never an executor's own lock after the first time: it is held while it runs a job
            if device not in self._probed:
                environments = [executor.probe_environment(device) for executor in self.executors]
                target = gpu_target(environments[0])
                if self.precompiler is not None and target is not None:
                    self.precompiler.start(device)
                self._probed[device] = target
            return self._probed[device]

    def execute(self, job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None) -> Execution:
        return self.submit(job, campaign, events).result()

    def execute_many(self, jobs: Sequence[CandidateJob], campaign: Campaign,
                     events: PipelineEvents | None = None) -> list[Execution]:
        """Verify every job, up to `width` at once (results in the jobs' order). `events` is shared by all jobs and
        called from several threads."""
        futures = [self.submit(job, campaign, events) for job in jobs]
        return [f.result() for f in futures]

    def _execute(self, job: CandidateJob, campaign: Campaign, events: PipelineEvents | None,
                 ahead: Future[Precompiled] | None) -> Execution:
        precompiled = None
        if ahead is not None:  # waited for before taking a slot: others may go first
            try:
                precompiled = ahead.result()
            except Exception:  # never the candidate's problem: its verification compiles for itself
                log.exception("precompile failed")
        if precompiled is not None:
            self.precompiled.append((source_sha256(job.source), precompiled.without_files()))
            if precompiled.note:
                log.info("no precompiled kernels for this job: %s", precompiled.note)
        executor = self._free.get()
        try:
            return executor.execute(job, campaign, events, precompiled.files if precompiled else None)
        finally:
            self._free.put(executor)

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        if self.precompiler is not None:
            self.precompiler.close()
        for executor in self.executors:
            executor.close()
