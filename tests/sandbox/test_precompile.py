"""Compile-ahead (kernelproof_core/precompile.py, sandbox/precompiler.py) with real parts on a CPU host: a real
fork server for the CUDA device, real GPU-less sandboxed children and Triton's real CUDA backend building sm_90
cubins (its bundled ptxas), the built-in candidate included. What runs only on a GPU (the verification child
finding its kernels in its cache) is in test_gpu.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.presets import build_campaign
from kernelproof_core.sandbox.precompiler import Precompiled, Precompiler, gpu_target
from kernelproof_core.sandbox.protocol import GpuTarget
from kernelproof_core.sandbox.supervisor import RunOutcome
from kernelproof_core.sandbox.triton_cache import install_entries
from kernelproof_core.tasks import CaseSet, get_task
from tests.sandbox.candidates import source
from tests.sandbox.conftest import sandbox_settings

H200 = GpuTarget(arch=90)


def cuda_campaign(**overrides: Any) -> Campaign:
    values: dict[str, Any] = dict(device="cuda", dtypes=["bfloat16"], case_set=CaseSet.FULL,
                                     case_ids=["n1", "tail127"], measure=False, compile_timeout_s=60.0)
    values.update(overrides)
    return Campaign(**values)


@pytest.fixture(scope="module")
def precompiler() -> Iterator[Precompiler]:
    pre = Precompiler(1, sandbox_settings())
    pre.start("cuda")
    yield pre
    pre.close()


def precompile(pre: Precompiler, job_source: bytes, camp: Campaign | None = None) -> Precompiled:
    job = CandidateJob(task="rms_norm", source=job_source, origin="submission", filename="c.py")
    return pre.submit(job, camp or cuda_campaign(), H200).result(timeout=300)


def cubins(done: Precompiled) -> list[bytes]:
    return [data for rel, data in done.files.items() if rel.endswith(".cubin")]


def test_the_builtin_candidate_is_built_for_sm90_in_a_gpu_less_child(precompiler: Precompiler) -> None:
    task = get_task("rms_norm")
    camp = build_campaign(task, "cuda", "quick")
    done = precompile(precompiler, task.builtin_candidate.read_bytes(), camp)
    assert done.note == "" and done.failed == [] and done.calls == len(camp.case_ids or [])
    assert len(cubins(done)) >= 3 and all(c.startswith(b"\x7fELF") for c in cubins(done))
    assert any(rel.split("/")[1].startswith("__grp__") for rel in done.files)
    metadata = [data for rel, data in done.files.items() if rel.endswith(".json") and "__grp__" not in rel]
    assert metadata and all(b'"arch": 90' in m or b'"arch":90' in m for m in metadata), metadata[0][:400]
    kept = done.without_files()  # what an overlapped runner keeps of it
    assert kept.files == {} and kept.file_names == sorted(done.files) == done.file_names
    assert kept.size_bytes == done.size_bytes == sum(len(b) for b in done.files.values()) > 0


def test_precompiled_entries_are_cache_hits_in_a_fresh_process(precompiler: Precompiler, tmp_path: Path) -> None:
    """Another process with another cache directory, given the entries as a verification child installs them,
    compiles nothing: no file of its cache is written again (a miss rewrites the entry under the same names)."""
    done = precompile(precompiler, source("honest"))
    cache = tmp_path / "cache"
    install_entries(cache, done.files)
    before = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "KERNELPROOF_"))}
    env |= {"TRITON_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = ("import sys; from kernelproof_core.campaign import Campaign, CandidateJob; "
            "from kernelproof_core.precompile import precompile_candidate; "
            "job = CandidateJob.model_validate_json(sys.argv[1]); camp = Campaign.model_validate_json(sys.argv[2]); "
            "s = precompile_candidate(job, camp, 'cuda', 90, 32); assert s.calls == 2 and not s.failed, s")
    job = CandidateJob(task="rms_norm", source=source("honest"), origin="submission", filename="c.py")
    subprocess.run([sys.executable, "-c", code, job.model_dump_json(), cuda_campaign().model_dump_json()], env=env,
                   check=True, timeout=300)
    after = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    assert after == before, sorted(str(p) for p in after if after[p] != before.get(p))


def test_a_precompile_child_has_no_gpu_and_no_dev(precompiler: Precompiler) -> None:
    done = precompile(precompiler, source("precompile_probe"))
    assert done.calls == 2 and len(done.failed) == 2, done
    assert all("probe dev=denied cuda=False device=cpu" in f for f in done.failed), done.failed
    run = precompiler.slots[0].precompile(
        CandidateJob(task="rms_norm", source=source("honest"), origin="submission"), cuda_campaign(), H200)
    assert isinstance(run, RunOutcome) and run.armed is not None
    assert {"no-gpu", "landlock-fs", "seccomp"} <= set(run.armed.layers), run.armed


def test_every_autotune_config_is_built_ahead(precompiler: Precompiler) -> None:
    done = precompile(precompiler, source("precompile_autotune"), cuda_campaign(case_ids=["n1"]))
    assert done.failed == [] and done.calls == 1
    assert len(cubins(done)) == 2  # one per config (num_warps 1 and 2), none benchmarked


def test_a_candidate_that_does_not_load_gets_nothing_and_no_verdict(precompiler: Precompiler) -> None:
    done = precompile(precompiler, b"raise ImportError('not today')\n")
    assert done.files == {} and done.calls == 0
    assert len(done.failed) == 1 and done.failed[0].startswith("load: "), done.failed


def test_code_the_static_policy_refuses_does_not_run_ahead(precompiler: Precompiler) -> None:
    refused = source("honest") + b"\nimport threading\nraise SystemExit('ran')\n"
    done = precompile(precompiler, refused, cuda_campaign(static_policy=True))
    assert done.files == {} and done.calls == 0 and done.note == ""
    assert len(done.failed) == 1 and "no-concurrency" in done.failed[0], done.failed


def test_the_target_comes_from_the_probed_gpu() -> None:
    from kernelproof_core.report.models import Environment, GpuInfo

    env = Environment(device="cuda", hostname="h", platform="p", python="3", torch="t", triton="3.6",
                      harness_version="0", gpu=GpuInfo(name="H200", capability="9.0", sm_count=132, memory_bytes=1))
    assert gpu_target(env) == GpuTarget(arch=90, warp_size=32)
    assert gpu_target(env.model_copy(update={"gpu": None})) is None
