"""Progress of long runs: one line per finished case on stderr, and optionally each case's result as a JSON line."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # importing campaign pulls in torch; `kernelproof submit` and `keys` should not pay for it
    from kernelproof_core.campaign import Campaign
    from kernelproof_core.pipeline import PipelineEvents
    from kernelproof_core.report.models import CaseResult


class ProgressPrinter:
    """PipelineEvents implementation that reports each finished case (and nothing on non-terminals unless asked)."""

    def __init__(self, stream: TextIO, campaign: Campaign, tasks: list[str]) -> None:
        from kernelproof_core.pipeline import planned_cases
        from kernelproof_core.tasks import get_task

        self.stream = stream
        self.total = sum(len(planned_cases(get_task(t), campaign)) for t in tasks) * len(campaign.dtypes)
        self.done = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()  # overlapped runs (--overlap) report from several threads

    def phase(self, name: str, case_id: str | None = None) -> None:
        return None

    def case_done(self, result: CaseResult) -> None:
        with self._lock:
            self._print(result)

    def _print(self, result: CaseResult) -> None:
        self.done += 1
        timing = ""
        if result.timing is not None:
            t = result.timing
            timing = f"  cand {t.candidate.median:9.2f}us  base {t.baseline.median:9.2f}us"
            # The interpreter's ratio compares an interpreted kernel with eager torch on the CPU: no speed at all.
            timing += f"  x{t.speedup:5.2f}" if t.kind == "cuda_events" else "  (interpreter wall-clock, unrewarded)"
        elapsed = time.monotonic() - self.started
        self.stream.write(
            f"[{self.done:>3}/{self.total}] {elapsed:7.1f}s  {result.task:<9} {result.dtype:<9} "
            f"{result.case_id:<16} {result.verdict.value:<18}{timing}\n"
        )
        self.stream.flush()


class CaseLines:
    """PipelineEvents that writes each finished case's result (the report's CaseResult, as JSON) to a file, one line
    each, flushed at once (the file is started afresh by each run). The report is written when the run ends; a run
    stopped before that (a time box, a kill, the machine taken back) still leaves every case it finished here."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def phase(self, name: str, case_id: str | None = None) -> None:
        return None

    def case_done(self, result: CaseResult) -> None:
        with self._lock:
            self._file.write(result.model_dump_json() + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


class Fanout:
    """Several PipelineEvents as one: each call goes to all of them, in order."""

    def __init__(self, *targets: PipelineEvents) -> None:
        self.targets = targets

    def phase(self, name: str, case_id: str | None = None) -> None:
        for target in self.targets:
            target.phase(name, case_id)

    def case_done(self, result: CaseResult) -> None:
        for target in self.targets:
            target.case_done(result)
