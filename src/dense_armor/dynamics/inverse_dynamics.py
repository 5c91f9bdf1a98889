"""Inverse dynamics by the Recursive Newton-Euler Algorithm, and its special cases.

Featherstone (2008), *Rigid Body Dynamics Algorithms*, table 5.1, run in joint frames
(:func:`tree.joint_frames`: each joint moves along or about z of its own frame) over a walk of
the tree (:mod:`dense_armor.dynamics.traversal`), with gravity as an upward acceleration of the
base.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dense_armor import spatial
from dense_armor.dynamics import traversal
from dense_armor.dynamics import tree as tr
from dense_armor.model import Model

Z3 = (spatial.ZERO,) * 3


def base_motion(model: Model, dtype) -> tuple:
    """The base's velocity and acceleration ``(v_0, a_0)``: at rest, accelerating at ``-g``
    (Featherstone's way of adding gravity to every body)."""
    return (Z3, Z3), (Z3, spatial.scale(-1.0, tr.leaf(model.gravity, dtype)))


def body_velocity(v_parent, joint: tr.Joint, qd) -> tuple:
    """``v_i = X_i v_p + S_i qd_i``."""
    return spatial.sadd(spatial.motion_to_child(joint.R, joint.p, v_parent), tr.joint_motion(joint.prismatic, qd))


def body_motion(parent, joint: tr.Joint, qd, qdd) -> tuple:
    """The forward step: ``v_i = X_i v_p + S_i qd_i``, ``a_i = X_i a_p + S_i qdd_i + v_i x S_i qd_i``."""
    v_parent, a_parent = parent
    v = body_velocity(v_parent, joint, qd)
    a = spatial.sadd(spatial.motion_to_child(joint.R, joint.p, a_parent), tr.joint_motion(joint.prismatic, qdd))
    return v, spatial.sadd(a, spatial.cross_motion(v, tr.joint_motion(joint.prismatic, qd)))


def motions(walk, model: Model, joints, qd, qdd, dtype):
    """Every body's velocity and acceleration in its joint frame, as per-body values of
    ``walk``; ``qd``/``qdd`` ``None`` are zero, and their terms are not traced."""
    return walk.forward(body_motion, base_motion(model, dtype), joints, walk.split(qd), walk.split(qdd))


def body_force(children, joint: tr.Joint, motion) -> tuple:
    """The backward step: ``f_i = I_i a_i + v_i x* I_i v_i + sum of the children's f``,
    ``tau_i = S_i^T f_i``, and ``f_i`` in the parent's frame."""
    v, a = motion
    I = joint.inertia
    f = spatial.sadd(spatial.sadd(spatial.rigid_momentum(I, a), spatial.cross_force(v, spatial.rigid_momentum(I, v))), children)
    return tr.project(joint.prismatic, f), spatial.force_to_parent(joint.R, joint.p, f)


def _rnea(model: Model, q, qd, qdd, dtype, frames=None):
    """The joint torques (B,) at the joints' positions, velocities and accelerations (B,), from
    the joint frames (:func:`tree.joint_frames`, read from the model if not given)."""
    walk = traversal.walk(model.parents)
    joints = tr.joints(walk, model, q, dtype, frames)
    motion = motions(walk, model, joints, qd, qdd, dtype)
    return walk.array(walk.backward(body_force, (Z3, Z3), joints, motion))


@jax.jit
def rnea(model: Model, q, qd, qdd):
    """Inverse dynamics by the Recursive Newton-Euler Algorithm.

    Args:
        model: the robot.
        q, qd, qdd: (n,) joint positions (rad or m), velocities and accelerations.

    Returns:
        (n,) joint torques (N m) or forces (N): ``M(q) qdd + C(q, qd) qd + g(q)``, ``M`` with the
        model's armature on its diagonal.
    """
    dtype, (q, qd, qdd) = model.check(q=q, qd=qd, qdd=qdd)
    tau = tr.generalized(model, dtype, _rnea(model, *tr.joint_values(model, dtype, q, qd, qdd), dtype))
    return tau + jnp.asarray(model.armature, dtype) * qdd  # the rotors, spun up by their own joint


@jax.jit
def nonlinear_effects(model: Model, q, qd):
    """Bias forces ``C(q, qd) qd + g(q)`` (n,): the RNEA at zero acceleration."""
    dtype, (q, qd) = model.check(q=q, qd=qd)
    return tr.generalized(model, dtype, _rnea(model, *tr.joint_values(model, dtype, q, qd), dtype))


@jax.jit
def generalized_gravity(model: Model, q):
    """Gravity torques ``g(q)`` (n,): the RNEA at rest."""
    dtype, (q,) = model.check(q=q)
    return tr.generalized(model, dtype, _rnea(model, *tr.joint_values(model, dtype, q), dtype))
