"""Closed-loop simulation: the reference generator, and a controller that knows the robot."""

from __future__ import annotations

import numpy as np

from dense_armor import attach_payload
from dense_armor.control import minimum_jerk, simulate
from dense_armor.demo import two_link_arm


def test_minimum_jerk_starts_and_ends_at_rest_on_the_waypoints():
    ref = minimum_jerk([[0.0, 1.0], [1.0, -1.0], [0.5, 0.0]], move_time=0.5, hold_time=0.2, dt=0.001)
    assert ref.q.shape == (200 + 2 * (500 + 200), 2)  # hold, then (move, hold) per waypoint
    np.testing.assert_allclose(ref.q[0], [0.0, 1.0])
    np.testing.assert_allclose(ref.q[-1], [0.5, 0.0])
    np.testing.assert_allclose(ref.q[200 + 500], [1.0, -1.0])  # after the first hold and move
    assert np.abs(ref.qd[[0, 199, 700, -1]]).max() == 0.0
    # velocity and acceleration are the derivatives of the position
    np.testing.assert_allclose(np.gradient(ref.q, 0.001, axis=0)[1:-1], ref.qd[1:-1], atol=5e-3)
    np.testing.assert_allclose(np.gradient(ref.qd, 0.001, axis=0)[1:-1], ref.qdd[1:-1], atol=0.3)


def test_a_controller_that_knows_the_robot_tracks_it_and_one_that_does_not_misses():
    nominal = two_link_arm("vertical")
    real = attach_payload(nominal, "link2", 0.5, com=(0.5, 0.0, 0.0))
    ref = minimum_jerk([[-1.2, 1.0], [-0.3, 0.8]], move_time=0.5, hold_time=0.5, dt=0.002)
    _, exact = simulate(real, real, ref, 0.002, 400.0, 40.0)
    _, blind = simulate(nominal, real, ref, 0.002, 400.0, 40.0)
    assert np.abs(np.asarray(exact.error)).max() < 2e-3  # discretisation only
    assert np.abs(np.asarray(blind.error))[-1].max() > 5e-3  # the payload's weight: a steady miss


def test_a_learner_starts_from_its_own_initial_state_and_bad_gains_are_named():
    import jax.numpy as jnp
    import pytest

    from dense_armor.learners import ResidualLearner

    nominal = two_link_arm("vertical")
    real = attach_payload(nominal, "link2", 0.5, com=(0.5, 0.0, 0.0))
    ref = minimum_jerk([[-1.2, 1.0], [-0.3, 0.8]], move_time=0.1, hold_time=0.1, dt=0.002)
    learner = ResidualLearner(nominal, lam=0.99)
    default, a = simulate(nominal, real, ref, 0.002, 400.0, 40.0, learner)
    given, b = simulate(nominal, real, ref, 0.002, 400.0, 40.0, learner, learner.init(jnp.asarray(ref.q).dtype))
    np.testing.assert_array_equal(np.asarray(a.tau), np.asarray(b.tau))
    with pytest.raises(ValueError, match=r"kp: expected a scalar or \(2,\) gains, got shape \(3,\)"):
        simulate(nominal, real, ref, 0.002, [1.0, 2.0, 3.0], 40.0)
