"""Inverse dynamics by the Recursive Newton-Euler Algorithm, and its special cases."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.model import Model


def _plus(a, b):
    """Sum of two 3-vectors where ``None`` is a zero known at trace time."""
    return b if a is None else a if b is None else spatial.add(a, b)


def body_accelerations(model: Model, joints, v, qd, qdd, dtype, gravity: bool = True) -> list:
    """Body spatial accelerations in body frames, gravity included as an upward acceleration
    ``(0, -g)`` of the fixed base.

    ``v``/``qd`` and ``qdd`` may be ``None`` (zero): their terms are left out at trace time.
    """
    g = tr.leaf(model.gravity, dtype) if gravity else None
    acc = []
    for i, joint in enumerate(joints):
        if joint.parent >= 0:
            w, lin = spatial.motion_to_child(joint.R, joint.p, acc[joint.parent])
        else:
            w, lin = None, None if g is None else spatial.matTvec(joint.R, spatial.scale(-1.0, g))
        if qdd is not None:
            along = spatial.scale(qdd[i], joint.axis)
            w, lin = (w, _plus(lin, along)) if joint.prismatic else (_plus(w, along), lin)
        if v is not None:
            along = spatial.scale(qd[i], joint.axis)  # v x (S qd)
            vw, vlin = v[i]
            w, lin = (w, _plus(lin, spatial.cross(vw, along))) if joint.prismatic else (
                _plus(w, spatial.cross(vw, along)), _plus(lin, spatial.cross(vlin, along)))
        zero = (jnp.zeros((), dtype),) * 3
        acc.append((zero if w is None else w, zero if lin is None else lin))
    return acc


def _rnea(model: Model, q, qd, qdd, dtype, gravity: bool = True):
    """The RNEA as traced code, (n,); ``qd``/``qdd`` ``None`` mean zero, ``gravity=False`` leaves it out."""
    joints = tr.joints(model, q, dtype)
    v = tr.velocities(joints, qd) if qd is not None else None
    acc = body_accelerations(model, joints, v, qd, qdd, dtype, gravity)
    forces = []
    for i, params in enumerate(tr.leaf(model.inertia, dtype)):
        f = spatial.rigid_momentum(params, acc[i])
        if v is not None:
            f = spatial.sadd(f, spatial.cross_force(v[i], spatial.rigid_momentum(params, v[i])))
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

    Written in scalars and unrolled over the tree (see :mod:`dense_armor.dynamics.tree`), so
    that it compiles to one kernel (plus the sines and cosines of ``q``) for up to about 15
    joints.

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
