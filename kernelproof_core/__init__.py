"""KernelProof core: verify untrusted Triton kernels against higher-precision oracles, time them, score them."""

__version__ = "0.1.0"
# Identifies the verification logic; part of the cache key for answering a resubmission from a stored verdict.
# 0.9: the dependent-launch probe again after the timed samples, in place on a ring set, not a capture's first call;
# 0.8: the dependent-launch probe (gate 7), kernel time as each stream's busy time; 0.7: ring audits by default;
# 0.6: graph replay; 0.5: host-release launch gate; 0.4: launch-hidden device time (sleep gate), reward v2
HARNESS_VERSION = "kernelproof-harness/0.9.0"
