"""The benchmark protocols' data (SPEC section 4), defined once.

The benchmark scripts (drift.py, payload.py) and the tests (tests/test_learners.py,
tests/test_payload.py, through tests/conftest.py) build their samples here, so a protocol
cannot drift apart between what is measured and what is asserted.

- :func:`seed_data`, :func:`seed_noise`: the seed benchmark (design document section 4).
- :func:`drift_batch`: the drift benchmark (payload and friction from sample 200 of 400).
- :func:`windup_batch`, :func:`windup_errors`: the covariance wind-up protocol (issue 4, part 3).
- :func:`precision_trajectory`: float32 against float64 over 10^5 samples (issue 4, part 4).
- :func:`replay_P`: predictions and covariances at every sample, vmapped over seeds.

The real robot of every protocol is the two-link arm of :func:`dense_armor.robots.minimal_urdf`
with a 0.5 kg payload and, except in the seed benchmark, viscous ``0.2 qd_j`` and Coulomb
``0.1 sign(qd_j)`` friction on every joint (:func:`with_friction`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from dense_armor import parse_urdf  # noqa: E402
from dense_armor.dynamics import rnea  # noqa: E402
from dense_armor.learners import Sample  # noqa: E402
from dense_armor.robots import minimal_urdf  # noqa: E402

NOMINAL = parse_urdf(minimal_urdf())
CHANGED = parse_urdf(minimal_urdf(payload_mass=0.5))
# The same arm in a vertical plane: gravity excites every feature.
VERTICAL = parse_urdf(minimal_urdf(), gravity=(0.0, -9.81, 0.0))
VERTICAL_CHANGED = parse_urdf(minimal_urdf(payload_mass=0.5), gravity=(0.0, -9.81, 0.0))

T, CHANGE = 400, 200  # drift benchmark: samples, and the first sample of the changed robot
MOVING, REST = 200, 2000  # wind-up protocol: exciting samples before and after the rest
SIGMA = 0.01  # torque noise, N m

_torques = jax.jit(jax.vmap(rnea, in_axes=(None, 0, 0, 0)))  # (T, n) arrays
_torques_seeds = jax.jit(jax.vmap(jax.vmap(rnea, in_axes=(None, 0, 0, 0)), in_axes=(None, 0, 0, 0)))  # (S, T, n)


def with_friction(tau, qd):
    """``tau`` plus the protocols' joint friction, viscous ``0.2 qd`` and Coulomb ``0.1 sign(qd)``."""
    return tau + 0.2 * qd + 0.1 * np.sign(qd)


# --- seed benchmark ---------------------------------------------------------------------


class SeedData(NamedTuple):
    """The seed benchmark: nominal and real arm, learning and test samples, real torques."""

    nominal: object
    real: object
    train: np.ndarray  # (3, 40, 2): q, qd, qdd
    tau: np.ndarray  # (40, 2), noise-free
    test: np.ndarray  # (3, 20, 2)
    tau_test: np.ndarray  # (20, 2)


def seed_data() -> SeedData:
    """Two-link arm, real robot with ``payload_mass=0.5`` (no friction); samples
    ``default_rng(0).uniform(-1, 1, (40, 3, 2))`` to learn, then ``(20, 3, 2)`` to test."""
    rng = np.random.default_rng(0)
    train = rng.uniform(-1, 1, (40, 3, 2)).transpose(1, 0, 2)
    test = rng.uniform(-1, 1, (20, 3, 2)).transpose(1, 0, 2)
    return SeedData(NOMINAL, CHANGED, train, np.asarray(_torques(CHANGED, *train)), test, np.asarray(_torques(CHANGED, *test)))


def seed_noise(shape, draws: int, sigma: float = SIGMA) -> np.ndarray:
    """Noise draws ``k = 0 .. draws - 1`` on the learned torques: ``sigma *
    default_rng(1000 + k).standard_normal(shape)``, stacked, ``(draws, *shape)``."""
    return sigma * np.stack([np.random.default_rng(1000 + k).standard_normal(shape) for k in range(draws)])


# --- drift benchmark --------------------------------------------------------------------


def drift_batch(seeds, sigma: float = SIGMA, scale: float = 1.0, length: int = T):
    """The drift benchmark's trajectories for ``seeds``.

    Sample ``t`` of seed ``s`` is ``default_rng(s).uniform(-1, 1, (T, 3, n))[t]`` read as
    ``(q, qd, qdd)``; the measured torque is the real robot's plus ``sigma *
    default_rng(1000 + s).standard_normal((T, n))``. Before :data:`CHANGE` the real robot is the
    payload-free URDF; from it on, the payload and the friction.

    Args:
        seeds: seed numbers.
        sigma: measurement noise standard deviation, N m.
        scale: size of the change (1 = the benchmark; 0.1 = payload 0.05 kg, friction 0.02 qd
            and 0.01 sign(qd); the regressor is linear in the inertial parameters, so scaling
            the torque change is scaling the payload).
        length: samples per seed (the first ``length`` of the benchmark's 400).

    Returns:
        ``(trajectory, true)``: a :class:`Sample` of (S, length, n) arrays with the measured
        torques, and the noise-free real torques (S, length, n).
    """
    n = NOMINAL.n
    X = np.stack([np.random.default_rng(s).uniform(-1, 1, (length, 3, n)) for s in seeds])
    q, qd, qdd = X[:, :, 0], X[:, :, 1], X[:, :, 2]
    before = np.asarray(_torques_seeds(NOMINAL, q, qd, qdd))
    after = with_friction(np.asarray(_torques_seeds(CHANGED, q, qd, qdd)), qd)
    after = before + scale * (after - before)
    true = np.where((np.arange(length) >= CHANGE)[None, :, None], after, before)
    noise = np.stack([sigma * np.random.default_rng(1000 + s).standard_normal((length, n)) for s in seeds])
    return Sample(q, qd, qdd, true + noise), true


# --- covariance wind-up -----------------------------------------------------------------


def windup_batch(seeds, sigma: float = SIGMA, rest: int = REST):
    """The wind-up protocol: :data:`MOVING` exciting samples, ``rest`` at rest (q held, qd =
    qdd = 0), :data:`MOVING` exciting; the changed robot (payload and friction) throughout.

    Seed ``s``: both exciting stretches from ``default_rng(s)``, the noise ``sigma *
    default_rng(1000 + s).standard_normal((2 MOVING + REST, n))`` of the protocol; with a
    shorter ``rest`` (0: the same motion without the rest, a reference) the exciting samples
    keep the protocol's noise.

    Returns:
        ``(trajectory, true)``: a :class:`Sample` of (S, 2 MOVING + rest, n) arrays with the
        measured torques, and the noise-free real torques.
    """
    n = CHANGED.n
    runs, noises = [], []
    for s in seeds:
        rng = np.random.default_rng(s)
        a, b = rng.uniform(-1, 1, (MOVING, 3, n)), rng.uniform(-1, 1, (MOVING, 3, n))
        still = np.zeros((rest, 3, n))
        still[:, 0] = a[-1, 0]  # q held, qd = qdd = 0
        runs.append(np.concatenate([a, still, b]))
        noise = sigma * np.random.default_rng(1000 + s).standard_normal((2 * MOVING + REST, n))
        noises.append(np.concatenate([noise[: MOVING + rest], noise[MOVING + REST :]]))
    X = np.stack(runs)
    q, qd, qdd = X[:, :, 0], X[:, :, 1], X[:, :, 2]
    true = with_friction(np.asarray(_torques_seeds(CHANGED, q, qd, qdd)), qd)
    return Sample(q, qd, qdd, true + np.stack(noises)), true


@partial(jax.jit, static_argnums=3)
def windup_errors(learner, trajectory, true, resume: int = MOVING + REST):
    """One seed: the prequential errors against the noise-free torque at every sample, and
    ``P`` when motion resumes (after sample ``resume - 1``)."""

    def body(state, x):
        sample, truth = x
        state, out = learner.step(state, sample)
        return state, out.prediction - truth

    data = (trajectory, true)
    state, before = jax.lax.scan(body, learner.init(jnp.float64), jax.tree.map(lambda a: a[:resume], data))
    _, after = jax.lax.scan(body, state, jax.tree.map(lambda a: a[resume:], data))
    return jnp.concatenate([before, after]), state.rls.P


@jax.jit
def replay_P(learner, state, batch):
    """Predictions and covariances at every sample, vmapped over the leading (seed) axis."""

    def one(traj):
        def body(s, sample):
            s, o = learner.step(s, sample)
            return s, (o.prediction, s.rls.P)

        return jax.lax.scan(body, state, traj)[1]

    return jax.vmap(one)(batch)


# --- float32 against float64 ------------------------------------------------------------


def precision_trajectory(length: int = 100_000) -> Sample:
    """The vertical arm (gravity excites every feature) with payload and friction, samples
    ``default_rng(9).uniform(-1, 1, (length, 3, 2))``, noise ``0.01 default_rng(1009)``."""
    X = np.random.default_rng(9).uniform(-1, 1, (length, 3, 2))
    q, qd, qdd = X[:, 0], X[:, 1], X[:, 2]
    tau = with_friction(np.asarray(_torques(VERTICAL_CHANGED, q, qd, qdd)), qd)
    tau = tau + SIGMA * np.random.default_rng(1009).standard_normal(tau.shape)
    return Sample(q, qd, qdd, tau)
