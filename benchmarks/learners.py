"""Speed of the online learners as users run them, side by side with NumPy on top of Pinocchio.

    python benchmarks/learners.py [--quick]

For the seed's 2-link arm, UR5 and Panda (7 joints, fingers locked) and each documented learner
(the five-feature ``ResidualDynamicsLearner``, ``DriftAwareResidualDynamicsLearner`` with its
default Hampel trigger, ``PayloadResidualDynamicsLearner`` and ``RobotResidualDynamicsLearner``, the
last also without its payload detector, ``robot --no-payload``), float64:

- one ``learn_one`` of the documented class (which returns once its step is queued: a round of
  calls is timed up to the end of its last step), and one ``learners.Stepper.step`` (the
  control-loop form, which returns the step's outputs: the learner compiled in, the state packed;
  called inside ``jax.enable_x64``, as the documented classes call it), in a fresh process with
  JAX's defaults: nothing in the measuring process touches JAX's configuration. A second column
  repeats them in a process with asynchronous CPU dispatch off
  (``jax_cpu_enable_async_dispatch = False``), the tuned setting. And a control loop's tick
  (learn the measured sample, then predict at a reference state): ``Stepper.tick`` (one call)
  against ``Stepper.learn`` then ``Stepper.predict``, and the NumPy reference's step then
  prediction;
- the same work in NumPy on top of Pinocchio: ``pin.rnea`` and ``pin.computeGeneralizedGravity``
  with one RLS per joint (five-feature; plus a Hampel window of the same length for the
  drift-aware learner); ``pin.rnea`` and the columns of ``pin.computeJointTorqueRegressor`` with
  one RLS over the stacked joint equations (payload: the payload body's 10 columns, viscous,
  Coulomb and offset per joint; whole robot: the bodies' columns the learner learns, armature,
  viscous, smooth Coulomb, Stribeck and offset per joint);
- the cost per sample inside a jitted ``lax.scan`` (``learners.replay`` over 10^4 samples): the
  library's program, compiled with ``dense_armor.compiler.OPTIONS`` (XLA:CPU's memory-optimised
  scheduler), and the same replay inside a user's own ``jax.jit`` (JAX's defaults: the outer
  program's options hold);
- vmapped batches: 1024 two-link five-feature learners x 400 samples (each its own payload), and
  1024 Panda whole-robot learners x 1000 samples (in blocks of 50: ``replay`` prepares a block's
  features at once), against a loop of the same replay, robot by robot. The whole-robot batch is
  compiled with ``compiler_options=dense_armor.compiler.OPTIONS``, as ``docs/quickstart.md``
  tells a user to: with JAX's defaults XLA:CPU's concurrency-optimised scheduler hangs on this
  vmap from about 128 learners; a probe of that size says whether it still does. Tuned: the same
  batch as ``jax.lax.map`` over groups of ``GROUP`` vmapped learners.

Single calls are timed in interleaved rounds (reference, ``learn_one``, ``Stepper``, in turn),
so their ratios hold while the machine's speed drifts. Writes the "Online learner" section of
``docs/benchmarks.md`` (not with ``--quick``).

``--against [REVISION]`` measures instead the replays (but the whole-robot learner's) and the
five-feature batch of this checkout and of an earlier git revision (by default
``common.ARCHITECTURE_MAIN``) side by side, each tree in its own fresh processes, alternated, in
a section of its own (about 15 minutes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from common import ARCHITECTURE_MAIN, alternated, best, in_child, interleaved_us, median_us, pinocchio_model, robots, table, write_section

ROBOTS = ("2-link", "UR5", "Panda")
KINDS = ("five-feature", "drift-aware", "payload", "robot", "robot --no-payload")
LAM = 0.99
RATE = 1000.0  # Hz, the whole-robot learner's sampling rate
# Panda whole-robot learners x samples in one vmap. With JAX's defaults, XLA:CPU's
# concurrency-optimised scheduler hangs on this vmap from about 128 learners (every thread
# waiting, no CPU used; 96 run): the batch is compiled with the library's options, and the
# defaults probed.
BATCH, SAMPLES = 1024, 1000
PROBE = 128, 100
GROUP = 16  # learners vmapped together in the grouped batch (jax.lax.map's batch_size)
PROBE_TIMEOUT = 120.0  # s; the probe compiles in about 6 s and runs in 1


# ----------------------------------------------------------------------------- NumPy + Pinocchio


class NumpyFiveFeature:
    """The five-feature learner in NumPy over Pinocchio: one RLS per joint."""

    def __init__(self, xml: str, lam: float = LAM, delta: float = 1e6, hampel: int | None = None):
        import pinocchio as pin

        self.pin, self.model = pin, pinocchio_model(xml)
        self.data = self.model.createData()
        n = self.model.nv
        self.lam, self.w, self.P = lam, np.zeros((n, 5)), np.tile(delta * np.eye(5), (n, 1, 1))
        # the drift-aware learner's Hampel trigger: a window of the last 2 radius + 1 errors
        self.window = None if hampel is None else np.zeros((n, 2 * hampel + 1))

    def features(self, q, qd, qdd):
        pin = self.pin
        nominal = pin.rnea(self.model, self.data, q, qd, qdd)
        g = pin.computeGeneralizedGravity(self.model, self.data, q)
        return np.stack([qdd, qd, np.sign(qd), g, np.ones_like(q)], axis=1), nominal

    def predict(self, q, qd, qdd):
        x, nominal = self.features(q, qd, qdd)
        return nominal + np.einsum("jk,jk->j", x, self.w)

    def step(self, q, qd, qdd, tau):
        x, nominal = self.features(q, qd, qdd)
        prediction = nominal + np.einsum("jk,jk->j", x, self.w)
        e = tau - prediction
        Px = np.einsum("jab,jb->ja", self.P, x)
        s = self.lam + np.einsum("ja,ja->j", x, Px)
        if self.window is not None:
            self.window = np.roll(self.window, -1, axis=1)
            self.window[:, -1] = e / np.sqrt(s)
            median = np.median(self.window, axis=1)
            outlier = np.abs(self.window[:, -1] - median) > 3.0 * 1.4826 * np.median(np.abs(self.window - median[:, None]), axis=1)
            self.alarm = bool(outlier.any())
        K = Px / s[:, None]
        self.w += K * e[:, None]
        P = (self.P - np.einsum("ja,jb->jab", K, Px)) / self.lam
        self.P = 0.5 * (P + P.transpose(0, 2, 1))
        return prediction


class NumpyShared:
    """One RLS over the stacked joint equations, its columns from Pinocchio's joint-torque
    regressor: the payload learner's (``body`` given) or the whole robot's (those the
    library's learner learns: ``learned``, indices into the ``15 n`` columns)."""

    def __init__(self, xml: str, body: int | None, lam: float = LAM, delta: float = 1e6, width: float = 0.02,
                 learned=None):
        import pinocchio as pin

        from dense_armor.robot_learner import STRIBECK_WIDTH

        self.pin, self.model = pin, pinocchio_model(xml)
        self.data = self.model.createData()
        n = self.model.nv
        self.n, self.body, self.lam, self.width = n, body, lam, width
        self.stribeck_width = STRIBECK_WIDTH * width  # the Stribeck term's slow smooth sign
        self.learned = np.arange(15 * n) if learned is None else np.asarray(learned)
        p = 10 + 3 * n if body is not None else len(self.learned)
        self.w, self.P = np.zeros(p), delta * np.eye(p)

    def features(self, q, qd, qdd):
        pin, n = self.pin, self.n
        Y = pin.computeJointTorqueRegressor(self.model, self.data, q, qd, qdd)
        nominal = pin.rnea(self.model, self.data, q, qd, qdd)
        if self.body is not None:
            X = np.concatenate([Y[:, 10 * self.body : 10 * self.body + 10], np.diag(qd), np.diag(np.sign(qd)), np.eye(n)], 1)
        else:
            smooth = np.tanh(qd / self.width)
            stribeck = smooth - np.tanh(qd / self.stribeck_width)
            X = np.concatenate([Y, np.diag(qdd), np.diag(qd), np.diag(smooth), np.diag(stribeck), np.eye(n)], 1)[:, self.learned]
        return X, nominal

    def predict(self, q, qd, qdd):
        X, nominal = self.features(q, qd, qdd)
        return nominal + X @ self.w

    def step(self, q, qd, qdd, tau):
        n = self.n
        X, nominal = self.features(q, qd, qdd)
        prediction = nominal + X @ self.w
        e = tau - prediction
        XP = X @ self.P
        S = self.lam * np.eye(n) + XP @ X.T
        K = np.linalg.solve(S, XP).T
        self.w = self.w + K @ e
        P = (self.P - K @ XP) / self.lam
        self.P = 0.5 * (P + P.T)
        return prediction


def reference(kind: str, xml: str):
    """The NumPy + Pinocchio learner doing ``kind``'s work; a kind with options (``robot
    --no-payload``) is compared with its learner's (the reference detects no payload)."""
    from dense_armor import parse_urdf
    from dense_armor.robot_learner import RobotLearner

    n_bodies = pinocchio_model(xml).nv
    return {
        "five-feature": lambda: NumpyFiveFeature(xml),
        "drift-aware": lambda: NumpyFiveFeature(xml, hampel=20),
        "payload": lambda: NumpyShared(xml, body=n_bodies - 1),
        "robot": lambda: NumpyShared(xml, body=None, learned=RobotLearner(parse_urdf(xml), rate=RATE).learned),
    }[kind.split()[0]]()


# ----------------------------------------------------------------------------- dense_armor


def wrapper(kind: str, xml: str):
    """The documented class for ``kind``, on a ``RigidBodyModel`` of ``xml``."""
    from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
    from dense_armor.utility.learn import online_dynamics as od

    model = RigidBodyModel(xml)
    return {
        "five-feature": lambda: od.ResidualDynamicsLearner(model, lam=LAM),
        "drift-aware": lambda: od.DriftAwareResidualDynamicsLearner(model, lam=LAM),
        "payload": lambda: od.PayloadResidualDynamicsLearner(model, lam=LAM),
        "robot": lambda: od.RobotResidualDynamicsLearner(model, rate=RATE),
        "robot --no-payload": lambda: od.RobotResidualDynamicsLearner(model, rate=RATE, detect_payload=False),
    }[kind]()


def trajectory(xml: str, count: int, seed: int = 0):
    """Random states and the torques of a robot like the URDF's (Pinocchio's RNEA, plus friction
    and noise), (T, n) each: consistent data, as a real robot's (random torques would raise
    payload alarms, whose steps cost more)."""
    import pinocchio as pin

    model = pinocchio_model(xml)
    data = model.createData()
    rng = np.random.default_rng(seed)
    q, qd, qdd = rng.uniform(-1, 1, (3, count, model.nv))
    tau = np.stack([pin.rnea(model, data, *x) for x in zip(q, qd, qdd)])
    return q, qd, qdd, tau + 0.3 * np.sign(qd) + 0.05 * rng.standard_normal(tau.shape)


def measure_calls(quick: bool) -> dict:
    """Child process: single calls from Python, with whatever dispatch the parent chose."""
    import jax
    import jax.numpy as jnp

    from dense_armor.learners import Stepper

    results = {}
    for name in ROBOTS:
        xml = robots()[name]
        for kind in KINDS:
            learner = wrapper(kind, xml)
            samples = list(zip(*trajectory(xml, 64)))
            with jax.enable_x64(True):
                stepper = Stepper(learner.learner, learner.learner.init(jnp.float64))
            numpy = reference(kind, xml)
            r = {}
            start = time.perf_counter()
            learner.learn_one(*samples[0])
            r["compile"] = time.perf_counter() - start
            counter = iter(range(10**9))

            def sample():
                return samples[next(counter) % len(samples)]

            def stepped():
                with jax.enable_x64(True):
                    stepper.step(*sample())

            # a control loop's tick: learn the measured sample, then the torque at the reference
            def numpy_tick():
                numpy.step(*sample())
                numpy.predict(*sample()[:3])

            def learn_predict():
                with jax.enable_x64(True):
                    stepper.learn(*sample())
                    stepper.predict(*sample()[:3])

            def tick():
                with jax.enable_x64(True):
                    stepper.tick(*sample(), *sample()[:3])

            r |= interleaved_us({
                "numpy": lambda: numpy.step(*sample()),
                "learn_one": lambda: learner.learn_one(*sample()),
                "stepper": stepped,
                "numpy_tick": numpy_tick,
                "learn_predict": learn_predict,
                "tick": tick,
            }, rounds=3 if quick else 15, per_round=50 if quick else 200, finish={"learn_one": lambda: learner.last})
            results[f"{name}/{kind}"] = r
    return results


def measure_replays(quick: bool, kinds=KINDS, plain: bool = False) -> dict:
    """Per-sample cost of ``learners.replay`` (a jitted ``lax.scan``), us; with ``plain``,
    inside a user's own ``jax.jit``."""
    import jax

    from dense_armor import learners
    from dense_armor.learners import Sample

    replay = jax.jit(lambda *args: learners.replay(*args)) if plain else learners.replay
    out = {}
    count = 2_000 if quick else 10_000
    with jax.enable_x64(True):
        for name in ROBOTS:
            for kind in kinds:
                learner = wrapper(kind, robots()[name])
                traj = jax.device_put(Sample(*trajectory(robots()[name], count)))
                core, state = learner.learner, learner.state
                jax.block_until_ready(replay(core, state, traj))
                out[f"{name}/{kind}"] = median_us(lambda: jax.block_until_ready(replay(core, state, traj)), 5, 1) / count
                if kind == "robot" and not plain:
                    out[f"{name}/robot-rls"] = block_rls_us(core, state, traj)
    return out


def block_rls_us(core, state, traj) -> float:
    """Per-sample cost of the whole-robot learner's RLS update alone (``rls.learn_rows`` over
    the same rows, with its forgetting) in a ``lax.scan`` compiled as ``learners.replay`` is: what
    its noise model, payload detector and gating add is the rest of its step."""
    import jax

    from dense_armor import compiler, rls

    prepared = jax.jit(jax.vmap(lambda sample: core.prepare(sample, state.rls.w.dtype)))(traj)

    def update(s, xs):
        X, y = xs
        return rls.learn_rows(s, X, y, core.lam, directional=core.forgets, product=rls.rows_covariance(s, X)[1])[0], None

    run = compiler.jit(lambda s, X, y: jax.lax.scan(update, s, (X, y))[0])
    jax.block_until_ready(run(state.rls, prepared.x, prepared.target))
    return median_us(lambda: jax.block_until_ready(run(state.rls, prepared.x, prepared.target)), 5, 1) / len(prepared.x)


def measure_batches(quick: bool) -> dict:
    """The five-feature learners' vmapped batch."""
    import jax
    import jax.numpy as jnp

    from dense_armor import attach_payload, parse_urdf
    from dense_armor.dynamics import rnea
    from dense_armor.learners import ResidualLearner, Sample, replay

    out = {}
    with jax.enable_x64(True):
        model = parse_urdf(robots()["2-link"])
        B, T = (128, 400) if quick else (1024, 400)
        rng = np.random.default_rng(1)
        q, qd, qdd = (jnp.asarray(a) for a in rng.uniform(-1, 1, (3, B, T, 2)))
        real = jax.vmap(lambda m: attach_payload(model, "link2", m, com=(0.5, 0.0, 0.0)))(jnp.asarray(rng.uniform(0, 1, B)))
        tau = jax.jit(jax.vmap(jax.vmap(rnea, in_axes=(None, 0, 0, 0))))(real, q, qd, qdd)
        learner = jax.tree.map(jnp.asarray, ResidualLearner(model, lam=LAM))
        state = learner.init(jnp.float64)
        run = jax.jit(jax.vmap(lambda traj: replay(learner, state, traj)))
        traj = Sample(q, qd, qdd, tau)
        start = time.perf_counter()
        jax.block_until_ready(run(traj))
        out["five-feature"] = {"B": B, "T": T, "compile": time.perf_counter() - start,
                               "seconds": median_us(lambda: jax.block_until_ready(run(traj)), 3, 0) / 1e6}
    return out


def measure_robot_batch(quick: bool, batch, plain: bool = False) -> dict:
    """``B`` Panda whole-robot learners x ``T`` samples in one vmap, and a loop of single replays,
    compiled with the library's options (``plain``: with JAX's, as ``measure_replays``)."""
    import jax

    from dense_armor.compiler import OPTIONS
    from dense_armor.learners import Sample, replay

    B, T = batch
    options = {} if plain else {"compiler_options": OPTIONS}
    block = min(T, 50)  # replay prepares a block's features at once: 5.5 kB a sample
    with jax.enable_x64(True):
        robot = wrapper("robot", robots()["Panda"])
        core, state = robot.learner, robot.state
        traj = jax.device_put(Sample(*(a.reshape(B, T // block, block, -1) for a in trajectory(robots()["Panda"], B * T, seed=2))))

        def blocks(traj):  # the final state; blocks of samples bound the features replay prepares
            return jax.lax.scan(lambda s, piece: (replay(core, s, piece)[0], None), state, traj)[0]

        start = time.perf_counter()
        run = jax.jit(jax.vmap(blocks), **options).lower(traj).compile()
        compile_s = time.perf_counter() - start
        jax.block_until_ready(run(traj))
        start = time.perf_counter()
        jax.block_until_ready(run(traj))
        seconds = time.perf_counter() - start
        # tuned: a loop over groups of GROUP vmapped learners, whose covariances stay in cache
        grouped = jax.jit(lambda t: jax.lax.map(blocks, t, batch_size=GROUP), **options).lower(traj).compile()
        jax.block_until_ready(grouped(traj))
        start = time.perf_counter()
        jax.block_until_ready(grouped(traj))
        grouped_s = time.perf_counter() - start
        loop = 8 if quick else 16
        one = jax.jit(blocks, **options)
        jax.block_until_ready(one(jax.tree.map(lambda a: a[0], traj)))
        start = time.perf_counter()
        for k in range(loop):
            jax.block_until_ready(one(jax.tree.map(lambda a, k=k: a[k], traj)))
        return {"B": B, "T": T, "compile": compile_s, "seconds": seconds, "grouped_s": grouped_s,
                "loop_rate": loop * T / (time.perf_counter() - start), "loop": loop}


AGAINST_HEADING = "Online learners against an earlier main"
AGAINST_KINDS = ("five-feature", "drift-aware", "payload")  # the whole-robot learner came later
AGAINST_ROUNDS = 3


def against(revision: str, quick: list) -> str:
    """The replays and the five-feature batch for this checkout and for ``revision``, in fresh
    processes alternated over :data:`AGAINST_ROUNDS` rounds, each figure the best of its rounds."""
    def measure(env):
        return {"replays": in_child(__file__, "replays", "--kinds", *AGAINST_KINDS, *quick, env=env),
                "batches": in_child(__file__, "batches", *quick, env=env)}

    runs = alternated(measure, revision, AGAINST_ROUNDS)
    head, base = best(runs["head"]), best(runs["base"])
    rows = []
    for name in ROBOTS:
        for kind in AGAINST_KINDS:
            key = f"{name}/{kind}"
            ratio = head["replays"][key] / base["replays"][key]
            rows.append([name, f"{kind}, `learners.replay` in `lax.scan`, us a sample", f"{base['replays'][key]:.2f}",
                         f"{head['replays'][key]:.2f}", f"{ratio:.2f}x", "yes" if ratio <= 1.25 else "no"])
    b, h = base["batches"]["five-feature"], head["batches"]["five-feature"]
    ratio = h["seconds"] / b["seconds"]
    rows.append(["2-link", f"{h['B']} five-feature learners x {h['T']} samples, one `vmap`, ms", f"{b['seconds'] * 1e3:.1f}",
                 f"{h['seconds'] * 1e3:.1f}", f"{ratio:.2f}x", "yes" if ratio <= 1.25 else "no"])
    which = " (`main` when the architecture issue was filed)" if revision == ARCHITECTURE_MAIN else ""
    return (f"This checkout against `{revision}`{which}, each in fresh processes with JAX's defaults, alternated over "
            f"{AGAINST_ROUNDS} rounds, each figure the best of its rounds. Target (the architecture issue's): "
            "throughput within 1.25x of that revision's. The learners' work is not quite the same in both: the "
            "classes and their defaults are, but their steps may have changed besides the dynamics under them "
            f"(`git diff {revision} -- src/dense_armor/learners.py src/dense_armor/payload.py src/dense_armor/rls.py`), "
            "so a ratio mixes both.\n\n" + table(["robot", "workload", revision, "this checkout", "ratio", "<= 1.25x"], rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, shorter replays, smaller batches")
    parser.add_argument("--child", choices=("calls", "replays", "batches", "robot-batch"), help=argparse.SUPPRESS)
    parser.add_argument("--batch", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sync", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kinds", nargs="+", default=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--against", metavar="REVISION", nargs="?", const=ARCHITECTURE_MAIN,
                        help="measure the replays and batches side by side with a git revision instead (default: the "
                             "main of the architecture issue; its own docs section)")
    args = parser.parse_args(argv)
    if args.child:
        if args.sync:
            import jax

            jax.config.update("jax_cpu_enable_async_dispatch", False)
        if args.child == "robot-batch":
            print(json.dumps(measure_robot_batch(args.quick, args.batch, args.plain)))
        else:
            measure = {"calls": measure_calls, "replays": lambda quick: measure_replays(quick, args.kinds, args.plain),
                       "batches": measure_batches}[args.child]
            print(json.dumps(measure(args.quick)))
        return
    quick = ["--quick"] if args.quick else []
    if args.against:
        body = against(args.against, quick)
        print(body)
        if not args.quick:
            write_section(AGAINST_HEADING, body, f"python benchmarks/learners.py --against {args.against}")
        return
    default = in_child(__file__, "calls", *quick)
    tuned = in_child(__file__, "calls", "--sync", *quick)
    replays = in_child(__file__, "replays", *quick)
    replays_plain = in_child(__file__, "replays", "--plain", *quick)
    batches = in_child(__file__, "batches", *quick)
    batch = [str(x) for x in ((16, 200) if args.quick else (BATCH, SAMPLES))]
    robot = in_child(__file__, "robot-batch", "--batch", *batch, *quick)
    probe = in_child(__file__, "robot-batch", "--batch", *map(str, PROBE), "--plain", *quick, timeout=PROBE_TIMEOUT)

    header = ["robot", "learner", "NumPy + Pinocchio (us)", "learn_one (us)", "learn_one / NumPy",
              "Stepper (us)", "Stepper / NumPy", "tuned: learn_one / NumPy", "tuned: Stepper / NumPy",
              "in lax.scan (us/sample)", "in a user's jax.jit (us/sample)", "first learn_one (s)"]
    rows = []
    for name in ROBOTS:
        for kind in KINDS:
            d, t = default[f"{name}/{kind}"], tuned[f"{name}/{kind}"]
            rows.append([name, kind, f"{d['numpy']:.1f}", f"{d['learn_one']:.1f}", f"{d['learn_one'] / d['numpy']:.2f}x",
                         f"{d['stepper']:.1f}", f"{d['stepper'] / d['numpy']:.2f}x", f"{t['learn_one'] / t['numpy']:.2f}x",
                         f"{t['stepper'] / t['numpy']:.2f}x", f"{replays[f'{name}/{kind}']:.2f}",
                         f"{replays_plain[f'{name}/{kind}']:.2f}", f"{d['compile']:.1f}"])
    tick_header = ["robot", "learner", "NumPy + Pinocchio (us)", "Stepper.learn + Stepper.predict (us)",
                   "Stepper.tick (us)", "tick / NumPy", "tick / (learn + predict)"]
    tick_rows = []
    for name in ROBOTS:
        for kind in KINDS:
            d = default[f"{name}/{kind}"]
            tick_rows.append([name, kind, f"{d['numpy_tick']:.1f}", f"{d['learn_predict']:.1f}", f"{d['tick']:.1f}",
                              f"{d['tick'] / d['numpy_tick']:.2f}x", f"{d['tick'] / d['learn_predict']:.2f}x"])
    five = batches["five-feature"]
    defaults = (f"with JAX's defaults, {PROBE[0]} x {PROBE[1]} did not finish in {PROBE_TIMEOUT:.0f} s (XLA:CPU's "
                "concurrency-optimised scheduler hangs on it: every thread waiting, no CPU used)" if probe is None else
                f"with JAX's defaults, {PROBE[0]} x {PROBE[1]} ran at {PROBE[0] * PROBE[1] / probe['seconds']:,.0f} samples/s")
    body = table(header, rows) + (
        f"\n\nBatches, one vmapped `learners.replay` after compiling: {five['B']} two-link five-feature learners (each "
        f"its own payload) x {five['T']} samples in {five['seconds'] * 1e3:.1f} ms ({five['B'] * five['T'] / five['seconds'] / 1e6:.2f} "
        f"M samples/s, compiled in {five['compile']:.1f} s); {robot['B']} Panda whole-robot learners x {robot['T']} samples in "
        f"{robot['seconds']:.1f} s ({robot['B'] * robot['T'] / robot['seconds']:,.0f} samples/s, compiled in "
        f"{robot['compile']:.1f} s) with `compiler_options=dense_armor.compiler.OPTIONS`, against {robot['loop_rate']:,.0f} samples/s "
        f"for a loop of single replays ({robot['loop']} robots), {robot['B'] * robot['T'] / robot['seconds'] / robot['loop_rate']:.2f}x; "
        f"tuned, `jax.lax.map(..., batch_size={GROUP})` (a loop over groups of {GROUP} vmapped learners, whose "
        f"covariances stay in cache; the same options): {robot['B'] * robot['T'] / robot['grouped_s']:,.0f} samples/s, "
        f"{robot['B'] * robot['T'] / robot['grouped_s'] / robot['loop_rate']:.2f}x the loop; "
        f"{defaults}.\n\n"
        "The whole-robot learner's RLS update alone (`rls.block_update` over the same rows, with its directional "
        "forgetting, in a `lax.scan` compiled as `learners.replay` is, in the same process), us a sample, against its "
        "whole step in `lax.scan` (the update, its noise model, its payload detector, the residual's gate): "
        + "; ".join(f"{name} {replays[f'{name}/robot-rls']:.2f} against {replays[f'{name}/robot']:.2f}" for name in ROBOTS)
        + ".\n\n"
        "How to read it. Every column but the \"tuned\" ones is measured in a fresh process with JAX's defaults "
        "(asynchronous dispatch on, 64-bit off outside the classes, which enter `jax.enable_x64` themselves); the "
        "tuned single calls in a process with asynchronous dispatch off. Single calls: medians over interleaved rounds "
        "(NumPy + Pinocchio, `learn_one`, `Stepper`, in turn), so ratios hold while the machine's speed drifts. "
        "`robot --no-payload` is the whole-robot learner without its payload detector (`detect_payload=False`, the "
        "command line's `--no-payload`), against the same NumPy reference, which detects no payload either. "
        "`learn_one` returns once its step is queued (JAX's asynchronous dispatch; the steps run in order on "
        "XLA's thread while Python goes on): a round of 200 calls is timed up to the end of its last step "
        "(`learner.last`), so its figure is the cost of a step in a stream of them, waiting included; the "
        "`Stepper` column is `Stepper.step`, which returns the step's outputs, so it is the latency of one "
        "step (the learn-then-read of a control loop). "
        "The NumPy + Pinocchio reference does the same work: Pinocchio's RNEA (and gravity, or its joint-torque "
        "regressor) and the same RLS in NumPy (exponential forgetting; the documented classes forget "
        "directionally, a little more work). \"first learn_one\" includes compiling. \"in lax.scan\" is "
        "`learners.replay` over 10^4 samples under `jax.enable_x64`, the library's program (compiled with "
        "XLA:CPU's memory-optimised scheduler, `dense_armor.compiler.OPTIONS`); \"in a user's jax.jit\" the same "
        "call inside `jax.jit(lambda *a: learners.replay(*a))`, whose options (JAX's defaults) hold; "
        "`jax.jit(..., compiler_options=dense_armor.compiler.OPTIONS)` makes it the first.\n\n"
        "Targets (the speed issue): `learn_one` <= 1.0x NumPy + Pinocchio, the `Stepper` <= 0.5x, the "
        "whole-robot learner's step in `lax.scan` <= 20 us a sample on Panda.\n\n"
        "A control loop's tick, in the same processes and rounds (JAX's defaults): learn the measured sample, then "
        "the learner's torque at the reference state (the feed-forward command; each a sample of the same log), "
        "median us. `Stepper.tick` does both in one call; without it, `Stepper.learn` then `Stepper.predict` (two "
        "calls); the NumPy + Pinocchio reference does its step, then its prediction at the reference.\n\n"
        + table(tick_header, tick_rows)
    )
    print(body)
    if not args.quick:
        write_section("Online learner", body, "python benchmarks/learners.py")


if __name__ == "__main__":
    sys.exit(main())
