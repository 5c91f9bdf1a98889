"""Every matrix product the library compiles for a GPU is at full precision.

On NVIDIA GPUs from Ampere on, JAX's default float32 product rounds its operands to
TensorFloat-32 (10 mantissa bits): an RLS covariance, a payload's regressor product and the
change test's fits would be computed from operands rounded by 5e-4 (``docs/design.md``,
"Precision policy"). The check
needs no GPU: ``jax.export`` lowers each entry point for CUDA here, as a user's ``jax.jit`` would
on the GPU, and every ``dot_general`` in the program must carry ``HIGHEST``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import dense_armor as da
from dense_armor import learners, rls
from dense_armor.learners import ResidualLearner, Sample
from dense_armor.payload import PayloadLearner, payload_estimate
from dense_armor.robot_learner import RobotLearner, robot_estimate
from dense_armor.robots import minimal_urdf

MODEL = da.parse_urdf(minimal_urdf())
F32 = jnp.float32
q = jnp.full(2, 0.3, F32)
SAMPLE = Sample(q, q, q, q)
LEARNERS = {"five-feature": ResidualLearner(MODEL, lam=0.99), "payload": PayloadLearner(MODEL, "link2"), "robot": RobotLearner(MODEL)}


def products(fn, *args) -> tuple[int, list[str]]:
    """The number of matrix products in ``fn``'s program for CUDA, and those below HIGHEST."""
    text = jax.export.export(jax.jit(fn), platforms=["cuda"])(*args).mlir_module()
    dots = [line.strip() for line in text.splitlines() if "stablehlo.dot_general" in line]
    return len(dots), [d for d in dots if "precision = [HIGHEST, HIGHEST]" not in d]


def entry_points():
    """(name, function, args): what a user traces, as the docs show it."""
    batch = jax.tree.map(lambda a: jnp.stack([a, a]), SAMPLE)
    yield "rnea", lambda q: da.rnea(MODEL, q, q, q), (q,)
    yield "crba, nle, gravity (vmap)", jax.vmap(lambda q: (da.crba(MODEL, q), da.nonlinear_effects(MODEL, q, q), da.generalized_gravity(MODEL, q))), (batch.q,)
    yield "aba", lambda q: da.aba(MODEL, q, q, q), (q,)
    yield "regressor", lambda q: da.joint_torque_regressor(MODEL, q, q, q), (q,)
    for name, learner in LEARNERS.items():
        state = learner.init(F32)
        yield f"{name}: learner.step", lambda s, x, learner=learner: learner.step(s, x), (state, SAMPLE)
        yield f"{name}: learner.learn", lambda s, p, learner=learner: learner.learn(s, p), (state, learner.prepare(SAMPLE, F32))
        yield f"{name}: learner.predict", lambda s, q, learner=learner: learner.predict(s, q, q, q), (state, q)
        yield f"{name}: learners.replay", lambda s, t, learner=learner: learners.replay(learner, s, t), (state, batch)
    yield "payload_estimate", lambda s: payload_estimate(LEARNERS["payload"], s), (LEARNERS["payload"].init(F32),)
    robot = LEARNERS["robot"]
    yield "robot_estimate", lambda s: robot_estimate(robot, s), (robot.init(F32),)
    yield "PayloadDetector.fits", lambda s: robot.detector.fits(s.detector, jnp.zeros((), F32), 1000.0), (robot.init(F32),)
    state, x = rls.init(5, dtype=F32), jnp.linspace(-1, 1, 5, dtype=F32)
    yield "rls.update (Joseph)", lambda s, x: rls.update(s, x, x[0], 0.99, joseph=True), (state, x)
    yield "rls.update_rows", lambda s, x: rls.update_rows(s, jnp.stack([x, -x]), x[:2], 0.99), (state, x)
    yield "rls.predict, prior_variance", lambda s, x: (rls.predict(s, x), rls.prior_variance(s, x)), (state, x)


@pytest.mark.parametrize("name, fn, args", list(entry_points()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_product_for_a_gpu_is_at_full_precision(name, fn, args):
    _, low = products(fn, *args)
    assert not low, f"{name}: {len(low)} products below HIGHEST, e.g. {low[0][:200]}"


def test_the_learners_do_compute_products():
    """The check above sees the products it guards (a program of none would pass it vacuously)."""
    for name, learner in LEARNERS.items():
        if name != "five-feature":  # its step is written out elementwise
            count, _ = products(lambda s, t, learner=learner: learners.replay(learner, s, t), learner.init(F32), jax.tree.map(lambda a: a[None], SAMPLE))
            assert count > 0, name
    count, low = products(lambda a, b: a @ b, jnp.ones((3, 3), F32), jnp.ones(3, F32))
    assert count == 1 and len(low) == 1  # a plain product, traced outside the library, is not HIGHEST
