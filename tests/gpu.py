"""The marks of the GPU test modules (test_cuda.py, test_cuda_int8.py): they
run with an NVIDIA GPU and the CUDA extension, and skip otherwise."""
import jax
import pytest

from jaxemu.backends import cuda


def has_cuda_gpu() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


MARKS = [pytest.mark.gpu,
         pytest.mark.skipif(not (has_cuda_gpu() and cuda.built()), reason="needs a CUDA GPU and the CUDA extension")]
