"""The joint-torque regressor: inverse dynamics linear in the inertial parameters.

``rnea(q, qd, qdd) == joint_torque_regressor(q, qd, qdd) @ model.inertia.reshape(-1)``, with
the parameters of each body in the order of :mod:`dense_armor.spatial`. The RNEA is linear
in the inertial parameters, so its forward-mode Jacobian with respect to them is the
regressor, exactly; all 10 n columns are computed as lanes of one vectorised RNEA.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.inverse_dynamics import _rnea
from dense_armor.model import Model, with_inertia


def _columns(model: Model, q, qd, qdd, bodies):
    """(n, len(bodies), 10): d tau / d pi for the given bodies."""
    dtype, (q, qd, qdd) = tr.check(model, q=q, qd=qd, qdd=qdd)
    inertia = jnp.asarray(model.inertia, dtype)
    rows = jnp.asarray(bodies)

    def torque(params):
        return _rnea(with_inertia(model, inertia.at[rows].set(params)), q, qd, qdd, dtype)

    return jax.jacfwd(torque)(inertia[rows])


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
    return _columns(model, q, qd, qdd, tuple(range(model.n))).reshape(model.n, 10 * model.n)


@partial(jax.jit, static_argnums=4)
def body_regressor(model: Model, q, qd, qdd, body: int):
    """The 10 regressor columns (n, 10) of one body: how its inertial parameters move every joint."""
    return _columns(model, q, qd, qdd, (body,))[:, 0]
