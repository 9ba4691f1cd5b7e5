"""Compile ahead: each candidate's kernels are built in a GPU-less sandboxed child while other candidates are timed.

Under overlap (overlap.py) every run's compile and checks are frozen while another run is timed, because those
phases use the GPU too. Building kernels needs no GPU (kernelproof_core/precompile.py), so a precompile child can
run straight through other runs' timed phases without disturbing them:

  * it is forked by a fork server of its own (one per slot, started before any job is timed, no harness-kernel
    prewarm: it never touches the GPU) with `gpu=False`: no CUDA start-up, and landlock grants nothing under /dev
    but the always-writable nodes, so not even a read-only open of a GPU device node succeeds; landlock is
    required (no landlock, no precompile). It runs under the same watchdog, deadlines, cgroup, rlimits and
    seccomp as any candidate child, outside the GPU arbiter;
  * it runs the candidate's entry point on every planned case's shapes, with CPU inputs of fresh random values,
    and sends back its Triton cache entries (size-capped): kernels and their C launchers;
  * the same candidate's verification child installs them in its own cache just before loading the candidate
    (after every harness kernel is built, never over an existing entry), so its compile phase becomes cache hits.

The entries are bytes produced by candidate code; they reach only that candidate's own process, which could have
written the same files into its own cache itself. A failed or slow precompile costs nothing but the overlap: the
verification child compiles whatever is missing, and no verdict depends on any of this.
"""

from __future__ import annotations

import logging
import queue
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from kernelproof_core.campaign import Campaign, CandidateJob, Device
from kernelproof_core.report.models import Environment
from kernelproof_core.sandbox.deaths import classify
from kernelproof_core.sandbox.executor import SandboxExecutor
from kernelproof_core.sandbox.protocol import GpuTarget
from kernelproof_core.settings import Settings, get_settings

log = logging.getLogger(__name__)


@dataclass
class Precompiled:
    """One precompile's product: cache entries for the verification child, and what happened."""

    files: dict[str, bytes] = field(default_factory=dict)
    calls: int = 0
    failed: list[str] = field(default_factory=list)
    launcher_errors: list[str] = field(default_factory=list)
    dropped_entries: int = 0
    seconds: float = 0.0
    note: str = ""  # why there are no entries, when there are none
    file_names: list[str] = field(default_factory=list)  # the entries' paths and total size, kept without the bytes
    size_bytes: int = 0

    def without_files(self) -> Precompiled:
        """This record without the bytes (what a long-running worker may keep)."""
        return replace(self, files={})


def gpu_target(environment: Environment) -> GpuTarget | None:
    """The compile target of the probed GPU ("9.0" -> arch 90), or None where there is no CUDA GPU."""
    if environment.device != "cuda" or environment.gpu is None:
        return None
    try:
        major, minor = (int(part) for part in environment.gpu.capability.split(".")[:2])
    except ValueError:
        return None
    return GpuTarget(arch=major * 10 + minor)


class Precompiler:
    """`width` precompile slots, each a SandboxExecutor with its own GPU-free fork server; jobs queue in order."""

    def __init__(self, width: int, settings: Settings | None = None) -> None:
        base = settings or get_settings()
        # No harness-kernel prewarm (it would launch on the GPU from this server's start) and no standbys (those
        # start CUDA): every child of these servers is a precompile child.
        own = base.model_copy(update={"sandbox_seed_triton_cache": False, "sandbox_standby_children": 0})
        self.slots = [SandboxExecutor(own) for _ in range(width)]
        self._free: queue.Queue[SandboxExecutor] = queue.Queue()
        for slot in self.slots:
            self._free.put(slot)
        self._threads = ThreadPoolExecutor(max_workers=width, thread_name_prefix="kp-precompile")

    def start(self, device: Device) -> None:
        """Start every slot's fork server now (imports, no GPU), so none starts in the middle of a job. A server
        that does not start is left to the first precompile to retry and report (as a note, never a verdict)."""
        for slot in self.slots:
            try:
                slot.start(device)
            except Exception as exc:
                log.warning("precompile server did not start: %s", exc)

    def submit(self, job: CandidateJob, campaign: Campaign, target: GpuTarget) -> Future[Precompiled]:
        return self._threads.submit(self._run, job, campaign, target)

    def _run(self, job: CandidateJob, campaign: Campaign, target: GpuTarget) -> Precompiled:
        slot = self._free.get()
        started = time.monotonic()
        try:
            run = slot.precompile(job, campaign, target)
        except Exception as exc:  # never the candidate's verdict; the verification compiles for itself
            log.exception("precompile failed")
            run = f"{type(exc).__name__}: {exc}"
        finally:
            self._free.put(slot)
        seconds = time.monotonic() - started
        if isinstance(run, str):
            return Precompiled(seconds=seconds, note=run)
        msg = run.precompiled
        if msg is None:
            why = classify(run.death, {}) if run.death is not None else None
            return Precompiled(seconds=seconds, note=f"no entries: {why[1] if why else 'child ended early'}")
        return Precompiled(files=msg.files, calls=msg.calls, failed=msg.failed, launcher_errors=msg.launcher_errors,
                           dropped_entries=msg.dropped_entries, seconds=seconds, file_names=sorted(msg.files),
                           size_bytes=sum(len(data) for data in msg.files.values()))

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        for slot in self.slots:
            slot.close()
