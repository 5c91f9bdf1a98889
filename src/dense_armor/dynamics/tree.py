"""What every tree pass shares: input checks, the model as scalars or lanes, joint placements
and motion, and how results become arrays.

Two layouts, chosen per function by what XLA:CPU compiles well (measured on Panda; see
``docs/benchmarks.md``):

* **Scalars** (the RNEA and its special cases). Python loops over the static parent tuple unroll
  into straight-line code on 0-d arrays (see :mod:`dense_armor.spatial`), which fuses into one
  kernel, provided that every scalar is sliced straight from a model array or input (``x[i, r, c]``,
  never from a shared ``x[i]``), transcendentals act on whole vectors (``cos(q)``), and results
  are assembled by :func:`stack` (a chain of selects), never by ``jnp.stack``: XLA:CPU does not
  fuse a concatenate of more than 8 operands, and duplicates each operand's whole cone of
  dependencies into a kernel of its own. It only suits up to about 15 results: XLA will not fuse
  a scalar into more than 15 places, and cuts it out into a kernel of its own otherwise.
* **Lanes** (mass matrix, regressor, kinematics): see the section below.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import spatial
from dense_armor.model import Model


class Joint(NamedTuple):
    """One joint as scalars: its placement in the parent body at ``q`` and its axis."""

    parent: int
    prismatic: bool
    axis: tuple  # unit axis in the joint (= child body) frame
    R: tuple  # (3, 3) child body orientation in the parent body frame
    p: tuple  # (3,) child body origin in the parent body frame


def check(model: Model, **arrays):
    """Cast the named arrays to one floating dtype and check each has shape (n,).

    Returns:
        The dtype and the arrays in the order given (``None`` stays ``None``).

    Raises:
        ValueError: naming the argument and the expected length.
    """
    given = [jnp.asarray(a) for a in arrays.values() if a is not None]
    dtype = jnp.result_type(*given) if given else jnp.result_type(float)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    out = []
    for name, a in arrays.items():
        if a is None:
            out.append(None)
            continue
        a = jnp.asarray(a, dtype)
        if a.shape != (model.n,):
            raise ValueError(f"{name}: expected shape ({model.n},) for the {model.n} joints, got {a.shape}")
        out.append(a)
    return dtype, out


def scalars(x, prefix: tuple = ()):
    """``x[prefix]`` as nested tuples of 0-d arrays, each element sliced straight from ``x``."""
    if len(prefix) == x.ndim:
        return x[prefix]
    return tuple(scalars(x, (*prefix, k)) for k in range(x.shape[len(prefix)]))


def leaf(x, dtype):
    """A model leaf as a JAX array of ``dtype``, as nested tuples of scalars."""
    return scalars(jnp.asarray(x, dtype))


def joints(model: Model, q, dtype) -> list[Joint]:
    """Every joint's placement at ``q``, in model order.

    A revolute joint turns by ``q`` about its axis ``a``:
    ``R = R0 Rot(a, q) = cos(q) R0 + sin(q) R0 [a] + (1 - cos(q)) (R0 a) a^T``, where only the
    three scalar factors depend on ``q``. A prismatic joint slides: ``p = p0 + q R0 a``.
    """
    rotation = jnp.asarray(model.joint_rotation, dtype)
    translation = jnp.asarray(model.joint_translation, dtype)
    axes = jnp.asarray(model.axis, dtype)
    cos, sin = jnp.cos(q), jnp.sin(q)
    out = []
    for i, (kind, parent) in enumerate(zip(model.joint_kinds, model.parents)):
        R0, p0, axis = scalars(rotation, (i,)), scalars(translation, (i,)), scalars(axes, (i,))
        u = spatial.matvec(R0, axis)
        if kind == "prismatic":
            R, p = R0, spatial.add(p0, spatial.scale(q[i], u))
        else:
            c, s = cos[i], sin[i]
            t = 1.0 - c
            R = tuple(
                tuple(c * R0[r][k] + s * K_rk + t * u[r] * axis[k] for k, K_rk in enumerate(spatial.cross(R0[r], axis)))
                for r in range(3)
            )
            p = p0
        out.append(Joint(parent, kind == "prismatic", axis, R, p))
    return out


def project(joint: Joint, force):
    """``S^T f``: the generalized force of a spatial force on a joint."""
    n, f = force
    return spatial.dot(joint.axis, f if joint.prismatic else n)


def velocities(tree: list[Joint], qd) -> list:
    """Body spatial velocities in body frames."""
    v = []
    for i, joint in enumerate(tree):
        along = spatial.scale(qd[i], joint.axis)
        if joint.parent < 0:
            zero = (jnp.zeros((), qd.dtype),) * 3
            v.append((zero, along) if joint.prismatic else (along, zero))
            continue
        w, lin = spatial.motion_to_child(joint.R, joint.p, v[joint.parent])
        v.append((w, spatial.add(lin, along)) if joint.prismatic else (spatial.add(w, along), lin))
    return v


def stack(values) -> jax.Array:
    """``jnp.stack(values)`` for a list of equally shaped arrays, written as one chain of selects.

    The selects fuse with the computation of the values into a single kernel, with each value
    computed once (see the module docstring). Meant for a few dozen values at most: every
    output element evaluates the whole chain.
    """
    values = [jnp.asarray(v) for v in values]
    shape = (len(values), *values[-1].shape)
    index = jax.lax.broadcasted_iota(jnp.int32, shape, 0)
    out = jnp.broadcast_to(values[-1], shape)
    for k in range(len(values) - 2, -1, -1):
        out = jnp.where(index == k, values[k], out)
    return out


def materialize(x: jax.Array) -> jax.Array:
    """``x`` (..., m), computed once into a buffer of its own for its consumers to read.

    XLA:CPU fuses an elementwise producer into every consumer, and a consumer that writes many
    elements (a learner's packed state, its stacked outputs) then recomputes, per element, the
    whole straight-line RNEA behind ``x``: a Panda learner's step compiled to 7.4k arithmetic
    operations, 5.3k with its two RNEAs materialized. A product with the identity is a ``dot``,
    which XLA:CPU never fuses, so ``x`` is computed once, by its own kernel. Measured in
    interleaved runs: ``learners.replay`` 0.92 instead of 1.04 us a sample on the two-link arm,
    1.96 instead of 2.68 on Panda; a single step from Python, within the noise. Exact: every entry is a product by 1 plus products by 0
    (a NaN or inf in ``x`` spreads along its row, which only screened, finite inputs reach).
    """
    # Over the last axis, so that under vmap it is one matrix product, not a batch of small ones.
    return x @ jnp.eye(x.shape[-1], dtype=x.dtype)


def vector(values) -> jax.Array:
    """Assemble scalars into a 1-D array."""
    return stack(values)


def matrix(rows) -> jax.Array:
    """Assemble rows of scalars into a 2-D array (for a few dozen entries)."""
    return stack([stack(row) for row in rows])


# ---------------------------------------------------------------- lanes: one array element per body
#
# Where a result mixes many bodies (a mass matrix, a regressor, frame placements), the passes work
# on "lanes": every spatial quantity is a tuple of (n,) arrays, element i belonging to body i, and
# the algebra of :mod:`dense_armor.spatial` applies to them unchanged. Lanes cross between bodies
# only at stage boundaries: a stage packs its lanes into one array (:func:`pack`, one kernel) and
# the next reads whole rows of it with one gather (:func:`read`, a kernel of its own), as many rows
# and as often as it needs; sums over ancestors or descendants are then masked reductions over the
# rows (:func:`masked_sum`). What XLA:CPU would do otherwise:
#
# * a slice of a pack is rewritten into a slice of the lane it came from, so the reader would
#   recompute the packing stage, once per use;
# * a lane that feeds more than 15 places of a pack is cut out into a kernel of its own;
# * when a gather is a pack's only reader, the packing stage is fused into it and computed once
#   per row read: fine for the two rows per body of pointer jumping, not for n rows per body.
#
# The stages form a chain, so XLA:CPU runs them in order on the calling thread; more than 8
# independent kernels would be dispatched to its thread pool, at microseconds each.


def lanes(x, dtype):
    """A model leaf (n, ...) as lanes: nested tuples over its component axes of (n,) arrays."""
    x = jnp.asarray(x, dtype)

    def split(prefix):
        if len(prefix) == x.ndim - 1:
            return x[(slice(None), *prefix)]
        return tuple(split((*prefix, k)) for k in range(x.shape[len(prefix) + 1]))

    return split(())


def pack(components) -> jax.Array:
    """Lane arrays, each (n,), as one (n, groups, width) array computed by one kernel.

    XLA fuses a concatenate of at most 8 operands, so more lanes are stacked in groups of at
    most 8 along a second axis (64 lanes at most).
    """
    components = list(components)
    groups = -(-len(components) // 8)
    if groups > 8:
        raise ValueError(f"a pack holds at most 64 lanes, got {len(components)}")
    width = -(-len(components) // groups)
    components += [jnp.zeros_like(components[0])] * (groups * width - len(components))
    return jnp.stack([jnp.stack(components[g * width : (g + 1) * width], -1) for g in range(groups)], -2)


def read(packed, index) -> jax.Array:
    """Rows ``index`` (static) of a packed array, by one gather."""
    return packed[..., np.asarray(index), :, :]


def columns(rows, count: int) -> list:
    """The first ``count`` lanes of rows read from a pack."""
    width = rows.shape[-1]
    return [rows[..., k // width, k % width] for k in range(count)]


def rows(packed, count: int, *indices) -> list:
    """The first ``count`` lanes of a pack at each static index array (lane ``i`` holding row
    ``index[i]``), all read by one gather."""
    lanes_read = columns(read(packed, np.concatenate([np.asarray(i) for i in indices])), count)
    bounds = np.cumsum([0, *(len(i) for i in indices)])
    return [[x[..., a:b] for x in lanes_read] for a, b in zip(bounds[:-1], bounds[1:])]


def placement_lanes(values) -> tuple:
    """``(R, p)`` from 12 lane arrays: ``R`` row-major, then ``p``."""
    v = list(values)
    return (tuple(v[0:3]), tuple(v[3:6]), tuple(v[6:9])), tuple(v[9:12])


def placement_values(placement) -> list:
    """The 12 lane arrays of a placement ``(R, p)``: ``R`` row-major, then ``p``."""
    R, p = placement
    return [*R[0], *R[1], *R[2], *p]


def _doubling(parents) -> list:
    """Pointer-jumping schedule over the tree: per step, which bodies still have an ancestor
    to fold in (``has``) and where it is (``index``)."""
    up = np.asarray(parents)
    steps = []
    while (up >= 0).any():
        has = up >= 0
        index = np.where(has, up, np.arange(len(up)))
        steps.append((has, index))
        up = np.where(has, up[index], -1)
    return steps


def world_placements(model: Model, q, dtype) -> tuple:
    """World placement ``(R, p)`` of every body, as lanes.

    The joint placements, ``R = c R0 + s R0 [a] + (1 - c) (R0 a) a^T`` with ``c, s`` the cosine
    and sine of ``q`` (``p = p0 + q R0 a`` for a prismatic joint), are whole-array operations, so
    that each transcendental is evaluated once per joint. Then the tree is composed by pointer
    jumping: in ``ceil(log2(depth))`` stages every body folds in the placement of the ancestor
    ``2^s`` levels up. The last stage is left open, so that the caller's per-body computations
    fuse with it.
    """
    prismatic = np.array([kind == "prismatic" for kind in model.joint_kinds])
    R0, p0, axis = (jnp.asarray(x, dtype) for x in (model.joint_rotation, model.joint_translation, model.axis))
    u = R0[:, :, 0] * axis[:, :1] + R0[:, :, 1] * axis[:, 1:2] + R0[:, :, 2] * axis[:, 2:]  # R0 a, elementwise: fuses
    c = jnp.where(prismatic, 1.0, jnp.cos(q))[:, None, None]
    s = jnp.where(prismatic, 0.0, jnp.sin(q))[:, None, None]
    R = c * R0 + s * jnp.cross(R0, axis[:, None, :]) + (1.0 - c) * u[:, :, None] * axis[:, None, :]
    p = p0 + jnp.where(prismatic, q, 0.0)[:, None] * u
    packed = jnp.concatenate([R.reshape(-1, 9), p], -1).reshape(-1, 2, 6)
    own = None
    for has, index in _doubling(model.parents):
        if own is not None:
            packed = pack([jnp.where(has_, a, b) for a, b in zip(composed, own)])
        own, up = rows(packed, 12, np.arange(model.n), index)
        composed = placement_values(spatial.compose(placement_lanes(up), placement_lanes(own)))
        has_ = has
    if own is None:  # every joint on the base
        (own,) = rows(packed, 12, np.arange(model.n))
        return placement_lanes(own)
    return placement_lanes([jnp.where(has_, a, b) for a, b in zip(composed, own)])


def masked_sum(mask: np.ndarray, rows, axis: int) -> jax.Array:
    """``sum_k where(mask[k], rows[k], 0)`` over the body axis of rows read from a pack: lane
    ``j`` of the result sums the rows ``k`` with ``mask[k, j]`` (``axis=0``) or ``mask[j, k]``
    (``axis=1``). Written as ``n`` adds, which fuse into one kernel with no n x n intermediate."""
    mask = np.asarray(mask)
    total = 0.0
    for k in range(mask.shape[0]):
        select = mask[k] if axis == 0 else mask[:, k]
        total = total + jnp.where(select[:, None, None], rows[..., k : k + 1, :, :], 0.0)
    return total


def subtree_mask(model: Model) -> np.ndarray:
    """(n, n) static ``D[k, j]``: body ``k`` is ``j`` or one of its descendants (equivalently,
    ``j`` is ``k`` or one of its ancestors)."""
    n = model.n
    D = np.zeros((n, n), bool)
    for k in range(n):
        j = k
        while j >= 0:
            D[k, j] = True
            j = model.parents[j]
    return D
