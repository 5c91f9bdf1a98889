"""Identities between the dynamics algorithms, payloads as model edits, vmap/grad, and no retrace."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from urdf_factory import random_tree

from dense_armor import attach_payload, parse_urdf, payload_parameters, with_inertia
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics import (
    aba,
    body_regressor,
    crba,
    generalized_gravity,
    joint_torque_regressor,
    nonlinear_effects,
    rnea,
)
from dense_armor.robots import minimal_urdf

ROBOTS = {"two_link": minimal_urdf(), "tree": random_tree(3, n_movable=4).xml}


@pytest.fixture(scope="module", params=["two_link", pytest.param("tree", marks=pytest.mark.slow)])
def robot(request):
    model = parse_urdf(ROBOTS[request.param])
    states = np.random.default_rng(0).uniform(-1, 1, (4, 3, model.n))
    return model, states


def test_algorithms_agree(robot):
    model, states = robot
    for q, qd, qdd in states:
        M = np.asarray(crba(model, q))
        np.testing.assert_allclose(M, M.T, atol=1e-13)
        assert np.linalg.eigvalsh(M).min() > 0
        tau = np.asarray(rnea(model, q, qd, qdd))
        h = np.asarray(nonlinear_effects(model, q, qd))
        np.testing.assert_allclose(tau - h, M @ qdd, atol=1e-12)
        np.testing.assert_allclose(aba(model, q, qd, tau), qdd, atol=1e-10)
        np.testing.assert_allclose(rnea(model, q, 0 * qd, 0 * qdd), generalized_gravity(model, q), atol=1e-12)
        Y = np.asarray(joint_torque_regressor(model, q, qd, qdd))
        np.testing.assert_allclose(Y @ np.asarray(model.inertia).reshape(-1), tau, atol=1e-12)
        last = model.n - 1
        np.testing.assert_allclose(body_regressor(model, q, qd, qdd, last), Y[:, 10 * last :], atol=1e-12)


@pytest.mark.slow
def test_gradient_wrt_inertia_is_the_regressor(robot):
    model, states = robot
    q, qd, qdd = states[0]
    weights = jnp.arange(1.0, model.n + 1)

    def loss(inertia):
        return weights @ rnea(with_inertia(model, inertia), q, qd, qdd)

    expected = weights @ joint_torque_regressor(model, q, qd, qdd)
    reverse = jax.grad(loss)(jnp.asarray(model.inertia))
    forward = jax.jacfwd(loss)(jnp.asarray(model.inertia))
    np.testing.assert_allclose(reverse.reshape(-1), expected, atol=1e-12)
    np.testing.assert_allclose(forward.reshape(-1), expected, atol=1e-12)


def test_gradient_wrt_the_model_is_a_model_of_gradients(robot):
    """The model is one leaf; its gradient is a model whose arrays are the gradients (the
    inertia's is the regressor's weighted rows; the limits and frames do not enter)."""
    model, states = robot
    q, qd, qdd = states[0]
    weights = jnp.arange(1.0, model.n + 1)
    grad = jax.grad(lambda m: weights @ rnea(m, q, qd, qdd))(jax.device_put(model))
    assert type(grad) is type(model) and grad.joint_names == model.joint_names
    np.testing.assert_allclose(grad.inertia.reshape(-1), weights @ joint_torque_regressor(model, q, qd, qdd), atol=1e-12)
    for unused in (grad.lower, grad.upper, grad.velocity_limit, grad.effort_limit, grad.frame_translation):
        assert not np.any(unused)
    with pytest.raises(AttributeError, match="immutable"):
        model.inertia = grad.inertia


def test_derivative_wrt_the_kinematic_parameters_matches_finite_differences(robot):
    """The dynamics run in joint frames built from the axes (``tree.joint_frames``); the
    derivative with respect to joint origins and axes (kept unit) is still the true one."""
    model, states = robot
    q, qd, qdd = states[0]
    rng = np.random.default_rng(1)
    dp, da = rng.normal(size=model.joint_translation.shape), rng.normal(size=model.axis.shape)

    def torque(eps):
        axis = model.axis + eps * da
        moved = model.replace(joint_translation=model.joint_translation + eps * dp,
                              axis=axis / jnp.linalg.norm(axis, axis=-1, keepdims=True))
        return rnea(moved, q, qd, qdd)

    _, derivative = jax.jvp(torque, (0.0,), (1.0,))
    h = 1e-6
    np.testing.assert_allclose(derivative, (torque(h) - torque(-h)) / (2 * h), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("axis", [(0, 0, 1), (0, 0, -1), (1, 0, 0), (0, -1, 0), (1e-300, 0, -1), (0.6, 0, -0.8), "random"])
def test_axis_basis_is_a_rotation_taking_z_to_the_axis(axis):
    axes = np.random.default_rng(2).normal(size=(100, 3)) if axis == "random" else np.array([axis], float)
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    B = np.moveaxis(np.array(tr.axis_basis(tuple(jnp.asarray(axes[:, k]) for k in range(3)))), (0, 1), (1, 2))
    np.testing.assert_allclose(B @ np.swapaxes(B, 1, 2), np.broadcast_to(np.eye(3), B.shape), atol=1e-15)
    np.testing.assert_allclose(np.linalg.det(B), 1.0, atol=1e-15)
    np.testing.assert_array_equal(B[:, :, 2], axes)


@pytest.mark.parametrize(
    "parents",
    [
        (-1, -1),  # no ancestors: no stage
        (-1, 0, 1, 2, 3, 4, 5),  # a chain: one run per stage
        (-1, 0, 1, 2, 3, 4, 5, 6, 6),  # Panda's fingers: three
        (-1, 0, 0, 1, 2, 3, -1, 6),  # branches and a second root
        tuple(x for k in range(10) for x in (-1, 2 * k)),  # ten short chains: the gather, past 8 runs
    ],
)
def test_accumulate_folds_in_every_ancestor(parents):
    """Segments that are affine maps ``x -> a x + b`` (associative, and not commutative): every
    body gets the composition of its ancestors' maps and its own, from the base down."""
    model = type("Tree", (), {"parents": parents, "n": len(parents)})
    n = len(parents)
    a, b = np.random.default_rng(0).uniform(0.5, 1.5, (2, n))
    segments = [jnp.asarray(a[None]), jnp.asarray(b[None])]
    up = np.maximum(np.asarray(parents), 0)

    def compose(upper, lower):
        return [lower[0] * upper[0], lower[0] * upper[1] + lower[1]]

    # read from the segments, from a stack of them and another row, or with the parents'
    # segments given for the first stage
    stacked = tr.stack_rows([*segments, jnp.zeros((1, n))])
    given = [jnp.asarray(a[up][None]), jnp.asarray(b[up][None])]
    for result in (tr.accumulate(model, segments, compose), tr.accumulate(model, stacked, compose, width=2), tr.accumulate(model, segments, compose, given)):
        scale, shift = tr.unstack_rows(result, 2)
        for k in range(n):
            path = [k]
            while parents[path[-1]] >= 0:
                path.append(parents[path[-1]])
            expected_scale, expected_shift = 1.0, 0.0
            for j in reversed(path):
                expected_scale, expected_shift = a[j] * expected_scale, a[j] * expected_shift + b[j]
            np.testing.assert_allclose([scale[0, k], shift[0, k]], [expected_scale, expected_shift], rtol=1e-12)


def test_vmap_over_states_equals_loop(robot):
    model, states = robot
    q, qd, qdd = (jnp.asarray(states[:, k]) for k in range(3))
    batched = jax.vmap(rnea, in_axes=(None, 0, 0, 0))(model, q, qd, qdd)
    looped = jnp.stack([rnea(model, *s) for s in states])
    chex.assert_trees_all_close(batched, looped, atol=1e-13)
    chex.assert_trees_all_close(jax.vmap(crba, in_axes=(None, 0))(model, q), jnp.stack([crba(model, s[0]) for s in states]), atol=1e-13)


def test_attach_payload_equals_the_urdf_with_the_payload():
    nominal, real = parse_urdf(minimal_urdf()), parse_urdf(minimal_urdf(payload_mass=0.5))
    loaded = attach_payload(nominal, "link2", 0.5, com=(0.5, 0.0, 0.0))
    np.testing.assert_allclose(loaded.inertia, real.inertia, atol=1e-15)


def test_attach_payload_to_a_link_behind_a_fixed_joint():
    """A payload on a tool frame lands on the body the tool is fixed to, moved into its frame."""
    tree = random_tree(5, n_movable=3, n_fixed=2)
    model = parse_urdf(tree.xml)
    frame = next(f for f, b in zip(model.frame_names, model.frame_bodies) if b >= 0 and f not in model.body_names)
    body = model.body_index(frame)
    com, inertia = np.array([0.1, -0.2, 0.3]), np.diag([0.01, 0.02, 0.03])
    loaded = attach_payload(model, frame, 0.7, com=com, inertia=inertia)
    R, p = np.asarray(model.frame_rotation[model.frame_index(frame)]), np.asarray(model.frame_translation[model.frame_index(frame)])
    expected = payload_parameters(0.7, R @ com + p, R @ inertia @ R.T)
    np.testing.assert_allclose(loaded.inertia[body] - model.inertia[body], expected, atol=1e-14)


def test_vmap_over_payload_masses_equals_loop():
    model = parse_urdf(minimal_urdf())
    masses = jnp.linspace(0.0, 2.0, 5)
    q, qd, qdd = jnp.array([0.3, -0.4]), jnp.array([0.5, 0.1]), jnp.array([-0.2, 0.7])

    def torque(mass):
        return rnea(attach_payload(model, "link2", mass, com=(0.5, 0.0, 0.0)), q, qd, qdd)

    looped = jnp.stack([rnea(parse_urdf(minimal_urdf(float(m))), q, qd, qdd) for m in masses])
    chex.assert_trees_all_close(jax.vmap(torque)(masses), looped, atol=1e-12)


def test_same_structure_compiles_once():
    """Two parses of one URDF share the compiled function; new values do not retrace."""
    traced = chex.assert_max_traces(n=1)(lambda model, q: generalized_gravity(model, q) + 0.0)
    jitted = jax.jit(traced)
    for k in range(3):
        model = parse_urdf(minimal_urdf(payload_mass=0.1 * k))
        jitted(model, jnp.full(2, 0.1 * k))
    assert jitted._cache_size() == 1


def test_float32_follows_the_inputs():
    model = parse_urdf(minimal_urdf())
    q = np.array([0.3, -0.2], np.float32)
    tau32 = rnea(model, q, q, q)
    assert tau32.dtype == jnp.float32
    np.testing.assert_allclose(tau32, rnea(model, *(q.astype(np.float64),) * 3), rtol=1e-6)


@pytest.mark.parametrize("fn, args", [(rnea, 3), (crba, 1), (aba, 3), (joint_torque_regressor, 3)])
def test_wrong_length_names_the_argument(fn, args):
    model = parse_urdf(minimal_urdf())
    good = [np.zeros(2)] * args
    for k in range(args):
        bad = list(good)
        bad[k] = np.zeros(3)
        with pytest.raises(ValueError, match=r"expected shape \(2,\)"):
            fn(model, *bad)
