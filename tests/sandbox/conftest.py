"""Fixtures for the sandbox suite: one shared sandboxed executor with tight limits and short deadlines, and a small
interpreter campaign (two cases, so a kill mid-run shows both the killed case and a skipped one)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.sandbox import SandboxExecutor
from kernelproof_core.sandbox.forkserver import parent_pids, process_trees
from kernelproof_core.settings import Settings
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict
from kernelproof_core.verify import Execution
from tests.sandbox.candidates import source

# A secret in the worker's environment that no candidate may see (set before any server starts).
SECRET_VALUE = "s3cr3t-do-not-leak"
os.environ.setdefault("KERNELPROOF_TEST_SECRET", SECRET_VALUE)

Origin = Literal["builtin", "file", "submission"]
DEADLINE_S = 8.0
CASES = ["n1", "tail127"]  # in the order the task runs them


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """This suite's honest runs must finish inside DEADLINE_S and some tests compare wall clocks: `serial`, which
    scripts/test runs alone after its parallel phase, so a neighbour's work never pushes one past its deadline."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.serial)


def sandbox_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        sandbox_memory_limit_bytes=1024**3,
        sandbox_max_processes=64,
        sandbox_output_cap_bytes=256 * 1024,
        sandbox_kill_grace_s=3.0,
        sandbox_child_start_timeout_s=60.0,
    )
    values.update(overrides)
    return Settings(**values)


def campaign(**overrides: Any) -> Campaign:
    values: dict[str, Any] = dict(device="interpreter", dtypes=["float32"], case_set=CaseSet.INTERPRETER,
                                     case_ids=CASES, measure=False, compile_timeout_s=DEADLINE_S,
                                     execution_timeout_s=DEADLINE_S)
    values.update(overrides)
    return Campaign(**values)


def run(executor: SandboxExecutor, name: str, camp: Campaign | None = None, origin: Origin = "submission",
        **replace: str) -> Execution:
    job = CandidateJob(task="rms_norm", source=source(name, **replace), origin=origin, filename=f"{name}.py")
    return executor.execute(job, camp or campaign())


def sandbox_states(executor: SandboxExecutor, device: str = "interpreter") -> dict[int, str]:
    """Host pid -> process state letter ("S", "T" for stopped, ...) of every process in the executor's sandbox."""
    root = executor._servers[device].proc.pid  # type: ignore[index]
    states = {}
    for pid in process_trees({root}, parent_pids()):
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        states[pid] = text[text.rindex(")") + 2:].split()[0]
    return states


def verdicts(execution: Execution) -> list[Verdict]:
    return [c.verdict for c in execution.outcome.cases]


def assert_honest_passes(executor: SandboxExecutor) -> None:
    """The supervisor is healthy and nothing the previous candidate did leaks into the next one."""
    execution = run(executor, "honest")
    assert verdicts(execution) == [Verdict.PASS] * len(CASES), execution.outcome.cases


@pytest.fixture(scope="session")
def executor() -> Iterator[SandboxExecutor]:
    ex = SandboxExecutor(sandbox_settings())
    yield ex
    ex.close()
