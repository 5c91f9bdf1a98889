"""The whole-robot learner: the URDF as the prior, consistent estimates, the payload detector,
residuals that do no harm; and the locked (reduced) model it often runs on."""

from __future__ import annotations

import difflib
import re
import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor import attach_payload, inertial, learners, parse_urdf, rls
from dense_armor.dynamics import joint_torque_regressor, rnea
from dense_armor.learners import Sample
from dense_armor.model import lock_joints
from dense_armor.payload_change import BLOCK, BLOCK_MEMORY, HELD, ONSET_SPACING, ONSETS, WINDOWS, PayloadDetector, payload_std
from dense_armor import robot_learner
from dense_armor.robot_learner import JOINT_TERMS, SPEED_BANDS, Prior, RobotLearner, invisible
from dense_armor.robots import minimal_urdf
from dense_armor.urdf import URDFWarning, with_inertials
from mujoco_robot import moves_within  # noqa: E402  (benchmarks/, on the path through conftest.py)

VERTICAL = parse_urdf(minimal_urdf(), gravity=(0.0, -9.81, 0.0))  # gravity in the plane of motion
PLANAR = parse_urdf(minimal_urdf())  # horizontal: gravity along the joint axes

_torques = jax.jit(jax.vmap(rnea, in_axes=(None, 0, 0, 0)))


def _motion(T, rate=100.0, seed=0, n=2):
    """Smooth random motion (sums of sines) at ``rate`` Hz: (q, qd, qdd), each (T, n)."""
    rng = np.random.default_rng(seed)
    t = np.arange(T)[:, None] / rate
    w = rng.uniform(0.5, 3.0, (3, n))
    a = rng.uniform(0.3, 1.0, (3, n))
    q = sum(a[k] * np.sin(w[k] * t + k) for k in range(3))
    qd = sum(a[k] * w[k] * np.cos(w[k] * t + k) for k in range(3))
    qdd = sum(-a[k] * w[k] ** 2 * np.sin(w[k] * t + k) for k in range(3))
    return q, qd, qdd


def _real_torque(model, q, qd, qdd, *, payload=0.0, armature=(0.05, 0.02), viscous=(0.3, 0.1), coulomb=(0.4, 0.2),
                 width=0.02):
    """What the 'real' two-link arm needs: its payload, rotor inertia and friction."""
    real = attach_payload(model, "link2", payload, com=(0.3, 0.05, 0.0)) if payload else model
    return (np.asarray(_torques(real, q, qd, qdd)) + np.asarray(armature) * qdd + np.asarray(viscous) * qd
            + np.asarray(coulomb) * np.tanh(qd / width))


def test_the_first_prediction_is_the_urdf_and_the_prior_is_proper():
    learner = RobotLearner(VERTICAL, rate=100.0)
    state = learner.init(jnp.float64)
    q, qd, qdd = (x[0] for x in _motion(1))
    np.testing.assert_allclose(learner.predict(state, q, qd, qdd), rnea(VERTICAL, q, qd, qdd), rtol=1e-12)
    X, nominal = learner.features(q, qd, qdd, jnp.float64)
    Y = joint_torque_regressor(VERTICAL, q, qd, qdd)
    # link1 turns about z, gravity across it: its torque sees I_zz, m c_x and m c_y alone
    hidden = [0, 3, 4, 5, 6, 7, 8]
    assert learner.learned == tuple(k for k in range(30) if k not in hidden) and learner.num_parameters == 23
    chex.assert_shape(X, (2, 23))
    np.testing.assert_allclose(X[:, :13], Y[:, learner.learned[:13]])
    np.testing.assert_allclose(Y[:, hidden], 0.0, atol=1e-12)
    np.testing.assert_allclose(X[:, 13:15], np.diag(qdd))  # armature columns
    np.testing.assert_allclose(X[:, 17:19], np.diag(np.tanh(qd / 0.02)))  # Coulomb
    np.testing.assert_allclose(X[:, 19:21], np.diag(np.tanh(qd / 0.02) - np.tanh(qd / 0.08)), atol=1e-12)  # Stribeck
    std = Prior().std(VERTICAL)
    assert std.shape == (30,) and np.all(std > 0)
    np.testing.assert_allclose(std[0], 0.3 * 1.0)  # 30 % of link1's mass
    np.testing.assert_allclose(std[5], 0.002)  # its I_xy is 0: the floor
    with pytest.raises(ValueError, match="finite and > 0"):
        Prior(relative=0.0, mass_floor=0.0).std(VERTICAL)


def _prismatic_first(xml: str) -> str:
    """The URDF with its first joint made prismatic along the same axis."""
    return xml.replace('type="revolute"', 'type="prismatic"', 1)


@pytest.mark.parametrize("robot", ["2-link vertical", "2-link planar", "Panda", "UR5", "prismatic first", "tilted", "random chain"])
def test_the_parameters_left_out_are_invisible_to_every_torque(robot, panda_urdf):
    from common import serial_chain
    from urdf_factory import example_robot_urdf

    # each parameter invisible() leaves out has a zero regressor column in random states (of
    # any speed and acceleration, the joints over a full turn); the known cases are found
    models = {
        "2-link vertical": lambda: VERTICAL, "2-link planar": lambda: PLANAR,
        "Panda": lambda: lock_joints(parse_urdf(panda_urdf), {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}),
        "UR5": lambda: parse_urdf(example_robot_urdf("ur_description/urdf/ur5_robot.urdf")),
        "prismatic first": lambda: parse_urdf(_prismatic_first(minimal_urdf()), gravity=(0.0, -9.81, 0.0)),
        "tilted": lambda: parse_urdf(minimal_urdf(), gravity=(0.0, -6.0, -7.0)),
        "random chain": lambda: parse_urdf(serial_chain(6, seed=3)),
    }
    model = models[robot]()
    hidden = invisible(model)
    rng = np.random.default_rng(0)
    states = [jnp.asarray(rng.uniform(-np.pi, np.pi, (64, model.n))) for _ in range(3)]
    Y = np.asarray(jax.vmap(lambda *x: joint_torque_regressor(model, *x))(*states)).reshape(-1, model.n_bodies, 10)
    scale = np.max(np.abs(Y))
    assert np.all(np.max(np.abs(Y[:, hidden]), axis=0) <= 1e-12 * scale)
    # and, of the bodies on the base, every parameter that is
    first = np.asarray(model.parents) == -1
    np.testing.assert_array_equal(hidden[first], np.max(np.abs(Y[:, first]), axis=0) <= 1e-12 * scale)
    assert not np.any(hidden[~first])
    expected = {"2-link vertical": 7, "2-link planar": 9, "Panda": 9, "UR5": 9, "prismatic first": 9, "tilted": 7,
                "random chain": 1}[robot]
    assert hidden.sum() == expected, hidden


@pytest.mark.slow  # a long protocol: the default run stays under 5 minutes
def test_leaving_out_the_invisible_parameters_changes_nothing(monkeypatch):
    # the learner with every parameter and the learner without the invisible ones: the same
    # predictions, alarms and estimate (the left-out parameters stay at the prior)
    q, qd, qdd = _motion(500, seed=4)
    rng = np.random.default_rng(4)
    tau = _real_torque(VERTICAL, q, qd, qdd, payload=0.3) + 0.02 * rng.standard_normal(q.shape)
    lean = RobotLearner(VERTICAL, rate=100.0)
    monkeypatch.setattr(robot_learner, "invisible", lambda model: np.zeros((model.n_bodies, 10), bool))
    every = RobotLearner(VERTICAL, rate=100.0)
    assert every.num_parameters == 30 and lean.num_parameters == 23
    (s_lean, out_lean), (s_every, out_every) = (learners.replay(x, x.init(jnp.float64), Sample(q, qd, qdd, tau))
                                                for x in (lean, every))
    np.testing.assert_allclose(out_lean.prediction, out_every.prediction, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(out_lean.alarm, out_every.alarm)
    np.testing.assert_allclose(lean.full(s_lean.rls.w), s_every.rls.w, atol=1e-9)
    np.testing.assert_allclose(lean.full(s_lean.rls.w, s_lean.rls.P)[1], s_every.rls.P, rtol=1e-7, atol=1e-12)
    est_lean, est_every = robot_learner.estimate(lean, s_lean), robot_learner.estimate(every, s_every)
    for field in ("mass", "mass_std", "com", "inertia", "armature", "viscous", "coulomb", "stribeck"):
        np.testing.assert_allclose(getattr(est_lean, field), getattr(est_every, field), rtol=1e-6, atol=1e-9, err_msg=field)
    assert lean.parameter_names == tuple(every.parameter_names[k] for k in lean.learned)


@pytest.mark.slow
def test_it_learns_rotor_inertia_friction_and_a_payload_and_predicts_better_than_the_urdf():
    q, qd, qdd = _motion(3000, seed=1)
    rng = np.random.default_rng(2)
    tau = _real_torque(VERTICAL, q, qd, qdd, payload=0.4) + 0.02 * rng.standard_normal(q.shape)
    learner = RobotLearner(VERTICAL, rate=100.0, detector=None)
    state, out = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    late = slice(1000, None)
    urdf = np.sqrt(np.mean((tau - np.asarray(out.nominal))[late] ** 2))
    mine = np.sqrt(np.mean(np.asarray(out.error)[late] ** 2))
    assert mine < 0.05 * urdf and mine < 0.03
    est = robot_learner.estimate(learner, state)
    np.testing.assert_allclose(est.viscous, [0.3, 0.1], atol=0.02)
    np.testing.assert_allclose(est.coulomb, [0.4, 0.2], atol=0.02)
    np.testing.assert_allclose(est.noise_std, 0.02, rtol=0.3)


def test_each_joint_learns_the_shape_of_its_friction_at_low_speed():
    """Joint 1's friction peaks at low speed (static above sliding friction), joint 2's builds
    up more slowly than the smooth sign (a soft constraint): the Stribeck term learns each."""
    q, qd, qdd = _motion(3000, seed=1)
    stribeck = np.array([0.3, -0.15])
    shape = np.tanh(qd / 0.02) - np.tanh(qd / 0.08)
    tau = _real_torque(VERTICAL, q, qd, qdd) + stribeck * shape + 0.02 * np.random.default_rng(2).standard_normal(q.shape)
    learner = RobotLearner(VERTICAL, rate=100.0, detector=None)
    state, out = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    est = robot_learner.estimate(learner, state)
    np.testing.assert_allclose(est.stribeck, stribeck, atol=0.03)
    np.testing.assert_allclose(est.coulomb, [0.4, 0.2], atol=0.03)
    slow = (np.abs(qd) < 0.2) & (np.arange(len(q)) >= 1000)[:, None]  # where the shape is
    assert np.sqrt(np.mean(np.asarray(out.error)[slow] ** 2)) < 0.03


def test_a_model_armature_is_the_prior_mean_of_the_learned_armature():
    """The model's armature is part of its dynamics (``rnea``, the learner's nominal torque);
    the learner learns the rest and reports the whole."""
    model = VERTICAL.replace(armature=np.array([0.03, 0.01]))
    q, qd, qdd = _motion(3000, seed=1)
    tau = _real_torque(VERTICAL, q, qd, qdd)  # armature (0.05, 0.02)
    learner = RobotLearner(model, rate=100.0, detector=None)
    state = learner.init(jnp.float64)
    np.testing.assert_allclose(robot_learner.estimate(learner, state).armature, [0.03, 0.01])
    np.testing.assert_allclose(learner.features(q[0], qd[0], qdd[0], jnp.float64)[1], rnea(model, q[0], qd[0], qdd[0]), rtol=1e-12)
    state, _ = learners.replay(learner, state, Sample(q, qd, qdd, tau))
    # joint1's armature and link1's I_zz are one term of M (the base's joint): only joint2's is identifiable
    np.testing.assert_allclose(robot_learner.estimate(learner, state).armature[1], 0.02, atol=0.002)


@pytest.mark.slow
def test_unexcited_directions_stay_exactly_at_the_prior():
    """Planar arm, gravity along the joint axes: only a few combinations of the inertial
    parameters move the torques. In the prior's own coordinates (each parameter over its prior
    standard deviation), the posterior leaves every direction no sample excites exactly at the
    prior: mean 0 (the URDF), variance 1. No symbolic reduction to base parameters: the proper
    prior does it."""
    q, qd, qdd = _motion(500, seed=3)
    tau = _real_torque(PLANAR, q, qd, qdd, payload=0.3)
    learner = RobotLearner(PLANAR, rate=100.0, detector=None)
    state, _ = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    D = np.asarray(learner.std)[np.asarray(learner.learned)]  # w's
    X = np.asarray(jax.vmap(lambda a, b, c: learner.features(a, b, c, jnp.float64)[0])(q, qd, qdd))
    X = X.reshape(-1, learner.num_parameters) * D
    _, s, Vt = np.linalg.svd(X, full_matrices=True)
    null = Vt[np.sum(s > 1e-8 * s[0]) :]  # directions no sample excites
    assert len(null) >= 8  # besides link1's 9, which the learner leaves out (invisible)
    w, P = np.asarray(state.rls.w), np.asarray(state.rls.P)
    np.testing.assert_allclose(null @ (w / D), 0.0, atol=1e-10)
    np.testing.assert_allclose(null @ (P / np.outer(D, D)) @ null.T, np.eye(len(null)), atol=1e-8)
    est = robot_learner.estimate(learner, state)
    assert bool(est.mass_unexcited[0])  # link1's mass: the planar arm cannot tell it
    assert not bool(est.viscous_unexcited[0])


def test_the_report_is_physically_consistent():
    q, qd, qdd = _motion(800, seed=4)
    rng = np.random.default_rng(5)
    tau = _real_torque(VERTICAL, q, qd, qdd, payload=0.8) + 0.5 * rng.standard_normal(q.shape)  # noisy
    learner = RobotLearner(VERTICAL, Prior(relative=2.0), rate=100.0, detector=None)  # a loose prior
    state, _ = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    est = robot_learner.estimate(learner, state)
    for k in range(2):
        assert inertial.inconsistency(np.asarray(est.parameters[k])) < 1e-10
        assert float(est.mass[k]) >= 0
        moments = np.linalg.eigvalsh(np.asarray(est.inertia[k]))
        assert moments[0] > -1e-10 and moments[2] <= moments[0] + moments[1] + 1e-10
        assert bool(est.projected[k]) == (inertial.inconsistency(np.asarray(est.learned[k])) > 0)
    assert all(np.all(np.asarray(x) >= 0) for x in (est.armature, est.viscous, est.coulomb))  # dissipative, a rotor


@pytest.mark.slow
def test_scan_equals_a_loop_of_steps_and_vmap_equals_a_loop():
    q, qd, qdd = _motion(60, seed=6)
    tau = _real_torque(VERTICAL, q, qd, qdd, payload=0.2)
    learner = RobotLearner(VERTICAL, rate=100.0)
    state0 = learner.init(jnp.float64)
    scanned, out = learners.replay(learner, state0, Sample(q, qd, qdd, tau))
    stepper = learners.Stepper(learner, state0)
    for k in range(len(q)):
        step_out = stepper.step(q[k], qd[k], qdd[k], tau[k])
    chex.assert_trees_all_close(stepper.state, scanned, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(step_out.prediction, out.prediction[-1], rtol=1e-9)
    np.testing.assert_allclose(step_out.extra.mass, out.extra.mass[-1], rtol=1e-9, atol=1e-12)
    taus = np.stack([_real_torque(VERTICAL, q, qd, qdd, payload=m) for m in (0.0, 0.5)])
    batched = jax.vmap(lambda tau: learners.replay(learner, state0, Sample(q, qd, qdd, tau))[1].prediction)(jnp.asarray(taus))
    for b in range(2):
        np.testing.assert_allclose(batched[b], learners.replay(learner, state0, Sample(q, qd, qdd, taus[b]))[1].prediction, rtol=1e-9)


def test_the_residual_is_trusted_only_once_it_explains_the_urdf_error_and_stays_within_effort():
    q, qd, qdd = _motion(400, seed=7)
    tau = _real_torque(VERTICAL, q, qd, qdd, payload=0.5)
    learner = RobotLearner(VERTICAL, rate=100.0, detector=None)
    _, out = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    np.testing.assert_allclose(out.prediction[0], out.nominal[0])  # no evidence yet: the URDF's torque
    errors = np.abs(np.asarray(out.error))
    assert errors[300:].max() < 0.1 * np.abs(tau - np.asarray(out.nominal))[300:].max()
    # an effort limit bounds what the controller gets
    limited = VERTICAL.replace(effort_limit=np.array([1.0, 1.0]))
    learner = RobotLearner(limited, rate=100.0, detector=None)
    _, out = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    assert np.abs(np.asarray(out.prediction)).max() <= 1.0


@pytest.mark.slow
def test_a_payload_picked_up_is_detected_and_measured_from_the_baseline():
    rate, T, change = 200.0, 4000, 2400
    q, qd, qdd = _motion(T, rate=rate, seed=8)
    rng = np.random.default_rng(9)
    tau = _real_torque(VERTICAL, q, qd, qdd) + 0.03 * rng.standard_normal(q.shape)
    picked = _real_torque(VERTICAL, q, qd, qdd, payload=1.5) + 0.03 * rng.standard_normal(q.shape)
    tau[change:] = picked[change:]
    learner = RobotLearner(VERTICAL, rate=rate, detector=PayloadDetector(min_mass=0.5))
    state, out = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    alarms = np.nonzero(np.asarray(out.alarm))[0]
    assert len(alarms) == 1 and change <= alarms[0] <= change + 3 * rate, alarms
    assert float(out.extra.mass[-1]) == pytest.approx(1.5, rel=0.05)
    np.testing.assert_allclose(out.extra.com[-1][:2], [0.3, 0.05], atol=0.03)
    # the rest of the robot was kept: the friction learned before the change is still there
    est = robot_learner.estimate(learner, state)
    np.testing.assert_allclose(est.viscous, [0.3, 0.1], atol=0.03)
    # the noise is white, and the re-learning the alarm started is no correlation: else the
    # detector, its deviations multiplied by the correlation time, is blind to the next change
    assert 1.0 <= float(est.correlation) < 2.0, est.correlation


def test_after_an_alarm_the_change_is_the_ridge_fit_against_the_baseline():
    # the detector's change: least squares of the body's columns on the errors under the
    # baseline, over every sample since the alarm, the payload prior as ridge
    detector, n, p, columns = PayloadDetector(), 3, 28, slice(10, 20)
    rng = np.random.default_rng(12)
    baseline, delta = rng.normal(size=p), 0.5 * np.asarray(detector.prior) * rng.normal(size=10)
    state = detector.init(jnp.zeros(p), jnp.float64)._replace(alarmed=jnp.ones((), bool), baseline=jnp.asarray(baseline))
    A, b = np.zeros((10, 10)), np.zeros(10)
    step = jax.jit(lambda state, rows, e_baseline, valid: detector.step(
        state, rows, jnp.zeros(n), jnp.ones(n), jnp.eye(n), e_baseline, jnp.zeros(p), 1.0, columns, 1.0, 1000.0, valid, True))
    for k in range(200):
        rows = rng.normal(size=(n, p))
        target = rows @ baseline + rows[:, columns] @ delta + 0.01 * rng.standard_normal(n)
        valid = k != 7  # an invalid sample counts for nothing
        state, alarm, *_ = step(state, rows, target - rows @ baseline, valid)
        assert not bool(alarm)
        if valid:
            A, b = A + rows[:, columns].T @ rows[:, columns], b + rows[:, columns].T @ (target - rows @ baseline)
    fitted, std = (x[2] for x in detector.fits(state, 4.0, 1000.0))  # the windows', the change's, the onsets'
    cov = np.linalg.inv(A + np.diag(1.0 / np.asarray(detector.prior) ** 2))
    np.testing.assert_allclose(fitted, cov @ b, rtol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(4.0 * cov[0, 0]), rtol=1e-10)  # the correlation time counted
    assert np.all(np.abs(np.asarray(fitted) - delta) <= 0.05 * np.asarray(detector.prior)), (fitted, delta)


def test_a_fit_counts_its_scores_correlation_from_batch_means_held_back_three_seconds():
    # errors that wander slowly (an AR(1) at 0.99, like ripple at low speed) on rows that move
    # slowly too: the fits' score u = Y_b' e summed over blocks, each block counted HELD blocks
    # after it ends, widens the fits beyond what the correlation they are given (1) says
    detector, n, p, columns, rate, T = PayloadDetector(arm_after=0.0, min_mass=1e9), 3, 28, slice(10, 20), 40.0, 800
    rng = np.random.default_rng(16)
    rows, e = rng.normal(size=(n, p)) + 0.3 * rng.normal(size=(T, n, p)), np.zeros((T, n))
    for t in range(1, T):
        e[t] = 0.99 * e[t - 1] + np.sqrt(1 - 0.99**2) * rng.standard_normal(n)

    def step(state, sample):
        X, error = sample
        state, *_ = detector.step(state, X, error, jnp.ones(n), jnp.eye(n), error, jnp.zeros(p), 1.0, columns, 1.0,
                                  rate, True, True)
        return state, None

    state, _ = jax.lax.scan(step, detector.init(jnp.zeros(p), jnp.float64), (jnp.asarray(rows), jnp.asarray(e)))
    length = round(BLOCK * rate)
    u = np.einsum("tni,tn->ti", rows[:, :, columns], e).reshape(T // length, length, 10)
    sums, powers = u.sum(1), np.einsum("kti,ktj->kij", u, u)
    released = T // length - HELD
    weights = (1.0 - length / (BLOCK_MEMORY * rate)) ** np.arange(released - 1, -1, -1.0)
    np.testing.assert_allclose(state.scores.long, np.einsum("k,ki,kj->ij", weights, sums[:released], sums[:released]),
                               rtol=1e-10)
    np.testing.assert_allclose(state.scores.long_power, np.einsum("k,kij->ij", weights, powers[:released]), rtol=1e-10)
    # each fit, its mass g' b, widened by its score's correlation time along g
    _, std = detector.fits(state, 1.0, rate)
    _, white = detector.fits(state._replace(scores=detector.init(jnp.zeros(p), jnp.float64).scores), 1.0, rate)
    A = np.concatenate([state.A, state.onsets.A]) + np.diag(1.0 / np.asarray(detector.prior) ** 2)
    g = np.linalg.solve(A, np.broadcast_to(np.eye(10)[0], (len(A), 10))[..., None])[..., 0]
    own = np.einsum("ki,ij,kj->k", g, state.scores.long, g) / np.einsum("ki,ij,kj->k", g, state.scores.long_power, g)
    np.testing.assert_allclose(std, white * np.sqrt(np.maximum(own, 1.0)), rtol=1e-8)
    assert np.max(np.asarray(std) / np.asarray(white)) > 2.0, (std, white)


def test_the_first_test_waits_for_seconds_of_motion_not_of_samples():
    # a log that starts with the arm at rest: the learner's own transient comes with the first
    # motion, so a long rest does not arm the detector; an alarm keeps the count of motion
    detector, n, p, columns, rate = PayloadDetector(arm_after=0.5, every=0.0), 3, 28, slice(10, 20), 100.0
    rng = np.random.default_rng(18)

    def certain(state):  # a long window that has fitted a 3 kg change, certain: an armed step raises an alarm
        return state._replace(A=state.A.at[1].set(1e6 * jnp.eye(10)), b=state.b.at[1, 0].set(3e6))

    state = certain(detector.init(jnp.zeros(p), jnp.float64))
    args = (jnp.asarray(rng.normal(size=(n, p))), jnp.zeros(n), jnp.ones(n), jnp.eye(n), jnp.zeros(n), jnp.zeros(p), 1.0,
            columns, 1.0, rate, True)
    step = jax.jit(lambda state, moving: detector.step(state, *args, moving)[:2])
    for k in range(300):  # 3 s at rest
        rest, alarm = step(state._replace(since=jnp.asarray(k, jnp.int32)), False)
        assert not bool(alarm) and int(rest.moved) == 0
    state = state._replace(since=jnp.asarray(300, jnp.int32))
    for k in range(50):  # then 0.5 s of motion
        state, alarm = step(certain(state), True)
        assert not bool(alarm) and int(state.moved) == k + 1
    state, alarm = step(certain(state), True)
    assert bool(alarm) and int(state.moved) == 51 and int(state.since) == 0


@pytest.mark.parametrize("since", [101, 499])
def test_an_alarm_drops_the_held_blocks_and_keeps_the_released_ones(since):
    # the blocks of the last 3 s may have seen the change: they must not widen the next test;
    # an alarm on a block's last sample (499 at 1 kHz, tested every sample) keeps the block that
    # sample releases
    detector, n, p, columns, rate = PayloadDetector(arm_after=0.0, every=0.0), 3, 28, slice(10, 20), 1000.0
    rng = np.random.default_rng(17)
    state = detector.init(jnp.zeros(p), jnp.float64)
    scores = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape)), state.scores)
    # a long window that has fitted a 3 kg change, certain: the next step raises an alarm
    A = state.A.at[1].set(1e6 * jnp.eye(10))
    state = state._replace(A=A, b=state.b.at[1, 0].set(3e6), since=jnp.asarray(since, jnp.int32), scores=scores)
    new, alarm, *_ = detector.step(state, jnp.asarray(rng.normal(size=(n, p))), jnp.zeros(n), jnp.ones(n), jnp.eye(n),
                                   jnp.zeros(n), jnp.zeros(p), 1.0, columns, 1.0, rate, True, True)
    assert bool(alarm)
    length = round(BLOCK * rate)
    released = (since + 1) % length == 0
    keep = 1.0 - length / (BLOCK_MEMORY * rate) if released else 1.0
    np.testing.assert_allclose(new.scores.long, keep * scores.long + released * scores.held[-1], rtol=1e-14)
    np.testing.assert_allclose(new.scores.long_power, keep * scores.long_power + released * scores.held_power[-1], rtol=1e-14)
    for field in ("block", "block_power", "held", "held_power"):
        assert not np.any(np.asarray(getattr(new.scores, field))), field


def test_the_fits_are_tested_every_period_and_held_between_tests():
    # at 1 kHz the default tests every 10 samples: a certain 3 kg change found between two tests
    # waits for the next one, and the outputs between tests are the last test's fits
    detector, n, p, columns, rate = PayloadDetector(arm_after=0.0), 3, 28, slice(10, 20), 1000.0
    rng = np.random.default_rng(5)
    state = detector.init(jnp.zeros(p), jnp.float64)
    held = jnp.asarray(rng.normal(size=state.tested.shape)), jnp.asarray(rng.uniform(1, 2, state.tested_std.shape))
    state = state._replace(A=state.A.at[1].set(1e6 * jnp.eye(10)), b=state.b.at[1, 0].set(3e6), tested=held[0], tested_std=held[1])
    args = (jnp.asarray(rng.normal(size=(n, p))), jnp.zeros(n), jnp.ones(n), jnp.eye(n), jnp.zeros(n), jnp.zeros(p), 1.0, columns,
            1.0, rate, True, True)
    step = jax.jit(lambda state: detector.step(state, *args))  # one compile for both
    between, alarm, _, change, std, _ = step(state._replace(since=jnp.asarray(105, jnp.int32)))
    assert not bool(alarm)
    np.testing.assert_array_equal(change, held[0][len(WINDOWS)])
    assert float(std) == float(held[1][len(WINDOWS)])
    np.testing.assert_array_equal(between.tested, held[0])
    tested, alarm, *_ = step(state._replace(since=jnp.asarray(110, jnp.int32)))
    assert bool(alarm)
    fitted, fitted_std = detector.fits(state, 1.0, rate)
    assert abs(float(fitted[1, 0]) - 3.0) < 1e-3


def test_each_onset_follows_how_much_of_a_change_the_learner_absorbed():
    # Willsky & Jones: an RLS fed y + [t >= t0] X S Delta ends D Delta away from the same RLS
    # fed y (it is linear in y), D the onset's absorption; and the onset's fit finds Delta
    rate, n, p, columns, T, t0 = 20.0, 3, 28, slice(10, 20), 100, 60
    detector = PayloadDetector(arm_after=0.0, min_mass=1e9, prior=payload_std(100.0, 1.0))  # a negligible ridge
    spacing = round(ONSET_SPACING * rate)
    assert t0 % spacing == 0 and (T - t0) // spacing < ONSETS  # an onset at t0, still in the bank at T
    rng = np.random.default_rng(13)
    theta, delta = rng.normal(size=p), rng.normal(size=10)
    rows = rng.normal(size=(T, n, p))
    y = np.einsum("tnp,p->tn", rows, theta) + 0.01 * rng.standard_normal((T, n))
    changed = y + (np.arange(T) >= t0)[:, None] * (rows[:, :, columns] @ delta)

    @jax.jit
    def step(carry, sample):
        learned, plain, state = carry
        X, target, untouched = sample
        error = target - X @ learned.w
        state, alarm, *_, signature = detector.step(state, X, error, jnp.ones(n), jnp.eye(n), error, learned.w, 1.0,
                                                    columns, 1.0, rate, True, True)
        learned, _ = rls.block_update(learned, X, target, 0.99, directional=True, PXt=learned.P @ X.T)
        plain, _ = rls.block_update(plain, X, untouched, 0.99, directional=True, PXt=plain.P @ X.T)
        return (learned, plain, detector.absorb(state, learned.P @ X.T, signature)), alarm

    prior = rls.RLSState(jnp.zeros(p), jnp.eye(p))
    (learned, plain, state), alarms = jax.lax.scan(step, (prior, prior, detector.init(jnp.zeros(p), jnp.float64)),
                                                   (jnp.asarray(rows), jnp.asarray(changed), jnp.asarray(y)))
    assert not np.any(np.asarray(alarms))
    h = int(np.argmax(np.asarray(state.onsets.age) == T - t0))
    assert int(state.onsets.age[h]) == T - t0
    np.testing.assert_allclose(learned.w - plain.w, state.onsets.D[:, h] @ delta, atol=1e-9)
    fitted, _ = detector.fits(state, 1.0, rate)
    np.testing.assert_allclose(fitted[3 + h], delta, atol=0.02)  # after the windows' fits and the change's


@pytest.mark.slow
def test_no_alarm_without_a_change_on_correlated_noise_and_misfit():
    rate, T = 200.0, 6000
    q, qd, qdd = _motion(T, rate=rate, seed=10)
    rng = np.random.default_rng(11)
    white = rng.standard_normal(q.shape)
    colored = np.zeros_like(white)
    for k in range(1, T):  # noise low-passed at about 5 Hz: strongly correlated at 200 Hz
        colored[k] = 0.85 * colored[k - 1] + np.sqrt(1 - 0.85**2) * white[k]
    # misfit: friction that is not tanh-shaped, and a torque ripple with position
    tau = (_real_torque(VERTICAL, q, qd, qdd) + 0.2 * colored + 0.15 * np.sign(qd) * np.abs(qd) ** 0.5
           + 0.1 * np.sin(5 * q))
    learner = RobotLearner(VERTICAL, rate=rate)
    _, out = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    assert not np.any(np.asarray(out.alarm))


@pytest.mark.slow
def test_the_errors_excess_is_learned_per_speed_band():
    # errors four times the noise while a joint moves slowly (friction's misfit at low speed):
    # the detector sees those samples with their own variance, the rest unchanged (slower, the
    # friction band at rest widens the spread instead)
    rate, T = 200.0, 12000
    q, qd, qdd = moves_within(-np.pi * np.ones(2), np.pi * np.ones(2), T / rate, np.random.default_rng(3))(np.arange(T) / rate)
    rng = np.random.default_rng(4)
    slow = (np.abs(qd) >= 0.04) & (np.abs(qd) < 0.16)  # bands 4 and 5 of v0 = 0.02 rad/s
    tau = _real_torque(VERTICAL, q, qd, qdd) + np.where(slow, 0.2, 0.05) * rng.standard_normal(q.shape)
    learner = RobotLearner(VERTICAL, rate=rate)
    state, out = learners.replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
    excess = np.asarray(state.noise.excess)
    chex.assert_shape(excess, (2, len(SPEED_BANDS) + 1))
    fast = excess[:, 6:]  # above 8 v0
    assert np.all((fast > 0.3) & (fast < 2.0)), excess
    assert np.all(excess[:, 4:6] > 5.0 * fast.max()), excess
    assert not np.any(np.asarray(out.alarm))


def test_hyperparameters_are_checked():
    with pytest.raises(ValueError, match="lam"):
        RobotLearner(VERTICAL, lam=1.5)
    with pytest.raises(ValueError, match="rate"):
        RobotLearner(VERTICAL, rate=0.0)
    with pytest.raises(ValueError, match="min_mass"):
        PayloadDetector(min_mass=-1.0)
    with pytest.raises(ValueError, match="prior"):
        PayloadDetector(prior=np.ones(3))
    assert set(JOINT_TERMS) == {"armature", "viscous", "coulomb", "stribeck", "offset"}


# ----------------------------------------------------------------------------- locked joints, identified URDFs


def test_locking_joints_is_pinocchios_reduced_model(panda_urdf):
    import pinocchio as pin

    locks = {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.01, "panda_joint5": 0.7}
    model = lock_joints(parse_urdf(panda_urdf), locks)
    full = pin.buildModelFromUrdf(str(panda_urdf))
    q0 = pin.neutral(full)
    for name, value in locks.items():
        q0[full.joints[full.getJointId(name)].idx_q] = value
    reduced = pin.buildReducedModel(full, [full.getJointId(name) for name in locks], q0)
    assert model.joint_names == tuple(reduced.names[1:])
    data = reduced.createData()
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, qd, qdd = rng.uniform(-1, 1, (3, model.n))
        np.testing.assert_allclose(rnea(model, q, qd, qdd), pin.rnea(reduced, data, q, qd, qdd), atol=1e-10)
    with pytest.raises(ValueError, match="not a movable joint"):
        lock_joints(model, {"panda_hand_joint": 0.0})


def test_an_identified_urdf_keeps_its_locked_joints_and_loads_in_pinocchio_with_its_parameters(panda_urdf):
    """The fingers stay movable, with the URDF's inertials; locked again, the URDF is the robot
    learned (the hand's parameters less the fingers'), as Pinocchio's reduced model too."""
    import pinocchio as pin

    locks = {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.03}
    full = parse_urdf(panda_urdf)
    model = lock_joints(full, locks)
    rng = np.random.default_rng(1)
    inertia = np.stack([inertial.nearest_consistent(p * rng.uniform(0.8, 1.2)) for p in np.asarray(model.inertia)])
    xml = with_inertials(panda_urdf, full, inertia, locks)
    again = parse_urdf(xml)
    assert again.joint_names == full.joint_names
    fingers = [full.body_joint_names.index(name) for name in locks]
    np.testing.assert_allclose(np.asarray(again.inertia)[fingers], np.asarray(full.inertia)[fingers], rtol=1e-14)
    np.testing.assert_allclose(lock_joints(again, locks).inertia, inertia, atol=1e-12)
    pm = pin.buildModelFromXML(xml)
    q_locked = pin.neutral(pm)
    for name, x in locks.items():
        q_locked[pm.joints[pm.getJointId(name)].idx_q] = x
    reduced = pin.buildReducedModel(pm, [pm.getJointId(name) for name in locks], q_locked)
    q, qd, qdd = rng.uniform(-1, 1, (3, model.n))
    np.testing.assert_allclose(pin.rnea(reduced, reduced.createData(), q, qd, qdd), rnea(model.replace(inertia=inertia), q, qd, qdd),
                               atol=1e-10)


def test_a_body_learned_with_locked_links_that_the_urdf_does_not_fit_is_written_as_the_nearest_rigid_body(panda_urdf):
    """On the edge of rigidity (as the posterior's projection leaves a body the log saw thin),
    less the locked fingers it is off by their width: moved back silently. Learned far lighter
    than the fingers: a warning; with nothing left for the hand: an error."""
    locks = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}
    full = parse_urdf(panda_urdf)
    model = lock_joints(full, locks)
    hand = model.n_bodies - 1
    inertia = np.asarray(model.inertia).copy()
    values, vectors = np.linalg.eigh(inertial.pseudo_inertia(inertia[hand]))
    inertia[hand] = inertial.from_pseudo_inertia((vectors * np.r_[0.0, values[1:]]) @ vectors.T)  # thin along one axis
    with warnings.catch_warnings():
        warnings.simplefilter("error", URDFWarning)
        xml = with_inertials(panda_urdf, full, inertia, locks)
    written = lock_joints(parse_urdf(xml, strict=True), locks).inertia[hand]  # strict: a non-physical link is refused
    fingers = np.linalg.eigvalsh(inertial.pseudo_inertia(inertia[hand] - np.asarray(full.inertia)[hand]))
    assert 0 < np.abs(written - inertia[hand]).max() < 10 * fingers[1]
    inertia[hand] *= 0.01  # the hand and fingers learned lighter than the URDF's fingers alone
    with pytest.warns(URDFWarning, match="'panda_link7': the parameters learned with the locked links less theirs"):
        xml = with_inertials(panda_urdf, full, inertia, locks)
    assert inertial.inconsistency(np.asarray(parse_urdf(xml, strict=True).inertia[hand])) < 1e-12
    inertia[hand] = 0.0
    with pytest.raises(ValueError, match="'panda_link7': the locked links fixed to it weigh"):
        with_inertials(panda_urdf, full, inertia, locks)


@pytest.fixture(scope="module")
def panda_urdf():
    from urdf_factory import example_robot_urdf

    return example_robot_urdf("panda_description/urdf/panda.urdf")


def test_an_identified_urdf_is_the_file_as_written_but_its_learned_inertials():
    text = minimal_urdf().replace('<axis xyz="0 0 1"/>', "<axis/>")  # URDF's default axis: x
    text = re.sub(r"(?m)^( +)", r"\1\1", text)  # indented by 4, not ElementTree's 2
    # and what xacro and people write beside the robot is kept
    text = '<?xml version="1.0"?>\n<!-- generated by xacro -->\n' + text.replace(
        "<robot ", '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" ', 1).replace(
        "</robot>", '<!-- licence --><xacro:property name="r" value="1"/></robot>')
    unused = 'xmlns:gz="http://gazebosim.org/schema"'  # declared, and no element uses it
    text = text.replace("<robot ", f"<robot {unused} ", 1)
    locks = {"joint2": 0.4}
    full = parse_urdf(text)
    model = lock_joints(full, locks)
    learned = np.asarray(model.inertia) * 1.5
    xml = with_inertials(text, full, learned, locks, {"joint1": {"damping": 0.3}})
    again = parse_urdf(xml)
    assert again.joint_names == ("joint1", "joint2") and float(again.damping[0]) == 0.3
    assert xml.startswith('<?xml version="1.0"?>\n<!-- generated by xacro -->\n<robot ')
    assert "<!-- licence -->" in xml
    assert '<xacro:property name="r" value="1"/>' in xml
    assert unused in xml.split(">")[2]  # on the root, as written
    # in the file's own layout: only link1's inertial and joint1's new <dynamics> differ
    changed = [line.split()[:2] for line in difflib.ndiff(text.splitlines(), xml.splitlines()) if line[:1] in "-+"]
    assert changed == [[sign, tag] for tag in ("<origin", "<mass", "<inertia") for sign in "-+"] + [["+", "<dynamics"]], changed
    q = np.array([0.7])
    np.testing.assert_allclose(rnea(lock_joints(again, locks), q, q, q), rnea(model.replace(inertia=learned), q, q, q), atol=1e-12)
