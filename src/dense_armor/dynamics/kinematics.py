"""Forward kinematics and frame Jacobians, over lanes of bodies (see :mod:`dense_armor.dynamics.tree`)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.mass_matrix import motion_subspaces
from dense_armor.model import Model


def _frame_placements(model: Model, world, frames, dtype):
    """Placements ``(R, p)`` of the given frames, as lanes, from the joint frames' world
    placements ``world`` (:func:`tree.joint_frame_placements`): each frame's fixed placement in
    its body's link frame, turned into the body's joint frame (by ``B^T``,
    :func:`tree.axis_basis` of its joint axis; a fixed placement, which a scan computes once),
    composed with the joint frame's (frames of the base keep the former)."""
    frames = np.asarray(frames)
    bodies = np.asarray(model.frame_bodies)[frames]
    on_base = bodies < 0
    body = tr.placements_at(world, np.where(on_base, 0, bodies))
    R_f, p_f = (jnp.asarray(x, dtype)[frames] for x in (model.frame_rotation, model.frame_translation))
    local = (tuple(tuple(R_f[:, r, c] for c in range(3)) for r in range(3)), tuple(p_f[:, k] for k in range(3)))
    axis = tr.lanes(jnp.asarray(model.axis, dtype)[np.where(on_base, 0, bodies)], dtype)
    B_T = spatial.transpose(tr.axis_basis(axis))
    in_joint_frame = spatial.matmul(B_T, local[0]), spatial.matvec(B_T, local[1])
    composed = spatial.compose(body, in_joint_frame)
    return tr.placement_lanes([jnp.where(on_base, b, a) for a, b in zip(tr.placement_values(composed), tr.placement_values(local))])


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
    dtype, (q,) = model.check(q=q)
    q, _, _ = tr.joint_values(model, dtype, q)
    world, _ = tr.joint_frame_placements(model, q, dtype)
    R, p = _frame_placements(model, world, np.arange(len(model.frame_names)), dtype)
    return jnp.stack([jnp.stack(row, -1) for row in R], -2), jnp.stack(p, -1)


@partial(jax.jit, static_argnums=2)
def frame_jacobian(model: Model, q, frame: str | int):
    """Geometric Jacobian of a frame's origin.

    Column ``j`` is joint ``j``'s motion subspace in world coordinates, ``(w, v)`` with ``v`` the
    velocity of the world origin, moved to the frame origin ``o``: ``(v + w x o, w)``, for the
    joints between the frame and the base (zero for the others).

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
    dtype, (q,) = model.check(q=q)
    world, _ = tr.joint_frame_placements(model, tr.joint_values(model, dtype, q)[0], dtype)
    R, p = tr.placements_at(world)
    w, v = motion_subspaces(tr.prismatic_mask(model), tuple(row[2] for row in R), p)  # a joint frame's axis is its z
    _, origin = _frame_placements(model, world, np.full(model.n_bodies, frame), dtype)
    linear = spatial.add(v, spatial.cross(w, origin))
    # the joints between the frame's body and the base (row -1, the base's: none)
    mask = np.vstack([tr.subtree_mask(model), np.zeros(model.n_bodies, bool)])[model.frame_bodies[frame]]
    J = jnp.stack([jnp.where(mask, x, 0.0) for x in (*linear, *w)])  # (6, B) per joint
    return tr.generalized(model, dtype, J.T).T
