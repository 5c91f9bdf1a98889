"""``host.fetch``: results read back as NumPy, however long they take, structure kept."""

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import host


class Pair(NamedTuple):
    a: object
    b: object


def test_a_result_comes_back_as_numpy_with_its_values_and_dtype():
    x = jax.jit(lambda v: v * 2)(jnp.arange(5, dtype=jnp.int32))
    got = host.fetch(x)
    assert type(got) is np.ndarray and got.dtype == np.int32
    np.testing.assert_array_equal(got, np.arange(5) * 2)


def test_a_pytree_keeps_its_structure_and_its_other_leaves():
    tree = (Pair(jnp.ones(3), None), [jnp.zeros((2, 2)), 1.5, "name"])
    got = host.fetch(tree)
    assert type(got) is tuple and type(got[0]) is Pair and type(got[1]) is list
    assert type(got[0].a) is np.ndarray and got[0].b is None
    assert type(got[1][0]) is np.ndarray and got[1][1:] == [1.5, "name"]


def test_a_result_longer_than_the_poll_is_waited_for():
    """Dispatched asynchronously, a program that runs for far longer than ``SPIN`` is not ready
    when the poll ends: the fetch then blocks, and returns its value."""

    @jax.jit
    def slow(m):
        return jax.lax.fori_loop(0, 400, lambda _, x: jnp.tanh(x @ m), m)

    m = jnp.eye(100) * 0.5 + 0.001
    expected = np.asarray(slow(m))  # compiled, and the value
    start = time.perf_counter()
    got = host.fetch(slow(m))
    assert time.perf_counter() - start > 5 * host.SPIN  # the poll ended before the result
    np.testing.assert_array_equal(got, expected)


def test_traced_values_pass_through():
    """Inside ``jax.jit`` around a caller (a wrapper's method), the values stay traced."""
    np.testing.assert_allclose(jax.jit(lambda v: host.fetch((v + 1, v))[0] * 3)(jnp.ones(2)), [6.0, 6.0])
