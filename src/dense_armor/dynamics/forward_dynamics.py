"""Forward dynamics: the Articulated-Body Algorithm, or the mass matrix for small trees.

The ABA is Featherstone (2008), *Rigid Body Dynamics Algorithms*, table 7.1, in joint frames
(each joint moves along or about z of its own frame, so ``S`` picks a column of an inertia)
over a walk of the tree (:mod:`dense_armor.dynamics.traversal`): three passes, each linear in
the bodies. Unrolled, its backward pass compiles to code that recomputes every descendant's
articulated inertia for each ancestor (Panda: 13k multiplications where the algorithm has 3k,
and 20 s to compile), so trees the walk unrolls solve ``M qdd = tau - C qd - g`` instead, with
:func:`crba`, the RNEA and a Cholesky factorisation, which on so few joints also costs fewer
operations (Featherstone 2008, chapter 6).
"""

from __future__ import annotations

import jax
import jax.scipy.linalg as jsl

from dense_armor import spatial
from dense_armor.dynamics import traversal
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.inverse_dynamics import Z3, _rnea, base_motion, body_velocity
from dense_armor.dynamics.mass_matrix import _mass_matrix
from dense_armor.model import Model

ZERO_INERTIA = ((Z3,) * 3,) * 3


def _column(prismatic, blocks):
    """``U = I S`` of an inertia's blocks ``(A, B, C)`` (``n = A w + B v``, ``f = B^T w + C v``)
    for a joint along z of its frame, as a spatial force ``(n, f)``."""
    A, B, C = blocks
    revolute = (A[0][2], A[1][2], A[2][2]), B[2]
    return traversal.choose(prismatic, ((B[0][2], B[1][2], B[2][2]), (C[0][2], C[1][2], C[2][2])), revolute)


def _rank_one(blocks, U, D):
    """``I - U U^T / D`` in blocks."""
    n, f = U
    n_D, f_D = spatial.scale(1.0 / D, n), spatial.scale(1.0 / D, f)
    return tuple(spatial.msub(X, Y) for X, Y in zip(blocks, (spatial.outer(n_D, n), spatial.outer(n_D, f), spatial.outer(f_D, f))))


def articulated(children, joint: tr.Joint, v, qd, tau):
    """The backward step: the body's articulated inertia ``I^A = I + children``, its bias force
    ``p^A = v x* I v + children``; returns ``(U, D, u)`` and, in the parent's frame,
    ``I^a = I^A - U U^T / D`` and ``p^a = p^A + I^a c + U u / D``, with ``c = v x S qd``."""
    inertia_children, bias_children = children
    I = joint.inertia
    m, h = I[0], I[1:4]
    rigid = ((I[4], I[5], I[7]), (I[5], I[6], I[8]), (I[7], I[8], I[9])), spatial.skew(h), ((m, spatial.ZERO, spatial.ZERO), (spatial.ZERO, m, spatial.ZERO), (spatial.ZERO, spatial.ZERO, m))
    IA = tuple(spatial.madd(X, Y) for X, Y in zip(rigid, inertia_children))
    pA = spatial.sadd(spatial.cross_force(v, spatial.rigid_momentum(I, v)), bias_children)
    U = _column(joint.prismatic, IA)
    D = tr.project(joint.prismatic, U)
    u = tau - tr.project(joint.prismatic, pA)
    Ia = _rank_one(IA, U, D)
    c = spatial.cross_motion(v, tr.joint_motion(joint.prismatic, qd))
    pa = spatial.sadd(spatial.sadd(pA, spatial.inertia_apply(Ia, c)), tuple(spatial.scale(u / D, x) for x in U))
    up = spatial.inertia_to_parent(Ia, joint.R, joint.p), spatial.force_to_parent(joint.R, joint.p, pa)
    return (U, D, u), up


def acceleration(parent, joint: tr.Joint, v, qd, projection):
    """The last forward step: ``a' = X a_p + c``, ``qdd = (u - U^T a') / D``, ``a = a' + S qdd``."""
    a_parent, _ = parent
    U, D, u = projection
    a = spatial.sadd(spatial.motion_to_child(joint.R, joint.p, a_parent), spatial.cross_motion(v, tr.joint_motion(joint.prismatic, qd)))
    qdd = (u - spatial.dot(U[0], a[0]) - spatial.dot(U[1], a[1])) / D
    return spatial.sadd(a, tr.joint_motion(joint.prismatic, qdd)), qdd


def _aba(model: Model, q, qd, tau, dtype):
    walk = traversal.walk(model.parents)
    if isinstance(walk, traversal.Unrolled):
        M = _mass_matrix(model, q, dtype)
        return jsl.cho_solve(jsl.cho_factor(M, lower=True), tau - _rnea(model, q, qd, None, dtype))
    joints = tr.joints(walk, model, q, dtype)
    qd, tau = walk.split(qd), walk.split(tau)
    v0, a0 = base_motion(model, dtype)
    v = walk.forward(body_velocity, v0, joints, qd)
    projections = walk.backward(articulated, (ZERO_INERTIA, v0), joints, v, qd, tau)
    a = walk.forward(acceleration, (a0, spatial.ZERO), joints, v, qd, projections)
    return walk.array(walk.map(lambda motion: motion[1], a))


@jax.jit
def aba(model: Model, q, qd, tau):
    """Forward dynamics ``qdd = M(q)^-1 (tau - C(q, qd) qd - g(q))`` (Pinocchio's ``aba``).

    Args:
        model: the robot.
        q, qd: (n,) joint positions and velocities.
        tau: (n,) joint torques (N m) or forces (N).

    Returns:
        (n,) joint accelerations.
    """
    dtype, (q, qd, tau) = tr.check(model, q=q, qd=qd, tau=tau)
    return _aba(model, q, qd, tau, dtype)
