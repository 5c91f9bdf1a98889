"""What the dynamics share: coordinates mapped to joints, the model as per-body values, joint
frames and placements, and the layouts of the passes that mix many bodies.

The recursive passes (RNEA, ABA, a body's regressor columns) run over a walk of the tree
(:mod:`dense_armor.dynamics.traversal`) in joint frames (:func:`joints`). The passes whose
results mix many bodies work on whole arrays instead:

* **Lanes** (mass matrix, kinematics) and **rows** (the regressor, and the joint frames' world
  placements that the others read): see the sections below.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import spatial
from dense_armor.compiler import stage
from dense_armor.dynamics.traversal import choose, scalars
from dense_armor.model import Model


class Joint(NamedTuple):
    """One joint in joint frames (see :func:`joint_frames`): the joint moves along or about the
    z axis of its body's joint frame. Per-body values of a walk (:mod:`traversal`)."""

    prismatic: bool  # or a lane of flags
    R: tuple  # (3, 3) the joint frame's orientation in its parent's joint frame, at q
    p: tuple  # (3,) the joint frame's origin in its parent's joint frame, at q
    inertia: tuple  # (10,) the body's inertial parameters in its joint frame


def prismatic_mask(model: Model) -> np.ndarray:
    """(n,) static mask of the prismatic joints."""
    return np.array([kind == "prismatic" for kind in model.joint_kinds])


def _coupling(model: Model, dtype):
    """``(G, o)``, (B, n) and (B,): the joints' positions from the coordinates, ``G q + o``."""
    scale, offset = jnp.ones(model.n_bodies, dtype), jnp.zeros(model.n_bodies, dtype)
    if model.mimics:
        bodies = np.array([body for _, body, _ in model.mimics])
        scale = scale.at[bodies].set(jnp.asarray(model.mimic_multiplier, dtype))
        offset = offset.at[bodies].set(jnp.asarray(model.mimic_offset, dtype))
    return scale[:, None] * (model.coordinates[:, None] == np.arange(model.n)), offset


def _times(A, x):
    return jnp.matmul(A, x, precision=jax.lax.Precision.HIGHEST)


def joint_values(model: Model, dtype, q=None, qd=None, qdd=None) -> tuple:
    """Every joint's position, velocity and acceleration (B,) from the coordinates' (n,): a
    coupled mimic joint follows its coordinate, ``q_i = k q_c + o``, ``qd_i = k qd_c``, ``qdd_i =
    k qdd_c``; without mimic joints, the coordinates themselves. ``None`` stays ``None``."""
    if not model.mimics:
        return q, qd, qdd
    G, o = _coupling(model, dtype)
    return None if q is None else _times(G, q) + o, *(None if x is None else _times(G, x) for x in (qd, qdd))


def generalized(model: Model, dtype, f) -> jax.Array:
    """``G^T f``: joint forces (B, ...) as forces on the coordinates (n, ...), by virtual work
    (a mimic joint's force adds ``k f_i`` to its coordinate's); ``f`` itself without mimic
    joints."""
    if not model.mimics:
        return f
    return _times(_coupling(model, dtype)[0].T, f)


def generalized_inertia(model: Model, dtype, M) -> jax.Array:
    """``G^T M G``: a joint-space mass matrix (B, B) in the coordinates (n, n)."""
    if not model.mimics:
        return M
    G = _coupling(model, dtype)[0]
    return _times(G.T, _times(M, G))


def leaf(x, dtype):
    """A model leaf as a JAX array of ``dtype``, as nested tuples of scalars."""
    return scalars(jnp.asarray(x, dtype))


def axis_basis(axis) -> tuple:
    """A rotation ``B`` (rows of scalars or lanes) with ``B e_z = axis``, for a unit axis.

    Its columns are a right-handed orthonormal basis ending in ``axis``, branch-free (Duff et
    al., "Building an orthonormal basis, revisited", 2017): any such ``B`` turns a rotation
    about ``axis`` into one about z, ``Rot(axis, q) = B Rot(z, q) B^T``.
    """
    x, y, z = axis
    s = jnp.where(z >= 0, 1.0, -1.0)
    a = -1.0 / (s + z)
    b = x * y * a
    return ((1.0 + s * x * x * a, b, x), (s * b, s + y * y * a, y), (-s * x, -y, z))


def joint_frames(model: Model, dtype, parents: bool = False) -> jax.Array:
    """Every body re-expressed in its joint frame, where its joint axis is z, as one array.

    Body ``i``'s joint frame has the body's origin and the axes of ``B_i`` (:func:`axis_basis`
    of its joint axis). A revolute joint then places its frame in its parent's at
    ``(C Rot(z, q), d)`` with ``C = B_parent^T R0 B_i`` and ``d = B_parent^T p0`` fixed
    (``B = 1`` for the base), a prismatic one at ``(C, d + q C e_z)``; the body's inertial
    parameters rotate to ``(m, B^T h, B^T I B)``. A tree pass in these frames needs about 30 %
    fewer operations: with the axis along z, the joint's rotation, its motion subspace and its
    projection are free of products (what Pinocchio gets from its specialised joint types).

    The model's arrays are read by one gather, and the result is put behind an optimization
    barrier: in a single call that is two small kernels (more inputs, or an axis lane read in
    more than 15 places, would each be cut into a kernel of their own, hence the axes read
    more than once), and inside a ``lax.scan`` XLA hoists both out of the loop, as they do not
    depend on the state.

    Args:
        parents: also the parent joint's ``C`` and ``d`` (any values for a joint on the base),
            for the first stage of :func:`joint_frame_placements`.

    Returns:
        (n, groups, width) packed (:func:`pack`) lanes: ``C`` row-major (9), ``d`` (3), the
        parameters (10), and with ``parents`` the parent's ``C`` (9) and ``d`` (3).
    """
    up = np.maximum(np.asarray(model.parents), 0)
    rotation, translation, axis = (model.indices(key) for key in ("joint_rotation", "joint_translation", "axis"))
    index = [*rotation.reshape(-1, 9).T, *translation.T, *axis.T, *axis.T, *axis[up].T, *model.indices("inertia").T]
    if parents:
        index += [*rotation[up].reshape(-1, 9).T, *translation[up].T, *axis[up].T, *axis[up].T, *axis[up[up]].T]
    read = jnp.asarray(model.data, dtype)[..., np.stack(index)]  # (..., rows, n)
    x = [read[..., k, :] for k in range(len(index))]  # lanes
    basis = _basis(x[12:15], x[15:18])
    C, d = _placement(model.parents, x[0:12], basis, x[18:21])
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = x[21:31]
    B_T = spatial.transpose(basis)
    h = spatial.matvec(B_T, (hx, hy, hz))
    I = spatial.rotate_sym(B_T, ((ixx, ixy, ixz), (ixy, iyy, iyz), (ixz, iyz, izz)))
    out = [*C[0], *C[1], *C[2], *d, m, *h, I[0][0], I[0][1], I[1][1], I[0][2], I[1][2], I[2][2]]
    if parents:
        C_up, d_up = _placement(np.asarray(model.parents)[up], x[31:43], _basis(x[43:46], x[46:49]), x[49:52])
        out += [*C_up[0], *C_up[1], *C_up[2], *d_up]
    return stage(pack(out))


def _basis(axis, column) -> tuple:
    """:func:`axis_basis` of ``axis`` with its last column read from ``column`` (the same axis,
    read again so that neither read is used in more than 15 places)."""
    return tuple((*row[:2], a) for row, a in zip(axis_basis(axis), column))


def _placement(parents, values, basis, parent_axis) -> tuple:
    """``(C, d)`` of joints from their 12 placement lanes ``(R0, p0)``, their axes' basis and
    their parents' axes (the base's basis is the identity)."""
    has_parent = np.asarray(parents) >= 0
    up_T = spatial.transpose(axis_basis(tuple(jnp.where(has_parent, a, float(k == 2)) for k, a in enumerate(parent_axis))))
    R0, p0 = placement_lanes(values)
    return spatial.matmul(up_T, spatial.matmul(R0, basis)), spatial.matvec(up_T, p0)


def joints(walk, model: Model, q, dtype, frames=None):
    """Every joint's placement at ``q`` and its body's inertia, in joint frames, as per-body
    values of ``walk`` (:mod:`traversal`), from ``frames`` (:func:`joint_frames`, read from the
    model if not given).

    A revolute joint turns its frame by ``Rot(z, q)``: ``R = C Rot(z, q)``, where only ``cos(q)``
    and ``sin(q)`` depend on ``q``; a prismatic one slides: ``p = d + q C e_z``.
    """
    frames = joint_frames(model, dtype) if frames is None else frames
    width = frames.shape[-1]

    def joint(prismatic, frame, q, c, s):
        x = [frame[k // width][k % width] for k in range(22)]
        C, d, inertia = (tuple(x[0:3]), tuple(x[3:6]), tuple(x[6:9])), tuple(x[9:12]), tuple(x[12:22])
        slide = C, spatial.add(d, spatial.scale(q, (C[0][2], C[1][2], C[2][2])))
        turn = tuple(turn_z(row, c, s) for row in C), d
        return Joint(prismatic, *choose(prismatic, slide, turn), inertia)

    values = (walk.split(prismatic_mask(model), flag=True), walk.split(frames), *(walk.split(x) for x in (q, jnp.cos(q), jnp.sin(q))))
    return walk.map(joint, *values)


def turn_z(v, c, s) -> tuple:
    """``v Rot(z, q)`` for a row 3-vector ``v``, equivalently ``Rot(z, q)^T v``, from the cosine
    ``c`` and sine ``s`` of ``q``."""
    return c * v[0] + s * v[1], c * v[1] - s * v[0], v[2]


def joint_motion(prismatic, x):
    """``S x``, a joint's motion subspace times ``x``, in its joint frame: ``(x e_z, 0)`` for a
    revolute joint, ``(0, x e_z)`` for a prismatic one."""
    Z = spatial.ZERO
    return choose(prismatic, ((Z, Z, Z), (Z, Z, x)), ((Z, Z, x), (Z, Z, Z)))


def project(prismatic, force):
    """``S^T f``: the generalized force of a spatial force ``(n, f)`` on a joint (joint frame)."""
    return choose(prismatic, force[1][2], force[0][2])


# ---------------------------------------------------------------- lanes: one array element per body
#
# Where a result mixes many bodies (a mass matrix, frame placements), the passes work
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
#   per row read: fine for a row or two per body, not for n rows per body.
#
# Up to 8 kernels XLA:CPU runs in order on the calling thread (crba: 9); more, unless each reads
# the one before (see the rows section), are dispatched to its thread pool, at microseconds each.


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
    return jnp.stack([jnp.stack(group, -1) for group in _groups(components)], -2)


def _groups(items) -> list:
    """Arrays in at most 8 equal groups of at most 8, padded with zeros: what XLA fuses into one
    kernel when each group is concatenated and the groups stacked along another axis."""
    items = list(items)
    groups = -(-len(items) // 8)
    if groups > 8:
        raise ValueError(f"a pack holds at most 64 lanes or rows, got {len(items)}")
    width = -(-len(items) // groups)
    items += [jnp.zeros_like(items[0])] * (groups * width - len(items))
    return [items[g * width : (g + 1) * width] for g in range(groups)]


def read(packed, index) -> jax.Array:
    """Rows ``index`` (static) of a packed array, by one gather."""
    return packed[..., np.asarray(index), :, :]


def columns(rows, count: int) -> list:
    """The first ``count`` lanes of rows read from a pack."""
    width = rows.shape[-1]
    return [rows[..., k // width, k % width] for k in range(count)]


def placement_lanes(values) -> tuple:
    """``(R, p)`` from 12 lane arrays: ``R`` row-major, then ``p``."""
    v = list(values)
    return (tuple(v[0:3]), tuple(v[3:6]), tuple(v[6:9])), tuple(v[9:12])


def placement_values(placement) -> list:
    """The 12 lane arrays of a placement ``(R, p)``: ``R`` row-major, then ``p``."""
    R, p = placement
    return [*R[0], *R[1], *R[2], *p]


def masked_sum(mask: np.ndarray, rows) -> jax.Array:
    """``sum_k where(mask[k], rows[k], 0)`` over the body axis of rows read from a pack: lane
    ``j`` of the result sums the rows ``k`` with ``mask[k, j]``. Written as ``n`` adds, which
    fuse into one kernel with no n x n intermediate."""
    mask = np.asarray(mask)
    total = 0.0
    for k in range(mask.shape[0]):
        total = total + jnp.where(mask[k][:, None, None], rows[..., k : k + 1, :, :], 0.0)
    return total


def subtree_mask(model: Model) -> np.ndarray:
    """(n, n) static ``D[k, j]``: body ``k`` is ``j`` or one of its descendants (equivalently,
    ``j`` is ``k`` or one of its ancestors)."""
    n = model.n_bodies
    D = np.zeros((n, n), bool)
    for k in range(n):
        j = k
        while j >= 0:
            D[k, j] = True
            j = model.parents[j]
    return D


# ---------------------------------------------------------------- rows: bodies along the last axis
#
# The regressor and the compositions down the tree (:func:`accumulate`) keep every quantity as a
# row, a (1, n) array over the bodies, and stack rows into (groups, width, n) arrays, with each
# stage of a pass materialized behind an optimization barrier.
# Two things follow, both about how XLA:CPU compiles small programs:
#
# * XLA cuts a fused value out into a kernel of its own once it would be recomputed more than 15
#   times; it counts one recomputation per reshape between the value and a kernel's output, and
#   every lane of (n,) needs a reshape of its own to be stacked. A row is stacked without one,
#   so a row read from a stage can feed every output of the next stage and stay fused.
# * Each stage then reads the one before it, so the kernels form a chain, and XLA:CPU runs a chain
#   in order on the calling thread whatever its length (any other program of more than 8 kernels
#   goes to its thread pool, at microseconds a kernel; docs/benchmarks.md).


def model_rows(model: Model, key: str, dtype) -> list:
    """An array of :data:`dense_armor.model.ARRAYS` as rows over the bodies: for an (n, ...)
    array one row per component (row-major), a strided slice of ``model.data`` whose addresses
    are fixed at compile time (a gather loads and clamps an index per element, and a model's view
    is a kernel of its own); for a (k,) array, k rows each repeating one value."""
    data = jnp.asarray(model.data, dtype)
    index = model.indices(key)
    if index.ndim == 1:
        return [jnp.broadcast_to(data[i], (1, model.n_bodies)) for i in index]
    stride = index[0].size
    return [data[i : i + stride * (model.n_bodies - 1) + 1 : stride][None] for i in index[0].reshape(-1)]


def stack_rows(rows) -> jax.Array:
    """Rows (1, n) as one (groups, width, n) array (:func:`_groups`), computed by one kernel and
    materialized (concatenates along different axes are not merged into one)."""
    return stage(jnp.stack([jnp.concatenate(group, -2) for group in _groups(rows)], -3))


def unstack_rows(stacked: jax.Array, count: int, bodies: slice = slice(None)) -> list:
    """The first ``count`` rows (1, n) of a :func:`stack_rows` array, or their ``bodies``
    columns, each sliced straight from the array."""
    width = stacked.shape[-2]
    return [stacked[k // width, k % width : k % width + 1, bodies] for k in range(count)]


def accumulate(model: Model, segments, compose, parents: list | None = None, width: int | None = None) -> jax.Array:
    """Every body's segment composed with the segments of all its ancestors, by pointer jumping.

    Args:
        segments: rows (1, n), each body's own segment (say its placement in its parent, or its
            joint's velocity), or a :func:`stack_rows` array whose first ``width`` rows they are
            (read by slices straight from it: a slice of a row of it is a kernel of its own).
        compose: ``compose(upper, lower)`` of two lists of rows like ``segments``, associative:
            the segment of a body's ancestor above the segment of the body.
        parents: optional rows of each body's parent's segment (any value for a body on the
            base): the first stage then composes them as they are, with no read of
            ``segments``, so that it fuses with their computation.
        width: the number of segment rows, for a stacked ``segments``.

    Returns:
        :func:`stack_rows` of the rows composed from the base down to each body, one
        materialized kernel per stage of ``ceil(log2(depth))``, in which each body folds in the
        segment ``2^s`` levels up. Bodies are taken in runs whose ancestors are consecutive too
        (a chain is one run), read by slices whose addresses are fixed at compile time: a
        gather, which loads and clamps an index per element, made a stage on Panda about 3x
        slower (it is the fallback past 8 runs).
    """
    stacked = segments if width else None
    width = width or len(segments)

    def read(at) -> list:  # from the stage before, by slices straight from it
        return [row[:, at] for row in segments] if stacked is None else unstack_rows(stacked, width, at)

    for stage, (has, index) in enumerate(_doubling(model.parents)):
        runs = _runs(has, index)
        given = parents if stage == 0 else None
        if given is not None or len(runs) > 8:
            own = read(slice(None))
            composed = compose(list(given) if given is not None else [row[:, index] for row in own], own)
            stacked = stack_rows([jnp.where(has, a, b) for a, b in zip(composed, own)])
            continue
        pieces = []
        for a, b, up in runs:
            lower = read(slice(a, b))
            pieces.append(lower if up is None else compose(read(slice(up, up + b - a)), lower))
        stacked = stack_rows([jnp.concatenate(row, -1) if len(row) > 1 else row[0] for row in zip(*pieces)])
    return stack_rows(segments) if stacked is None else stacked


def _runs(has: np.ndarray, index: np.ndarray) -> list:
    """The bodies as ranges ``(a, b, up)``: with no ancestor at this stage (``up`` None), or
    with ancestors ``up .. up + b - a - 1``."""
    out, a = [], 0
    while a < len(has):
        b = a + 1
        while b < len(has) and has[b] == has[a] and (not has[a] or index[b] == index[b - 1] + 1):
            b += 1
        out.append((a, b, int(index[a]) if has[a] else None))
        a = b
    return out


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


# ---------------------------------------------------------------- world placements of the joint frames
#
# Composed down the tree over rows (:func:`accumulate`), once for every pass that needs them
# (the mass matrix, the level walk's ABA, kinematics), and read as lanes.


def joint_frame_placements(model: Model, q, dtype, frames=None) -> tuple:
    """World placements of every joint frame (:func:`joint_frames`), and the bodies' inertial
    parameters in them (10 lanes); ``frames`` the joint frames with their parents' (read from
    the model if not given).

    A joint frame's placement in its parent's, ``(C Rot(z, q), d)``, needs two products per
    entry once ``C`` and ``d`` are known, and these do not depend on ``q``: in a scan they are
    computed once, out of the loop. The cosines and sines of ``q`` (and of the parents' ``q``)
    are a kernel of their own, so that no kernel evaluates them per element it writes; the first
    stage of the composition composes each joint with its parent from these directly.

    Returns:
        The placements as a :func:`stack_rows` array of their 12 rows (:func:`placements_at`
        reads them), and the inertial parameters as lanes.
    """
    frames = joint_frames(model, dtype, parents=True) if frames is None else frames
    x = [lane[None] for lane in columns(frames, 34)]
    cs = joint_angles(model, q, parents=True)

    def placement(values, c, s, slide) -> list:
        (C, d), column = placement_lanes(values), tuple(values[2:9:3])
        return placement_values((tuple(turn_z(row, c, s) for row in C), spatial.add(d, spatial.scale(slide, column))))

    world = accumulate(model, placement(x[0:12], *cs[0:3]), compose_placements, placement(x[22:34], *cs[3:6]))
    return world, tuple(lane[0] for lane in x[12:22])


def joint_angles(model: Model, q, parents: bool = False) -> jax.Array:
    """Rows (1, n) of every joint's rotation and slide at its position ``q`` (n,): the cosine and
    sine of a revolute joint's angle (1 and 0 for a prismatic one), a prismatic joint's slide (0
    for a revolute one), and with ``parents`` the same of each joint's parent (any value for a
    joint on the base). Computed by a kernel of their own, so that no reader evaluates a cosine
    per element it writes."""
    prismatic = prismatic_mask(model)
    c, s, slide = jnp.where(prismatic, 1.0, jnp.cos(q)), jnp.where(prismatic, 0.0, jnp.sin(q)), jnp.where(prismatic, q, 0.0)
    up = np.maximum(np.asarray(model.parents), 0)
    rows = [c, s, slide, c[up], s[up], slide[up]] if parents else [c, s, slide]
    return stage(jnp.stack(rows))[:, None, :]


def placements_at(world: jax.Array, bodies=None) -> tuple:
    """``(R, p)`` as lanes from :func:`joint_frame_placements`' world placements: of every body,
    sliced from its rows, or of the static ``bodies`` (K,), read by one gather (gathered row by
    row, each row would be a kernel of its own)."""
    if bodies is None:
        return placement_lanes([row[0] for row in unstack_rows(world, 12)])
    return placement_lanes(columns(jnp.moveaxis(world, -1, 0)[np.asarray(bodies)], 12))


def compose_placements(upper, lower) -> list:
    """The 12 rows of a placement composed from its ancestor's ``upper`` and its own in that
    ancestor ``lower`` (:func:`placement_values`)."""
    return placement_values(spatial.compose(placement_lanes(upper), placement_lanes(lower)))
