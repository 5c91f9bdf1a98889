"""Closed-loop simulation: a computed-torque controller on a simulated robot, in one ``lax.scan``.

The controller knows the nominal (URDF) model; the simulated robot is another model (e.g. with
a payload) plus joint friction. Each tick, at 1/dt Hz:

1. command ``a = qdd_ref + kp (q_ref - q) + kd (qd_ref - qd)`` and torque
   ``tau = ID(q, qd, a)``, with ``ID`` the nominal RNEA, or the learner's prediction
   (nominal plus learned residual) when a learner is given;
2. the robot moves: ``qdd = aba(real, q, qd, tau - friction(qd))`` (forward dynamics);
3. the learner, if any, learns the sample ``(q, qd, qdd, tau_measured)`` with its prequential
   step: ``tau_measured`` is the applied torque (plus optional sensor noise), which is the
   real robot's inverse dynamics along the actual motion;
4. semi-implicit Euler: ``qd += dt qdd``, then ``q += dt qd``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import compiler
from dense_armor.dynamics import aba, rnea
from dense_armor.learners import Sample
from dense_armor.model import Model


class Reference(NamedTuple):
    """A reference trajectory: (T, n) positions, velocities and accelerations."""

    q: Any
    qd: Any
    qdd: Any


class Rollout(NamedTuple):
    """A simulated run, each field with a leading T axis.

    Attributes:
        q, qd, qdd: (T, n) the robot's state at each tick (before the tick's update) and the
            acceleration it got.
        tau: (T, n) the commanded (applied) torque, N m.
        error: (T, n) tracking error ``q_ref - q``, rad.
        residual: (T, n) what the learner added to the nominal command (zeros without one).
        alarm: (T,) bool, drift alarms of the learner.
    """

    q: jax.Array
    qd: jax.Array
    qdd: jax.Array
    tau: jax.Array
    error: jax.Array
    residual: jax.Array
    alarm: jax.Array


def minimum_jerk(waypoints, move_time: float, hold_time: float, dt: float) -> Reference:
    """Point-to-point minimum-jerk moves through ``waypoints``, holding at each.

    Args:
        waypoints: (K, n) joint positions; the trajectory starts at rest at ``waypoints[0]``,
            holds ``hold_time`` there, then moves to each next waypoint in ``move_time`` and
            holds ``hold_time`` at it.
        move_time, hold_time: seconds.
        dt: sample period, s.

    Returns:
        The reference sampled every ``dt`` (NumPy float64).
    """
    waypoints = np.asarray(waypoints, dtype=np.float64)
    n_move, n_hold = int(round(move_time / dt)), int(round(hold_time / dt))
    qs, qds, qdds = [], [], []

    def hold(at):
        qs.append(np.repeat(at[None], n_hold, 0))
        qds.append(np.zeros((n_hold, at.size)))
        qdds.append(np.zeros((n_hold, at.size)))

    hold(waypoints[0])
    s = np.arange(n_move)[:, None] / n_move  # normalised time in [0, 1)
    for a, b in zip(waypoints[:-1], waypoints[1:]):
        d = b - a
        qs.append(a + d * (10 * s**3 - 15 * s**4 + 6 * s**5))
        qds.append(d * (30 * s**2 - 60 * s**3 + 30 * s**4) / move_time)
        qdds.append(d * (60 * s - 180 * s**2 + 120 * s**3) / move_time**2)
        hold(b)
    return Reference(np.concatenate(qs), np.concatenate(qds), np.concatenate(qdds))


def _friction(qd, viscous, coulomb):
    return viscous * qd + coulomb * jnp.sign(qd)


@compiler.jit
def simulate(
    nominal: Model,
    real: Model,
    reference: Reference,
    dt,
    kp,
    kd,
    learner=None,
    state=None,
    viscous=0.0,
    coulomb=0.0,
    noise=None,
    use_learner=True,
) -> tuple[Any, Rollout]:
    """Run the computed-torque loop over ``reference``; see the module docstring.

    Args:
        nominal: the model the controller knows.
        real: the simulated robot (e.g. ``attach_payload(nominal, ...)``).
        reference: (T, n) ``q``, ``qd``, ``qdd``; the robot starts at rest at ``reference.q[0]``.
        dt: control period, s.
        kp, kd: scalar or (n,) gains, 1/s^2 and 1/s.
        learner: ``None`` (nominal model only), or a learner with ``predict(state, q, qd, qdd)``
            and ``step(state, Sample)`` (e.g. :class:`~dense_armor.learners.ResidualLearner`).
        state: the learner's initial state (default ``learner.init(dtype)``, the reference's dtype).
        viscous, coulomb: scalar or (n,) friction of the real robot, ``viscous qd +
            coulomb sign(qd)``.
        noise: ``None`` or (T, n) torque-sensor noise added to the torque the learner learns.
        use_learner: whether the learner's residual is added to the command (a traced bool:
            ``False`` lets the learner learn alongside the nominal controller without acting,
            and ``jax.vmap`` over ``[False, True]`` runs both cases in one compiled call).

    Returns:
        The learner's final state (``None`` without a learner) and the :class:`Rollout`.
    """
    q_ref = jnp.asarray(reference.q)
    dtype = q_ref.dtype
    n = q_ref.shape[1]
    noise = jnp.zeros_like(q_ref) if noise is None else jnp.asarray(noise, dtype)
    kp, kd, dt = (jnp.asarray(v, dtype) for v in (kp, kd, dt))
    for name, gain in (("kp", kp), ("kd", kd)):
        if gain.shape not in ((), (n,)):
            raise ValueError(f"{name}: expected a scalar or ({n},) gains, got shape {gain.shape}")
    if learner is not None and state is None:
        state = learner.init(dtype)
    viscous, coulomb = (jnp.broadcast_to(jnp.asarray(v, dtype), (n,)) for v in (viscous, coulomb))

    def tick(carry, xs):
        q, qd, lstate = carry
        (qr, qdr, qddr), eps = xs
        a = qddr + kp * (qr - q) + kd * (qdr - qd)
        nominal_tau = rnea(nominal, q, qd, a)
        tau = nominal_tau
        if learner is not None:
            residual = learner.predict(lstate, q, qd, qddr) - rnea(nominal, q, qd, qddr)
            tau = jnp.where(use_learner, nominal_tau + residual, nominal_tau)
        qdd = aba(real, q, qd, tau - _friction(qd, viscous, coulomb))
        alarm = jnp.zeros((), bool)
        if learner is not None:
            lstate, out = learner.step(lstate, Sample(q, qd, qdd, tau + eps))
            alarm = out.alarm
        qd_next = qd + dt * qdd
        q_next = q + dt * qd_next
        row = Rollout(q, qd, qdd, tau, qr - q, tau - nominal_tau, alarm)
        return (q_next, qd_next, lstate), row

    q0 = q_ref[0]
    carry = (q0, jnp.zeros_like(q0), state)
    (_, _, state), rollout = jax.lax.scan(tick, carry, ((q_ref, jnp.asarray(reference.qd, dtype), jnp.asarray(reference.qdd, dtype)), noise))
    return state, rollout
