"""The design document's stateful API: conversion, bad input, persistence, agreement with the core."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
from dense_armor.utility.learn.online_dynamics import (
    CUSUMDriftDetector,
    DriftAwareResidualDynamicsLearner,
    HampelScorer,
    RecursiveLeastSquares,
    ResidualDynamicsLearner,
    write_minimal_urdf,
)


@pytest.fixture(scope="module")
def arms():
    return RigidBodyModel(write_minimal_urdf()), RigidBodyModel(write_minimal_urdf(payload_mass=0.5))


def _samples(real, count, seed=0):
    states = np.random.default_rng(seed).uniform(-1, 1, (count, 3, 2))
    return states, np.stack([np.asarray(real.inverse_dynamics(*s)) for s in states])


def test_rigid_body_model_methods(arms):
    nominal, _ = arms
    q, qd, qdd = np.array([0.3, -0.2]), np.array([0.1, 0.4]), np.array([-0.5, 0.2])
    M = np.asarray(nominal.mass_matrix(q))
    h = np.asarray(nominal.bias_forces(q, qd))
    np.testing.assert_allclose(M @ qdd + h, nominal.inverse_dynamics(q, qd, qdd), atol=1e-14)
    np.testing.assert_allclose(nominal.forward_dynamics(q, qd, M @ qdd + h), qdd, atol=1e-12)
    np.testing.assert_allclose(nominal.gravity_forces(q), 0.0, atol=1e-15)  # planar arm, gravity along the axes
    assert nominal.mass_matrix(q).dtype == np.float64 and nominal.joint_names == ("joint1", "joint2")


def test_wrappers_leave_global_precision_alone():
    """In a fresh interpreter (the tests' conftest switches x64 on): a wrapper's float64 call
    leaves JAX's default precision float32."""
    script = (
        "import jax, jax.numpy as jnp\n"
        "from dense_armor.dynamics.urdf_dynamics import RigidBodyModel\n"
        "from dense_armor.robots import write_minimal_urdf\n"
        "M = RigidBodyModel(write_minimal_urdf()).mass_matrix([0.0, 0.0])\n"
        "print(M.dtype, jax.config.jax_enable_x64, jnp.zeros(1).dtype)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    assert out.stdout.split() == ["float64", "False", "float32"], out.stdout + out.stderr


def test_the_minimal_urdfs_temporary_files_go_when_the_interpreter_exits(tmp_path):
    script = (
        "import os\n"
        "from dense_armor.robots import write_minimal_urdf\n"
        "paths = [write_minimal_urdf(), write_minimal_urdf(payload_mass=0.5)]\n"
        "os.remove(paths[1])  # one the user removed already\n"
        "print(write_minimal_urdf(), write_minimal_urdf(os.path.join(os.getcwd(), 'arm.urdf')), *paths)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path)
    temporary, kept, *first = out.stdout.split()
    assert not out.stderr and kept == str(tmp_path / "arm.urdf") and os.path.isfile(kept)
    assert not any(os.path.exists(p) for p in (temporary, *first))


def test_jit_patch_idiom_still_works(arms):
    model = RigidBodyModel(write_minimal_urdf())
    model.mass_matrix = jax.jit(model.mass_matrix)
    np.testing.assert_allclose(model.mass_matrix(np.array([0.3, -0.2])), arms[0].mass_matrix([0.3, -0.2]), rtol=1e-6)


def test_model_methods_return_float64_numpy_or_traced_values(arms):
    """An array result and a tuple of them (forward kinematics) come back as float64 NumPy, the
    functional results; inside ``jax.jit`` around a method, as traced values."""
    from dense_armor import dynamics

    model, q = arms[0], np.array([0.3, -0.2])
    R, p = model.forward_kinematics(q)
    with jax.enable_x64(True):
        expected = dynamics.forward_kinematics(model.model, q)
    for got, want in zip((R, p), expected):
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
    assert isinstance(model.gravity_forces(q), np.ndarray)
    traced = jax.jit(lambda q: model.forward_kinematics(q))(jnp.asarray(q))
    np.testing.assert_allclose(traced[1], p, rtol=1e-6)


def test_learn_many_equals_learn_one(arms):
    nominal, real = arms
    states, torques = _samples(real, 30)
    one, many = ResidualDynamicsLearner(nominal, lam=0.99), ResidualDynamicsLearner(nominal, lam=0.99)
    for s, tau in zip(states, torques):
        one.learn_one(*s, tau)
    outputs = many.learn_many(states[:, 0], states[:, 1], states[:, 2], torques)
    np.testing.assert_allclose(one.weights, many.weights, rtol=1e-9, atol=1e-9)
    assert outputs.prediction.shape == (30, 2) and outputs.accepted.all()
    np.testing.assert_allclose(many.last.prediction, one.last.prediction, rtol=1e-9)  # the last sample's, as learn_one
    one.learn_one(*states[0], torques[0])
    many.learn_many(states[:1, 0], states[:1, 1], states[:1, 2], torques[:1])  # then steps go on as one
    one.learn_one(*states[1], torques[1])
    many.learn_one(*states[1], torques[1])
    np.testing.assert_allclose(many.last.prediction, one.last.prediction, rtol=1e-9)
    np.testing.assert_allclose(one.weights, many.weights, rtol=1e-9, atol=1e-9)


def test_five_features_fit_batch_least_squares_per_joint(arms):
    nominal, real = arms
    states, torques = _samples(real, 40)
    learner = ResidualDynamicsLearner(nominal, delta=1e9)
    learner.learn_many(states[:, 0], states[:, 1], states[:, 2], torques)
    g = np.stack([np.asarray(nominal.gravity_forces(s[0])) for s in states])
    residual = torques - np.stack([np.asarray(nominal.inverse_dynamics(*s)) for s in states])
    for j in range(2):
        X = np.stack([states[:, 2, j], states[:, 1, j], np.sign(states[:, 1, j]), g[:, j], np.ones(40)], 1)
        w, *_ = np.linalg.lstsq(X, residual[:, j], rcond=None)
        np.testing.assert_allclose(X @ learner.weights[j], X @ w, atol=1e-6)


def test_nan_sample_is_skipped(arms):
    nominal, real = arms
    states, torques = _samples(real, 10)
    learner = ResidualDynamicsLearner(nominal)
    for s, tau in zip(states, torques):
        learner.learn_one(*s, tau)
    before = learner.state
    learner.learn_one(states[0, 0], states[0, 1], states[0, 2], np.array([np.nan, 1.0]))
    learner.learn_one(states[0, 0], np.array([np.inf, 0.0]), states[0, 2], torques[0])
    assert int(learner.state.rejected) == 2
    np.testing.assert_array_equal(learner.state.rls.w, before.rls.w)
    np.testing.assert_array_equal(learner.state.rls.P, before.rls.P)
    rls = RecursiveLeastSquares()
    rls.learn_one({"a": 1.0}, 2.0).learn_one({"a": float("nan")}, 1.0)
    assert rls.rejected == 1 and np.isfinite(rls._w).all()


def test_save_and_load_are_bit_exact(arms, tmp_path):
    nominal, real = arms
    states, torques = _samples(real, 25)
    learner = DriftAwareResidualDynamicsLearner(nominal, trigger="cusum")
    learner.learn_many(states[:, 0], states[:, 1], states[:, 2], torques)
    learner.save(tmp_path / "state.npz")
    restored = DriftAwareResidualDynamicsLearner(nominal, trigger="cusum").load(tmp_path / "state.npz")
    for a, b in zip(jax.tree.leaves(learner.state), jax.tree.leaves(restored.state)):
        np.testing.assert_array_equal(a, b)
    q = states[0]
    np.testing.assert_array_equal(learner.predict_torque(*q), restored.predict_torque(*q))
    with pytest.raises(ValueError, match="state"):
        ResidualDynamicsLearner(nominal).load(tmp_path / "state.npz")


@pytest.mark.parametrize(
    "make",
    [
        lambda m: ResidualDynamicsLearner(m, lam=0.0),
        lambda m: ResidualDynamicsLearner(m, lam=1.5),
        lambda m: ResidualDynamicsLearner(m, delta=0.0),
        lambda m: DriftAwareResidualDynamicsLearner(m, fast_lam=0.0),
        lambda m: DriftAwareResidualDynamicsLearner(m, trigger="magic"),
        lambda m: DriftAwareResidualDynamicsLearner(m, trigger="cusum", drift_reference="nope"),
        lambda m: RecursiveLeastSquares(lam=-0.1),
        lambda m: RecursiveLeastSquares(delta=-1.0),
    ],
)
def test_bad_hyperparameters_raise(arms, make):
    with pytest.raises(ValueError):
        make(arms[0])


@pytest.mark.parametrize("argument", ["q", "qd", "qdd", "tau"])
def test_wrong_length_names_the_argument(arms, argument):
    learner = ResidualDynamicsLearner(arms[0])
    values = {k: np.zeros(2) for k in ("q", "qd", "qdd", "tau")}
    values[argument] = np.zeros(3)
    with pytest.raises(ValueError, match=rf"^{argument}: expected shape \(2,\)"):
        learner.learn_one(**values)


def test_rls_feature_order_does_not_depend_on_dict_order():
    a, b = RecursiveLeastSquares(), RecursiveLeastSquares()
    rng = np.random.default_rng(1)
    for x, y in zip(rng.standard_normal((20, 2)), rng.standard_normal(20)):
        a.learn_one({"u": x[0], "v": x[1]}, y)
        b.learn_one({"v": x[1], "u": x[0]}, y)
    np.testing.assert_array_equal(a._w, b._w)
    assert a.predict_one({"u": 1.0}) == a._w[0]
    with pytest.raises(ValueError, match="unknown features"):
        a.predict_one({"w": 1.0})


def test_detector_wrappers_fire_on_a_step():
    rng = np.random.default_rng(0)
    stream = np.concatenate([rng.standard_normal(100), 6.0 + rng.standard_normal(30)])
    hampel = HampelScorer()
    cusum = CUSUMDriftDetector()
    alarms_h = [hampel.update(x) for x in stream]
    alarms_c = [cusum.update(x) for x in stream]
    assert any(alarms_h[100:105]) and any(alarms_c[100:115])
    assert not any(alarms_c[:100])


def test_the_functional_api_is_flat():
    """Every name of ``dense_armor.__all__`` resolves, to the object its module defines."""
    import dense_armor
    from dense_armor import dynamics, learners, payload, robot_learner

    for name in dense_armor.__all__:
        value = getattr(dense_armor, name)
        home = next((m for m in (dynamics, learners, payload, robot_learner) if hasattr(m, name)), None)
        assert home is None or getattr(home, name) is value, name
    assert dense_armor.rnea is dynamics.rnea and dense_armor.RobotLearner is robot_learner.RobotLearner
    import dense_armor.replay  # noqa: F401 (a module of the package: no name of __all__ may be one)

    assert not any(isinstance(getattr(dense_armor, name), type(dense_armor)) for name in dense_armor.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dense_armor.nope  # noqa: B018
