"""Forward kinematics and frame Jacobians."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.model import Model


def body_placements(joints) -> list:
    """World placement ``(R, p)`` of every body."""
    world = []
    for joint in joints:
        local = (joint.R, joint.p)
        world.append(local if joint.parent < 0 else spatial.compose(world[joint.parent], local))
    return world


def _frame_placement(model: Model, world, frame: int, dtype):
    local = (tr.leaf(model.frame_rotation[frame], dtype), tr.leaf(model.frame_translation[frame], dtype))
    body = model.frame_bodies[frame]
    return local if body < 0 else spatial.compose(world[body], local)


@jax.jit
def forward_kinematics(model: Model, q):
    """World placement of every frame (every URDF link, fixed-joint children included).

    Args:
        model: the robot.
        q: (n,) joint positions.

    Returns:
        ``(R, p)``: (F, 3, 3) orientations and (F, 3) positions (m) of the frames in
        ``model.frame_names``, in the base frame.
    """
    dtype, (q,) = tr.check(model, q=q)
    world = body_placements(tr.joints(model, q, dtype))
    frames = [_frame_placement(model, world, f, dtype) for f in range(len(model.frame_names))]
    return jnp.stack([tr.matrix(R) for R, _ in frames]), jnp.stack([tr.vector(p) for _, p in frames])


def _ancestors(model: Model, body: int) -> list[int]:
    chain = []
    while body >= 0:
        chain.append(body)
        body = model.parents[body]
    return chain


@partial(jax.jit, static_argnums=2)
def frame_jacobian(model: Model, q, frame: str | int):
    """Geometric Jacobian of a frame's origin.

    Args:
        model: the robot.
        q: (n,) joint positions.
        frame: a link name or an index into ``model.frame_names`` (static).

    Returns:
        (6, n) ``J`` with ``(v; w) = J qd``: the linear velocity of the frame origin (first three
        rows) and the angular velocity (last three), in base-frame axes (Pinocchio's
        ``LOCAL_WORLD_ALIGNED``).
    """
    frame = model.frame_index(frame)
    dtype, (q,) = tr.check(model, q=q)
    joints = tr.joints(model, q, dtype)
    world = body_placements(joints)
    _, origin = _frame_placement(model, world, frame, dtype)
    zero = 0.0 * q[0]
    columns = [(zero,) * 6 for _ in range(model.n)]
    for j in _ancestors(model, model.frame_bodies[frame]):
        R, p = world[j]
        z = spatial.matvec(R, joints[j].axis)
        if joints[j].prismatic:
            columns[j] = (*z, zero, zero, zero)
        else:
            columns[j] = (*spatial.cross(z, spatial.sub(origin, p)), *z)
    return tr.matrix([[col[r] for col in columns] for r in range(6)])
