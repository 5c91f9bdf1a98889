"""MuJoCo as the real robot: the realistic benchmark's data (SPEC section 4), defined once.

The library's own model must not generate the data it is judged on. Here MuJoCo simulates a
"real" Panda (fingers locked) or UR5 from example-robot-data whose every body differs from the
nominal URDF, whose joints carry armature, viscous damping and dry friction, and which picks up
or drops a payload mid-run. The torque is MuJoCo's own inverse dynamics (``mj_inverse``: rotor
inertia in the mass matrix, damping as a passive force, dry friction as its soft constraint)
along a smooth prescribed motion. It is logged the way real robots log: irregular sample times
(+-30 % of the period), dropped packets at 1 kHz, encoder positions quantised to 2^-19 rad,
velocities as the encoder's difference (or none), no accelerations, torque from a current with
a gain error of up to 3 % per joint and time-correlated noise of 1-3 % of the peak torque.
Optionally, the arm also has what no model in the library has (:func:`unmodelled_torque`:
Stribeck friction, torque ripple, friction that falls as the arm warms up, a cable spring,
friction held at rest). And optionally the URDF is a CAD estimate (``cad``): besides the scaled
masses and moments, every centre of mass is off by up to 3 cm along each axis (also where the
URDF puts it on an axis) and every body's principal axes are turned by up to 20 degrees
(products of inertia the URDF lacks). And optionally the arm is under closed-loop control
(``loop``): MuJoCo integrates the arm's motion under a joint controller tracking the motion
(:func:`closed_loop`), and the log's torque is the controller's command, not the inverse
dynamics of a prescribed motion: the arm lags and overshoots its reference, a joint that stops
sticks in its dry friction, and the controller's integrator winds up against it.

:func:`simulate` returns the log's columns (what a user has) and the truth (what the benchmark
scores against). ``benchmarks/realistic.py`` runs the learners on it; the tests run short
versions.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import mujoco
import numpy as np

from common import example_robot_urdf

QUANTUM = 2.0**-19  # encoder resolution, rad
REST = 0.002  # rad/s: a joint slower than this is at rest (for the unmodelled friction)
CAD_COM = 0.03  # m: a CAD-estimate URDF's centres of mass are off by up to this along each axis ...
CAD_TURN = math.radians(20.0)  # ... and its principal axes by up to this angle
# The closed loop's joint controller (:func:`closed_loop`): ticks, physics steps a tick, ...
CONTROL_RATE = 1000.0  # Hz
SUBSTEPS = 2
STIFFNESS = 20.0  # ... stiffness, N m/rad per N m of the joint's effort limit, ...
BANDWIDTH = 60.0  # ... at most this natural frequency (rad/s) on the joint's own inertia, ...
DAMPING_RATIO = 0.8
INTEGRAL_TIME = 0.5  # ... s, the integrator's time (its torque: stiffness x error x time / this) ...
INTEGRAL_LIMIT = 0.2  # ... and its clamp, a fraction of the effort limit (anti-wind-up)


@dataclass(frozen=True)
class Robot:
    """A benchmark robot: its URDF, the joints locked in the log, the last body (which carries
    the payload), the flange in that body's frame and the tool axis, and its big joints."""

    urdf: str
    locked: dict
    last_link: str
    flange: tuple
    tool_axis: tuple
    big: int  # the first ``big`` joints are the big ones (large armature and friction)


ROBOTS = {
    "panda": Robot("panda_description/urdf/panda.urdf", {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0},
                   "panda_link7", (0.0, 0.0, 0.107), (0.0, 0.0, 1.0), 4),
    "ur5": Robot("ur_description/urdf/ur5_robot.urdf", {}, "wrist_3_link", (0.0, 0.0823, 0.0), (0.0, 1.0, 0.0), 3),
}


def nominal_urdf(robot: str) -> str:
    """The robot's URDF as shipped (the nominal model a user has)."""
    return example_robot_urdf(ROBOTS[robot].urdf).read_text()


def mujoco_urdf(robot: str) -> str:
    """The URDF for MuJoCo: meshes stripped, locked joints fixed, fixed bodies kept."""
    spec = ROBOTS[robot]
    root = ET.fromstring(nominal_urdf(robot))
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    for joint in root.findall("joint"):
        if joint.get("name") in spec.locked:
            joint.set("type", "fixed")
        for el in joint.findall("dynamics"):  # the real robot's friction is drawn below
            joint.remove(el)
    compiler = ET.SubElement(ET.SubElement(root, "mujoco"), "compiler")
    compiler.attrib.update(fusestatic="false", discardvisual="true", balanceinertia="false")
    return ET.tostring(root, encoding="unicode")


@dataclass
class Truth:
    """What the benchmark knows and the learner does not."""

    armature: np.ndarray
    damping: np.ndarray
    frictionloss: np.ndarray
    gain_error: np.ndarray  # logged torque = (1 + gain_error) (true torque + noise)
    payload_mass: float
    payload_com: np.ndarray  # in the last link's frame, m
    payload_inertia: np.ndarray  # about its centre of mass, kg m^2
    change_time: float | None  # s; None: no change
    change: str  # "steady", "pick" or "drop"
    noise_std: np.ndarray  # N m, per joint
    unmodelled: bool = False  # the torque includes :func:`unmodelled_torque`
    cad: bool = False  # the nominal URDF is a CAD estimate (:func:`_cad_error`)
    loop: bool = False  # the torque is a joint controller's command (:func:`closed_loop`)


@dataclass
class Simulated:
    """A simulated log.

    Attributes:
        columns: the log as a user has it: ``t``, ``q_<joint>``, optionally ``qd_<joint>``,
            ``tau_<joint>`` (float64 arrays, one per column).
        joint_names: the logged joints, in the URDF's order.
        tau_true: (T, n) the true torque at each logged sample: MuJoCo's, plus
            :func:`unmodelled_torque` when asked (noise and gain free).
        qdd_true: (T, n) the true accelerations at the logged samples.
        truth: the true robot's additions and the payload.
        rate: the nominal sampling rate, Hz.
    """

    columns: dict
    joint_names: tuple
    tau_true: np.ndarray
    qdd_true: np.ndarray
    truth: Truth
    rate: float
    extra: dict = field(default_factory=dict)


def _perturb_bodies(m: mujoco.MjModel, rng) -> None:
    """Every body's mass, centre of mass and principal moments scaled by factors in [0.7, 1.3],
    the moments redrawn until they satisfy the triangle inequality (physically consistent)."""
    for b in range(1, m.nbody):
        if m.body_mass[b] <= 0:
            continue
        m.body_mass[b] *= rng.uniform(0.7, 1.3)
        m.body_ipos[b] *= rng.uniform(0.7, 1.3, 3)
        moments = m.body_inertia[b].copy()
        for _ in range(100):
            scaled = moments * rng.uniform(0.7, 1.3, 3)
            if all(scaled[k] <= scaled[(k + 1) % 3] + scaled[(k + 2) % 3] for k in range(3)):
                m.body_inertia[b] = scaled
                break


def _cad_error(m: mujoco.MjModel, rng) -> None:
    """What a CAD estimate gets wrong beyond scale: every body's centre of mass moved by up to
    :data:`CAD_COM` along each axis, its principal axes turned by up to :data:`CAD_TURN` about a
    random axis (a rotation keeps the body physically consistent)."""
    for b in range(1, m.nbody):
        if m.body_mass[b] <= 0:
            continue
        m.body_ipos[b] += rng.uniform(-CAD_COM, CAD_COM, 3)
        axis = rng.standard_normal(3)
        turn = np.zeros(4)
        mujoco.mju_axisAngle2Quat(turn, axis / np.linalg.norm(axis), rng.uniform(-CAD_TURN, CAD_TURN))
        turned = np.zeros(4)
        mujoco.mju_mulQuat(turned, turn, m.body_iquat[b])
        m.body_iquat[b] = turned


def _quat_from_matrix(R) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R).reshape(-1))
    return q


def _add_payload(m: mujoco.MjModel, body: int, mass: float, com, inertia) -> None:
    """The payload (mass, centre of mass and inertia about it, in the body's frame) merged into
    the body's inertial parameters."""
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, m.body_iquat[body])
    R = R.reshape(3, 3)
    m0, c0 = m.body_mass[body], m.body_ipos[body].copy()
    I0 = R @ np.diag(m.body_inertia[body]) @ R.T
    total = m0 + mass
    c = (m0 * c0 + mass * np.asarray(com)) / total

    def shift(mass, offset):  # parallel axis: inertia of a point mass at offset about the origin
        return mass * (offset @ offset * np.eye(3) - np.outer(offset, offset))

    I = I0 + shift(m0, c0 - c) + np.asarray(inertia) + shift(mass, np.asarray(com) - c)
    moments, axes = np.linalg.eigh(I)
    if np.linalg.det(axes) < 0:
        axes[:, 0] *= -1
    m.body_mass[body], m.body_ipos[body] = total, c
    m.body_inertia[body], m.body_iquat[body] = moments, _quat_from_matrix(axes)


def true_robot(robot: str, seed: int, cad: bool = False):
    """The real robot: MuJoCo models without and with the payload, and what differs from the URDF
    (with ``cad``, also :func:`_cad_error`, drawn apart so that the rest is the same draw).

    Returns:
        ``(model, model_with_payload, joint_names, truth_parts)``.
    """
    spec = ROBOTS[robot]
    rng = np.random.default_rng([seed, 4])
    m = mujoco.MjModel.from_xml_string(mujoco_urdf(robot))
    _perturb_bodies(m, rng)
    if cad:
        _cad_error(m, np.random.default_rng([seed, 6]))
    n = m.nv
    names = tuple(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, m.dof_jntid[k]) for k in range(n))
    limits = {j.get("name"): j.find("limit") for j in ET.fromstring(nominal_urdf(robot)).findall("joint")}
    effort = np.array([float(limits[name].get("effort")) for name in names])
    big = np.arange(n) < spec.big
    armature = np.where(big, np.exp(rng.uniform(np.log(0.1), np.log(2.0), n)), np.exp(rng.uniform(np.log(0.01), np.log(0.2), n)))
    damping = np.where(big, rng.uniform(1.0, 10.0, n), rng.uniform(0.2, 2.0, n))
    frictionloss = rng.uniform(0.05, 0.12, n) * effort
    m.dof_armature[:], m.dof_damping[:], m.dof_frictionloss[:] = armature, damping, frictionloss
    # A payload of 1-3 kg off the flange, a solid box with random sides.
    mass = rng.uniform(1.0, 3.0)
    axis = np.asarray(spec.tool_axis)
    com = np.asarray(spec.flange) + axis * rng.uniform(0.04, 0.12) + (1 - np.abs(axis)) * rng.uniform(-0.03, 0.03, 3)
    sides = rng.uniform(0.04, 0.15, 3)
    inertia = mass / 12 * np.diag([sides[1] ** 2 + sides[2] ** 2, sides[0] ** 2 + sides[2] ** 2, sides[0] ** 2 + sides[1] ** 2])
    loaded = mujoco.MjModel.from_xml_string(mujoco_urdf(robot))
    for key in ("body_mass", "body_ipos", "body_inertia", "body_iquat", "dof_armature", "dof_damping", "dof_frictionloss"):
        getattr(loaded, key)[:] = getattr(m, key)
    body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, spec.last_link)
    _add_payload(loaded, body, mass, com, inertia)
    return m, loaded, names, dict(armature=armature, damping=damping, frictionloss=frictionloss,
                                  payload_mass=mass, payload_com=com, payload_inertia=inertia, effort=effort)


# ----------------------------------------------------------------------------- trajectories


def _limits(m: mujoco.MjModel):
    lo, hi = m.jnt_range[m.dof_jntid, 0].copy(), m.jnt_range[m.dof_jntid, 1].copy()
    unlimited = lo >= hi
    lo[unlimited], hi[unlimited] = -math.pi, math.pi
    return lo, hi


def sines(m: mujoco.MjModel, duration: float, rng, harmonics: int = 5, period: float = 10.0):
    """A Fourier-series excitation (as identification trajectories use), within 70 % of each
    joint's range and about 1 rad/s: ``t -> (q, qd, qdd)``, each (len(t), n)."""
    lo, hi = _limits(m)
    n = m.nv
    centre, half = (lo + hi) / 2, 0.35 * (hi - lo)
    w = 2 * math.pi / period * np.arange(1, harmonics + 1)
    a, b = rng.normal(size=(2, n, harmonics)) / np.arange(1, harmonics + 1)
    # scale each joint so that its position stays within +-half and its speed below ~1.2 rad/s
    grid = np.linspace(0, period, 2001)
    pos = (a[:, None, :] * np.sin(w * grid[:, None])[None] - b[:, None, :] * np.cos(w * grid[:, None])[None]).sum(-1) / 1.0
    vel_unit = (a[:, None, :] * w * np.cos(w * grid[:, None])[None] + b[:, None, :] * w * np.sin(w * grid[:, None])[None]).sum(-1)
    scale = np.minimum(np.minimum(half, 1.5) / np.abs(pos).max(1), 1.2 / np.abs(vel_unit).max(1))

    def at(t):
        t = np.asarray(t)[:, None, None]
        s, c = np.sin(w * t), np.cos(w * t)
        A, B = (scale[:, None] * a)[None], (scale[:, None] * b)[None]
        q = centre + (A * s - B * c).sum(-1)
        qd = (A * w * c + B * w * s).sum(-1)
        qdd = (-A * w**2 * s + B * w**2 * c).sum(-1)
        return q, qd, qdd

    return at


def moves(m: mujoco.MjModel, duration: float, rng):
    """Task-like motion of ``m``'s joints (:func:`moves_within` their ranges)."""
    return moves_within(*_limits(m), duration, rng)


def moves_within(lo, hi, duration: float, rng):
    """Task-like motion: minimum-jerk point-to-point moves between random targets within 60 %
    of each joint's range ``[lo, hi]`` (rad, (n,) each), of 1-3 s and at most 1.5 rad/s, with
    rests of 0.5-2 s: ``t -> (q, qd, qdd)``."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    centre, half = (lo + hi) / 2, 0.3 * (hi - lo)
    half = np.minimum(half, 1.5)
    knots, start = [], 0.0
    q = centre.copy()
    while start < duration + 5:
        target = centre + rng.uniform(-1, 1, len(lo)) * half
        # a minimum-jerk move of length d peaks at 1.875 d / T
        move = max(rng.uniform(1.0, 3.0), 1.875 * np.abs(target - q).max() / 1.5)
        rest = rng.uniform(0.5, 2.0)
        knots.append((start, start + move, q, target))
        q, start = target, start + move + rest
    t0 = np.array([k[0] for k in knots])

    def at(t):
        t = np.asarray(t)
        k = np.clip(np.searchsorted(t0, t, side="right") - 1, 0, len(knots) - 1)
        a, b = np.array([knots[i][0] for i in k]), np.array([knots[i][1] for i in k])
        qa, qb = np.stack([knots[i][2] for i in k]), np.stack([knots[i][3] for i in k])
        T = (b - a)[:, None]
        s = np.clip((t[:, None] - a[:, None]) / T, 0, 1)
        moving = (t[:, None] < b[:, None])
        p = 10 * s**3 - 15 * s**4 + 6 * s**5
        dp = np.where(moving, (30 * s**2 - 60 * s**3 + 30 * s**4) / T, 0)
        ddp = np.where(moving, (60 * s - 180 * s**2 + 120 * s**3) / T**2, 0)
        d = qb - qa
        return qa + p * d, dp * d, ddp * d

    return at


# ----------------------------------------------------------------------------- the log


def _inverse(m: mujoco.MjModel, q, qd, qdd) -> np.ndarray:
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT  # the motion stays inside the limits
    d = mujoco.MjData(m)
    out = np.empty_like(q)
    for k in range(len(q)):
        d.qpos[:], d.qvel[:], d.qacc[:] = q[k], qd[k], qdd[k]
        mujoco.mj_inverse(m, d)
        out[k] = d.qfrc_inverse
    return out


def closed_loop(robot: str, plain: mujoco.MjModel, loaded: mujoco.MjModel, path, t, carrying, effort,
                 feed_forward=None):
    """The arm's motion under a joint controller that tracks ``path``, at the log's times ``t``.

    What real arms' joint controllers do: at :data:`CONTROL_RATE`, a feed-forward torque along
    the reference (by default the nominal URDF's inverse dynamics: no friction, no armature, no
    payload; else ``feed_forward(tick, reference, q, command)``, the tick's reference ``(q, qd,
    qdd)`` (n,) each, the arm's position and the last tick's command, N m) plus a PID
    on each joint's tracking error, whose stiffness is :data:`STIFFNESS` times the joint's effort
    limit (at most :data:`BANDWIDTH` on its own inertia), its damping :data:`DAMPING_RATIO` and
    its integrator clamped at :data:`INTEGRAL_LIMIT` of the effort; the command saturates at the
    effort. MuJoCo integrates the arm (``plain`` or ``loaded``, as ``carrying(time)`` says; the
    state carries over at a change) in :data:`SUBSTEPS` steps a tick, its dry friction a
    constraint that holds a joint at rest.

    Returns:
        ``(q, qd, qdd, tau)`` at ``t`` (T, n) each: the state between physics steps (linear),
        the acceleration of the step, the command of the tick.
    """
    tick = 1.0 / CONTROL_RATE
    for m in (plain, loaded):
        m.opt.timestep = tick / SUBSTEPS
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT | mujoco.mjtDisableBit.mjDSBL_CONTACT
    ticks = int(math.ceil(t[-1] / tick)) + 2
    times = np.arange(ticks) * tick
    reference = path(times)
    if feed_forward is None:
        nominal = _inverse(mujoco.MjModel.from_xml_string(mujoco_urdf(robot)), *reference)
        feed_forward = lambda i, *_: nominal[i]  # noqa: E731
    datas = (mujoco.MjData(plain), mujoco.MjData(loaded))
    which = int(carrying(0.0))
    data = datas[which]
    data.qpos[:], data.qvel[:] = reference[0][0], reference[1][0]
    probe, inertia = mujoco.MjData(plain), np.zeros((plain.nv, plain.nv))
    probe.qpos[:] = reference[0][0]
    mujoco.mj_forward(plain, probe)
    mujoco.mj_fullM(plain, probe, inertia)
    own = np.diag(inertia)  # each joint's inertia at the start, armature included
    kp = np.minimum(STIFFNESS * effort, own * BANDWIDTH**2)
    kd, ki, clamp = 2.0 * DAMPING_RATIO * np.sqrt(kp * own), kp / INTEGRAL_TIME, INTEGRAL_LIMIT * effort
    steps = ticks * SUBSTEPS
    q, qd, qdd = (np.empty((steps, plain.nv)) for _ in range(3))
    command = np.empty((ticks, plain.nv))
    integral = np.zeros(plain.nv)
    for i in range(ticks):
        if int(carrying(times[i])) != which:  # the payload picked up or dropped: the state carries over
            which = 1 - which
            datas[which].qpos[:], datas[which].qvel[:] = data.qpos, data.qvel
            data = datas[which]
        error, error_rate = reference[0][i] - data.qpos, reference[1][i] - data.qvel
        integral = np.clip(integral + ki * error * tick, -clamp, clamp)
        last = command[i - 1] if i else np.zeros(plain.nv)
        forward = feed_forward(i, tuple(x[i] for x in reference), data.qpos.copy(), last)
        command[i] = np.clip(forward + kp * error + kd * error_rate + integral, -effort, effort)
        data.qfrc_applied[:] = command[i]
        model = (plain, loaded)[which]
        for k in range(i * SUBSTEPS, (i + 1) * SUBSTEPS):
            q[k], qd[k] = data.qpos, data.qvel
            mujoco.mj_step(model, data)
            qdd[k] = data.qacc  # the acceleration the step integrated
    step = tick / SUBSTEPS
    k = np.clip((t / step).astype(int), 0, steps - 2)
    frac = (t / step - k)[:, None]
    return ((1 - frac) * q[k] + frac * q[k + 1], (1 - frac) * qd[k] + frac * qd[k + 1], qdd[k],
            command[np.minimum(k // SUBSTEPS, ticks - 1)])


def payload_on(change: str, when: float | None):
    """``time -> bool`` (any shape): the arm carries the payload (``change`` ``"pick"`` from
    ``when`` s, ``"drop"`` until then, ``"steady"`` never)."""

    def carrying(time):
        return np.zeros(np.shape(time), bool) if when is None else (time >= when) if change == "pick" else (time < when)

    return carrying


def _lowpass_noise(rng, t, std, cutoff) -> np.ndarray:
    """White noise through a first-order low-pass of ``cutoff`` Hz, on the sample times ``t``,
    scaled to ``std`` per joint (N m)."""
    white = rng.standard_normal((len(t), len(std)))
    out = np.empty_like(white)
    state = white[0]
    for k in range(len(t)):
        a = math.exp(-2 * math.pi * cutoff * (t[k] - t[k - 1])) if k else 0.0
        state = a * state + math.sqrt(max(1 - a * a, 0.0)) * white[k]
        out[k] = state
    return out * std


def unmodelled_torque(rng, t, q, qd, frictionloss, peak) -> np.ndarray:
    """Torques of a real arm that no model in the library has, (T, n), N m, drawn per joint:

    * Stribeck friction: below a velocity of 0.01-0.05 rad/s, static friction 20-60 % above the
      dry friction ``frictionloss``;
    * torque ripple (cogging, gear meshing): 1-2 % of the peak torque, periodic in the joint's
      position, 20-80 periods a turn;
    * friction warming up: the dry friction of a cold arm falls by 20-40 %, with a time
      constant of 5-15 minutes (gear oil warming up), from the log's start;
    * a cable or a spring: on the first two joints, 1-3 % of the peak torque per radian away
      from the log's mean position;
    * friction held at rest: a joint that stops keeps 30-70 % of its dry friction in the
      direction it last moved (the motor's last push, held by stiction) until it moves again, so
      the torque at rest depends on how the joint got there.

    Args:
        rng: a NumPy generator.
        t: (T,) sample times, s; q, qd: (T, n) positions and velocities.
        frictionloss: (n,) the joints' dry friction, N m; peak: (n,) peak torques, N m.
    """
    n = q.shape[1]
    stiction, v_s = rng.uniform(0.2, 0.6, n), rng.uniform(0.01, 0.05, n)
    ripple, periods, phase = rng.uniform(0.01, 0.02, n) * peak, rng.integers(20, 81, n), rng.uniform(0, 2 * np.pi, n)
    cooling, warm_up = rng.uniform(0.2, 0.4, n), rng.uniform(300.0, 900.0, n)
    spring = np.where(np.arange(n) < 2, rng.uniform(0.01, 0.03, n) * peak, 0.0)
    hold = rng.uniform(0.3, 0.7, n)
    sign = np.tanh(qd / REST)  # the sign of the velocity, smooth at rest
    warm = 1.0 - np.exp(-(t - t[0])[:, None] / warm_up)
    # each joint's last direction of motion: its velocity's sign at the last sample it moved
    moved = np.where(np.abs(qd) > REST, np.arange(len(t))[:, None], 0)
    last = np.sign(qd)[np.maximum.accumulate(moved, axis=0), np.arange(n)]
    return (
        stiction * frictionloss * np.exp(-((qd / v_s) ** 2)) * sign
        + ripple * np.sin(periods * q + phase)
        - cooling * warm * frictionloss * sign
        - spring * (q - q.mean(0))
        + hold * frictionloss * last * np.exp(-((qd / REST) ** 2))
    )


def simulate(robot: str = "panda", seed: int = 0, rate: float = 1000.0, duration: float = 60.0,
             change: str = "steady", change_time: float | None = None, motion: str = "sines",
             velocities: bool = True, jitter: float = 0.3, drops: bool | None = None, gain_error: float = 0.03,
             noise: tuple = (0.01, 0.03), unmodelled: bool = False, cad: bool = False, rest: float = 0.0,
             sine_period: float = 10.0, loop: bool = False) -> Simulated:
    """One realistic log of ``robot``.

    Args:
        robot: ``"panda"`` (7 joints, fingers locked) or ``"ur5"``.
        seed: draws the true robot, the motion, the payload and the noise.
        rate: nominal sampling rate, Hz (100 and 1000 in the benchmark).
        duration: s.
        change: ``"steady"`` (no payload), ``"pick"`` (picked up at ``change_time``) or
            ``"drop"`` (carried from the start, removed at ``change_time``).
        change_time: s; default 60 % of the duration.
        motion: ``"sines"`` (excitation) or ``"moves"`` (point-to-point with rests).
        velocities: log ``qd`` as the difference of the quantised encoder (else no ``qd``).
        jitter: sample-time jitter, a fraction of the period (uniform +-).
        drops: drop packets (gaps of 2-9 periods, 0.1 % of samples); default at 1 kHz.
        gain_error: the largest torque-gain error per joint (a fraction).
        noise: the range of the torque noise's standard deviation, fractions of the peak torque.
        unmodelled: add :func:`unmodelled_torque` to the true torque (the rest of the log, noise
            included, is the same draw as without).
        cad: the nominal URDF is a CAD estimate (:func:`_cad_error`; the rest is the same draw
            as without).
        rest: s the arm rests at its first position before the moves begin (a log started
            before the robot's program; ``"moves"`` only, which start from rest).
        sine_period: s, the sines' fundamental period (slower excitation when longer).
        loop: the arm tracks the motion under a joint controller (:func:`closed_loop`), whose
            command is the torque (the rest is the same draw as without).
    """
    if change not in ("steady", "pick", "drop"):
        raise ValueError(f"change: {change!r}")
    if loop and unmodelled:
        raise ValueError("loop: the unmodelled torques are added to the measured torque, not to the controlled arm")
    if rest and motion != "moves":
        raise ValueError("rest: the sines do not start from rest; only with motion='moves'")
    rng = np.random.default_rng([seed, int(rate), {"steady": 0, "pick": 1, "drop": 2}[change], motion == "moves"])
    plain, loaded, names, parts = true_robot(robot, seed, cad)
    n = plain.nv
    path = sines(plain, duration, rng, period=sine_period) if motion == "sines" else moves(plain, duration, rng)
    period = 1.0 / rate
    count = int(round(duration * rate))
    t = np.arange(count) * period + rng.uniform(-jitter, jitter, count) * period
    t[0] = max(t[0], 0.0)
    if drops if drops is not None else rate >= 1000:
        keep = np.ones(count, bool)
        for start in rng.choice(count - 10, size=max(1, count // 5000), replace=False):
            keep[start : start + rng.integers(1, 9)] = False
        t = t[keep]
    when = None if change == "steady" else (0.6 * duration if change_time is None else change_time)
    carrying = payload_on(change, when)
    if loop:
        q, qd, qdd, tau = closed_loop(robot, plain, loaded, lambda time: path(time - rest), t, carrying, parts["effort"])
    else:
        q, qd, qdd = path(t - rest)  # before its first knot a path of moves rests where it starts
        with_payload = carrying(t)
        tau = np.empty_like(q)
        for mask, model in ((~with_payload, plain), (with_payload, loaded)):
            if mask.any():
                tau[mask] = _inverse(model, q[mask], qd[mask], qdd[mask])
    peak = np.abs(tau).max(0)
    noise_std = rng.uniform(*noise, n) * peak
    noise = _lowpass_noise(rng, t, noise_std, rng.uniform(5.0, 20.0))
    gains = rng.uniform(-gain_error, gain_error, n)
    if unmodelled:
        tau = tau + unmodelled_torque(np.random.default_rng([seed, 5]), t, q, qd, parts["frictionloss"], peak)
    measured = (1 + gains) * (tau + noise)
    encoder = np.round(q / QUANTUM) * QUANTUM
    columns = {"t": t}
    for j, name in enumerate(names):
        columns[f"q_{name}"] = encoder[:, j]
    if velocities:
        diff = np.diff(encoder, axis=0) / np.diff(t)[:, None]
        diff = np.concatenate([diff[:1], diff])
        for j, name in enumerate(names):
            columns[f"qd_{name}"] = diff[:, j]
    for j, name in enumerate(names):
        columns[f"tau_{name}"] = measured[:, j]
    truth = Truth(
        armature=parts["armature"], damping=parts["damping"], frictionloss=parts["frictionloss"],
        gain_error=gains, payload_mass=parts["payload_mass"], payload_com=parts["payload_com"],
        payload_inertia=parts["payload_inertia"], change_time=when, change=change, noise_std=noise_std,
        unmodelled=unmodelled, cad=cad, loop=loop,
    )
    return Simulated(columns, names, tau, qdd, truth, rate, extra={"q_true": q, "qd_true": qd})
