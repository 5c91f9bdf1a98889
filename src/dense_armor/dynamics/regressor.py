"""The joint-torque regressor: inverse dynamics linear in the inertial parameters.

``rnea(q, qd, qdd) == joint_torque_regressor(q, qd, qdd) @ model.inertia.reshape(-1)``, with
the parameters of each body in the order of :mod:`dense_armor.spatial`.
"""

from __future__ import annotations

from functools import partial

import jax

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.rnea import body_accelerations
from dense_armor.model import Model


def _body_forces(v, a):
    """The 10 spatial forces ``I_c a + v x* I_c v`` of the unit parameters ``c`` of one body."""
    w, lin = v
    alpha, acc = a
    zero = 0.0 * w[0]
    zeros = (zero, zero, zero)
    columns = [(zeros, spatial.add(acc, spatial.cross(w, lin)))]  # mass
    ww = spatial.dot(w, w)
    for e in range(3):  # first moments h: n = h x acc + w (lin.h) - lin (w.h), f = alpha x h - |w|^2 h + w (w.h)
        h = tuple(1.0 if k == e else 0.0 for k in range(3))
        n = spatial.add(spatial.cross(h, acc), spatial.sub(spatial.scale(lin[e], w), spatial.scale(w[e], lin)))
        f = spatial.add(spatial.cross(alpha, h), spatial.sub(spatial.scale(w[e], w), spatial.scale(ww, h)))
        columns.append((n, f))
    # Rotational inertia about the origin: n = I alpha + w x (I w), linear in (xx, xy, yy, xz, yz, zz).
    for r, c in ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)):
        unit = [[0.0] * 3 for _ in range(3)]
        unit[r][c] = unit[c][r] = 1.0
        I_alpha = tuple(sum(unit[i][k] * alpha[k] for k in range(3) if unit[i][k]) + zero for i in range(3))
        I_w = tuple(sum(unit[i][k] * w[k] for k in range(3) if unit[i][k]) + zero for i in range(3))
        columns.append((spatial.add(I_alpha, spatial.cross(w, I_w)), zeros))
    return columns


def _columns(model: Model, joints, v, acc, body: int):
    """(n, 10) nested list: the regressor columns of one body."""
    zero = 0.0 * v[0][0][0]
    rows = [[zero] * 10 for _ in range(model.n)]
    forces = _body_forces(v[body], acc[body])
    j = body
    while True:
        rows[j] = [tr.project(joints[j], f) for f in forces]
        if joints[j].parent < 0:
            return rows
        forces = [spatial.force_to_parent(joints[j].R, joints[j].p, f) for f in forces]
        j = joints[j].parent


def _kinematics(model, q, qd, qdd):
    dtype, (q, qd, qdd) = tr.check(model, q=q, qd=qd, qdd=qdd)
    joints = tr.joints(model, q, dtype)
    v = tr.velocities(joints, qd)
    return joints, v, body_accelerations(model, joints, v, qd, qdd, dtype)


@jax.jit
def joint_torque_regressor(model: Model, q, qd, qdd):
    """Joint-torque regressor ``Y(q, qd, qdd)`` with ``Y @ pi == rnea(q, qd, qdd)``.

    Args:
        model: the robot.
        q, qd, qdd: (n,) joint positions, velocities and accelerations.

    Returns:
        (n, 10 n): columns ``10 k .. 10 k + 9`` belong to body ``k``, in the parameter order
        ``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)`` (Pinocchio's
        ``computeJointTorqueRegressor``).
    """
    joints, v, acc = _kinematics(model, q, qd, qdd)
    blocks = [_columns(model, joints, v, acc, k) for k in range(model.n)]
    return tr.matrix([[x for block in blocks for x in block[i]] for i in range(model.n)])


@partial(jax.jit, static_argnums=4)
def body_regressor(model: Model, q, qd, qdd, body: int):
    """The 10 regressor columns (n, 10) of one body: how its inertial parameters move every joint."""
    joints, v, acc = _kinematics(model, q, qd, qdd)
    return tr.matrix(_columns(model, joints, v, acc, body))
