"""Forward dynamics by the Articulated Body Algorithm."""

from __future__ import annotations

import jax

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.rnea import base_acceleration
from dense_armor.model import Model


def _sub_outer(blocks, u_n, u_f, d):
    """``I - U U^T / d`` for ``U = (u_n, u_f)`` in block form."""
    A, B, C = blocks
    un, uf = spatial.scale(1.0 / d, u_n), u_f
    return (
        spatial.msub(A, spatial.outer(un, u_n)),
        spatial.msub(B, spatial.outer(un, uf)),
        spatial.msub(C, spatial.outer(spatial.scale(1.0 / d, uf), uf)),
    )


@jax.jit
def aba(model: Model, q, qd, tau):
    """Forward dynamics by the Articulated Body Algorithm.

    Args:
        model: the robot.
        q, qd: (n,) joint positions and velocities.
        tau: (n,) joint torques (N m) or forces (N).

    Returns:
        (n,) joint accelerations ``qdd = M(q)^-1 (tau - C(q, qd) qd - g(q))``.
    """
    dtype, (q, qd, tau) = tr.check(model, q=q, qd=qd, tau=tau)
    joints = tr.joints(model, q, dtype)
    v = tr.velocities(joints, qd)
    n = model.n
    # Velocity-product accelerations c_i and bias forces pA_i (gravity enters in pass 3).
    c = [spatial.cross_motion(v[i], tr.subspace(joint, qd[i])) for i, joint in enumerate(joints)]
    IA = tr.inertias(model, dtype)
    pA = [spatial.cross_force(v[i], spatial.inertia_apply(IA[i], v[i])) for i in range(n)]
    U, D, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        joint = joints[i]
        U[i] = tr.subspace_force(joint, IA[i])
        D[i] = tr.project(joint, U[i])
        u[i] = tau[i] - tr.project(joint, pA[i])
        if joint.parent >= 0:
            Ia = _sub_outer(IA[i], U[i][0], U[i][1], D[i])
            scaled = spatial.sadd(pA[i], spatial.inertia_apply(Ia, c[i]))
            pa = spatial.sadd(scaled, (spatial.scale(u[i] / D[i], U[i][0]), spatial.scale(u[i] / D[i], U[i][1])))
            IA[joint.parent] = spatial.inertia_add(IA[joint.parent], spatial.inertia_to_parent(Ia, joint.R, joint.p))
            pA[joint.parent] = spatial.sadd(pA[joint.parent], spatial.force_to_parent(joint.R, joint.p, pa))
    base = base_acceleration(model, dtype)
    qdd = [None] * n
    acc = [None] * n
    for i, joint in enumerate(joints):
        a = spatial.sadd(spatial.motion_to_child(joint.R, joint.p, base if joint.parent < 0 else acc[joint.parent]), c[i])
        qdd[i] = (u[i] - spatial.dot(U[i][0], a[0]) - spatial.dot(U[i][1], a[1])) / D[i]
        acc[i] = spatial.sadd(a, tr.subspace(joint, qdd[i]))
    return tr.vector(qdd)
