"""Speed of the online learner, side by side with a NumPy RLS on top of Pinocchio.

    python benchmarks/learners.py [--quick]

Rows, float64, for the seed's 2-link arm and Panda (7 joints, fingers locked):
- one step (nominal RNEA + gravity + predict + learn) called from Python, with JAX's
  asynchronous CPU dispatch off and on (each in a child process of its own): the functional
  ``learners.step`` (every leaf of the learner and state passed) and the control-loop
  ``learners.Stepper`` (learner compiled in, state packed, outputs returned as NumPy);
- the same work in NumPy on top of Pinocchio (``pin.rnea``, ``pin.computeGeneralizedGravity``,
  per-joint RLS vectorised with einsum);
- the design document's stateful ``ResidualDynamicsLearner.learn_one``;
- the dispatch floor, ``jax.jit(lambda x: x + 1)``;
- per-sample cost inside ``learners.replay`` over 10^4 samples;
- a vmapped batch of 1024 learners x 400 samples (each its own payload), after compilation.
Writes the table to docs/benchmarks.md, section "Online learner".
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
from common import in_child, interleaved_us, median_us, pinocchio_model, robots, table, write_section  # noqa: E402

from dense_armor import attach_payload, parse_urdf  # noqa: E402
from dense_armor.dynamics import rnea  # noqa: E402
from dense_armor.dynamics.urdf_dynamics import RigidBodyModel  # noqa: E402
from dense_armor.learners import ResidualLearner, Sample, Stepper, replay, step  # noqa: E402
from dense_armor.utility.learn.online_dynamics import ResidualDynamicsLearner  # noqa: E402

ROBOTS = ("2-link", "Panda")


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


def _learner(xml: str):
    return jax.tree.map(jnp.asarray, ResidualLearner(parse_urdf(xml), lam=0.99))


def measure_calls(quick: bool) -> dict:
    """Child process: single calls from Python (the dispatch mode is set by the parent's flag)."""
    results = {}
    for name in ROBOTS:
        xml = robots()[name]
        learner = _learner(xml)
        one = Sample(*(a[0] for a in _trajectory(learner.model, 1)))
        state = learner.init(jnp.float64)
        r = {}
        start = time.perf_counter()
        jax.block_until_ready(step(learner, state, one))
        r["compile step (s)"] = time.perf_counter() - start
        stepper = Stepper(learner, state)
        start = time.perf_counter()
        stepper.step(*one)
        r["compile Stepper (s)"] = time.perf_counter() - start
        floor = jax.jit(lambda x: x + 1)
        x = jnp.zeros(learner.model.n)
        reference = NumpyPinocchioLearner(xml)
        wrapper = ResidualDynamicsLearner(RigidBodyModel(xml), lam=0.99)
        r |= interleaved_us({
            "NumPy+Pinocchio (us)": lambda: reference.step(*one),
            "floor (us)": lambda: floor(x).block_until_ready(),
            "step (us)": lambda: jax.block_until_ready(step(learner, state, one)),
            "Stepper (us)": lambda: stepper.step(*one),
            "learn_one (us)": lambda: wrapper.learn_one(*one),
        }, rounds=5 if quick else 25)
        results[name] = r
    return results


def measure_replay(name: str, quick: bool) -> float:
    """Per-sample cost of one ``replay`` over 10^4 samples (2000 with --quick), us."""
    learner = _learner(robots()[name])
    traj = jax.tree.map(jnp.asarray, _trajectory(learner.model, 2_000 if quick else 10_000))
    state = learner.init(jnp.float64)
    jax.block_until_ready(replay(learner, state, traj))
    return median_us(lambda: jax.block_until_ready(replay(learner, state, traj)), 11, 1) / traj.q.shape[0]


def measure_batch(quick: bool):
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
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--async-dispatch", choices=("on", "off"), default="off", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    jax.config.update("jax_cpu_enable_async_dispatch", args.async_dispatch == "on")
    if args.child:
        print(json.dumps(measure_calls(args.quick)))
        return
    quick = ["--quick"] if args.quick else []
    calls = {mode: in_child(__file__, "--async-dispatch", mode, *quick) for mode in ("off", "on")}
    header = ["robot", "n", "compile step (s)", "compile Stepper (s)", "floor (us)", "NumPy+Pinocchio (us)",
              "step (us), sync", "step (us), async", "Stepper (us), sync", "Stepper (us), async",
              "learn_one (us)", "replay (us/sample)", "Stepper / NumPy+Pin (sync)"]
    rows = []
    for name in ROBOTS:
        sync, asyn = calls["off"][name], calls["on"][name]
        cells = [name, parse_urdf(robots()[name]).n, sync["compile step (s)"], sync["compile Stepper (s)"],
                 sync["floor (us)"], sync["NumPy+Pinocchio (us)"], sync["step (us)"], asyn["step (us)"],
                 sync["Stepper (us)"], asyn["Stepper (us)"], sync["learn_one (us)"], measure_replay(name, args.quick)]
        rows.append([c if isinstance(c, (int, str)) else f"{c:.2f}" for c in cells]
                    + [f"{sync['Stepper (us)'] / sync['NumPy+Pinocchio (us)']:.2f}x"])
    body = table(header, rows)
    B, T, compile_s, seconds = measure_batch(args.quick)
    body += (
        f"\n\nBatch: {B} two-link learners (each its own payload) x {T} samples, one vmapped replay: "
        f"{seconds * 1e3:.1f} ms after a {compile_s:.1f} s compile "
        f"({B * T / seconds / 1e6:.2f} M samples/s).\n\n"
        "Single calls: medians over interleaved rounds (NumPy+Pinocchio, floor, step, Stepper and learn_one "
        "timed in turn, so their ratios hold while the machine's speed drifts), each dispatch mode in a fresh child "
        "process; the floor, NumPy+Pinocchio and learn_one with synchronous dispatch. `Stepper` is "
        "`stepper.step(q, qd, qdd, tau)` returning the step's outputs as NumPy. Targets (issue 3): a step from Python (the Stepper, sync) <= 0.7x "
        "NumPy+Pinocchio on the 2-link arm; replay <= 1 us/sample (2-link) and <= 4 us (Panda); 1024 x 400 "
        "vmapped 2-link replays in < 0.5 s."
    )
    print(body)
    command = "python benchmarks/learners.py" + (" --quick" if args.quick else "")
    if not args.quick:
        write_section("Online learner", body, command)


if __name__ == "__main__":
    sys.exit(main())
