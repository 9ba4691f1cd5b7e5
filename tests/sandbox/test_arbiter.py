"""The GPU arbiter's decisions (kernelproof_core/sandbox/arbiter.py), driven directly: which runs go on at each
phase boundary, when an exclusive phase starts and ends, who is frozen, and that nothing deadlocks."""

from __future__ import annotations

from kernelproof_core.sandbox.arbiter import GpuArbiter


class Runs:
    """Seats whose release and freeze calls are recorded, as the supervisor's would send them to children."""

    def __init__(self, arbiter: GpuArbiter, *names: str) -> None:
        self.arbiter = arbiter
        self.calls: list[str] = []
        for name in names:
            arbiter.join(name, lambda n=name: self.calls.append(f"go {n}"),
                         lambda frozen, n=name: self.calls.append(f"{'freeze' if frozen else 'thaw'} {n}"))

    def take(self) -> list[str]:
        out, self.calls = self.calls, []
        return out


def test_a_run_alone_goes_on_at_every_boundary() -> None:
    arbiter = GpuArbiter()
    runs = Runs(arbiter, "a")
    for phase in ("prepare", "arm", "load", "compile", "execute", "measure", "compile"):
        arbiter.reached("a", phase)
        assert runs.take() == ["go a"], phase


def test_a_timed_phase_waits_until_every_other_run_is_at_a_boundary() -> None:
    arbiter = GpuArbiter()
    paused: list[bool] = []
    arbiter.set_pauser("pool", paused.append)
    runs = Runs(arbiter, "a", "b")
    arbiter.reached("a", "load")
    arbiter.reached("b", "load")
    assert sorted(runs.take()) == ["go a", "go b"]
    arbiter.reached("a", "measure")  # b is somewhere in its load: a waits
    assert runs.take() == []
    arbiter.reached("b", "compile")  # b stops at its boundary: now a is timed, b waits there, frozen
    assert runs.take() == ["freeze b", "go a"] and paused == [True]
    assert arbiter.exclusive_active
    arbiter.reached("a", "compile")  # a's timing ended at its next boundary: both go on, standbys continue
    assert runs.take() == ["thaw b", "go a", "go b"] and paused == [True, False]
    assert not arbiter.exclusive_active


def test_a_waiting_timed_phase_holds_back_other_runs_so_it_is_not_starved() -> None:
    arbiter = GpuArbiter()
    runs = Runs(arbiter, "a", "b", "c")
    for name in "abc":
        arbiter.reached(name, "load")
    runs.take()
    arbiter.reached("a", "measure")
    arbiter.reached("b", "execute")  # must not go on: a is waiting for the GPU
    assert runs.take() == []
    arbiter.reached("c", "execute")
    assert runs.take() == ["freeze b", "freeze c", "go a"]
    arbiter.reached("a", "execute")
    assert runs.take() == ["thaw b", "thaw c", "go a", "go b", "go c"]


def test_timed_phases_are_granted_one_at_a_time_in_arrival_order() -> None:
    arbiter = GpuArbiter()
    runs = Runs(arbiter, "a", "b")
    arbiter.reached("a", "load")
    arbiter.reached("b", "load")
    runs.take()
    arbiter.reached("b", "measure")
    arbiter.reached("a", "measure")
    assert runs.take() == ["freeze a", "go b"]  # b asked first
    arbiter.reached("b", "compile")  # b's timing ends; a, waiting and asked next, is timed while b waits
    assert runs.take() == ["freeze b", "thaw a", "go a"]
    arbiter.reached("a", "compile")
    assert runs.take() == ["thaw b", "go a", "go b"]


def test_arming_measures_bandwidth_so_it_is_exclusive_too() -> None:
    arbiter = GpuArbiter()
    runs = Runs(arbiter, "a", "b")
    arbiter.reached("a", "prepare")
    runs.take()
    arbiter.reached("a", "arm")  # b is still starting up (before its first boundary): it is frozen, a arms
    assert runs.take() == ["freeze b", "go a"]
    arbiter.reached("a", "load")
    assert runs.take() == ["thaw b", "go a"]


def test_a_run_that_joins_during_a_timed_phase_is_frozen_until_it_ends() -> None:
    arbiter = GpuArbiter()
    runs = Runs(arbiter, "a")
    arbiter.reached("a", "measure")
    runs.take()
    Runs.__init__(runs, arbiter, "b")  # b's child starts up (CUDA, CUPTI) while a is timed
    assert runs.take() == ["freeze b"]
    arbiter.reached("a", "compile")
    assert runs.take() == ["thaw b", "go a"]


def test_a_run_that_ends_frees_whoever_waited_on_it() -> None:
    arbiter = GpuArbiter()
    runs = Runs(arbiter, "a", "b")
    arbiter.reached("a", "load")
    arbiter.reached("b", "load")
    runs.take()
    arbiter.reached("a", "measure")
    assert runs.take() == []
    arbiter.leave("b")  # b finished (or was killed) without another boundary
    assert runs.take() == ["go a"]
    arbiter.leave("a")  # a killed mid-timing: nothing stays exclusive
    assert not arbiter.exclusive_active
    runs2 = Runs(arbiter, "c")
    arbiter.reached("c", "measure")
    assert runs2.take() == ["go c"]


def test_consecutive_timed_phases_keep_the_gpu_even_with_others_queued() -> None:
    """Deferred measurement: a's timed phases come back to back. b asks for the GPU meanwhile, but a keeps it until
    its first boundary that is not a timed phase; b, already held at its boundary, is not asked again."""
    arbiter = GpuArbiter()
    runs = Runs(arbiter, "a", "b")
    arbiter.reached("a", "load")
    arbiter.reached("b", "load")
    runs.take()
    arbiter.reached("b", "compile")
    arbiter.reached("a", "measure")
    assert runs.take() == ["go b"]  # nobody exclusive yet: b goes on; a waits for b's next boundary
    arbiter.reached("b", "measure")  # b at a boundary, asking too: a (first in line) is timed, b frozen
    assert runs.take() == ["freeze b", "go a"]
    arbiter.reached("a", "measure")  # a's next case: it continues, b stays where it is
    assert runs.take() == ["go a"] and arbiter.exclusive_active
    assert [e for _, r, e in arbiter.log if r == "a"][-2:] == ["continued", "released"]
    arbiter.reached("a", "finish")  # a's timing is over: b's turn, a held at its boundary
    assert runs.take() == ["freeze a", "thaw b", "go b"]
