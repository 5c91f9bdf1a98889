"""Inverse dynamics by the Recursive Newton-Euler Algorithm, and its special cases."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.model import Model


def body_accelerations(joints, v, qd, qdd, gravity: bool = True) -> list:
    """Body spatial accelerations in joint frames (:func:`tree.joint_frames`), gravity included
    as an upward acceleration ``(0, -g)`` of the fixed base.

    ``v``/``qd`` and ``qdd`` may be ``None`` (zero): their terms are left out at trace time.
    """
    acc = []
    for i, joint in enumerate(joints):
        if joint.parent >= 0:
            w, lin = spatial.motion_to_child(joint.R, joint.p, acc[joint.parent])
        else:
            w, lin = (spatial.ZERO,) * 3, spatial.scale(-1.0, joint.gravity) if gravity else (spatial.ZERO,) * 3
        if qdd is not None:
            w, lin = (w, tr.along_z(lin, qdd[i])) if joint.prismatic else (tr.along_z(w, qdd[i]), lin)
        if v is not None:  # v x (S qd), S = e_z
            vw, vlin = v[i]
            if joint.prismatic:
                lin = spatial.add(lin, tr.cross_z(vw, qd[i]))
            else:
                w, lin = spatial.add(w, tr.cross_z(vw, qd[i])), spatial.add(lin, tr.cross_z(vlin, qd[i]))
        acc.append((w, lin))
    return acc


def _rnea(model: Model, q, qd, qdd, dtype, gravity: bool = True):
    """The RNEA as traced code, (n,); ``qd``/``qdd`` ``None`` mean zero, ``gravity=False`` leaves it out."""
    joints = tr.joints(model, q, dtype)
    v = tr.velocities(joints, qd) if qd is not None else None
    acc = body_accelerations(joints, v, qd, qdd, gravity)
    forces = []
    for i, joint in enumerate(joints):
        f = spatial.rigid_momentum(joint.inertia, acc[i])
        if v is not None:
            f = spatial.sadd(f, spatial.cross_force(v[i], spatial.rigid_momentum(joint.inertia, v[i])))
        forces.append(f)
    tau = [None] * model.n
    for i in reversed(range(model.n)):
        joint = joints[i]
        tau[i] = tr.project(joint, forces[i])
        if joint.parent >= 0:
            forces[joint.parent] = spatial.sadd(forces[joint.parent], spatial.force_to_parent(joint.R, joint.p, forces[i]))
    return tr.vector(tau)


@jax.jit
def rnea(model: Model, q, qd, qdd):
    """Inverse dynamics by the Recursive Newton-Euler Algorithm.

    Written in scalars, unrolled over the tree and run in joint frames (see
    :mod:`dense_armor.dynamics.tree`), so that it compiles to one kernel for up to about 15
    joints, plus the sines and cosines of ``q`` and the model's joint frames (hoisted out of a
    ``lax.scan``).

    Args:
        model: the robot.
        q, qd, qdd: (n,) joint positions (rad or m), velocities and accelerations.

    Returns:
        (n,) joint torques (N m) or forces (N): ``M(q) qdd + C(q, qd) qd + g(q)``.
    """
    dtype, (q, qd, qdd) = tr.check(model, q=q, qd=qd, qdd=qdd)
    return _rnea(model, q, qd, qdd, dtype)


@jax.jit
def nonlinear_effects(model: Model, q, qd):
    """Bias forces ``C(q, qd) qd + g(q)`` (n,): the RNEA at zero acceleration."""
    dtype, (q, qd) = tr.check(model, q=q, qd=qd)
    return _rnea(model, q, qd, None, dtype)


@jax.jit
def generalized_gravity(model: Model, q):
    """Gravity torques ``g(q)`` (n,): the RNEA at rest."""
    dtype, (q,) = tr.check(model, q=q)
    return _rnea(model, q, None, None, dtype)
