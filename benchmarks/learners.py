"""Speed of the online learner, side by side with a NumPy RLS on top of Pinocchio.

    python benchmarks/learners.py [--quick]

Rows, float64, for the seed's 2-link arm and Panda (7 joints, fingers locked):
- one step (nominal RNEA + gravity + predict + learn) called from Python, with JAX's
  asynchronous CPU dispatch on and off: the functional ``learners.step`` (every leaf of the
  learner and state passed) and the control-loop ``learners.Stepper`` (learner compiled in,
  state packed, outputs returned as NumPy);
- the same work in NumPy on top of Pinocchio (``pin.rnea``, ``pin.computeGeneralizedGravity``,
  per-joint RLS vectorised with einsum);
- the design document's stateful ``ResidualDynamicsLearner.learn_one``;
- the dispatch floor, ``jax.jit(lambda x: x + 1)``;
- per-sample cost inside ``learners.replay`` (``lax.scan``) over 10^4 samples;
- a vmapped batch of 1024 learners x 400 samples (each its own payload), after compilation.
Writes the table to docs/benchmarks.md, section "Online learner".
"""

from __future__ import annotations

import argparse
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
from common import median_us, pinocchio_model, robots, table, write_section  # noqa: E402

from dense_armor import attach_payload, parse_urdf  # noqa: E402
from dense_armor.dynamics import rnea  # noqa: E402
from dense_armor.dynamics.urdf_dynamics import RigidBodyModel  # noqa: E402
from dense_armor.learners import ResidualLearner, Sample, Stepper, replay, step  # noqa: E402
from dense_armor.utility.learn.online_dynamics import ResidualDynamicsLearner  # noqa: E402


class NumpyPinocchioLearner:
    """The five-feature learner in NumPy over Pinocchio: the reference for the same work."""

    def __init__(self, xml: str, lam: float = 0.99, delta: float = 1e6):
        self.model = pinocchio_model(xml)
        self.data = self.model.createData()
        n = self.model.nv
        self.lam = lam
        self.w = np.zeros((n, 5))
        self.P = np.tile(delta * np.eye(5), (n, 1, 1))

    def step(self, q, qd, qdd, tau):
        nominal = pin.rnea(self.model, self.data, q, qd, qdd)
        g = pin.computeGeneralizedGravity(self.model, self.data, q)
        x = np.stack([qdd, qd, np.sign(qd), g, np.ones_like(q)], axis=1)
        prediction = nominal + np.einsum("jk,jk->j", x, self.w)
        y = tau - nominal
        Px = np.einsum("jab,jb->ja", self.P, x)
        K = Px / (self.lam + np.einsum("ja,ja->j", x, Px))[:, None]
        self.w += K * (y - np.einsum("jk,jk->j", x, self.w))[:, None]
        P = (self.P - np.einsum("ja,jb->jab", K, Px)) / self.lam
        self.P = 0.5 * (P + P.transpose(0, 2, 1))
        return prediction


def _trajectory(model, count, seed=0):
    rng = np.random.default_rng(seed)
    q, qd, qdd = rng.uniform(-1, 1, (3, count, model.n))
    tau = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(model, q, qd, qdd)) + 0.1 * np.sign(qd)
    return Sample(q, qd, qdd, tau)


def bench_robot(name: str, xml: str, quick: bool):
    model = parse_urdf(xml)
    learner = jax.tree.map(jnp.asarray, ResidualLearner(model, lam=0.99))
    traj = _trajectory(model, 10_000 if not quick else 2_000)
    one = Sample(*(a[0] for a in traj))
    row = {"robot": name, "n": model.n}

    start = time.perf_counter()
    state = learner.init(jnp.float64)
    jax.block_until_ready(step(learner, state, one))
    row["compile step (s)"] = time.perf_counter() - start
    repeats = 500 if quick else 3000
    stepper = Stepper(learner, state)
    start = time.perf_counter()
    stepper.step(*one)
    row["compile Stepper (s)"] = time.perf_counter() - start
    for async_dispatch in (True, False):
        jax.config.update("jax_cpu_enable_async_dispatch", async_dispatch)
        mode = "async" if async_dispatch else "sync"
        row[f"step (us), {mode}"] = median_us(lambda: jax.block_until_ready(step(learner, state, one)), repeats)
        row[f"Stepper (us), {mode}"] = median_us(lambda: stepper.step(*one), repeats)
    floor = jax.jit(lambda x: x + 1)
    x = jnp.zeros(model.n)
    row["floor (us)"] = median_us(lambda: floor(x).block_until_ready(), repeats)

    reference = NumpyPinocchioLearner(xml)
    row["NumPy+Pinocchio (us)"] = median_us(lambda: reference.step(*one), repeats)
    wrapper = ResidualDynamicsLearner(RigidBodyModel(xml), lam=0.99)
    row["learn_one (us)"] = median_us(lambda: wrapper.learn_one(*one), repeats // 5)

    jax.block_until_ready(replay(learner, state, traj))
    T = traj.q.shape[0]
    row["replay (us/sample)"] = median_us(lambda: jax.block_until_ready(replay(learner, state, traj)), 5, 1) / T
    return row


def bench_batch(quick: bool):
    """1024 (or 128 with --quick) 2-link learners, each with its own payload, 400 samples each."""
    model = parse_urdf(robots()["2-link"])
    B, T = (128, 400) if quick else (1024, 400)
    rng = np.random.default_rng(1)
    q, qd, qdd = (jnp.asarray(a) for a in rng.uniform(-1, 1, (3, B, T, 2)))
    masses = jnp.asarray(rng.uniform(0.0, 1.0, B))
    real = jax.vmap(lambda m: attach_payload(model, "link2", m, com=(0.5, 0.0, 0.0)))(masses)
    tau = jax.jit(jax.vmap(jax.vmap(rnea, in_axes=(None, 0, 0, 0))))(real, q, qd, qdd)
    learner = jax.tree.map(jnp.asarray, ResidualLearner(model, lam=0.99))
    state = learner.init(jnp.float64)
    run = jax.jit(jax.vmap(lambda traj: replay(learner, state, traj)))
    traj = Sample(q, qd, qdd, tau)
    start = time.perf_counter()
    jax.block_until_ready(run(traj))
    compile_s = time.perf_counter() - start
    seconds = median_us(lambda: jax.block_until_ready(run(traj)), 5, 1) / 1e6
    return B, T, compile_s, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a smaller batch (a smoke run)")
    args = parser.parse_args(argv)
    rows = [bench_robot(name, xml, args.quick) for name, xml in robots().items() if name != "UR5"]
    jax.config.update("jax_cpu_enable_async_dispatch", True)
    header = list(rows[0])
    body = table(header + ["Stepper / NumPy+Pin (sync)"], [
        [r[k] if isinstance(r[k], (int, str)) else f"{r[k]:.2f}" for k in header]
        + [f"{r['Stepper (us), sync'] / r['NumPy+Pinocchio (us)']:.2f}x"]
        for r in rows
    ])
    B, T, compile_s, seconds = bench_batch(args.quick)
    body += (
        f"\n\nBatch: {B} two-link learners (each its own payload) x {T} samples, one vmapped replay: "
        f"{seconds * 1e3:.1f} ms after a {compile_s:.1f} s compile "
        f"({B * T / seconds / 1e6:.2f} M samples/s).\n\n"
        "Targets (issue 3): a step from Python (the Stepper, sync) <= 0.7x NumPy+Pinocchio on the 2-link arm; "
        "replay <= 1 us/sample "
        "(2-link) and <= 4 us (Panda); 1024 x 400 vmapped 2-link replays in < 0.5 s."
    )
    print(body)
    command = "python benchmarks/learners.py" + (" --quick" if args.quick else "")
    if not args.quick:
        write_section("Online learner", body, command)


if __name__ == "__main__":
    sys.exit(main())
