"""Inverse dynamics by the Recursive Newton-Euler Algorithm, and its special cases."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.model import Model


def base_acceleration(model: Model, dtype, gravity: bool = True):
    """Gravity as a fictitious upward acceleration of the fixed base, ``(0, -g)``."""
    g = tr.leaf(model.gravity, dtype)
    if not gravity:
        g = spatial.scale(0.0, g)
    zero = 0.0 * g[0]
    return (zero, zero, zero), spatial.scale(-1.0, g)


def body_accelerations(model: Model, joints, v, qd, qdd, dtype, gravity: bool = True) -> list:
    """Body spatial accelerations in body frames, gravity included as a base acceleration.

    ``v``/``qd`` and ``qdd`` may be ``None`` (zero): their terms are left out at trace time.
    """
    base = base_acceleration(model, dtype, gravity)
    acc = []
    for i, joint in enumerate(joints):
        a = spatial.motion_to_child(joint.R, joint.p, base if joint.parent < 0 else acc[joint.parent])
        if qdd is not None:
            a = spatial.sadd(a, tr.subspace(joint, qdd[i]))
        if v is not None:
            a = spatial.sadd(a, spatial.cross_motion(v[i], tr.subspace(joint, qd[i])))
        acc.append(a)
    return acc


def _rnea(model: Model, q, qd, qdd, dtype, gravity: bool = True):
    """The RNEA as traced code; ``qd``/``qdd`` ``None`` mean zero, ``gravity=False`` leaves it out."""
    # Zero rates enter as arrays, not as skipped terms: the pruned graph of a gravity-only pass
    # makes XLA:CPU's fused code blow up (measured on Panda: 1.4 s a call instead of ~0.2 ms).
    zeros = jnp.zeros_like(q)
    qd = zeros if qd is None else qd
    qdd = zeros if qdd is None else qdd
    joints = tr.joints(model, q, dtype)
    v = tr.velocities(joints, qd)
    acc = body_accelerations(model, joints, v, qd, qdd, dtype, gravity)
    forces = []
    for i, blocks in enumerate(tr.inertias(model, dtype)):
        f = spatial.inertia_apply(blocks, acc[i])
        f = spatial.sadd(f, spatial.cross_force(v[i], spatial.inertia_apply(blocks, v[i])))
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
