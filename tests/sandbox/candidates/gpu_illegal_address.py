# mypy: ignore-errors
# ruff: noqa: F821
# GPU only: stores through a wild pointer (illegal memory access), which poisons this process's CUDA context.
@triton.jit
def _wild_store(ptr):
    tl.store(ptr + (1 << 40), 1.0)


def candidate(x, weight, eps):
    _wild_store[(1,)](x)
    torch.cuda.synchronize()
    return honest(x, weight, eps)
