"""A batch of learners split across devices with JAX's own sharding equals the one-device batch.

XLA must be told how many host devices to fake before JAX starts, so the check runs in a
fresh interpreter with ``--xla_force_host_platform_device_count=4``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    from dense_armor import attach_payload, parse_urdf
    from dense_armor.dynamics import rnea
    from dense_armor.learners import ResidualLearner, Sample, replay
    from dense_armor.robots import minimal_urdf

    jax.config.update("jax_enable_x64", True)
    assert jax.device_count() == 4, jax.devices()
    model = parse_urdf(minimal_urdf())
    masses = jnp.linspace(0.0, 1.0, 8)
    rng = np.random.default_rng(0)
    q, qd, qdd = (jnp.asarray(a) for a in rng.uniform(-1, 1, (3, 8, 50, 2)))

    def run(mass, q, qd, qdd):
        real = attach_payload(model, "link2", mass, com=(0.5, 0.0, 0.0))
        tau = jax.vmap(rnea, in_axes=(None, 0, 0, 0))(real, q, qd, qdd)
        learner = ResidualLearner(model, lam=0.99)
        state, out = replay(learner, learner.init(jnp.float64), Sample(q, qd, qdd, tau))
        return state.rls.w, out.error

    batch = jax.jit(jax.vmap(run))
    mesh = jax.make_mesh((4,), ("robots",), axis_types=(jax.sharding.AxisType.Auto,))  # XLA propagates
    spread = NamedSharding(mesh, P("robots"))
    args = [jax.device_put(a, spread) for a in (masses, q, qd, qdd)]
    w_sharded, err_sharded = batch(*args)
    assert len(w_sharded.sharding.device_set) == 4
    w_one, err_one = batch(masses, q, qd, qdd)
    np.testing.assert_allclose(w_sharded, w_one, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(err_sharded, err_one, rtol=1e-10, atol=1e-10)
    print("ok")
    """
)


@pytest.mark.slow
def test_sharded_batch_equals_one_device():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
