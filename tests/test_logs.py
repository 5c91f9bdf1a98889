"""Logs: the Savitzky-Golay differentiator, column matching, and the chunked replay."""

from __future__ import annotations

import chex
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor import parse_urdf
from dense_armor.learners import ResidualLearner, Sample, replay
from dense_armor.logs import LogError, load_log, replay_chunked, savgol_derivative
from dense_armor.robots import minimal_urdf

JOINTS = ("joint1", "joint2")


@pytest.mark.parametrize("window, order", [(5, 3), (11, 3), (11, 4), (21, 5)])
def test_savgol_differentiates_polynomials_exactly_edges_included(window, order):
    dt = 0.01
    t = np.arange(60) * dt
    y = np.stack([1 - 2 * t + 3 * t**2 - 0.5 * t**3, np.full_like(t, 2.0)], axis=1)
    np.testing.assert_allclose(savgol_derivative(y, dt, window, order), np.stack([-2 + 6 * t - 1.5 * t**2, 0 * t], 1), atol=1e-9)
    np.testing.assert_allclose(savgol_derivative(y, dt, window, order, deriv=2), np.stack([6 - 3 * t, 0 * t], 1), atol=1e-6)


def test_savgol_smooths_noise_better_than_finite_differences():
    dt = 0.001
    t = np.arange(2000) * dt
    y = np.sin(2 * np.pi * t) + 1e-4 * np.random.default_rng(0).standard_normal(t.size)
    truth = 2 * np.pi * np.cos(2 * np.pi * t)
    sg = savgol_derivative(y, dt, window=21, order=3)
    fd = np.gradient(y, dt)
    assert np.sqrt(np.mean((sg - truth) ** 2)) < 0.2 * np.sqrt(np.mean((fd - truth) ** 2))


def test_savgol_rejects_bad_settings():
    with pytest.raises(ValueError, match="odd"):
        savgol_derivative(np.zeros(20), 0.01, window=10)
    with pytest.raises(ValueError, match="order"):
        savgol_derivative(np.zeros(20), 0.01, window=5, order=1, deriv=2)
    with pytest.raises(ValueError, match="too few"):
        savgol_derivative(np.zeros(4), 0.01, window=5)


def _csv(path, columns):
    names = list(columns)
    np.savetxt(path, np.column_stack([columns[k] for k in names]), delimiter=",", header=",".join(names), comments="")
    return path


def test_named_and_indexed_columns_give_the_same_log(tmp_path):
    rng = np.random.default_rng(0)
    data = {qty: rng.normal(size=(15, 2)) for qty in ("q", "qd", "qdd", "tau")}
    named = {f"{qty}_{j}": data[qty][:, k] for qty in data for k, j in enumerate(JOINTS)}
    indexed = {f"{qty}{k}": data[qty][:, k] for qty in data for k in range(2)}
    named["temperature"] = np.zeros(15)  # other columns are ignored
    a = load_log(_csv(tmp_path / "a.csv", named), JOINTS)
    b = load_log(_csv(tmp_path / "b.csv", indexed), JOINTS)
    np.savez(tmp_path / "c.npz", **data)
    c = load_log(tmp_path / "c.npz", JOINTS)
    for log in (a, b, c):
        for qty in data:
            np.testing.assert_array_equal(getattr(log, qty), data[qty])
        assert log.estimated == () and log.t is None and log.dt is None


def test_missing_derivatives_are_estimated_from_the_period(tmp_path):
    dt = 0.002
    t = np.arange(100) * dt
    q = np.stack([t**3, np.sin(t)], 1)
    cols = {"t": t, "q0": q[:, 0], "q1": q[:, 1], "tau0": t, "tau1": t}
    log = load_log(_csv(tmp_path / "q_only.csv", cols), JOINTS)
    assert log.estimated == ("qd", "qdd") and log.dt == pytest.approx(dt)
    np.testing.assert_allclose(log.qd[:, 0], 3 * t**2, atol=1e-9)
    np.testing.assert_allclose(log.qdd[:, 0], 6 * t, atol=1e-6)
    del cols["t"]
    with pytest.raises(LogError, match="--dt"):
        load_log(_csv(tmp_path / "no_t.csv", cols), JOINTS)
    log = load_log(tmp_path / "no_t.csv", JOINTS, dt=dt)
    np.testing.assert_allclose(log.qd[:, 1], np.cos(t), atol=1e-7)


def test_chunked_replay_equals_one_scan():
    model = parse_urdf(minimal_urdf())
    learner = ResidualLearner(model, lam=0.98)
    rng = np.random.default_rng(3)
    trajectory = Sample(*rng.uniform(-1, 1, (4, 31, 2)))
    state0 = learner.init(jnp.float64)
    whole_state, whole = replay(learner, state0, trajectory)
    seen = []
    state, out = replay_chunked(learner, state0, trajectory, chunk=7, progress=lambda done, total: seen.append(done))
    assert seen == [7, 14, 21, 28, 31]
    chex.assert_trees_all_close(state, whole_state, rtol=1e-12, atol=1e-12)
    chex.assert_trees_all_close(out, whole, rtol=1e-12, atol=1e-12)
    assert int(state.count) == 31 and int(state.rejected) == 0  # the padding was never learned
