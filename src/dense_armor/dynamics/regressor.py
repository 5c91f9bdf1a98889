"""The joint-torque regressor: inverse dynamics linear in the inertial parameters.

``rnea(q, qd, qdd) == joint_torque_regressor(q, qd, qdd) @ model.inertia.reshape(-1)``, with
the parameters of each body in the order of :mod:`dense_armor.spatial`.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.mass_matrix import motion_subspaces
from dense_armor.model import Model

# the symmetric unit matrices of (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz), as index pairs
_INERTIA_ENTRIES = (((0, 0),), ((0, 1), (1, 0)), ((1, 1),), ((0, 2), (2, 0)), ((1, 2), (2, 1)), ((2, 2),))


def body_force_regressor(motion, acceleration):
    """The 10 columns ``(n, f)`` of a body's spatial force ``I a + v x* I v`` per inertial
    parameter, from its velocity ``(w, v)`` and acceleration ``(wd, vd)`` in its own frame::

        m:    (0, vd + w x v)
        h_e:  (e x vd + w x (e x v) - v x (e x w),  -e x wd - w x (e x w))
        I_E:  (E wd + w x (E w), 0)
    """
    w, v = motion
    wd, vd = acceleration
    zero = spatial.scale(0.0, w)
    columns = [(zero, spatial.add(vd, spatial.cross(w, v)))]
    for axis in range(3):
        def e_x(x, axis=axis):  # e x x for the unit vector e along axis
            out = [0.0 * x[0]] * 3
            out[(axis + 1) % 3] = -x[(axis + 2) % 3]
            out[(axis + 2) % 3] = x[(axis + 1) % 3]
            return tuple(out)

        n = spatial.sub(spatial.add(e_x(vd), spatial.cross(w, e_x(v))), spatial.cross(v, e_x(w)))
        columns.append((n, spatial.scale(-1.0, spatial.add(e_x(wd), spatial.cross(w, e_x(w))))))
    for pairs in _INERTIA_ENTRIES:
        def E(x, pairs=pairs):
            out = [0.0 * x[0]] * 3
            for r, c in pairs:
                out[r] = out[r] + x[c]
            return tuple(out)

        columns.append((spatial.add(E(wd), spatial.cross(w, E(w))), zero))
    return columns


def _regressor(model: Model, q, qd, qdd, dtype):
    n = model.n
    body = np.arange(n)
    D = tr.subtree_mask(model)  # D[k, j]: j is k or one of its ancestors

    def over_ancestors(rows):  # lane k: the sum of every row j on the path from k to the base
        return tr.masked_sum(D, rows, axis=1)

    R, p = tr.world_placements(model, q, dtype)
    S = motion_subspaces(model, spatial.matvec(R, tr.lanes(model.axis, dtype)), p)
    # world-frame velocities V_k: sums of S_j qd_j over the ancestors
    rows = tr.read(tr.pack([*tr.placement_values((R, p)), *(x * qd for x in (*S[0], *S[1])), *S[0], *S[1]]), body)
    lanes = tr.columns(rows, 24)
    R, p = tr.placement_lanes(lanes[:12])
    Sqd, S = lanes[12:18], lanes[18:24]
    V = tr.columns(over_ancestors(rows), 18)[12:18]
    # accelerations A_k: the base's (0, -g) plus sums of S_j qdd_j + V_j x S_j qd_j
    own = spatial.sadd(
        (spatial.scale(qdd, tuple(S[:3])), spatial.scale(qdd, tuple(S[3:]))),
        spatial.cross_motion((tuple(V[:3]), tuple(V[3:])), (tuple(Sqd[:3]), tuple(Sqd[3:]))),
    )
    rows = tr.read(tr.pack([*tr.placement_values((R, p)), *V, *own[0], *own[1], *S]), body)
    lanes = tr.columns(rows, 30)
    R, p = tr.placement_lanes(lanes[:12])
    V, S = lanes[12:18], lanes[24:30]
    A = tr.columns(over_ancestors(rows), 24)[18:24]
    A = (tuple(A[:3]), spatial.sub(tuple(A[3:]), tr.leaf(model.gravity, dtype)))
    # each body's force per parameter, in its own frame, then in world coordinates
    motion = spatial.motion_to_child(R, p, (tuple(V[:3]), tuple(V[3:])))
    columns = body_force_regressor(motion, spatial.motion_to_child(R, p, A))
    world = [x for column in columns for part in spatial.force_to_parent(R, p, column) for x in part]
    forces = tr.read(tr.pack(world), body).reshape(n, -1)[:, :60].reshape(n, 10, 6)
    # Y[i, 10 k + c] = S_i . f_kc for i an ancestor of k
    torque = sum(S[c][:, None, None] * forces[None, :, :, c] for c in range(6))
    return jnp.where(D.T[:, :, None], torque, 0.0).reshape(n, 10 * n)


@jax.jit
def joint_torque_regressor(model: Model, q, qd, qdd):
    """Joint-torque regressor ``Y(q, qd, qdd)`` with ``Y @ pi == rnea(q, qd, qdd)``.

    In world coordinates, over lanes of bodies (see :mod:`dense_armor.dynamics.tree`): body
    velocities and accelerations as sums over ancestors, each body's force per parameter in its
    frame, moved to the world, and projected on the motion subspaces of the joints above it.

    Args:
        model: the robot.
        q, qd, qdd: (n,) joint positions, velocities and accelerations.

    Returns:
        (n, 10 n): columns ``10 k .. 10 k + 9`` belong to body ``k``, in the parameter order
        ``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)`` (Pinocchio's
        ``computeJointTorqueRegressor``).
    """
    dtype, (q, qd, qdd) = tr.check(model, q=q, qd=qd, qdd=qdd)
    return _regressor(model, q, qd, qdd, dtype)


@partial(jax.jit, static_argnums=4)
def body_regressor(model: Model, q, qd, qdd, body: int):
    """The 10 regressor columns (n, 10) of one body: how its inertial parameters move every joint."""
    dtype, (q, qd, qdd) = tr.check(model, q=q, qd=qd, qdd=qdd)
    return _regressor(model, q, qd, qdd, dtype)[:, 10 * body : 10 * body + 10]
