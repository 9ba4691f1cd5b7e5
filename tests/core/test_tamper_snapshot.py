"""The harness snapshot's quick comparison (tamper._Index.intact) never calls a changed process intact: each kind of
change the descriptive walk names also fails the quick check, and restoring the process makes both clean again."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch

from kernelproof_core import verdicts
from kernelproof_core.integrity.tamper import HarnessSnapshot
from kernelproof_core.measurement import sampler, timing


@pytest.fixture
def snapshot() -> Iterator[HarnessSnapshot]:
    snap = HarnessSnapshot.take()
    assert snap.index is not None and snap.index.intact() and snap.changes() == []
    yield snap
    snap.restore()


def _replace_timer() -> None:
    torch.cuda.synchronize = lambda *a, **k: None


def _new_code() -> None:
    timing.calls_per_sample.__code__ = (lambda call_ms, bound, max_sample_ms: 1).__code__


def _new_defaults() -> None:
    timing.calls_per_sample.__defaults__ = (1,)


def _shadow_method() -> None:
    torch.Tensor.kp_shadow = lambda self: 0  # type: ignore[attr-defined]


def _replace_method() -> None:
    torch.cuda.Event.elapsed_time = lambda self, other: 0.0  # type: ignore[method-assign,assignment]


def _remove_harness_attr() -> None:
    del timing.finite_or_none


CHANGES: dict[str, Callable[[], None]] = {
    "timer replaced": _replace_timer,
    "function body replaced": _new_code,
    "defaults replaced": _new_defaults,
    "method added to a watched class": _shadow_method,
    "method of a watched class replaced": _replace_method,
    "harness attribute removed": _remove_harness_attr,
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_every_change_fails_the_quick_check_and_is_named(snapshot: HarnessSnapshot, name: str) -> None:
    CHANGES[name]()
    assert snapshot.index is not None and not snapshot.index.intact()
    assert snapshot.changes(), name
    snapshot.restore()
    assert snapshot.index.intact() and snapshot.changes() == []


def test_a_table_edited_in_place_is_named_though_identities_hold(snapshot: HarnessSnapshot) -> None:
    info = verdicts.VERDICT_INFO
    key = next(iter(info))
    saved = info[key]
    info[key] = None  # type: ignore[assignment]
    try:
        assert any("VERDICT_INFO" in line for line in snapshot.changes())
    finally:
        info[key] = saved


def test_a_plain_class_attribute_turned_into_a_method_fails_the_quick_check(snapshot: HarnessSnapshot) -> None:
    cls = sampler.CudaSampler
    saved = vars(cls)["__module__"]
    cls.__module__ = staticmethod(lambda: None)  # type: ignore[assignment]
    try:
        assert snapshot.index is not None and not snapshot.index.intact()
        assert any("CudaSampler.__module__" in line for line in snapshot.changes())
    finally:
        cls.__module__ = saved
    assert snapshot.index.intact()
