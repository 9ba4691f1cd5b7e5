# mypy: ignore-errors
# ruff: noqa: F821
# Precompile tests: the honest kernel autotuned over two configs (both must be built ahead) with its block size
# from a heuristic.
_tuned = triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["N"])(
    triton.heuristics({"BLOCK_N": lambda args: triton.next_power_of_2(args["N"])})(_rms_norm_kernel))


def candidate(x, weight, eps):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _tuned[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps)
    return y
