"""Bad input raises a clear Python error naming the problem."""
import jax.numpy as jnp
import numpy as np
import pytest

import jaxemu

A = np.ones((3, 4), np.float32)
B = np.ones((4, 2), np.float32)


def test_integer_operands():
    with pytest.raises(TypeError, match="a has dtype int32.*floating-point"):
        jaxemu.dot(np.ones((3, 4), np.int32), B)
    with pytest.raises(TypeError, match="rhs has dtype int8"):
        jaxemu.dot_general(A, np.ones((4, 2), np.int8), (((1,), (0,)), ((), ())))


def test_float64_operands():
    with pytest.raises(TypeError, match="b has dtype float64.*float32"):
        jaxemu.dot(A, np.ones((4, 2), np.float64))
    with pytest.raises(TypeError, match="rhs has dtype float64.*float32"):
        jaxemu.dot_general(A, np.ones((4, 2), np.float64), (((1,), (0,)), ((), ())))


def test_mismatched_contracting_sizes():
    with pytest.raises(ValueError, match="contracting dimensions differ in size: lhs axis 1 has 4, rhs axis 0 has 5"):
        jaxemu.dot(A, np.ones((5, 2), np.float32))
    with pytest.raises(ValueError, match="matmul: contracting dimensions differ"):
        jaxemu.matmul(A, np.ones((5, 2), np.float32))


def test_bad_dimension_numbers():
    with pytest.raises(ValueError, match="out of range"):
        jaxemu.dot_general(A, B, (((2,), (0,)), ((), ())))
    with pytest.raises(ValueError, match="differ in number"):
        jaxemu.dot_general(A, B, (((1,), (0, 1)), ((), ())))
    with pytest.raises(ValueError, match="must be"):
        jaxemu.dot_general(A, B, "nonsense")
    with pytest.raises(ValueError, match="batch dimensions differ in size"):
        jaxemu.dot_general(np.ones((2, 3, 4), np.float32), np.ones((5, 4, 2), np.float32),
                           (((2,), (1,)), ((0,), (0,))))


def test_unknown_scheme_and_invalid_parameters():
    with pytest.raises(ValueError, match="unknown scheme 'bf16x7'"):
        jaxemu.dot(A, B, scheme="bf16x7")
    with pytest.raises(ValueError, match="kc must be a positive int"):
        jaxemu.dot(A, B, scheme=jaxemu.get_scheme("bf16x6").replace(kc=0))
    with pytest.raises(ValueError, match="unknown scheme"):
        with jaxemu.default_scheme("nope"):
            pass


def test_bad_output_dtype_and_backend():
    with pytest.raises(TypeError, match="preferred_element_type must be float32"):
        jaxemu.dot(A, B, preferred_element_type=jnp.int32)
    with pytest.raises(ValueError, match="backend must be one of"):
        jaxemu.dot(A, B, backend="tpu")


def test_cuda_backend_on_cpu_is_a_clear_error():
    with pytest.raises(ValueError, match="backend='cuda'"):
        jaxemu.dot(A, B, backend="cuda")


def test_non_arrays():
    with pytest.raises(TypeError, match="lhs must be an array"):
        jaxemu.dot_general(object(), B, (((1,), (0,)), ((), ())))
    with pytest.raises(ValueError, match="rank >= 1"):
        jaxemu.dot(np.float32(2.0), B)


def test_emulate_rejects_non_callables_and_bad_options():
    with pytest.raises(TypeError, match="f must be callable"):
        jaxemu.emulate(3)
    with pytest.raises(ValueError, match="unknown scheme"):
        jaxemu.emulate(lambda x: x, scheme="bf16x5")
    with pytest.raises(TypeError, match="per_dot must be"):
        jaxemu.emulate(lambda x: x, per_dot=5)


def test_dimension_numbers_must_be_integers():
    # int() used to accept these and compute another product (found by tests/test_random.py).
    for bad in ((((1.5,), (0,)), ((), ())), (((True,), (0,)), ((), ())), ((("1",), (0,)), ((), ())),
                (((np.array([1.0]),), (0,)), ((), ()))):
        with pytest.raises(ValueError, match="dimension_numbers must be .* of integer axes"):
            jaxemu.dot_general(A, B, bad)
    # numpy integers are integers
    assert jaxemu.dot_general(A, B, (((np.int64(1),), (np.int32(0),)), ((), ()))).shape == (3, 2)


def test_non_arrays_are_named_by_each_entry_point():
    # dot named them lhs/rhs or called them scalars; matmul(None) raised jnp's message.
    for bad in (None, "abc", {}, object()):
        with pytest.raises(TypeError, match="a must be an array"):
            jaxemu.dot(bad, B)
        with pytest.raises(TypeError, match="b must be an array"):
            jaxemu.matmul(A, bad)
    with pytest.raises(TypeError, match="a has dtype int32"):
        jaxemu.dot(np.ones((3, 4), np.int32), B)
    with pytest.raises(ValueError, match="rank >= 1, but b is a scalar"):
        jaxemu.dot(A, np.float32(2))
    with pytest.raises(ValueError, match="rank >= 1, but a is a scalar"):
        jaxemu.matmul(np.float32(2), B)


def test_matmul_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"matmul: batch dimensions of a \(shape \(2, 3, 4\)\) and b"):
        jaxemu.matmul(np.ones((2, 3, 4), np.float32), np.ones((3, 4, 2), np.float32))
