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


def _posterior(rng, bodies, joints, degenerate=False):
    """An inconsistent posterior mean (rigid bodies plus noise, or with ``degenerate`` point
    masses with their masses negated, far from any rigid body; joint terms about 0) and a
    covariance whose spectrum spans seven decades, as a log's information leaves it."""
    if degenerate:
        rigid = np.concatenate([-inertial.from_com(rng.uniform(0.5, 2), rng.uniform(-0.3, 0.3, 3), np.zeros((3, 3)))
                                for _ in range(bodies)])
    else:
        rigid = np.concatenate([inertial.from_com(*_random_body(rng)) for _ in range(bodies)])
    mean = np.concatenate([rigid + rng.normal(0, 0.05, rigid.shape), rng.normal(0.02, 0.1, 4 * joints)])
    A = rng.normal(size=(mean.size, mean.size)) * np.exp(rng.uniform(-5, 3, mean.size))
    return mean, np.linalg.inv(A.T @ A + 1e-2 * np.eye(mean.size))


def _conic(mean, cov, bodies, nonnegative):
    """The same problem for Clarabel's interior-point solver, through CVXPY: an independent
    solution of the semidefinite program."""
    import cvxpy as cp

    x = cp.Variable(mean.size)
    constraints = [x[np.flatnonzero(nonnegative)] >= 0]
    for b in range(bodies):
        m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = (x[10 * b + k] for k in range(10))
        t = 0.5 * (ixx + iyy + izz)
        J = cp.bmat([[t - ixx, -ixy, -ixz, hx], [-ixy, t - iyy, -iyz, hy], [-ixz, -iyz, t - izz, hz], [hx, hy, hz, m]])
        constraints.append(0.5 * (J + J.T) >> 0)
    root = np.linalg.cholesky(np.linalg.inv(cov))
    cp.Problem(cp.Minimize(cp.sum_squares(root.T @ (x - mean))), constraints).solve(solver="CLARABEL")
    return x.value


@pytest.mark.parametrize("degenerate", [False, True])
def test_the_most_probable_consistent_robot_is_the_conic_solvers(degenerate):
    rng = np.random.default_rng(4)
    bodies, joints = 3, 3
    nonnegative = np.zeros(10 * bodies + 4 * joints, bool)
    nonnegative[10 * bodies : 10 * bodies + 3 * joints] = True  # armature, viscous, Coulomb
    project = jax.jit(inertial.most_probable_consistent, static_argnums=2)
    with jax.enable_x64(True):
        for _ in range(4):
            mean, cov = _posterior(rng, bodies, joints, degenerate)
            assert np.any(inertial.inconsistency(mean[: 10 * bodies].reshape(bodies, 10)) > 0)
            mine = np.asarray(project(jnp.asarray(mean), jnp.asarray(cov), bodies, nonnegative))
            theirs = _conic(mean, cov, bodies, nonnegative)
            distance = lambda x: (x - mean) @ np.linalg.solve(cov, x - mean)  # noqa: E731
            assert distance(mine) <= distance(theirs) * (1 + 1e-7)  # as close to the mean, or closer
            np.testing.assert_allclose(mine, theirs, atol=1e-3 * np.max(np.abs(theirs)))
            J = inertial.pseudo_inertia(mine[: 10 * bodies].reshape(bodies, 10))
            assert np.linalg.eigvalsh(J).min() > 0 and np.all(mine[nonnegative] > 0)  # strictly feasible


def test_a_zero_body_beside_inconsistent_ones_moves_as_the_conic_solver_says():
    """A moving link with no <inertial> whose learned change is exactly 0 (a consistent body
    on the boundary, J = 0), correlated with inconsistent ones."""
    rng = np.random.default_rng(7)
    mean, cov = _posterior(rng, 3, 1, degenerate=True)
    mean[10:20] = 0.0
    nonnegative = np.arange(34) >= 30
    with jax.enable_x64(True):
        mine = np.asarray(inertial.most_probable_consistent(jnp.asarray(mean), jnp.asarray(cov), 3, nonnegative))
    theirs = _conic(mean, cov, 3, nonnegative)
    distance = lambda x: (x - mean) @ np.linalg.solve(cov, x - mean)  # noqa: E731
    assert distance(mine) <= distance(theirs) * (1 + 1e-7)
    np.testing.assert_allclose(mine, theirs, atol=1e-3 * np.max(np.abs(theirs)))


def test_in_the_pseudo_inertias_own_metric_it_is_the_nearest_consistent_body():
    """With the covariance of the Frobenius norm of ``J`` (bodies uncorrelated), the most
    probable consistent bodies are each body's nearest, which has a closed form."""
    rng = np.random.default_rng(5)
    with jax.enable_x64(True):
        A = np.asarray(jax.jacobian(lambda p: inertial.pseudo_inertia(p).reshape(-1))(jnp.zeros(10)))  # (16, 10), linear
        mean = np.concatenate([inertial.from_com(*_random_body(rng)) + rng.normal(0, 0.1, 10) for _ in range(4)])
        cov = np.kron(np.eye(4), np.linalg.inv(A.T @ A))
        mine = np.asarray(inertial.most_probable_consistent(jnp.asarray(mean), jnp.asarray(cov), 4))
    np.testing.assert_allclose(mine, inertial.nearest_consistent(mean.reshape(4, 10)).reshape(-1), atol=1e-8)


def test_a_consistent_posterior_mean_comes_back_unchanged():
    rng = np.random.default_rng(6)
    with jax.enable_x64(True):
        mean = np.concatenate([inertial.from_com(*_random_body(rng)) for _ in range(2)] + [rng.uniform(0, 1, 8)])
        _, cov = _posterior(rng, 2, 2)
        out = jax.jit(inertial.most_probable_consistent, static_argnums=2)(jnp.asarray(mean), jnp.asarray(cov), 2, np.arange(28) >= 20)
    np.testing.assert_array_equal(np.asarray(out), mean)
