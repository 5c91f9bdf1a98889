"""The operations that exist for XLA's compiler, not for the maths.

Each is the obvious operation (exactly, but for the order in which a sum adds its terms),
written in the form that XLA:CPU compiles well where the obvious one does not
(``docs/design.md``, "Dispatch and other global settings"):

* :func:`materialize`: a value computed once, into a buffer of its own, for its many readers
  (XLA fuses an elementwise producer into every consumer, and recomputes it per element there);
* :func:`stage`: a value computed by kernels of its own, up to this line and no further (XLA
  would otherwise fuse it into each reader, and cut the fusions where its rules say);
* :func:`stack` and :func:`join`: ``jnp.stack`` and ``jnp.concatenate`` as chains of selects,
  which XLA fuses with the computation of their operands (it gives each operand of a
  concatenate of more than 8 a kernel of its own);
* :func:`dot_last` and :func:`max_last`: a reduction over a short axis written out term by
  term, which XLA fuses with its neighbours (a reduction is a kernel of its own);
* :func:`jit`: ``jax.jit`` with the compiler's options for the library's own programs
  (:data:`OPTIONS`): XLA:CPU's memory-optimised scheduler, which keeps a learner's hundred small
  kernels in order on one thread where the default order spreads them over threads that wait
  on each other, and the copy insertion that proves a loop's state can be updated in place;
* :func:`full_precision`: a function whose matrix products are computed in the precision of
  its inputs on every platform (a GPU's default float32 product keeps 10 bits of mantissa).

These forms are for XLA:CPU: where a program is compiled for another platform (a GPU), each
function is the obvious operation itself (:func:`jax.lax.platform_dependent`, decided when the
program is lowered, so a CPU program holds only the CPU form). What is specific to one jaxlib's
compiler lives here and in the layouts of :mod:`dense_armor.dynamics.tree` and
:mod:`dense_armor.dynamics.traversal`; the algorithms call these by name.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from dense_armor.spatial import ZERO

__all__ = [
    "JOIN_SELECTS", "OPTIONS", "SHORT_AXIS", "dot_last", "full_precision", "jit", "join", "materialize", "max_last", "stack",
    "stage",
]

#: The most selects (parts x elements) :func:`join` writes: a two-link payload learner's packed
#: state (552 elements in 12 parts) was faster joined by selects, a UR5 payload learner's
#: (1,632 in 12) and Panda's (1,992 in 12) concatenated (``docs/design.md``).
JOIN_SELECTS = 10_000

#: The longest axis that :func:`dot_last` and :func:`max_last` write out term by term.
SHORT_AXIS = 16

#: XLA's options for the programs :func:`jit` compiles. XLA:CPU's memory-optimised (depth-first)
#: order of a program's kernels: a learner's step is a hundred small kernels, which the default,
#: concurrency-optimised order hands between the threads of XLA:CPU's pool (``docs/design.md``,
#: "XLA:CPU's scheduler"). Copy insertion with region analysis: without it, XLA:CPU copies
#: most leaves of a ``lax.scan``'s carried state at the top of every iteration, a kernel each
#: (``docs/design.md``, "Copies of a loop's state"). Options of one program, not of the process;
#: fields of XLA's debug options that only XLA:CPU reads.
OPTIONS = {
    "xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED",
    "xla_cpu_copy_insertion_use_region_analysis": True,
}


def full_precision(fn):
    """``fn``, traced with every matrix product (``@``, ``einsum``, ``jnp.dot``) at the precision
    of its operands, whatever the platform's default and the caller's
    ``jax.default_matmul_precision``. On NVIDIA GPUs from Ampere on, JAX's default float32
    product rounds its operands to TensorFloat-32 (10 mantissa bits: a relative rounding of 5e-4
    where float32's is 6e-8), which an RLS covariance does not survive; XLA:CPU computes float32
    products in full anyway.
    Decided when ``fn`` is traced, so it holds inside the caller's ``jax.jit``, ``vmap`` and
    ``lax.scan``."""

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return traced


def jit(fn=None, /, *, nested: bool = True, **kwargs):
    """``jax.jit(full_precision(fn), **kwargs)``, compiled with :data:`OPTIONS` when called from
    Python; with keywords only, a decorator. JAX takes compiler options only for a program it
    compiles on its own and refuses them inside another trace (``jax.jit``, ``lax.scan``), so
    there it is the plain ``jax.jit(full_precision(fn))``, and the outer program's options hold
    (give its ``jax.jit`` ``compiler_options=OPTIONS``). With ``nested=False``, for a program
    only ever called from Python (a :class:`~dense_armor.learners.Stepper`'s), the jitted
    function with the options itself: no Python frame around each call."""
    if fn is None:
        return functools.partial(jit, nested=nested, **kwargs)
    exact = full_precision(fn)
    tuned = jax.jit(exact, compiler_options=OPTIONS, **kwargs)
    if not nested:
        return tuned
    plain = jax.jit(exact, **kwargs)

    @functools.wraps(fn)
    def call(*args, **kw):
        # JAX's refusal comes once per trace, after tracing ``fn``, whose trace ``plain`` reuses;
        # a call from Python pays nothing for it (looking for tracers among the arguments cost
        # microseconds, and missed a trace whose arguments were all constants)
        try:
            return tuned(*args, **kw)
        except ValueError:
            pass
        return plain(*args, **kw)  # outside the handler: an error of the call's own shows alone

    call.lower, call._cache_size = tuned.lower, tuned._cache_size  # as a jitted function's
    return call


def _on_cpu(plain):
    """The decorated function where the program runs on a CPU, ``plain`` (the same arguments)
    on any other platform."""

    def decorate(tuned):
        @functools.wraps(tuned)
        def chosen(*args):
            return jax.lax.platform_dependent(*args, cpu=tuned, default=plain)

        return chosen

    return decorate


@_on_cpu(lambda x: x)
def materialize(x: jax.Array) -> jax.Array:
    """``x`` (..., m), computed once into a buffer of its own for its consumers to read.

    XLA:CPU fuses an elementwise producer into every consumer, and a consumer that writes many
    elements (a learner's packed state, its stacked outputs) then recomputes, per element, the
    whole straight-line RNEA behind ``x``. A product with the identity is a ``dot``, which
    XLA:CPU never fuses, so ``x`` is computed once, by its own kernel (``docs/design.md``).
    Exact: every entry is a product by 1 plus products by 0 (a NaN or inf in ``x`` spreads along
    its row, which only screened, finite inputs reach).
    """
    # Over the last axis, so that under vmap it is one matrix product, not a batch of small ones;
    # at full precision, whatever the platform's default.
    return jnp.matmul(x, jnp.eye(x.shape[-1], dtype=x.dtype), precision=jax.lax.Precision.HIGHEST)


@_on_cpu(lambda x: x)
def stage(x):
    """``x`` (any pytree of arrays) as it is, computed by the kernels before this line: XLA fuses
    nothing across it (an optimization barrier), so that a pass is a chain of kernels, each
    reading the one before, which XLA:CPU runs in order on the calling thread however long it
    is (``docs/design.md``, "Tree walks"), and what a stage computes is computed once."""
    return jax.lax.optimization_barrier(x)


@_on_cpu(lambda a, b: jnp.sum(a * b, axis=-1))
def dot_last(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a' b`` over the last axis of ``a`` and ``b`` (..., p): for ``p <= SHORT_AXIS``, written out
    term by term (each term a product of slices), elementwise arithmetic that XLA fuses with its
    neighbours into one kernel, where a reduction is a kernel of its own (on a CPU a kernel
    launch costs more than a short sum)."""
    if a.shape[-1] > SHORT_AXIS:
        return jnp.sum(a * b, axis=-1)
    return functools.reduce(jnp.add, [a[..., k] * b[..., k] for k in range(a.shape[-1])])


@_on_cpu(lambda x: jnp.max(x, axis=-1))
def max_last(x: jax.Array) -> jax.Array:
    """The maximum of ``x`` (..., p) over its last axis, written out like :func:`dot_last`."""
    if x.shape[-1] > SHORT_AXIS:
        return jnp.max(x, axis=-1)
    return functools.reduce(jnp.maximum, [x[..., k] for k in range(x.shape[-1])])


def stack(values) -> jax.Array:
    """``jnp.stack`` of equally shaped values, written as one chain of selects, which fuses with
    the computation of the values into one kernel (XLA:CPU does not fuse a concatenate of more
    than 8 operands, and gives each operand's dependencies a kernel of their own). All zeros
    known at trace time stack to :data:`~dense_armor.spatial.ZERO`."""
    like = next((v for v in values if v is not ZERO), None)
    if like is None:
        return ZERO
    return _stacked(*(jnp.zeros_like(like) if v is ZERO else jnp.asarray(v) for v in values))


@_on_cpu(lambda *values: jnp.stack(jnp.broadcast_arrays(*values)))
def _stacked(*values) -> jax.Array:
    shape = (len(values), *values[-1].shape)
    index = jax.lax.broadcasted_iota(jnp.int32, shape, 0)
    out = jnp.broadcast_to(values[-1], shape)
    for k in range(len(values) - 2, -1, -1):
        out = jnp.where(index == k, values[k], out)
    return out


def join(parts) -> jax.Array:
    """``jnp.concatenate`` of 1-D arrays. A small result is written as one chain of selects
    over the parts' padded copies, which XLA fuses with the computation of the parts into one
    kernel, where it gives each operand of a concatenate of more than 8 a kernel of its own; a
    large one stays a concatenate, as the chain tests every part's bounds at every element
    (:data:`JOIN_SELECTS`), and so do concrete parts (one eager operation, not two a part)."""
    parts = [jnp.asarray(part) for part in parts]
    total = sum(part.shape[0] for part in parts)
    traced = any(isinstance(part, jax.core.Tracer) for part in parts)
    if len(parts) == 1 or len(parts) * total > JOIN_SELECTS or not traced:
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts)
    return _joined(*parts)


@_on_cpu(lambda *parts: jnp.concatenate(parts))
def _joined(*parts) -> jax.Array:
    total = sum(part.shape[0] for part in parts)
    index = jax.lax.broadcasted_iota(jnp.int32, (total,), 0)
    end, out = total, None
    for part in reversed(parts):
        start = end - part.shape[0]
        padded = jnp.pad(part, (start, total - end))
        out = padded if out is None else jnp.where(index < end, padded, out)
        end = start
    return out
