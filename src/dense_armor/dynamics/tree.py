"""What every tree pass shares: input checks, the model as scalars, joint placements and motion.

The passes are Python loops over the static parent tuple, unrolled at trace time into
straight-line scalar code (see :mod:`dense_armor.spatial`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

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


def leaf(x, dtype):
    """A model leaf as a JAX array of ``dtype``, as nested tuples of scalars."""
    return spatial.as_tuple(jnp.asarray(x, dtype))


def joints(model: Model, q, dtype) -> list[Joint]:
    """Every joint's placement at ``q``, in model order."""
    rotation = jnp.asarray(model.joint_rotation, dtype)
    translation = jnp.asarray(model.joint_translation, dtype)
    axes = jnp.asarray(model.axis, dtype)
    out = []
    for i, (kind, parent) in enumerate(zip(model.joint_kinds, model.parents)):
        R0, p0, axis = spatial.as_tuple(rotation[i]), spatial.as_tuple(translation[i]), spatial.as_tuple(axes[i])
        if kind == "prismatic":
            R, p = R0, spatial.add(p0, spatial.matvec(R0, spatial.scale(q[i], axis)))
        else:
            R, p = spatial.matmul(R0, spatial.rodrigues(axis, jnp.cos(q[i]), jnp.sin(q[i]))), p0
        out.append(Joint(parent, kind == "prismatic", axis, R, p))
    return out


def inertias(model: Model, dtype) -> list:
    """Every body's spatial inertia blocks ``(A, B, C)`` about its origin."""
    params = jnp.asarray(model.inertia, dtype)
    return [spatial.inertia_blocks(spatial.as_tuple(params[i])) for i in range(model.n)]


def subspace(joint: Joint, s):
    """``S s``: the motion of a joint moving at rate ``s``, in its body frame."""
    zero = (0.0 * s, 0.0 * s, 0.0 * s)
    along = spatial.scale(s, joint.axis)
    return (zero, along) if joint.prismatic else (along, zero)


def project(joint: Joint, force):
    """``S^T f``: the generalized force of a spatial force on a joint."""
    n, f = force
    return spatial.dot(joint.axis, f if joint.prismatic else n)


def subspace_force(joint: Joint, blocks):
    """``I S``: the force column of a spatial inertia along a joint's motion subspace."""
    A, B, C = blocks
    if joint.prismatic:
        return spatial.matvec(B, joint.axis), spatial.matvec(C, joint.axis)
    return spatial.matvec(A, joint.axis), spatial.matTvec(B, joint.axis)


def velocities(tree: list[Joint], qd) -> list:
    """Body spatial velocities in body frames."""
    v = []
    for i, joint in enumerate(tree):
        own = subspace(joint, qd[i])
        if joint.parent < 0:
            v.append(own)
        else:
            v.append(spatial.sadd(spatial.motion_to_child(joint.R, joint.p, v[joint.parent]), own))
    return v


def vector(values):
    """Assemble scalars into a 1-D array."""
    return jnp.stack(values)


def matrix(rows):
    """Assemble rows of scalars into a 2-D array."""
    return jnp.stack([jnp.stack(row) for row in rows])
