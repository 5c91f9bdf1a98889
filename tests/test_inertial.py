"""The 10 inertial parameters: conversions, the pseudo-inertia, and the nearest rigid body."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor import inertial


def _random_body(rng):
    """A physically consistent body: a mass, a centre of mass and principal moments that
    satisfy the triangle inequality, in a random frame."""
    mass = rng.uniform(0.1, 5.0)
    com = rng.uniform(-0.3, 0.3, 3)
    sides = rng.uniform(0.02, 0.4, 3)
    moments = mass / 12 * np.array([sides[1] ** 2 + sides[2] ** 2, sides[0] ** 2 + sides[2] ** 2, sides[0] ** 2 + sides[1] ** 2])
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return mass, com, Q @ np.diag(moments) @ Q.T


def test_com_form_round_trips_and_matches_the_parallel_axis_theorem():
    rng = np.random.default_rng(0)
    for _ in range(20):
        mass, com, I_c = _random_body(rng)
        pi = inertial.from_com(mass, com, I_c)
        m, c, I = inertial.to_com(pi)
        np.testing.assert_allclose([m, *c], [mass, *com], rtol=1e-12)
        np.testing.assert_allclose(I, I_c, atol=1e-12)
        # about the origin: I_c + m (c'c 1 - c c')
        np.testing.assert_allclose(inertial.rotational_inertia(pi), I_c + mass * (com @ com * np.eye(3) - np.outer(com, com)), atol=1e-12)


def test_pseudo_inertia_round_trips_and_is_positive_for_a_rigid_body():
    rng = np.random.default_rng(1)
    for _ in range(20):
        pi = inertial.from_com(*_random_body(rng))
        J = inertial.pseudo_inertia(pi)
        assert np.linalg.eigvalsh(J).min() > 0
        np.testing.assert_allclose(inertial.from_pseudo_inertia(J), pi, atol=1e-12)
        assert inertial.inconsistency(pi) == 0.0


@pytest.mark.parametrize("what", ["negative mass", "triangle inequality", "negative moment"])
def test_nearest_consistent_repairs_what_no_body_has(what):
    mass, com, I_c = 2.0, np.array([0.1, 0.0, 0.05]), np.diag([0.02, 0.03, 0.04])
    if what == "negative mass":
        pi = inertial.from_com(mass, com, I_c)
        pi[0] = -0.5
    elif what == "triangle inequality":
        pi = inertial.from_com(mass, com, np.diag([0.1, 0.01, 0.02]))  # 0.1 > 0.01 + 0.02
    else:
        pi = inertial.from_com(mass, com, np.diag([-0.01, 0.03, 0.04]))
    assert inertial.inconsistency(pi) > 0
    fixed = inertial.nearest_consistent(pi)
    assert inertial.inconsistency(fixed) < 1e-12
    m, _, I = inertial.to_com(fixed)
    assert m >= 0
    moments = np.linalg.eigvalsh(I)
    assert moments.min() > -1e-12 and moments[2] <= moments[0] + moments[1] + 1e-12
    # the Frobenius-nearest PSD pseudo-inertia: no consistent body is nearer in that norm
    J, J_fixed = inertial.pseudo_inertia(pi), inertial.pseudo_inertia(fixed)
    rng = np.random.default_rng(2)
    for _ in range(50):
        other = inertial.pseudo_inertia(inertial.from_com(*_random_body(rng)))
        assert np.linalg.norm(J - J_fixed) <= np.linalg.norm(J - other) + 1e-12


def test_consistent_parameters_come_back_bit_for_bit_and_it_traces():
    rng = np.random.default_rng(3)
    batch = np.stack([inertial.from_com(*_random_body(rng)) for _ in range(8)])
    np.testing.assert_array_equal(inertial.nearest_consistent(batch), batch)
    out = jax.jit(jax.vmap(inertial.nearest_consistent))(jnp.asarray(batch))
    np.testing.assert_array_equal(np.asarray(out), batch)
    grad = jax.grad(lambda p: inertial.to_com(p)[1][0])(jnp.asarray(batch[0]))  # com_x = h_x / m
    np.testing.assert_allclose(np.asarray(grad)[[0, 1]], [-batch[0, 1] / batch[0, 0] ** 2, 1 / batch[0, 0]], rtol=1e-12)
