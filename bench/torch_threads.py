"""bench/torch_threads.py: sizes PyTorch's thread pools for the side-by-side benches.

torch.set_num_threads(n) sizes ATen's OpenMP pool only; Debian's torch runs its GEMMs in the
system OpenBLAS, whose own pool is sized with openblas_set_num_threads(n) through ctypes.
Imported by gpt_torch.py, train_torch.py and ops_torch.py (run from this folder, so the import
finds it).
"""
import ctypes

import torch


def set_threads(n):
    """Sizes both pools to n; returns OpenBLAS's thread count, or None when torch's BLAS is not
    the system OpenBLAS (then torch.set_num_threads is all there is)."""
    torch.set_num_threads(n)
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_set_num_threads(int(n))
        return lib.openblas_get_num_threads()
    except (OSError, AttributeError):
        return None
