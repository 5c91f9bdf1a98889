"""Forward dynamics by the Articulated-Body Algorithm.

Featherstone (2008), *Rigid Body Dynamics Algorithms*, table 7.1, in world coordinates (as
section 7.3 allows): every body's motion subspace ``S_i`` and rigid inertia ``I_i`` are
expressed about the world origin once, from the joints' world placements, so the passes over
the tree (:mod:`dense_armor.dynamics.traversal`) add a child's articulated inertia and bias
force to its parent's as they are, with no change of frame:

1. ``v_i = v_p + S_i qd_i`` and ``c_i = v_i x S_i qd_i``, base to tips;
2. ``I^A_i = I_i + sum I^a_c``, ``p^A_i = v_i x* I_i v_i + sum p^a_c``, ``U_i = I^A_i S_i``,
   ``D_i = S_i^T U_i``, ``u_i = tau_i - S_i^T p^A_i``, and for the parent
   ``I^a_i = I^A_i - U_i U_i^T / D_i``, ``p^a_i = p^A_i + I^a_i c_i + U_i u_i / D_i``, tips to base;
3. ``a'_i = a_p + c_i``, ``qdd_i = (u_i - U_i^T a'_i) / D_i``, ``a_i = a'_i + S_i qdd_i``, base
   to tips, from the base's ``a_0 = -g``.
"""

from __future__ import annotations

import jax
import jax.scipy.linalg as jsl

from dense_armor import spatial
from dense_armor.dynamics import traversal
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.inverse_dynamics import Z3, _rnea, base_motion
from dense_armor.dynamics.mass_matrix import _mass_matrix, motion_subspaces, world_inertia
from dense_armor.model import Model

ZERO_INERTIA = ((Z3,) * 3,) * 3


def _apply(blocks, motion):
    """A spatial inertia in blocks ``(A, B, C)`` (``n = A w + B v``, ``f = B^T w + C v``) times a motion."""
    A, B, C = blocks
    w, v = motion
    return spatial.add(spatial.matvec(A, w), spatial.matvec(B, v)), spatial.add(spatial.matTvec(B, w), spatial.matvec(C, v))


def _blocks(params):
    """The blocks of a rigid body's inertia from its 10 parameters (about the world origin)."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = params
    Z = spatial.ZERO
    return ((ixx, ixy, ixz), (ixy, iyy, iyz), (ixz, iyz, izz)), ((Z, -hz, hy), (hz, Z, -hx), (-hy, hx, Z)), ((m, Z, Z), (Z, m, Z), (Z, Z, m))


def velocity(v_parent, S, qd):
    """The first forward step: ``v_i = v_p + S_i qd_i``."""
    return spatial.sadd(v_parent, tuple(spatial.scale(qd, x) for x in S))


def articulated(children, S, inertia, v, qd, tau):
    """The backward step: returns ``(U, D, u, c)`` and the articulated inertia and bias force
    ``(I^a, p^a)`` the body adds to its parent's."""
    inertia_children, bias_children = children
    IA = tuple(spatial.madd(X, Y) for X, Y in zip(_blocks(inertia), inertia_children))
    pA = spatial.sadd(spatial.cross_force(v, spatial.rigid_momentum(inertia, v)), bias_children)
    U = _apply(IA, S)
    D = spatial.dot(S[0], U[0]) + spatial.dot(S[1], U[1])
    u = tau - spatial.dot(S[0], pA[0]) - spatial.dot(S[1], pA[1])
    n, f = (spatial.scale(1.0 / D, x) for x in U)
    Ia = tuple(spatial.msub(X, spatial.outer(a, b)) for X, (a, b) in zip(IA, ((n, U[0]), (n, U[1]), (f, U[1]))))
    c = spatial.cross_motion(v, tuple(spatial.scale(qd, x) for x in S))
    pa = spatial.sadd(spatial.sadd(pA, _apply(Ia, c)), tuple(spatial.scale(u / D, x) for x in U))
    return (U, D, u, c), (Ia, pa)


def acceleration(parent, S, projection):
    """The last forward step: ``a' = a_p + c``, ``qdd = (u - U^T a') / D``, ``a = a' + S qdd``."""
    a_parent, _ = parent
    U, D, u, c = projection
    a = spatial.sadd(a_parent, c)
    qdd = (u - spatial.dot(U[0], a[0]) - spatial.dot(U[1], a[1])) / D
    return spatial.sadd(a, tuple(spatial.scale(qdd, x) for x in S)), qdd


def _aba(model: Model, q, qd, tau, dtype):
    walk = traversal.walk(model.parents)
    if isinstance(walk, traversal.Unrolled):
        M = _mass_matrix(model, q, dtype)
        return jsl.cho_solve(jsl.cho_factor(M, lower=True), tau - _rnea(model, q, qd, None, dtype))
    (R, p), inertia = tr.joint_frame_placements(model, q, dtype)
    # a joint frame's axis is its z: the motion subspaces and inertias about the world origin
    S = walk.lanes(motion_subspaces(tr.prismatic_mask(model), tuple(row[2] for row in R), p))
    inertia = walk.lanes(world_inertia(inertia, R, p))
    qd, tau = walk.split(qd), walk.split(tau)
    v0, a0 = base_motion(model, dtype)
    v = walk.forward(velocity, v0, S, qd)
    projections = walk.backward(articulated, (ZERO_INERTIA, v0), S, inertia, v, qd, tau)
    a = walk.forward(acceleration, (a0, spatial.ZERO), S, projections)
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
    dtype, (q, qd, tau) = tr.check(model, q=q, qd=qd, tau=tau)
    return _aba(model, q, qd, tau, dtype)
