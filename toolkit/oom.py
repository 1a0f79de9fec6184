"""Out of memory: the one test for the errors torch and its allocators raise when memory runs out."""


def is_oom(e: BaseException) -> bool:
    """`e` says memory ran out: torch.OutOfMemoryError (CUDA's allocator), or another backend's error whose
    message says so (the CPU allocator, MPS)."""
    import torch
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()
