"""Cheat checks: the defences that make a reward impossible to collect without doing the work.

Runtime checks come first and must hold on their own; the static policy is a second layer.

| module | defence |
| --- | --- |
| `launches.py` | proof of work: observes the candidate's Triton launches and which memory its kernels wrote |
| `dispatch.py` | proof of work: traces torch ops the candidate ran (a torch op doing the math is a fallback) |
| `proof.py` | the proof-of-work decision from that evidence (`no_kernel_launch`) |
| `tamper.py` | identities of timers and harness objects, threads, torch mode stacks (`tampering`) |
| `guard.py` | one observed candidate call: all of the above around a gate call |
| `audit.py` | fresh data and output checks between timing samples (`cached_output`, `tampering`) |
| `precision.py` | 16-bit outputs within one unit in the last place, so downcast math cannot hide in tolerances |
| `plausibility.py` | the physical floor on measured time (`implausible_timing`) and persisting-L2 control |
| `policy.py` | the static AST policy (`policy_violation`) |
| `dependent_launch.py` | inputs written by the kernel just before, which lets dependents start early (`stale_input`) |
| `hidden_cases.py` | hidden cases: planning and input seeds from the per-run secret |
| `run.py` | arming all of it for one candidate run, before the candidate's code runs; restoring afterwards |
"""
