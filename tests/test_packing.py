"""Tests for dense_armor.packing (a pytree in one buffer per dtype, bit-exact both ways) and the
rewrites of dense_armor.compiler that it and the learners use."""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor import compiler
from dense_armor.compiler import JOIN_SELECTS, SHORT_AXIS, dot_last, join, max_last, stage
from dense_armor.packing import Layout

jax.config.update("jax_enable_x64", True)


class Pair(NamedTuple):
    a: object
    b: object


def _tree():
    rng = np.random.default_rng(0)
    return {
        "f64": jnp.asarray(rng.standard_normal((3, 4))),
        "f32": jnp.asarray(rng.standard_normal(5), jnp.float32),
        "i32": jnp.asarray([7, -2**31, 2**31 - 1], jnp.int32),
        "i64": jnp.asarray(2**60 + 1, jnp.int64),
        "flag": jnp.asarray([True, False, True]),
        "nested": Pair(jnp.asarray([np.nan, np.inf, -0.0, 5e-324]), None),
        "scalar": jnp.asarray(3.5),
    }


def _bits(tree):
    return jax.tree.map(lambda a: np.asarray(a).tobytes() + str(np.asarray(a).dtype).encode(), tree)


def test_round_trip_is_bit_exact_outside_and_inside_jit():
    tree = _tree()
    layout = Layout.of(tree)
    # int32 and bool ride in the float64 buffer (exact); int64 and float32 keep their own.
    assert sorted(layout.groups) == ["float32", "float64", "int64"]
    assert all(b.ndim == 1 for b in layout.pack(tree))
    host = layout.unpack([np.asarray(b) for b in layout.pack(tree)])  # NumPy views
    assert _bits(host) == _bits(tree)
    traced = jax.jit(lambda t: layout.unpack(layout.pack(t)))(tree)
    assert _bits(traced) == _bits(tree)


def test_without_float64_every_dtype_keeps_its_buffer():
    tree = {"f32": jnp.ones(3, jnp.float32), "i32": jnp.asarray([2**31 - 1], jnp.int32), "flag": jnp.asarray(True)}
    layout = Layout.of(tree)
    assert sorted(layout.groups) == ["bool", "float32", "int32"]
    assert _bits(layout.unpack(layout.pack(tree))) == _bits(tree)


def test_unpack_reads_the_leading_part_of_longer_buffers():
    tree = _tree()
    layout = Layout.of(tree)
    longer = [np.concatenate([np.asarray(b), np.zeros(3, b.dtype)]) for b in layout.pack(tree)]
    assert _bits(layout.unpack(longer)) == _bits(tree)
    # A pair (tree, extra) lays the tree out first: its buffers are valid for the tree.
    extra = jnp.arange(4.0)
    both = Layout.of((tree, extra))
    assert _bits(layout.unpack(both.pack((tree, extra)))) == _bits(tree)


def test_layout_is_hashable_and_a_static_jit_argument():
    tree = _tree()
    layout = Layout.of(tree)
    assert hash(layout) == hash(Layout.of(jax.tree.map(np.asarray, tree)))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def total(buffers):
        return layout.unpack(buffers)["f64"].sum()

    for k in range(3):
        bumped = jax.tree.map(lambda a: a + k if a.dtype != bool else a, tree)
        np.testing.assert_allclose(total(layout.pack(bumped)), np.sum(tree["f64"]) + 12 * k)
    chex.clear_trace_counter()


def test_leaves_that_would_make_the_join_a_concatenate_are_buffers_of_their_own():
    """Joined, a tree of large leaves would take more than ``JOIN_SELECTS`` selects: its largest
    leaves are buffers of their own (shape and dtype kept), until the rest joins as selects; the
    round trip stays bit-exact, inside ``jit`` too, with the buffers donated."""
    rng = np.random.default_rng(2)
    tree = {"P": jnp.asarray(rng.standard_normal((40, 40))), "D": jnp.asarray(rng.standard_normal((40, 3, 10))),
            "flag": jnp.asarray(True), "count": jnp.asarray(3, jnp.int32), **{f"x{k}": jnp.asarray(rng.standard_normal(30)) for k in range(8)}}
    layout = Layout.of(tree)
    leaves = jax.tree.leaves(tree)
    assert [leaves[k].shape for k in layout.alone] == [(40, 3, 10), (40, 40)]
    joined = [k for k in range(len(leaves)) if k not in layout.alone]
    assert len(joined) * sum(leaves[k].size for k in joined) <= JOIN_SELECTS
    assert layout.groups == ("float64",) and layout.sizes == (2 + 8 * 30,)
    buffers = layout.pack(tree)
    assert [b.shape for b in buffers] == [(242,), (40, 3, 10), (40, 40)]
    assert _bits(layout.unpack([np.asarray(b) for b in buffers])) == _bits(tree)
    step = jax.jit(lambda b: layout.pack(jax.tree.map(lambda x: x + 1 if x.dtype != bool else ~x, layout.unpack(b))),
                   donate_argnums=0)
    bumped = layout.unpack(step(tuple(jnp.array(b) for b in buffers)))
    assert _bits(bumped) == _bits(jax.tree.map(lambda x: x + 1 if x.dtype != bool else ~x, tree))
    small = Layout.of(_tree())
    assert small.alone == () and len(small.pack(_tree())) == len(small.groups)


def test_a_pytree_of_another_shape_is_refused():
    layout = Layout.of(_tree())
    other = _tree() | {"f64": jnp.zeros((4, 3))}
    with pytest.raises(ValueError, match="does not match the layout"):
        layout.pack(other)


@pytest.mark.parametrize("length", [3, 6000])
def test_join_is_a_concatenate_bit_for_bit(length):
    """Both forms of ``join`` (a chain of selects for a small result, a concatenate for a large
    one) give ``jnp.concatenate`` exactly, signed zeros and NaN payloads included."""
    rng = np.random.default_rng(1)
    parts = [rng.standard_normal(length), np.array([-0.0, 0.0]), np.frombuffer(np.uint64(0x7FF8DEADBEEF0001).tobytes(), np.float64),
             *(rng.standard_normal(k) for k in range(1, 10))]
    expected = np.concatenate(parts)
    assert (len(parts) * len(expected) > JOIN_SELECTS) == (length == 6000)
    joined = jax.jit(lambda *p: join(p))
    np.testing.assert_array_equal(np.asarray(joined(*parts)).view(np.uint64), expected.view(np.uint64))


@pytest.mark.parametrize("p", [1, 5, SHORT_AXIS, SHORT_AXIS + 1, 40])
def test_reductions_over_the_last_axis_written_out_or_not(p):
    """``dot_last`` and ``max_last`` are the reductions they name, written out (a sum from the
    first term on, as NumPy adds them one by one) up to ``SHORT_AXIS`` terms and reductions past
    it, batched over the leading axes and inside ``jit``; ``stage`` changes nothing."""
    rng = np.random.default_rng(p)
    a, b = rng.standard_normal((2, 3, 4, p))
    total, dot, peak = jax.jit(lambda a, b: stage((dot_last(a, np.ones(p)), dot_last(a, b), max_last(a))))(a, b)
    chex.assert_shape((total, dot, peak), (3, 4))
    np.testing.assert_array_equal(peak, a.max(-1))
    if p <= SHORT_AXIS:
        one_by_one = lambda x: sum((x[..., k] for k in range(1, p)), x[..., 0])  # noqa: E731
        np.testing.assert_array_equal(total, one_by_one(a))
    np.testing.assert_allclose(total, a.sum(-1), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(dot, np.einsum("...k,...k->...", a, b), rtol=1e-13, atol=1e-14)


def test_the_xla_cpu_forms_are_in_cpu_programs_only():
    """A program lowered for a GPU holds the obvious operations (no optimization barriers, no
    products with the identity, reductions as reductions); one lowered for the CPU holds the
    forms this machine's compiler wants. Lowered here (``jax.export``) for both: a learner step
    on the two-link arm, whose RNEA, features and RLS call every form."""
    from dense_armor import learners, parse_urdf
    from dense_armor.learners import ResidualLearner, Sample
    from dense_armor.robots import minimal_urdf

    model = parse_urdf(minimal_urdf())
    learner = ResidualLearner(model, lam=0.99)
    zero = jnp.zeros(model.n)
    step = jax.jit(lambda state, sample: learners.step(learner, state, sample))

    def ops(platform):
        text = jax.export.export(step, platforms=[platform])(learner.init(jnp.float32), Sample(zero, zero, zero, zero)).mlir_module()
        return {op: text.count(f"stablehlo.{op}") for op in ("optimization_barrier", "dot_general", "reduce", "concatenate")}

    cpu, gpu = ops("cpu"), ops("cuda")
    assert cpu["optimization_barrier"] > 0 and cpu["dot_general"] > 0, cpu
    assert gpu["optimization_barrier"] == 0 and gpu["dot_general"] == 0, gpu
    assert gpu["reduce"] > cpu["reduce"] and gpu["concatenate"] > cpu["concatenate"], (cpu, gpu)


def test_the_librarys_jit_passes_its_options_at_the_top_level_only(monkeypatch):
    """``compiler.jit`` compiles a call from Python with ``compiler.OPTIONS``, which this jaxlib
    accepts, and a call traced inside another program (``jax.jit``, ``lax.scan`` around it, on
    traced values or on constants alone) as the plain ``jax.jit``, which JAX requires; under
    ``jax.vmap`` too; the results are the same."""
    def f(x, k):
        return jnp.cumsum(x * k)

    x = jnp.arange(6.0)
    tuned = compiler.jit(f, static_argnums=1)
    expected = np.cumsum(np.arange(6.0) * 2)
    np.testing.assert_array_equal(tuned(x, 2), expected)
    assert "xla_cpu" in next(iter(compiler.OPTIONS))
    np.testing.assert_array_equal(jax.jit(lambda x: tuned(x, 2))(x), expected)
    np.testing.assert_array_equal(jax.vmap(lambda x: tuned(x, 2))(x[None])[0], expected)
    np.testing.assert_array_equal(jax.lax.scan(lambda c, x: (c, tuned(x, 2)), 0.0, x[None])[1][0], expected)
    np.testing.assert_array_equal(jax.jit(lambda y: tuned(x, 2) + y)(0.0), expected)  # no traced argument
    # the options reach the top-level compile, and only it: an option XLA does not know fails there
    monkeypatch.setattr(compiler, "OPTIONS", {"xla_cpu_no_such_option": True})
    bad = compiler.jit(f, static_argnums=1)
    np.testing.assert_array_equal(jax.jit(lambda x: bad(x, 2))(x), expected)
    with pytest.raises(Exception, match="xla_cpu_no_such_option"):
        bad(x, 2)
