"""Forward dynamics."""

from __future__ import annotations

import jax
import jax.scipy.linalg as jsl

from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.inverse_dynamics import _rnea
from dense_armor.dynamics.mass_matrix import _mass_matrix
from dense_armor.model import Model


@jax.jit
def aba(model: Model, q, qd, tau):
    """Forward dynamics ``qdd = M(q)^-1 (tau - C(q, qd) qd - g(q))`` (Pinocchio's ``aba``).

    Solved with the mass matrix and a Cholesky factorisation rather than the recursive
    Articulated Body Algorithm: for arms of a few to ~10 joints this is faster on XLA and
    compiles in seconds (a scalarised ABA took 47 s to compile and 840 us a call on Panda).

    Args:
        model: the robot.
        q, qd: (n,) joint positions and velocities.
        tau: (n,) joint torques (N m) or forces (N).

    Returns:
        (n,) joint accelerations.
    """
    dtype, (q, qd, tau) = tr.check(model, q=q, qd=qd, tau=tau)
    M = _mass_matrix(model, q, dtype)
    bias = _rnea(model, q, qd, None, dtype)
    return jsl.cho_solve(jsl.cho_factor(M, lower=True), tau - bias)
