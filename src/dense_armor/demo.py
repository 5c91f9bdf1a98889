"""The demonstrations behind ``dense-armor demo``: the embedded two-link arm changes, the learners follow.

Two scenarios, both on the design document's two-link arm (:func:`dense_armor.robots.minimal_urdf`):

* :func:`drift_scenario` (open loop, prequential): the arm follows a smooth excitation
  trajectory; it picks up a payload at one third of the run and its joints gain viscous and
  Coulomb friction at two thirds. Each learner predicts every sample's torque before learning
  it; :func:`phase_rmse` scores the predictions against the noise-free torque.
* :func:`tracking_scenario` (closed loop): a computed-torque controller that knows only the
  URDF moves the arm, mounted on a wall so gravity acts in its plane, through point-to-point
  moves while it carries an unmodelled payload (:mod:`dense_armor.control`).

Everything here follows the dtype of its inputs; the command line runs it in float64.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from dense_armor.control import Reference, minimum_jerk
from dense_armor.dynamics import rnea
from dense_armor.learners import Sample
from dense_armor.model import Model, attach_payload
from dense_armor.robots import minimal_urdf
from dense_armor.urdf import parse_urdf

#: Gravity for the arm in a horizontal plane (the design document's arm: joint axes along gravity).
HORIZONTAL = (0.0, 0.0, -9.81)
#: Gravity for the arm mounted on a wall: gravity along -y, in the plane of motion.
VERTICAL = (0.0, -9.81, 0.0)
#: Where a payload sits: the centre of mass of ``link2``, as in ``minimal_urdf(payload_mass)``.
PAYLOAD_LINK, PAYLOAD_COM = "link2", (0.5, 0.0, 0.0)


def two_link_arm(plane: str = "horizontal") -> Model:
    """The embedded two-link arm, with a ``tip`` frame at the end of ``link2`` (1 m out).

    Args:
        plane: ``"horizontal"`` (gravity along the joint axes, as in the design document) or
            ``"vertical"`` (mounted on a wall: gravity in the plane of motion).
    """
    if plane not in ("horizontal", "vertical"):
        raise ValueError(f"plane must be 'horizontal' or 'vertical', got {plane!r}")
    tip = (
        '  <link name="tip"/>\n'
        '  <joint name="tip_joint" type="fixed">\n'
        '    <parent link="link2"/>\n    <child link="tip"/>\n'
        '    <origin xyz="1 0 0" rpy="0 0 0"/>\n  </joint>\n</robot>'
    )
    xml = minimal_urdf().replace("</robot>", tip)
    return parse_urdf(xml, gravity=HORIZONTAL if plane == "horizontal" else VERTICAL)


def multisine(duration: float, rate: float, n: int, seed: int = 0, amplitude: float = 0.6):
    """A smooth, persistently exciting joint trajectory: four sines per joint, random phases.

    Frequencies 0.11, 0.23, 0.37 and 0.53 Hz (scaled a little per joint), so every joint sweeps
    about +-1.5 rad at up to ~2 rad/s and ~5 rad/s^2.

    Returns:
        ``t`` (T,) and ``q``, ``qd``, ``qdd`` (T, n), NumPy float64.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(duration * rate))) / rate
    freqs = np.array([0.11, 0.23, 0.37, 0.53])[:, None] * (1.0 + 0.13 * np.arange(n))[None, :]  # (4, n)
    w = 2 * np.pi * freqs
    phase = rng.uniform(0, 2 * np.pi, (4, n))
    amp = amplitude * np.array([1.0, 0.7, 0.5, 0.35])[:, None]
    arg = w[None] * t[:, None, None] + phase[None]  # (T, 4, n)
    q = np.sum(amp * np.sin(arg), axis=1)
    qd = np.sum(amp * w * np.cos(arg), axis=1)
    qdd = -np.sum(amp * w**2 * np.sin(arg), axis=1)
    return t, q, qd, qdd


class DriftScenario(NamedTuple):
    """The open-loop demo's data.

    Attributes:
        t: (T,) time, s.
        measured: the :class:`~dense_armor.learners.Sample` trajectory the learners see
            (measured torque = true torque + noise).
        true_tau: (T, n) noise-free torque of the real robot, the score's reference.
        changes: sample indices where the robot changes (payload picked up, friction appears).
        phases: ``(label, start, stop)`` sample ranges that :func:`phase_rmse` reports.
        model: the nominal model.
        payload: the payload mass, kg.
    """

    t: np.ndarray
    measured: Sample
    true_tau: np.ndarray
    changes: tuple[int, ...]
    phases: tuple[tuple[str, int, int], ...]
    model: Model
    payload: float


def drift_scenario(
    duration: float = 30.0,
    rate: float = 100.0,
    payload: float = 0.5,
    viscous: float = 0.2,
    coulomb: float = 0.1,
    sigma: float = 0.01,
    seed: int = 0,
    plane: str = "horizontal",
    settle: float = 1.0,
) -> DriftScenario:
    """The open-loop demo: payload picked up at ``duration / 3``, friction from ``2 duration / 3``.

    Args:
        duration: s; rate: samples per second.
        payload: kg, at the centre of mass of ``link2``.
        viscous, coulomb: friction gained by every joint, N m s/rad and N m.
        sigma: standard deviation of the torque-sensor noise, N m.
        seed: the trajectory's phases and the noise.
        plane: see :func:`two_link_arm`.
        settle: seconds after each change reported as their own phase (the transient).
    """
    model = two_link_arm(plane)
    real = attach_payload(model, PAYLOAD_LINK, payload, com=PAYLOAD_COM)
    t, q, qd, qdd = multisine(duration, rate, model.n, seed)
    T = t.size
    c1, c2 = T // 3, 2 * T // 3
    batch = jax.vmap(rnea, in_axes=(None, 0, 0, 0))
    tau_nominal = np.asarray(batch(model, q, qd, qdd))
    tau_payload = np.asarray(batch(real, q, qd, qdd))
    friction = viscous * qd + coulomb * np.sign(qd)
    true_tau = np.concatenate([tau_nominal[:c1], tau_payload[c1:c2], tau_payload[c2:] + friction[c2:]])
    noise = sigma * np.random.default_rng(1000 + seed).standard_normal(true_tau.shape)
    s = max(1, int(round(settle * rate)))
    f = lambda k: f"{k / rate:g}"
    phases = (
        (f"{f(0)}-{f(c1)} s", 0, c1),
        (f"{f(c1)}-{f(c1 + s)} s", c1, c1 + s),
        (f"{f(c1 + s)}-{f(c2)} s", c1 + s, c2),
        (f"{f(c2)}-{f(c2 + s)} s", c2, c2 + s),
        (f"{f(c2 + s)}-{f(T)} s", c2 + s, T),
    )
    return DriftScenario(t, Sample(q, qd, qdd, true_tau + noise), true_tau, (c1, c2), phases, model, payload)


def phase_rmse(error, phases) -> list[float]:
    """RMSE over all joints of ``error`` (T, n) within each ``(label, start, stop)`` phase."""
    error = np.asarray(error)
    out = []
    for _, start, stop in phases:
        e = error[start:stop]
        e = e[np.all(np.isfinite(e), axis=1)]
        out.append(float(np.sqrt(np.mean(e**2))) if e.size else float("nan"))
    return out


class TrackingScenario(NamedTuple):
    """The closed-loop demo's set-up.

    Attributes:
        nominal: the model the controller knows; real: the robot with the payload.
        reference: the reference trajectory (1/dt Hz); t: (T,) s.
        dt: control period, s; kp, kd: gains.
        targets: sample indices at the end of each hold (where the arm should be on target).
        payload: kg.
    """

    nominal: Model
    real: Model
    reference: Reference
    t: np.ndarray
    dt: float
    kp: float
    kd: float
    targets: tuple[int, ...]
    payload: float


#: Joint-space targets of the closed-loop demo (rad), visited twice.
WAYPOINTS = ((-1.2, 1.0), (-0.3, 0.8), (-1.0, -0.5), (0.2, 0.3))


def tracking_scenario(
    payload: float = 0.5,
    rate: float = 1000.0,
    move_time: float = 1.0,
    hold_time: float = 1.0,
    laps: int = 2,
    kp: float = 400.0,
    kd: float = 40.0,
    plane: str = "vertical",
) -> TrackingScenario:
    """Point-to-point moves through :data:`WAYPOINTS` (``laps`` times) with an unmodelled payload.

    Args:
        payload: kg at the centre of mass of ``link2``, unknown to the controller.
        rate: control rate, Hz.
        move_time, hold_time: s per move and per hold.
        laps: how many times the targets are visited.
        kp, kd: computed-torque gains (critically damped for ``kd = 2 sqrt(kp)``).
        plane: see :func:`two_link_arm`; ``"vertical"`` so the payload's weight acts.
    """
    nominal = two_link_arm(plane)
    real = attach_payload(nominal, PAYLOAD_LINK, payload, com=PAYLOAD_COM)
    waypoints = np.array(WAYPOINTS * laps + WAYPOINTS[:1])
    dt = 1.0 / rate
    ref = minimum_jerk(waypoints, move_time, hold_time, dt)
    n_move, n_hold = int(round(move_time / dt)), int(round(hold_time / dt))
    targets = tuple(n_hold + k * (n_move + n_hold) + n_move + n_hold - 1 for k in range(len(waypoints) - 1))
    t = np.arange(ref.q.shape[0]) * dt
    return TrackingScenario(nominal, real, ref, t, dt, kp, kd, targets, payload)


def tip_positions(model: Model, q) -> np.ndarray:
    """(T, 3) position of the ``tip`` frame along a trajectory ``q`` (T, n), m.

    One jitted forward-kinematics call per sample: a single compiled function for any T.
    """
    from dense_armor.dynamics import forward_kinematics

    tip = model.frame_index("tip")
    return np.array([np.asarray(forward_kinematics(model, x)[1][tip]) for x in np.asarray(q)]).reshape(-1, 3)
