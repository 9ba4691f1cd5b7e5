#!/usr/bin/env python3
"""How long CUDA context creation and the first and later torch.profiler (CUPTI) sessions take in a fresh process,
with PyTorch's default CUPTI teardown and with TEARDOWN_CUPTI=0. Used to find where a sandboxed child's start-up
time goes (evidence/h200/2026-11-30_checks/). Needs CUDA."""
import os
import subprocess
import sys
import time

CODE = r'''
import time, torch
from torch.profiler import profile, ProfilerActivity
t=time.perf_counter(); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); t0=time.perf_counter()
out=[("ctx", t0-t)]
for i in range(3):
    a=time.perf_counter(); p=profile(activities=[ProfilerActivity.CUDA]); p.__enter__(); b=time.perf_counter()
    torch.zeros(1024, device="cuda").add_(1); torch.cuda.synchronize(); c=time.perf_counter()
    p.__exit__(None, None, None); d=time.perf_counter(); ev=len(p.events()); e=time.perf_counter()
    out += [(f"s{i}.enter", b-a), (f"s{i}.exit", d-c), (f"s{i}.events", e-d)]
print(" ".join(f"{k}={v:.3f}" for k, v in out))
'''
for env in ({}, {"TEARDOWN_CUPTI": "0"}):
    r = subprocess.run([sys.executable, "-c", CODE], env={**os.environ, **env}, capture_output=True, text=True)
    print(env or "default", r.stdout.strip(), r.stderr.strip()[-300:])
# Where the first session's seconds go: Kineto's own log at its most verbose, each line stamped on arrival.
proc = subprocess.Popen([sys.executable, "-c", CODE], env={**os.environ, "KINETO_LOG_LEVEL": "0"},
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
t0 = time.perf_counter()
assert proc.stdout is not None
for line in proc.stdout:
    print(f"[{time.perf_counter() - t0:8.3f}] {line.rstrip()[:200]}")
proc.wait()
