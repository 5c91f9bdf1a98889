"""Forward dynamics by the Articulated-Body Algorithm.

Featherstone (2008), *Rigid Body Dynamics Algorithms*, table 7.1, in world coordinates (as
section 7.3 allows): every body's motion subspace ``S_i`` and rigid inertia ``I_i`` are
expressed about the world origin once, from the joints' world placements, so the passes over
the tree (:mod:`dense_armor.dynamics.traversal`) add a child's articulated inertia and bias
force to its parent's as they are, with no change of frame:

1. ``v_i = v_p + S_i qd_i`` and ``c_i = v_i x S_i qd_i``, base to tips;
2. ``I^A_i = I_i + sum I^a_c``, ``p^A_i = v_i x* I_i v_i + sum p^a_c``, ``U_i = I^A_i S_i``,
   ``D_i = S_i^T U_i + armature_i``, ``u_i = tau_i - S_i^T p^A_i``, and for the parent
   ``I^a_i = I^A_i - U_i U_i^T / D_i``, ``p^a_i = p^A_i + I^a_i c_i + U_i u_i / D_i``, tips to base;
3. ``a'_i = a_p + c_i``, ``qdd_i = (u_i - U_i^T a'_i) / D_i``, ``a_i = a'_i + S_i qdd_i``, base
   to tips, from the base's ``a_0 = -g``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from dense_armor import inertial, spatial
from dense_armor.dynamics import traversal
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.inverse_dynamics import _rnea
from dense_armor.dynamics.mass_matrix import _mass_matrix, motion_subspaces, world_inertia
from dense_armor.model import Model


def _skew(x):
    """``[x]`` (..., 3, 3), the matrix of ``x x .``, for vectors ``x`` (..., 3)."""
    return jnp.stack([jnp.stack(row, -1) for row in spatial.skew(tuple(x[..., k] for k in range(3)))], -2)


def cross_matrix(v):
    """The (..., 6, 6) matrix of the spatial motion cross product ``v x``, for ``v`` (..., 6) =
    ``(w, v_O)``; the force cross product ``v x*`` is minus its transpose."""
    W = _skew(v[..., :3])
    return jnp.concatenate([jnp.concatenate([W, jnp.zeros_like(W)], -1), jnp.concatenate([_skew(v[..., 3:]), W], -1)], -2)


def _times(M, x):
    """``M x`` for (..., 6, 6) matrices and (..., 6) vectors."""
    return jnp.einsum("...ij,...j->...i", M, x, precision=jax.lax.Precision.HIGHEST)


def spatial_inertia(params):
    """The (..., 6, 6) spatial inertia ``[[I_O, [h]], [[h]^T, m 1]]`` of 10 parameters (..., 10)."""
    m, H = params[..., 0], _skew(params[..., 1:4])
    I_O = inertial.rotational_inertia(params)
    return jnp.concatenate([jnp.concatenate([I_O, H], -1), jnp.concatenate([-H, m[..., None, None] * jnp.eye(3, dtype=m.dtype)], -1)], -2)


def velocity(v_parent, S, qd):
    """The first forward step: ``v_i = v_p + S_i qd_i``."""
    return v_parent + S * qd[..., None]


def articulated(children, S, I, v, qd, tau, armature):
    """The backward step: returns ``(U, D, u, c)`` and the articulated inertia and bias force
    ``(I^a, p^a)`` the body adds to its parent's; the joint's armature adds to ``D``, the
    inertia its motion meets."""
    inertia_children, bias_children = children
    IA = I + inertia_children
    pA = -_times(jnp.swapaxes(cross_matrix(v), -1, -2), _times(I, v)) + bias_children  # v x* I v
    U = _times(IA, S)
    D = jnp.sum(S * U, -1) + armature
    u = tau - jnp.sum(S * pA, -1)
    c = _times(cross_matrix(v), S * qd[..., None])
    Ia = IA - U[..., :, None] * U[..., None, :] / D[..., None, None]
    pa = pA + _times(Ia, c) + U * (u / D)[..., None]
    return (U, D, u, c), (Ia, pa)


def acceleration(parent, S, projection):
    """The last forward step: ``a' = a_p + c``, ``qdd = (u - U^T a') / D``, ``a = a' + S qdd``."""
    a_parent, _ = parent
    U, D, u, c = projection
    a = a_parent + c
    qdd = (u - jnp.sum(U * a, -1)) / D
    return a + S * qdd[..., None], qdd


def _aba(model: Model, q, qd, tau, dtype):
    """The coordinates' accelerations (n,) at the joints' positions and velocities (B,) and
    the coordinates' forces (n,)."""
    walk = traversal.walk(model.parents)
    if isinstance(walk, traversal.Unrolled) or model.mimics:
        # M(q) qdd = tau - h: in the coordinates for coupled joints, which the ABA does not have;
        # both passes read the joint frames once
        frames = tr.joint_frames(model, dtype, parents=True)
        M = _mass_matrix(model, q, dtype, frames)
        h = tr.generalized(model, dtype, _rnea(model, q, qd, None, dtype, frames))
        return jsl.cho_solve(jsl.cho_factor(M, lower=True), tau - h)
    world, inertia = tr.joint_frame_placements(model, q, dtype)
    R, p = tr.placements_at(world)
    # a joint frame's axis is its z: the motion subspaces and inertias about the world origin
    w, v = motion_subspaces(tr.prismatic_mask(model), tuple(row[2] for row in R), p)
    S = jnp.stack([*w, *v], -1)
    I = spatial_inertia(jnp.stack(world_inertia(inertia, R, p), -1))
    S, I, qd, tau, armature = walk.arrays(S), walk.arrays(I), walk.split(qd), walk.split(tau), walk.split(jnp.asarray(model.armature, dtype))
    zero = jnp.zeros(6, dtype)
    v = walk.forward(velocity, zero, S, qd)
    projections = walk.backward(articulated, (jnp.zeros((6, 6), dtype), zero), S, I, v, qd, tau, armature)
    gravity = jnp.concatenate([zero[:3], -jnp.asarray(model.gravity, dtype)])
    a = walk.forward(acceleration, (gravity, spatial.ZERO), S, projections)
    return walk.array(walk.map(lambda motion: motion[1], a))


@jax.jit
def aba(model: Model, q, qd, tau):
    """Forward dynamics ``qdd = M(q)^-1 (tau - C(q, qd) qd - g(q))`` by the Articulated-Body
    Algorithm (Pinocchio's ``aba``).

    Args:
        model: the robot.
        q, qd: (n,) joint positions and velocities.
        tau: (n,) joint torques (N m) or forces (N).

    Returns:
        (n,) joint accelerations.
    """
    dtype, (q, qd, tau) = model.check(q=q, qd=qd, tau=tau)
    q, qd, _ = tr.joint_values(model, dtype, q, qd)
    return _aba(model, q, qd, tau, dtype)
