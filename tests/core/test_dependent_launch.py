"""The dependent-launch probe (integrity/dependent_launch.py, gate 7) where no GPU is needed: the stale and true copies
of a case's inputs, the gate's place in a verification (off by default, unsupported under the interpreter), and the
sm_90 builds of the writer, the exploit and the honest candidate, and kernel busy time. The probe itself runs in
tests/gpu."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.integrity.dependent_launch import (
    MAX_TENSORS,
    LateInputs,
    ahead_sets,
    supported,
    timed_delay_ms,
)
from kernelproof_core.integrity.profiled import covered_us
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import VERDICT_INFO, Verdict
from tests.sm90_build import compile_for_sm90

CANDIDATES = Path(__file__).resolve().parents[1] / "adversarial" / "candidates"
EXPLOIT = CANDIDATES / "dependent_launch_no_wait.py"
HONEST = CANDIDATES / "honest" / "rms_norm_dependent_launch.py"


def test_late_inputs_hold_the_truth_and_a_nan_copy_of_the_same_layout() -> None:
    base = torch.randn(6, 40, dtype=torch.float32).to(torch.bfloat16)
    strided = base[:, 3:35]  # a view: offset into its storage, row stride 40
    weight = torch.randn(32, dtype=torch.float16)
    late = LateInputs([strided, weight, 1e-6])
    truth, stale = late.truth, late.stale
    assert torch.equal(truth[0], strided) and truth[0].stride() == strided.stride()
    assert truth[0].data_ptr() != strided.data_ptr()  # a copy: the case's own inputs are never touched
    assert stale[0].stride() == strided.stride() and stale[0].dtype == torch.bfloat16
    assert truth[2] == stale[2] == 1e-6  # non-tensor arguments pass through
    late.spoil()
    assert torch.isnan(stale[0]).all() and torch.isnan(stale[1]).all()  # every byte 0xFF: NaN in each format
    assert torch.equal(truth[0], strided) and torch.equal(truth[1], weight)
    # the writer copies whole storages: the bytes it reads and writes cover each tensor exactly
    assert [(s.numel(), d.numel()) for s, d in late.pairs] == [(truth[0].untyped_storage().nbytes(),) * 2,
                                                                (weight.numel() * 2,) * 2]


def test_late_inputs_in_place_spoil_and_restore_the_callers_own_tensors() -> None:
    """After the timed samples the probe runs on a ring set itself (the objects and addresses the timed calls
    used); views of one buffer (swiglu's halves of a fused projection) are one storage, spoilt and written once."""
    fused = torch.randn(4, 64).to(torch.bfloat16)
    gate, up = fused[:, :32], fused[:, 32:]
    before = fused.clone()
    late = LateInputs([gate, up, 0.5], in_place=True)
    assert late.stale[0] is gate and late.stale[1] is up and late.stale[2] == late.truth[2] == 0.5
    assert len(late.pairs) == 1 and late.pairs[0][1].numel() == fused.untyped_storage().nbytes()
    assert late.truth[1].data_ptr() != up.data_ptr() and late.truth[1].stride() == up.stride()
    assert torch.equal(late.truth[0], gate) and torch.equal(late.truth[1], up)
    late.spoil()
    assert torch.isnan(gate).all() and torch.isnan(up).all()  # the caller's tensors, until the writer comes
    assert torch.equal(late.truth[0], before[:, :32]) and torch.equal(late.truth[1], before[:, 32:])
    late.restore()
    assert torch.equal(fused, before)


def test_the_timed_probe_waits_five_calls_within_bounds() -> None:
    assert timed_delay_ms(30.0, 20.0) == 1.0  # at least 1 ms
    assert timed_delay_ms(1000.0, 20.0) == 5.0  # five 1 ms calls
    assert timed_delay_ms(10_000.0, 20.0) == 20.0  # never longer than gate 7's own delay
    assert timed_delay_ms(10_000.0, 2.0) == 2.0


def test_the_timed_probe_puts_its_call_past_a_captures_first() -> None:
    """The post-timing probe's graph calls the candidate on other ring sets first: 1 to calls - 1 of them, at random,
    round the ring without the probed (last) set; a ring of one set repeats it; a one-call sample adds none."""
    ring = [("a",), ("b",), ("c",), ("probed",)]
    seen = set()
    for _ in range(300):
        ahead = ahead_sets(ring, 20)
        assert 1 <= len(ahead) <= 19 and ("probed",) not in ahead
        assert ahead == [ring[i % 3] for i in range(len(ahead))]
        seen.add(len(ahead))
    assert len(seen) > 10  # drawn, not fixed: a candidate cannot know which call of a capture is probed
    assert ahead_sets([("only",)], 5)[0] == ("only",) and ahead_sets(ring, 1) == []
    assert ahead_sets(ring, 2) == [("a",)]


def test_late_inputs_take_one_to_three_tensors() -> None:
    with pytest.raises(ValueError, match="1-3 tensor inputs"):
        LateInputs([1.0])
    with pytest.raises(ValueError, match="1-3 tensor inputs"):
        LateInputs([torch.zeros(2)] * (MAX_TENSORS + 1))


def test_stale_input_is_the_candidates_fault() -> None:
    info = VERDICT_INFO[Verdict.STALE_INPUT]
    assert info.candidate_fault and "griddepcontrol.wait" in info.description
    assert Verdict("stale_input") is Verdict.STALE_INPUT


def test_no_probe_without_a_gpu() -> None:
    assert not supported(torch.device("cpu"))


@pytest.fixture
def probe_setting(kp_settings: Callable[..., None]) -> None:
    kp_settings(integrity_dependent_launch_probe=True)


def _verify(path: Path, device: str) -> list:
    campaign = Campaign(device=device, dtypes=["bfloat16"], case_set=CaseSet.INTERPRETER,
                        case_ids=["tail127"], measure=False)
    return verify_candidate(CandidateJob(task="rms_norm", source=path.read_bytes()), campaign).cases


def test_the_probe_is_on_by_default_and_can_be_turned_off(device: str, kp_settings: Callable[..., None]) -> None:
    if device == "cuda":
        pytest.skip("the GPU suite runs the probe (tests/gpu/test_gpu_dependent_launch.py)")
    (result,) = _verify(HONEST, device)
    assert result.verdict is Verdict.PASS and result.integrity is not None
    assert result.integrity.dependent_launch == "unsupported"  # on, but the interpreter has no PDL
    kp_settings(integrity_dependent_launch_probe=False)
    (result,) = _verify(HONEST, device)
    assert result.integrity is not None and result.integrity.dependent_launch == "off"


def test_no_timed_probe_under_the_interpreter(device: str) -> None:
    """The second probe runs after timed samples on a GPU; an interpreted case is timed by wall clock and says
    nothing there (null), while gate 7 says `unsupported`."""
    if device == "cuda":
        pytest.skip("the GPU suite runs the probe (tests/gpu/test_gpu_dependent_launch.py)")
    campaign = Campaign(device=device, dtypes=["bfloat16"], case_set=CaseSet.INTERPRETER, case_ids=["tail127"],
                        samples=2, warmups=0)
    (result,) = verify_candidate(CandidateJob(task="rms_norm", source=HONEST.read_bytes()), campaign).cases
    assert result.verdict is Verdict.PASS and result.timing is not None and result.integrity is not None
    assert result.integrity.dependent_launch == "unsupported" and result.integrity.dependent_launch_timed is None


def test_covered_time_counts_one_streams_overlap_once() -> None:
    """Kernel time as busy time (integrity.profiled.covered_us): a dependent launched early and waiting inside the
    GPU overlaps the kernel before it on the stream; the overlap counts once, gaps not at all."""
    assert covered_us([]) == 0.0
    assert covered_us([(0.0, 10.0), (12.0, 20.0)]) == 18.0  # one after another, a gap between
    assert covered_us([(12.0, 20.0), (0.0, 10.0), (8.0, 15.0)]) == 20.0  # overlapping, out of order
    assert covered_us([(0.0, 30.0), (5.0, 10.0)]) == 30.0  # one inside another


def test_the_interpreter_has_no_dependent_launch(device: str, probe_setting: None) -> None:
    """Asked for, the probe reports that this device cannot run it; both candidates are plain kernels here."""
    if device == "cuda":
        pytest.skip("the GPU suite runs the probe (tests/gpu/test_gpu_dependent_launch.py)")
    for path in (HONEST, EXPLOIT):
        (result,) = _verify(path, device)
        assert result.verdict is Verdict.PASS, (path.name, result.failure)
        assert result.integrity is not None and result.integrity.dependent_launch == "unsupported"


_BUILD = r"""
import importlib.util, json, sys, torch
from kernelproof_core.precompile import compile_only
from kernelproof_core.integrity import dependent_launch as dl

def ptx_of(kernel):
    ptx = kernel.asm["ptx"]
    body = ptx[ptx.index(".entry"):]
    return {"launch_dependents": body.find("griddepcontrol.launch_dependents"),
            "wait": body.find("griddepcontrol.wait"), "timer": body.find("%globaltimer"),
            "first_load": min((i for i in (body.find("ld.global"),) if i >= 0), default=-1),
            "launch_pdl": bool(kernel.metadata.launch_pdl)}

out = []
for case in json.loads(sys.argv[1]):
    if case == "writer":
        b = torch.empty(64, dtype=torch.uint8)
        with compile_only("cuda", 90, 32):
            out.append(ptx_of(dl._late_write[(dl.WRITER_PROGRAMS,)](b, b, 64, b, b, 64, b, b, 64, 1000, COUNT=2,
                                                                     BLOCK=dl._BLOCK, num_warps=4)))
        continue
    spec = importlib.util.spec_from_file_location("candidate", case)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, w = torch.empty((4, 64), dtype=torch.bfloat16), torch.empty(64, dtype=torch.bfloat16)
    with compile_only("cuda", 90, 32):
        out.append(ptx_of(module._rms_norm[(4,)](x, w, x, 64, 64, 64, 1e-6, BLOCK=64, PDL=True, launch_pdl=True)))
print(json.dumps(out))
"""


def test_sm90_builds_release_dependents_and_only_the_honest_candidate_waits() -> None:
    """The writer releases its dependents before its timed wait and never waits itself; the exploit is launched with
    PDL and has no wait; the honest candidate waits before its first global load."""
    writer, exploit, honest = compile_for_sm90(_BUILD, ["writer", str(EXPLOIT), str(HONEST)])
    assert 0 <= writer["launch_dependents"] < writer["timer"] and writer["wait"] == -1, json.dumps(writer)
    assert not writer["launch_pdl"]  # the writer is an ordinary launch: only its dependents carry the attribute
    assert exploit["launch_pdl"] and exploit["launch_dependents"] >= 0 and exploit["wait"] == -1, exploit
    assert honest["launch_pdl"] and 0 <= honest["wait"] < honest["first_load"], honest


_SPECIALISED = r"""
import json, sys, torch
from kernelproof_core.precompile import compile_only
from kernelproof_core.integrity import dependent_launch as dl

def builds():
    return sum(len(cache[0]) for cache in dl._late_write.device_caches.values())

out = []
with compile_only("cuda", 90, 32):
    for count in range(1, dl.MAX_TENSORS + 1):  # as warm_up writes them
        dl.LateInputs([torch.zeros(16 + i) for i in range(count)]).write(0.0)
    warmed = builds()
    odd = [torch.empty(4096, 127, dtype=torch.bfloat16), torch.empty(127, dtype=torch.float16), torch.ones(1),
           torch.zeros(33, dtype=torch.uint8)]
    for tensors in (odd[:1], odd[:2], odd[1:], odd[2:]):
        dl.LateInputs(tensors).write(0.05)
out.append({"warmed": warmed, "after": builds()})
print(json.dumps(out))
"""


def test_the_writer_is_built_once_for_each_count_of_inputs_whatever_their_sizes() -> None:
    """Gate 7's late writer in sm_90 builds (no GPU): after the writes warm_up makes (one, two and three tensors),
    writes of byte sizes that are not multiples of 16, of one element and with a delay build nothing more, so the
    probe compiles nothing inside a candidate's process (sizes and delay are not specialised on; COUNT is)."""
    (found,) = compile_for_sm90(_SPECIALISED, ["once"])
    assert found == {"warmed": MAX_TENSORS, "after": MAX_TENSORS}, found
