"""The batch path on an accelerator: precision, throughput and sharding, measured on whatever
backend JAX starts with (a GPU where there is one).

    python benchmarks/gpu.py measure --out DIR [--robots DIR] [--budget S]   # on each machine
    python benchmarks/gpu.py report GPU_DIR CPU_DIR [--before DIR]           # the docs section

``measure`` writes to ``DIR``:

- ``precision.npz``: float32 outputs of ``rnea``, ``crba``, ``aba``, the regressor (vmapped over
  random states) and of the three learners' replays (the five-feature, payload and whole-robot
  learners, each on a trajectory of a robot carrying 1.5 kg), Panda and UR5, with the inputs.
  ``measure --precision-only`` writes only this (run it with an earlier ``dense_armor`` on
  ``PYTHONPATH`` for the "before" column);
- ``results.json``: the device; ``jax.vmap`` of ``(crba, nonlinear_effects,
  generalized_gravity)`` over 10^3-10^5 Panda states and MuJoCo MJX's smooth dynamics (where
  ``mujoco-mjx`` imports) over the same; the three learners replayed for a batch of payload
  variants (one ``vmap``); compile times; all in float32 and float64; and a batch of learners
  sharded with ``jax.sharding`` over the backend's devices against the same batch unsharded.
  ``--skip-precision`` writes only this.

``report`` computes the float64 references on this machine's CPU from the inputs saved with the
GPU's outputs, writes the errors to ``GPU_DIR/errors.json`` and the "GPU" section of
``docs/benchmarks.md``. ``--robots DIR`` reads
``panda.urdf`` (fingers locked), ``ur5.urdf`` and ``panda_mujoco.urdf`` from ``DIR`` (a machine
without ``example-robot-data``); ``write-robots DIR`` writes them there.

On a GPU machine that has JAX, equinox and chex but not this project's other dependencies: put
``src`` on ``PYTHONPATH`` (the modules these measurements import need nothing else), bring the
robots (``write-robots``) and, for MJX, wheels of ``mujoco`` and ``mujoco-mjx`` of one version
(with ``trimesh``; MJX also imports ``etils``). Run the precision measurement a second time with an earlier ``src`` (``git
archive REV src``) on ``PYTHONPATH`` for ``report --before``: both precision runs fit the GPU at
once with ``XLA_PYTHON_CLIENT_PREALLOCATE=false``; the throughput run keeps JAX's defaults
(``benchmarks/gpu.sh`` does all three). The batches are sized for a card of 80 GB; ``--budget``
skips what would not end in time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

import jax
import jax.numpy as jnp
from common import median_us, table, write_section

from dense_armor import attach_payload, learners, parse_urdf
from dense_armor.dynamics import aba, crba, generalized_gravity, joint_torque_regressor, nonlinear_effects, rnea
from dense_armor.learners import ResidualLearner, Sample
from dense_armor.payload import PayloadLearner
from dense_armor.robot_learner import RobotLearner

ROBOTS = ("panda", "ur5")
STATES = 256  # random states for the dynamics' precision
SAMPLES = 500  # samples of each learner's trajectory for the precision check
RATE = 100.0  # Hz, of that trajectory
PAYLOAD = 1.5  # kg, at 5 cm from the payload link's origin
BLOCK = 50  # samples a replay prepares at once in the batches (a Panda robot learner's features: 5.5 kB a sample)
# the float32 bounds of the CPU tests (tests/test_dynamics_pinocchio.py): forward recursions, and aba's
# forward error (a linear solve's, which grows with the conditioning of M)
TOLERANCE = {"rnea": 1e-5, "crba": 1e-5, "regressor": 1e-5, "aba": 1e-4, "aba (backward)": 1e-5}
LEARNERS = ("five-feature", "payload", "robot")


# --- robots and data ------------------------------------------------------------------------


def robot_texts(directory: str | None) -> dict[str, str]:
    """URDF texts: ``panda`` (fingers locked), ``ur5``, and ``panda_mujoco`` (MuJoCo's: meshes
    stripped, the compiler told to keep the inertias)."""
    if directory:
        return {name: (Path(directory) / f"{name}.urdf").read_text() for name in (*ROBOTS, "panda_mujoco")}
    import mujoco_robot as mr
    from common import robots

    return {"panda": robots()["Panda"], "ur5": robots()["UR5"], "panda_mujoco": mr.mujoco_urdf("panda")}


def states(model, count: int, seed: int) -> tuple[np.ndarray, ...]:
    """(q, qd, qdd), each (count, n) float64: positions within the limits (or +-pi), velocities
    +-2 rad/s, accelerations +-5 rad/s^2."""
    rng = np.random.default_rng(seed)
    lo = np.maximum(np.asarray(model.lower), -np.pi)
    hi = np.minimum(np.asarray(model.upper), np.pi)
    q = lo + (hi - lo) * rng.uniform(0.05, 0.95, (count, model.n))
    return q, rng.uniform(-2, 2, (count, model.n)), rng.uniform(-5, 5, (count, model.n))


def make_learner(kind: str, model):
    """The learner, with the same prior in float32 and float64 (``delta=None`` would differ)."""
    if kind == "five-feature":
        return ResidualLearner(model, lam=0.99, delta=1e3)
    if kind == "payload":
        return PayloadLearner(model, lam=0.999, delta=1e3)
    return RobotLearner(model, rate=RATE)


def payload_torques(model, link, masses, q, qd, qdd):
    """(V, T, n) torques of the robot carrying each mass (kg) on ``link``, plus viscous and
    Coulomb friction; ``q``, ``qd``, ``qdd`` (T, n) shared."""
    def one(mass):
        real = attach_payload(model, link, mass, com=(0.0, 0.0, 0.05))
        tau = jax.vmap(rnea, in_axes=(None, 0, 0, 0))(real, q, qd, qdd)
        return tau + 0.2 * qd + 0.5 * jnp.tanh(qd / 0.02)

    return jax.jit(jax.vmap(one))(masses)


# --- measure --------------------------------------------------------------------------------


def dynamics_outputs(model, q, qd, qdd, tau) -> dict[str, np.ndarray]:
    """rnea, crba, nle and the regressor at (q, qd, qdd) and aba at (q, qd, tau), each (B, n)
    array a batch of states, in their dtype, on JAX's default device."""
    quantities = {
        "rnea": lambda m, q, qd, qdd, tau: rnea(m, q, qd, qdd),
        "crba": lambda m, q, qd, qdd, tau: crba(m, q),
        "nle": lambda m, q, qd, qdd, tau: nonlinear_effects(m, q, qd),
        "regressor": lambda m, q, qd, qdd, tau: joint_torque_regressor(m, q, qd, qdd),
        "aba": lambda m, q, qd, qdd, tau: aba(m, q, qd, tau),
    }
    batched = {name: jax.jit(jax.vmap(f, in_axes=(None, 0, 0, 0, 0))) for name, f in quantities.items()}
    return {name: np.asarray(f(model, q, qd, qdd, tau)) for name, f in batched.items()}


def learner_trajectory(model) -> tuple[np.ndarray, ...]:
    """(q, qd, qdd, tau), each (SAMPLES, n) float64: sines about the middle of the joints' range
    at RATE Hz, the robot carrying PAYLOAD kg, friction and noise."""
    t = np.arange(SAMPLES)[:, None] / RATE
    phase, w = np.arange(model.n)[None, :], 2 * np.pi * 0.3
    mid = 0.5 * (np.maximum(np.asarray(model.lower), -2) + np.minimum(np.asarray(model.upper), 2))
    q, qd, qdd = mid + 0.5 * np.sin(w * t + phase), 0.5 * w * np.cos(w * t + phase), -0.5 * w**2 * np.sin(w * t + phase)
    tau = np.asarray(payload_torques(model, PayloadLearner(model).link, jnp.asarray([PAYLOAD]), q, qd, qdd))[0]
    return q, qd, qdd, tau + 0.05 * np.random.default_rng(1).standard_normal(tau.shape)


def predictions(model, trajectory: Sample) -> dict[str, np.ndarray]:
    """Each learner's prior predictions over ``trajectory``, replayed in its dtype."""
    out = {}
    for kind in LEARNERS:
        learner = make_learner(kind, model)
        _, output = learners.replay(learner, learners.init(learner, trajectory.q.dtype), trajectory)
        out[kind] = np.asarray(output.prediction)
    return out


def precision_outputs(texts: dict) -> dict[str, np.ndarray]:
    """float32 outputs on JAX's default backend, with their float64 inputs."""
    out = {}
    for robot in ROBOTS:
        model = parse_urdf(texts[robot])
        q, qd, qdd = states(model, STATES, seed=0)
        tau = np.asarray(jax.jit(jax.vmap(rnea, in_axes=(None, 0, 0, 0)))(model, q, qd, qdd))  # the float64 torques
        out |= {f"{robot}/inputs/{k}": v for k, v in zip(("q", "qd", "qdd", "tau"), (q, qd, qdd, tau))}
        out |= {f"{robot}/{k}": v for k, v in dynamics_outputs(model, *(jnp.asarray(x, jnp.float32) for x in (q, qd, qdd, tau))).items()}
        trajectory = learner_trajectory(model)
        out |= {f"{robot}/trajectory/{k}": v for k, v in zip(("q", "qd", "qdd", "tau"), trajectory)}
        out |= {f"{robot}/{k}/prediction": v for k, v in predictions(model, Sample(*(jnp.asarray(x, jnp.float32) for x in trajectory))).items()}
    return out


def timed(compiled, args, repeats: int) -> float:
    """Median seconds of ``compiled(*args)``, each call waited for, after a warm-up call."""
    return median_us(lambda: jax.block_until_ready(compiled(*args)), repeats, warmup=1) / 1e6


def compile_and_time(fn, args, repeats: int, **options) -> dict:
    start = time.perf_counter()
    compiled = jax.jit(fn, **options).lower(*args).compile()
    compile_s = time.perf_counter() - start
    return {"compile_s": compile_s, "seconds": timed(compiled, args, repeats)}


def dynamics_throughput(texts: dict, sizes, deadline: float) -> list[dict]:
    """``vmap`` of (crba, nonlinear_effects, generalized_gravity) over Panda states."""
    model = parse_urdf(texts["panda"])
    rows = []
    for dtype in (jnp.float32, jnp.float64):
        for size in sizes:
            if time.perf_counter() > deadline:
                rows.append({"what": "dynamics", "dtype": dtype.dtype.name, "batch": size, "skipped": "time"})
                continue
            q, qd, _ = (jax.device_put(jnp.asarray(x, dtype)) for x in states(model, size, seed=3))
            fn = jax.vmap(lambda q, qd: (crba(model, q), nonlinear_effects(model, q, qd), generalized_gravity(model, q)))
            rows.append({"what": "dynamics", "dtype": dtype.dtype.name, "batch": size, **compile_and_time(fn, (q, qd), 10)})
    return rows


def mjx_throughput(texts: dict, sizes, deadline: float) -> list[dict]:
    """The same three quantities from MuJoCo MJX on the same Panda (fingers welded), vmapped over
    the same states: its smooth dynamics (``kinematics``, ``com_pos``, ``crb``, ``com_vel``,
    ``rne``; ``full_m`` for the dense M, ``rne`` at rest for g), which agree with
    :func:`~dense_armor.dynamics.crba` and the others to 1e-14 in float64."""
    try:
        import mujoco
        from mujoco import mjx
    except ImportError as error:
        return [{"what": "mjx", "skipped": f"mujoco-mjx does not import: {error}"}]
    m = mujoco.MjModel.from_xml_string(texts["panda_mujoco"])
    model = parse_urdf(texts["panda"])
    rows = []
    for dtype in (jnp.float32, jnp.float64):
        def cast(tree):
            floating = lambda a: hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating)  # noqa: E731
            return jax.tree.map(lambda a: a.astype(dtype) if floating(a) else a, tree)

        try:
            mx = cast(mjx.put_model(m))
            dx = cast(mjx.make_data(mx))
        except Exception as error:  # an MJX that refuses this model or dtype: recorded, not fatal
            rows.append({"what": "mjx", "dtype": dtype.dtype.name, "skipped": repr(error)[:300]})
            continue
        for size in sizes:
            if time.perf_counter() > deadline:
                rows.append({"what": "mjx", "dtype": dtype.dtype.name, "batch": size, "skipped": "time"})
                continue
            q, qd, _ = (jax.device_put(jnp.asarray(x, dtype)) for x in states(model, size, seed=3))

            def smooth(q, qd, mx=mx, dx=dx):
                d = dx.replace(qpos=q, qvel=qd)
                for stage in (mjx.kinematics, mjx.com_pos, mjx.crb, mjx.com_vel, mjx.rne):
                    d = stage(mx, d)
                gravity = mjx.rne(mx, mjx.com_vel(mx, d.replace(qvel=jnp.zeros_like(qd)))).qfrc_bias
                return mjx.full_m(mx, d), d.qfrc_bias, gravity

            try:
                rows.append({"what": "mjx", "dtype": dtype.dtype.name, "batch": size,
                             **compile_and_time(jax.vmap(smooth), (q, qd), 10)})
            except Exception as error:
                rows.append({"what": "mjx", "dtype": dtype.dtype.name, "batch": size, "skipped": repr(error)[:300]})
    return rows


def batch_program(learner, dtype, T: int):
    """``tau (V, T, n) -> (final weights, mean squared error) per variant``: one ``vmap`` of the
    learner's replay over payload variants, in blocks of :data:`BLOCK` samples."""
    state = learners.init(learner, dtype)

    def run(q, qd, qdd, tau):
        def block(carry, piece):
            state, sq = carry
            state, out = learners.replay(learner, state, Sample(*piece))
            return (state, sq + jnp.sum(out.error**2)), None

        pieces = tuple(a.reshape(T // BLOCK, BLOCK, -1) for a in (q, qd, qdd, tau))
        (state_, sq), _ = jax.lax.scan(block, (state, jnp.zeros((), dtype)), pieces)
        return state_.rls.w, sq / tau.size

    return jax.vmap(run, in_axes=(None, None, None, 0))


def learner_inputs(model, link, V: int, T: int, dtype):
    q, qd, qdd = (jnp.asarray(x, dtype) for x in states(model, T, seed=4))
    tau = payload_torques(model, link, jnp.linspace(0.0, 3.0, V, dtype=dtype), q, qd, qdd)
    return jax.device_put((q, qd, qdd, tau))


def learner_throughput(texts: dict, sizes, T: int, deadline: float) -> list[dict]:
    """The three learners replayed for V payload variants x T samples, one ``vmap``; the larger
    batch is skipped when the smaller one's time says it would not end before ``deadline``."""
    from dense_armor.compiler import OPTIONS

    model = parse_urdf(texts["panda"])
    link = PayloadLearner(model).link
    # XLA:CPU's default scheduler stalls on a large vmap of robot learners (docs/quickstart.md)
    options = {"compiler_options": OPTIONS} if jax.default_backend() == "cpu" else {}
    rows = []
    for kind in LEARNERS:
        learner = make_learner(kind, model)
        for dtype in (jnp.float32, jnp.float64):
            last = None
            for V in sizes:
                row = {"what": kind, "dtype": dtype.dtype.name, "batch": V, "samples": T}
                estimate = 0.0 if last is None else last["seconds"] * V / last["batch"] * 2 + last["compile_s"]
                if time.perf_counter() + estimate > deadline:
                    rows.append(row | {"skipped": f"time (estimated {estimate:.0f} s)"})
                    continue
                args = learner_inputs(model, link, V, T, dtype)
                last = row | compile_and_time(batch_program(learner, dtype, T), args, 1, **options)
                rows.append(last)
                print(json.dumps(last), flush=True)
    return rows


def sharded(texts: dict, V: int, T: int) -> dict:
    """A batch of payload learners sharded over every device of the backend, against one device."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    model = parse_urdf(texts["panda"])
    learner = make_learner("payload", model)
    q, qd, qdd, tau = learner_inputs(model, learner.link, V, T, jnp.float32)
    program = jax.jit(batch_program(learner, jnp.float32, T))
    mesh = jax.make_mesh((jax.device_count(),), ("variants",), axis_types=(jax.sharding.AxisType.Auto,))
    spread = jax.device_put(tau, NamedSharding(mesh, P("variants")))
    w_sharded, e_sharded = jax.block_until_ready(program(q, qd, qdd, spread))
    w_one, e_one = jax.block_until_ready(program(q, qd, qdd, tau))
    return {"devices": jax.device_count(), "platform": jax.default_backend(), "batch": V, "samples": T,
            "result_devices": len(w_sharded.sharding.device_set), "sharding": str(w_sharded.sharding),
            "max_weight_difference": float(jnp.max(jnp.abs(w_sharded - w_one))),
            "max_mse_difference": float(jnp.max(jnp.abs(e_sharded - e_one))),
            "seconds_sharded": timed(program, (q, qd, qdd, spread), 3), "seconds_one": timed(program, (q, qd, qdd, tau), 3)}


def environment() -> dict:
    device = jax.devices()[0]
    return {"backend": jax.default_backend(), "device": getattr(device, "device_kind", str(device)),
            "devices": jax.device_count(), "jax": jax.__version__, "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "machine": platform.machine()}


def measure(args) -> None:
    deadline = time.perf_counter() + args.budget
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    texts = robot_texts(args.robots)
    results = {"environment": environment()}
    print(json.dumps(results["environment"]), flush=True)
    if not args.skip_precision:
        start = time.perf_counter()
        np.savez_compressed(out / "precision.npz", **precision_outputs(texts))
        print(f"precision outputs in {time.perf_counter() - start:.1f} s", flush=True)
    if args.precision_only:
        return
    sections = {"sharding": lambda: sharded(texts, *args.shard), "dynamics": lambda: dynamics_throughput(texts, args.states, deadline),
                "learners": lambda: learner_throughput(texts, args.variants, args.samples, deadline),
                "mjx": lambda: mjx_throughput(texts, args.states, deadline)}
    for name, run in sections.items():
        results[name] = run()
        print(name, json.dumps(results[name]), flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))  # what a time-out leaves is kept


# --- report ---------------------------------------------------------------------------------


def relative(x, ref) -> float:
    """Largest difference over the reference's largest entry (floored at 1), as the CPU tests."""
    return float(np.max(np.abs(np.asarray(x, np.float64) - ref)) / max(float(np.max(np.abs(ref))), 1.0))


def precision_errors(outputs, texts) -> dict:
    """Each quantity's error against float64 computed here, on the CPU, from the same inputs."""
    cpu = jax.devices("cpu")[0]
    errors = {}
    with jax.default_device(cpu):
        for robot in ROBOTS:
            model = parse_urdf(texts[robot])
            q, qd, qdd, tau = (outputs[f"{robot}/inputs/{k}"] for k in ("q", "qd", "qdd", "tau"))
            f32 = [np.asarray(x, np.float32).astype(np.float64) for x in (q, qd, qdd, tau)]  # the rounded inputs
            ref = dynamics_outputs(model, *f32)
            for name in ("rnea", "crba", "regressor", "aba"):
                errors[f"{robot}/{name}"] = relative(outputs[f"{robot}/{name}"], ref[name])
            # aba's backward error: M qdd32 + h - tau, with the float64 M and h
            qdd32 = np.asarray(outputs[f"{robot}/aba"], np.float64)
            residual = np.einsum("bij,bj->bi", ref["crba"], qdd32) + ref["nle"] - f32[3]
            errors[f"{robot}/aba (backward)"] = float(np.max(np.abs(residual)) / max(np.max(np.abs(f32[3])), 1.0))
            trajectory = Sample(*(np.asarray(outputs[f"{robot}/trajectory/{k}"], np.float32).astype(np.float64)
                                  for k in ("q", "qd", "qdd", "tau")))
            tau64 = trajectory.tau
            rmse = lambda p: float(np.sqrt(np.mean((tau64[SAMPLES // 10:] - p[SAMPLES // 10:]) ** 2)))  # noqa: E731
            for kind, p64 in predictions(model, jax.tree.map(jnp.asarray, trajectory)).items():
                p32 = np.asarray(outputs[f"{robot}/{kind}/prediction"], np.float64)
                errors[f"{robot}/{kind}"] = {"max_difference": float(np.max(np.abs(p32 - p64))), "rmse_ratio": rmse(p32) / rmse(p64)}
    return errors


def load(directory: str) -> tuple[dict, dict]:
    d = Path(directory)
    results = json.loads((d / "results.json").read_text()) if (d / "results.json").exists() else {}
    return results, dict(np.load(d / "precision.npz"))


def report(args) -> None:
    texts = robot_texts(args.robots)
    gpu, gpu_out = load(args.gpu)
    cpu, cpu_out = load(args.cpu)
    columns = {"CPU float32": precision_errors(cpu_out, texts), "GPU float32": precision_errors(gpu_out, texts)}
    if args.before:
        columns = {"GPU float32, before": precision_errors(load(args.before)[1], texts), **columns}
    (Path(args.gpu) / "errors.json").write_text(json.dumps(columns, indent=1))
    body = render(gpu, cpu, columns)
    if args.no_docs:
        print(body)
    else:
        write_section("GPU", body, " ".join(["python benchmarks/gpu.py", *sys.argv[1:]]))


def render(gpu: dict, cpu: dict, columns: dict) -> str:
    env = gpu["environment"]
    names = list(columns)
    rows = []
    for key in next(iter(columns.values())):
        robot, quantity = key.split("/")
        if quantity in TOLERANCE:
            rows.append([robot, quantity, *(f"{columns[c][key]:.1e}" for c in names), f"{TOLERANCE[quantity]:.0e}"])
    learner_rows = []
    for key, value in columns[names[-1]].items():
        if isinstance(value, dict):
            robot, kind = key.split("/")
            learner_rows.append([robot, kind, *(f"{columns[c][key]['max_difference']:.1e} / {columns[c][key]['rmse_ratio']:.4f}" for c in names)])
    parts = [
        f"Device: {env['device']} ({env['devices']} device), jax {env['jax']}; the CPU columns on this machine "
        f"({cpu['environment']['cpu_count']} cores, jax {cpu['environment']['jax']}). Float64 references computed "
        "here on the CPU from the inputs saved with the GPU's outputs.",
        "### Precision: float32 against float64",
        "Relative error: the largest difference over the reference's largest entry (floored at 1), as in "
        "`tests/test_dynamics_pinocchio.py`, over 256 random states; the bound is that test's.",
        table(["robot", "quantity", *names, "bound"], rows),
        "Learners replayed in float32 on a 500-sample trajectory (the robot carrying 1.5 kg): the largest "
        "difference of the prediction from float64's, N m / the float32 RMSE over float64's.",
        table(["robot", "learner", *names], learner_rows),
        "### Throughput",
        render_throughput(gpu, cpu),
    ]
    if "sharding" in gpu:
        s = gpu["sharding"]
        parts += ["### Sharding", f"{s['batch']} Panda payload learners x {s['samples']} samples (float32), the "
                  f"batch sharded with `NamedSharding` over {s['devices']} {s['platform']} device(s): result on "
                  f"{s['result_devices']} device(s), largest difference from the unsharded batch {s['max_weight_difference']:.1e} "
                  f"(weights), {s['max_mse_difference']:.1e} (mean squared error); {s['seconds_sharded'] * 1e3:.1f} ms "
                  f"against {s['seconds_one'] * 1e3:.1f} ms unsharded."]
    return "\n\n".join(parts)


def render_throughput(gpu: dict, cpu: dict) -> str:
    def rate(row, per):
        if "skipped" in row:
            return "skipped"
        return f"{row['batch'] * per / row['seconds'] / 1e6:.3g} M/s ({row['compile_s']:.1f} s)"

    rows = []
    for section in ("dynamics", "mjx", "learners"):
        index = {}
        for name, results in (("GPU", gpu), ("CPU", cpu)):
            for row in results.get(section, []):
                if "batch" in row:
                    index.setdefault((row["what"], row["dtype"], row["batch"]), {})[name] = row
        for (what, dtype, batch), by in index.items():
            rows.append([what, dtype, f"{batch:,}", *(rate(by[n], by[n].get("samples", 1)) if n in by else "-" for n in ("GPU", "CPU"))])
    return ("States per second (dynamics and MJX: `(M, h, g)` for each) or learner samples per second, "
            "the compile time in brackets.\n\n" + table(["what", "dtype", "batch", "GPU", "CPU"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", required=True)
    m.add_argument("--robots")
    m.add_argument("--budget", type=float, default=300.0, help="seconds; later batches are skipped past it")
    m.add_argument("--precision-only", action="store_true")
    m.add_argument("--skip-precision", action="store_true")
    m.add_argument("--states", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    m.add_argument("--variants", type=int, nargs="+", default=[1_000, 10_000])
    m.add_argument("--samples", type=int, default=1_000)
    m.add_argument("--shard", type=int, nargs=2, default=[1_000, 200], metavar=("V", "T"))
    r = sub.add_parser("report")
    r.add_argument("gpu")
    r.add_argument("cpu")
    r.add_argument("--before")
    r.add_argument("--robots")
    r.add_argument("--no-docs", action="store_true")
    w = sub.add_parser("write-robots")
    w.add_argument("directory")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # float64 where asked; every array here has its dtype given
    if args.command == "measure":
        measure(args)
    elif args.command == "report":
        report(args)
    else:
        Path(args.directory).mkdir(parents=True, exist_ok=True)
        for name, text in robot_texts(None).items():
            (Path(args.directory) / f"{name}.urdf").write_text(text)


if __name__ == "__main__":
    main()
