"""Timing: CUDA-event latency, kernel-only device time and their summary statistics."""
