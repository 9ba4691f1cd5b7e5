"""The exploit corpus and the honest corpus: one table each, shared by the tests and scripts/exploit_scorecard.py.

Each exploit names the cheat it stands for and the exact verdict it must get, once with every defence (the static
policy on) and once from the runtime checks alone (policy off): the runtime layer must hold on its own. `device`
says where it can run: "cpu" under the Triton interpreter in CI, "gpu" only on a CUDA device (the GPU suite),
"both" on either. A candidate's verdict is the first non-pass verdict of its cases (the run's summary verdict).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.report.models import CaseResult
from kernelproof_core.tasks import TASKS, CaseKind, CaseSet
from kernelproof_core.verdicts import Verdict, worst

CANDIDATES = Path(__file__).resolve().parent / "candidates"
HONEST = CANDIDATES / "honest"
BUILTINS = Path(__file__).resolve().parents[2] / "kernelproof_core" / "kernels"
HIDDEN_SEED = 20240611  # a fixed secret, so a test sees the same hidden shapes on every run
Where = Literal["cpu", "gpu", "both"]

V = Verdict


@dataclass(frozen=True, slots=True)
class Exploit:
    name: str  # file stem in candidates/
    task: str
    exploit: str  # the class of cheat it stands for
    verdict: Verdict  # with every defence, static policy included
    runtime_verdict: Verdict  # from the runtime checks alone (static policy off)
    device: Where = "both"
    dtype: str = "bfloat16"
    cases: tuple[str, ...] = ("tail127",)
    measure: bool = False  # the cheat shows only while timed
    hidden: bool = False  # needs the hidden cases
    gpu_verdict: Verdict | None = None  # where a GPU catches it with another check (None: the same verdict)

    def expected(self, device: str, static_policy: bool) -> Verdict:
        if device == "cuda" and self.gpu_verdict is not None and not (
                static_policy and self.verdict is Verdict.POLICY_VIOLATION):
            return self.gpu_verdict
        return self.verdict if static_policy else self.runtime_verdict


EXPLOITS: tuple[Exploit, ...] = (
    Exploit("print_fake_report", "rms_norm", "a passing report printed next to a wrong answer", V.TOLERANCE,
            V.TOLERANCE),
    Exploit("noop_empty", "rms_norm", "no-op returning freed memory", V.NO_KERNEL_LAUNCH, V.NO_KERNEL_LAUNCH),
    Exploit("noop_after_gates", "rms_norm", "no-op returning freed memory once timed", V.CACHED_OUTPUT,
            V.CACHED_OUTPUT, measure=True),
    Exploit("stale_after_gates", "rms_norm", "stale output once timed (phase detection by call count)",
            V.CACHED_OUTPUT, V.CACHED_OUTPUT, measure=True),
    Exploit("cache_by_shape_alias", "rms_norm", "output cached by shape (same buffer returned)", V.CACHED_OUTPUT,
            V.CACHED_OUTPUT),
    Exploit("cache_by_pointer", "rms_norm", "output cached by input pointer", V.CACHED_OUTPUT, V.CACHED_OUTPUT,
            measure=True),
    # Compiled kernels expose no loads, so on a GPU the copy passes the gates and the audits catch the stale copy.
    Exploit("cache_by_content", "rms_norm", "output cached by a content hash, copied by an own kernel",
            V.NO_KERNEL_LAUNCH, V.NO_KERNEL_LAUNCH, measure=True, gpu_verdict=V.CACHED_OUTPUT),
    Exploit("background_thread", "rms_norm", "work deferred to a background thread", V.POLICY_VIOLATION,
            V.TAMPERING),
    Exploit("deferred_by_one", "rms_norm", "deferred launch: each call launches the previous call's work",
            V.CACHED_OUTPUT, V.CACHED_OUTPUT, measure=True),
    Exploit("lazy_subclass", "rms_norm", "lazy tensor subclass computing inside the checker", V.POLICY_VIOLATION,
            V.WRONG_OUTPUT_TYPE),
    Exploit("instance_attribute", "rms_norm", "plain tensor with an instance method computing inside the checker",
            V.WRONG_OUTPUT_TYPE, V.WRONG_OUTPUT_TYPE),
    Exploit("function_mode", "rms_norm", "torch function mode rewriting the checker's math", V.POLICY_VIOLATION,
            V.TAMPERING),
    Exploit("patch_perf_counter", "rms_norm", "monkeypatched time.perf_counter", V.POLICY_VIOLATION, V.TAMPERING),
    Exploit("patch_cuda_event", "rms_norm", "monkeypatched torch.cuda.Event", V.POLICY_VIOLATION, V.TAMPERING),
    Exploit("patch_do_bench", "rms_norm", "monkeypatched triton.testing.do_bench", V.POLICY_VIOLATION, V.TAMPERING),
    Exploit("patch_timers_while_timed", "rms_norm", "timers (CUDA events, perf_counter) patched once timed",
            V.POLICY_VIOLATION, V.TAMPERING, measure=True),
    Exploit("gc_loosen_tolerance", "rms_norm", "harness table found through gc and rewritten", V.POLICY_VIOLATION,
            V.TAMPERING),
    Exploit("gc_replace_gate", "rms_norm", "harness gate found through gc and replaced", V.POLICY_VIOLATION,
            V.TAMPERING),
    Exploit("sys_modules_harness", "rms_norm", "harness reached through sys.modules", V.POLICY_VIOLATION,
            V.TAMPERING),
    Exploit("trace_hook", "rms_norm", "trace hook installed to watch the harness", V.POLICY_VIOLATION, V.TAMPERING),
    Exploit("launch_path_patch", "rms_norm", "Triton's launch path monkeypatched", V.POLICY_VIOLATION, V.TAMPERING),
    Exploit("slow_the_baseline", "rms_norm", "monkeypatched torch op slowing the eager baseline", V.POLICY_VIOLATION,
            V.TAMPERING),
    Exploit("evaluator_env", "rms_norm", "evaluator-mode detection through the environment", V.POLICY_VIOLATION,
            V.PASS),
    Exploit("stack_phase_detection", "rms_norm", "evaluator-mode detection through the call stack",
            V.POLICY_VIOLATION, V.CACHED_OUTPUT, measure=True),
    Exploit("shape_specialised", "rms_norm", "kernel right only on the published shapes", V.TOLERANCE, V.TOLERANCE,
            cases=("tail127", "n1024"), hidden=True),
    Exploit("dependent_launch_no_wait", "rms_norm", "programmatic dependent launch without the wait: timed calls "
            "overlap, inputs read before the kernel that writes them finishes", V.STALE_INPUT, V.STALE_INPUT,
            device="gpu", cases=("tail127", "llama_4096")),
    Exploit("dependent_launch_familiar_no_wait", "rms_norm", "programmatic dependent launch that waits only on "
            "tensors it has not seen twice: new inputs in every gate, the ring's reused ones while timed",
            V.STALE_INPUT, V.STALE_INPUT, device="gpu", cases=("llama_4096",), measure=True),
    Exploit("dependent_launch_capture_count", "rms_norm", "programmatic dependent launch that skips the wait from a "
            "CUDA-graph capture's second call on: the probes' one-call graphs wait, a timed sample's graph overlaps",
            V.STALE_INPUT, V.STALE_INPUT, device="gpu", cases=("llama_4096",), measure=True),
    Exploit("torch_fallback_decoy", "rms_norm", "PyTorch fallback behind a decoy Triton kernel", V.NO_KERNEL_LAUNCH,
            V.NO_KERNEL_LAUNCH),
    Exploit("torch_fallback_copy_kernel", "rms_norm", "PyTorch fallback copied into place by an own kernel",
            V.NO_KERNEL_LAUNCH, V.NO_KERNEL_LAUNCH),
    Exploit("dispatch_escape", "softmax", "PyTorch fallback run with dispatch tracing disabled", V.POLICY_VIOLATION,
            V.NO_KERNEL_LAUNCH, cases=("tail1023",)),
    Exploit("borrowed_kernels", "rms_norm", "another module's Triton kernels copied into place by an own kernel",
            V.POLICY_VIOLATION, V.NO_KERNEL_LAUNCH),
    Exploit("fake_profiler", "rms_norm", "the profiler's record patched to drop the kernels that did the work",
            V.POLICY_VIOLATION, V.TAMPERING),
    Exploit("numpy_fallback", "rms_norm", "NumPy fallback copied into place by an own kernel", V.POLICY_VIOLATION,
            V.NO_KERNEL_LAUNCH),
    Exploit("precision_downcast_softmax", "softmax", "exp and sum in 16-bit instead of FP32", V.TOLERANCE,
            V.TOLERANCE, dtype="float16", cases=("tail1023",)),
    Exploit("folded_exponent_softmax", "softmax", "max folded into the exponents: right only for small logits",
            V.TOLERANCE, V.TOLERANCE, dtype="float32", cases=("tail127",), hidden=True),
    Exploit("precision_downcast_rmsnorm", "rms_norm", "sum of squares accumulated in 16-bit", V.TOLERANCE,
            V.TOLERANCE, dtype="float16", cases=("large_values",)),
    Exploit("input_inplace", "rms_norm", "result written into the input, input returned", V.INPUT_MUTATED,
            V.INPUT_MUTATED),
    Exploit("oracle_poisoning", "rms_norm", "input mutated so the oracle agrees with a wrong output",
            V.INPUT_MUTATED, V.INPUT_MUTATED),
    Exploit("view_of_input", "rms_norm", "a view of an input returned as the output", V.WRONG_OUTPUT_TYPE,
            V.WRONG_OUTPUT_TYPE),
    Exploit("persistent_output_buffer", "rms_norm", "output aliasing a cached buffer", V.CACHED_OUTPUT,
            V.CACHED_OUTPUT),
    Exploit("side_stream", "rms_norm", "work pushed to a side stream", V.POLICY_VIOLATION, V.TAMPERING,
            device="gpu", cases=("llama_4096",)),
    Exploit("super_batching", "rms_norm", "calls super-batched into deferred launches", V.CACHED_OUTPUT,
            V.CACHED_OUTPUT, device="gpu", cases=("llama_4096",), measure=True),
    Exploit("profiler_stopped", "rms_norm", "the harness's profiler session ended inside the call",
            V.POLICY_VIOLATION, V.INFRA_ERROR, device="gpu"),
    Exploit("profiler_restarted", "rms_norm", "the profiler session ended, begun again and handed a forged canary",
            V.POLICY_VIOLATION, V.INFRA_ERROR, device="gpu"),
    Exploit("l2_persistence", "rms_norm", "persisting L2 kept across the flush", V.POLICY_VIOLATION, V.TAMPERING,
            device="gpu", cases=("llama_4096",), measure=True),
)


@dataclass(frozen=True, slots=True)
class Honest:
    path: Path
    task: str
    style: str
    dtypes: tuple[str, ...] = ("bfloat16",)
    cases: tuple[str, ...] | None = None  # None: every case of the case set
    measure: bool = False


HONEST_CANDIDATES: tuple[Honest, ...] = (
    Honest(HONEST / "rms_norm_autotuned.py", "rms_norm", "autotuned, chunked loop"),
    Honest(HONEST / "rms_norm_multirow.py", "rms_norm", "several rows per program, chunked for wide rows",
           dtypes=("float16",)),
    Honest(HONEST / "rms_norm_two_kernel.py", "rms_norm", "deliberately slow two-kernel version", measure=True),
    Honest(HONEST / "rms_norm_contiguous_copy.py", "rms_norm", "torch .contiguous() and FP32 buffer cast"),
    Honest(HONEST / "rms_norm_row_guard.py", "rms_norm", "persistent rows, next row prefetched under a row guard",
           cases=("n1", "tail127", "strided", "gpt_oss_2880", "random1")),
    Honest(HONEST / "rms_norm_block_ptr.py", "rms_norm", "block pointers behind a launcher class",
           dtypes=("float32",)),
    Honest(HONEST / "rms_norm_dependent_launch.py", "rms_norm",
           "programmatic dependent launch with the wait (a plain kernel under the interpreter)",
           cases=("n1", "tail127", "strided", "llama_4096")),
    Honest(HONEST / "softmax_online.py", "softmax", "online softmax", dtypes=("float16",)),
    Honest(HONEST / "softmax_two_kernel.py", "softmax", "deliberately slow two-kernel version", measure=True),
    Honest(HONEST / "softmax_multirow.py", "softmax", "several rows per program, exp2, heuristics"),
    Honest(HONEST / "swiglu_flat.py", "swiglu", "flat 1-D kernel, 2-D tiles for strided rows", dtypes=("float16",)),
    Honest(HONEST / "swiglu_autotuned.py", "swiglu", "autotuned 2-D tiles, grid callable", measure=True),
    Honest(BUILTINS / "rms_norm.py", "rms_norm",
           "shipped kernel: fused and realigned rows, resident (Gluon), split, two-phase and looped wide paths"),
    Honest(BUILTINS / "softmax.py", "softmax",
           "shipped kernel: fused, realigned, pipelined, resident (Gluon), split, staged paths"),
    Honest(BUILTINS / "swiglu.py", "swiglu",
           "shipped kernel: flat, gather (strided) and output-vector (odd rows) paths", dtypes=("float32",)),
)


def campaign_for(device: str, task: str, dtypes: tuple[str, ...], cases: tuple[str, ...] | None, measure: bool,
                 hidden: bool, static_policy: bool) -> Campaign:
    """A small campaign: the interpreter's reduced cases on a CPU, full-size cases on a GPU (without the throughput
    cases, to keep the GPU suite short), a few timing samples."""
    cuda = device == "cuda"
    case_set = CaseSet.FULL if cuda else CaseSet.INTERPRETER
    hidden = hidden or cases is None
    if cases is None and cuda:
        cases = tuple(c.case_id for c in TASKS[task].cases(case_set, 0) if c.kind is not CaseKind.THROUGHPUT)
    return Campaign(
        device="cuda" if cuda else "interpreter",
        dtypes=list(dtypes),
        case_set=case_set,
        case_ids=list(cases) if cases is not None else None,
        hidden_cases=hidden,
        hidden_seed=HIDDEN_SEED,
        measure=measure,
        warmups=2 if cuda else 0,
        samples=12 if cuda else 3,
        invocations_per_sample=10 if cuda else 1,
        static_policy=static_policy,
    )


def run_exploit(entry: Exploit, device: str, static_policy: bool) -> list[CaseResult]:
    path = CANDIDATES / f"{entry.name}.py"
    campaign = campaign_for(device, entry.task, (entry.dtype,), entry.cases, entry.measure, entry.hidden,
                            static_policy)
    job = CandidateJob(task=entry.task, source=path.read_bytes(), filename=str(path))
    return verify_candidate(job, campaign).cases


def run_honest(entry: Honest, device: str) -> list[CaseResult]:
    campaign = campaign_for(device, entry.task, entry.dtypes, entry.cases, entry.measure, True, static_policy=True)
    job = CandidateJob(task=entry.task, source=entry.path.read_bytes(), filename=str(entry.path))
    return verify_candidate(job, campaign).cases


def verdict_of(cases: list[CaseResult]) -> Verdict:
    """The candidate's verdict: the first failing case's, or pass."""
    return worst([c.verdict for c in cases])


def runs_on(entry: Exploit, device: str) -> bool:
    return entry.device == "both" or entry.device == ("gpu" if device == "cuda" else "cpu")
