"""Shared fixtures. Tests run kernels under the Triton interpreter unless CUDA is present (GPU suite)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
import torch

from kernelproof_core.interpreter import enable_interpreter
from kernelproof_core.settings import get_settings

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Before any @triton.jit decorator runs; on a GPU host everything runs compiled.
    enable_interpreter()


_FAILURE_LINES = 40  # of each failure's text in KP_FAILURES_FILE


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With KP_FAILURES_FILE set (scripts/gpu-check sets it), each failing test's id is appended to that file as it
    fails, with the end of its failure text: a time-boxed run is killed before pytest's summary and junit report,
    which would name and explain them."""
    path = os.environ.get("KP_FAILURES_FILE")
    if path and report.failed and "PYTEST_XDIST_WORKER" not in os.environ:  # under xdist the controller writes
        text = "\n".join("    " + line for line in report.longreprtext.splitlines()[-_FAILURE_LINES:])
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{report.when} {report.nodeid}\n{text}\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (run scripts/gpu-check on the H200)")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def device() -> str:
    return "cuda" if HAS_CUDA else "interpreter"


@pytest.fixture
def kp_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set KERNELPROOF_* settings for this test's in-process runs (`kp_settings(timing_ring_audits=False)`); the
    cached settings are rebuilt now and after the test."""
    def apply(**values: object) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"KERNELPROOF_{name.upper()}", str(value).lower())
        get_settings.cache_clear()

    yield apply
    monkeypatch.undo()
    get_settings.cache_clear()
