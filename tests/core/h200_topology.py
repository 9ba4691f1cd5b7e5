"""The H200's topology for plan tests run without a GPU: SMs and shared memory a multiprocessor (bytes)."""

H200_SMS, H200_SMEM_PER_SM = 132, 233472
