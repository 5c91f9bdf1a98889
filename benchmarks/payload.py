"""The payload benchmark (SPEC section 4) and the payload learner's rows of the issue's targets.

    PYTHONPATH=src python benchmarks/payload.py [--quick]

1. Seed benchmark (design document section 4): two-link arm, real robot with a 0.5 kg payload,
   ``default_rng(0).uniform(-1, 1, (40, 3, 2))`` to learn and ``(20, 3, 2)`` to test; RMSE
   against the real (noise-free) torque; noise-free, and with sigma = 0.01 N m on the learned
   torques (``default_rng(1000 + k)``, k = 0-19). URDF alone, the five-feature learner and the
   payload learner (with and without its friction columns).
2. Payload benchmark: Panda (fingers locked) and UR5 carry a payload of known mass, centre of
   mass and inertia (rotated box) on a link behind the last joint (``panda_hand``, ``tool0``),
   plus viscous and Coulomb friction on every joint; measured torques with noise sigma =
   0.05 N m. Excitation: i.i.d. random states (q uniform within the joint limits, capped at
   +-pi; qd, qdd uniform in [-1, 1]) and a smooth multi-sine (5 harmonics of 0.1 Hz per joint,
   sampled at 100 Hz). Reported: samples until the payload mass stays within 1 % and the
   held-out torque RMSE against measured torques (200 held-out samples, fresh noise) stays
   within 2x the noise floor (2 sigma), median and worst over 10 seeds; final errors.
3. Covariance wind-up protocol (issue 4 part 3, as benchmarks/drift.py): 200 exciting samples,
   2000 at rest (q held, qd = qdd = 0), 200 exciting; payload and friction on the real robot;
   sigma = 0.01; seeds 0-19.
4. Drift targets (issue 4 part 2) of the payload learner with the innovation trigger as its
   wrapper configures it (``trigger="innovation"``: ``reopen = 100``), seeds 0-199, using
   benchmarks/drift.py's data and scoring.

Writes the tables to docs/benchmarks.md, section "Payload learner".
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import robots, table, write_section  # noqa: E402

from dense_armor import attach_payload, learners, parse_urdf, payload_parameters  # noqa: E402
from dense_armor.dynamics import rnea  # noqa: E402
from dense_armor.learners import ResidualLearner, Sample  # noqa: E402
from dense_armor.payload import PayloadLearner, payload_estimate  # noqa: E402
from dense_armor.robots import minimal_urdf  # noqa: E402
from dense_armor.utility.learn.online_dynamics import PayloadResidualDynamicsLearner  # noqa: E402

HEADING = "Payload learner"
_torques = jax.jit(jax.vmap(rnea, in_axes=(None, 0, 0, 0)))


def _rotation(rpy):
    r, p, y = rpy
    Rx = np.array([[1, 0, 0], [0, np.cos(r), -np.sin(r)], [0, np.sin(r), np.cos(r)]])
    Ry = np.array([[np.cos(p), 0, np.sin(p)], [0, 1, 0], [-np.sin(p), 0, np.cos(p)]])
    Rz = np.array([[np.cos(y), -np.sin(y), 0], [np.sin(y), np.cos(y), 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def _box(mass, size, rpy):
    """Rotational inertia about the centre of a box (x, y, z edges), rotated by ``rpy``."""
    a, b, c = size
    I = mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    R = _rotation(rpy)
    return R @ I @ R.T


PAYLOADS = {
    "Panda": dict(link="panda_hand", mass=1.5, com=np.array([0.01, -0.02, 0.08]), inertia=_box(1.5, (0.08, 0.12, 0.06), (0.3, 0.2, -0.4))),
    "UR5": dict(link="tool0", mass=2.0, com=np.array([0.02, -0.01, 0.06]), inertia=_box(2.0, (0.1, 0.1, 0.12), (-0.2, 0.4, 0.1))),
}
SIGMA = 0.05


# --- 1. seed benchmark --------------------------------------------------------------------


@jax.jit
def _fit(learner, trajectory, test):
    state, _ = learners.replay(learner, learner.init(jnp.float64), trajectory)
    predictions = jax.vmap(lambda q, qd, qdd: learner.predict(state, q, qd, qdd))(*test)
    return state, predictions


_fit_batch = jax.jit(jax.vmap(_fit, in_axes=(None, 0, None)))
_estimate_batch = jax.jit(jax.vmap(payload_estimate, in_axes=(None, 0)))


def seed_benchmark(print_=print) -> str:
    nominal, real = parse_urdf(minimal_urdf()), parse_urdf(minimal_urdf(payload_mass=0.5))
    rng = np.random.default_rng(0)
    train = rng.uniform(-1, 1, (40, 3, 2)).transpose(1, 0, 2)
    test = rng.uniform(-1, 1, (20, 3, 2)).transpose(1, 0, 2)
    tau, tau_test = np.asarray(_torques(real, *train)), np.asarray(_torques(real, *test))
    noise = 0.01 * np.stack([np.random.default_rng(1000 + k).standard_normal(tau.shape) for k in range(20)])
    batch = Sample(*(np.broadcast_to(a, (21, *a.shape)) for a in train), np.concatenate([tau[None], tau + noise]))
    rmse = lambda pred: np.sqrt(np.mean((np.asarray(pred) - tau_test) ** 2, axis=(-2, -1)))
    rows = [["URDF alone", f"{rmse(_torques(nominal, *test)):.3f}", "-", "-", "-", "-"]]
    subjects = {
        "five-feature learner (lam = 1)": ResidualLearner(nominal),
        "payload learner (friction: viscous, Coulomb, offset)": PayloadLearner(nominal),
        "payload learner (friction=False)": PayloadLearner(nominal, friction=False),
    }
    for name, learner in subjects.items():
        states, predictions = _fit_batch(learner, batch, test)
        r = rmse(predictions)
        cells = [f"{r[0]:.2e}" if r[0] < 1e-3 else f"{r[0]:.3f}", f"{r[1:].mean():.4f} / {r[1:].max():.4f}", f"{(r[1:] <= 4e-3).sum()} of 20"]
        if isinstance(learner, PayloadLearner):
            report = _estimate_batch(learner, states)
            mass = np.abs(np.asarray(report.mass) - 0.5)
            cells += [f"{mass[0]:.1e}", f"{mass[1:].max():.4f} ({int(report.identifiable[0])} of 10 identifiable)"]
        else:
            cells += ["-", "-"]
        rows.append([name, *cells])
    text = table(
        ["seed benchmark", "RMSE noise-free (N m)", "RMSE sigma = 0.01, mean / worst of 20", "draws <= 4e-3",
         "mass error noise-free (kg)", "mass error sigma = 0.01, worst (kg)"],
        rows,
    )
    print_(text)
    return text


# --- 2. Panda and UR5 ----------------------------------------------------------------------


def _random_states(model, count, rng):
    lo = np.maximum(np.asarray(model.lower), -np.pi)
    hi = np.minimum(np.asarray(model.upper), np.pi)
    q = rng.uniform(lo, hi, (count, model.n))
    qd, qdd = rng.uniform(-1, 1, (2, count, model.n))
    return q, qd, qdd


def _multisine(model, count, rng, rate=100.0, base=0.1, harmonics=5):
    """Smooth excitation: per joint, ``q = c + sum_k A_k sin(2 pi k base t + phi_k)``."""
    lo = np.maximum(np.asarray(model.lower), -np.pi)
    hi = np.minimum(np.asarray(model.upper), np.pi)
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    amplitude = np.minimum(0.8, 0.6 * half)
    k = np.arange(1, harmonics + 1)
    A = rng.uniform(0.2, 1.0, (model.n, harmonics)) / k
    A = A / A.sum(axis=1, keepdims=True) * amplitude[:, None]
    phi = rng.uniform(0, 2 * np.pi, (model.n, harmonics))
    t = np.arange(count)[:, None, None] / rate
    w = 2 * np.pi * base * k
    arg = w * t + phi
    q = centre + np.sum(A * np.sin(arg), axis=-1)
    qd = np.sum(A * w * np.cos(arg), axis=-1)
    qdd = -np.sum(A * w * w * np.sin(arg), axis=-1)
    return q, qd, qdd


def _trace(learner, trajectory, test, measured, true, every):
    """Replay; the mass estimate after every sample; the held-out RMSE against the measured
    torques after every ``every``-th sample; the RMSE against the true torques at the end."""

    def body(state, sample):
        state, _ = learner.step(state, sample)
        return state, state.rls.w

    state, w = jax.lax.scan(body, learner.init(jnp.float64), trajectory)
    X, nominal = jax.vmap(lambda q, qd, qdd: learner.features(q, qd, qdd, jnp.float64))(*test)
    predictions = nominal[None] + jnp.einsum("hnp,tp->thn", X, w[every - 1 :: every])
    rmse = jnp.sqrt(jnp.mean((predictions - measured) ** 2, axis=(1, 2)))
    final = jnp.sqrt(jnp.mean((predictions[-1] - true) ** 2))
    return state, w[:, 0], rmse, final


@partial(jax.jit, static_argnums=5)
def _trace_batch(learner, trajectories, tests, measured, true, every):
    """:func:`_trace` over seeds."""
    return jax.vmap(lambda t, h, m, y: _trace(learner, t, h, m, y, every))(trajectories, tests, measured, true)


@jax.jit
def _five_feature(learner, trajectory, test):
    return _fit(learner, trajectory, test)[1]


_five_feature_batch = jax.jit(jax.vmap(_five_feature, in_axes=(None, 0, 0)))


def _stays(ok):
    """Per seed, the first index from which ``ok`` (S, K) holds to the end (K if never)."""
    bad = ~ok
    last_bad = np.where(bad.any(axis=1), ok.shape[1] - 1 - np.argmax(bad[:, ::-1], axis=1), -1)
    return last_bad + 1


def robot_benchmark(quick: bool, print_=print) -> str:
    seeds = range(4 if quick else 10)
    rows = []
    for name in ("Panda", "UR5"):
        nominal = parse_urdf(robots()[name])
        spec = PAYLOADS[name]
        real = attach_payload(nominal, spec["link"], spec["mass"], spec["com"], spec["inertia"])
        friction = np.random.default_rng(7)
        viscous, coulomb = friction.uniform(0.1, 0.5, nominal.n), friction.uniform(0.2, 1.0, nominal.n)
        learner = jax.tree.map(jnp.asarray, PayloadLearner(nominal, spec["link"]))
        five = jax.tree.map(jnp.asarray, ResidualLearner(nominal))
        count, every = (1000 if quick else 2000), 2
        for excitation in ("random states", "multi-sine, 100 Hz"):
            make = _random_states if excitation == "random states" else _multisine
            data, tests = [], []
            for s in seeds:
                rng = np.random.default_rng(s)
                q, qd, qdd = make(nominal, count, rng)
                # Held out: 200 states of the same kind (for the multi-sine, spread over one
                # period of another multi-sine).
                tq, tqd, tqdd = make(nominal, 200, np.random.default_rng(10_000 + s)) if excitation == "random states" else (
                    a[::5] for a in _multisine(nominal, 1000, np.random.default_rng(10_000 + s)))
                true = lambda q, qd, qdd: np.asarray(_torques(real, q, qd, qdd)) + viscous * qd + coulomb * np.sign(qd)
                tau = true(q, qd, qdd) + SIGMA * rng.standard_normal((count, nominal.n))
                measured = true(tq, tqd, tqdd) + SIGMA * np.random.default_rng(20_000 + s).standard_normal((200, nominal.n))
                data.append(Sample(q, qd, qdd, tau))
                tests.append((tq, tqd, tqdd, measured, true(tq, tqd, tqdd)))
            batch = Sample(*(np.stack(a) for a in zip(*data)))
            test = tuple(np.stack(a) for a in zip(*tests))
            start = time.perf_counter()
            states, mass, rmse, final = jax.block_until_ready(_trace_batch(learner, batch, test[:3], test[3], test[4], every))
            elapsed = time.perf_counter() - start
            mass_ok = np.abs(np.asarray(mass) - spec["mass"]) <= 0.01 * spec["mass"]
            rmse_ok = np.asarray(rmse) <= 2 * SIGMA  # (S, K)
            n_mass = _stays(mass_ok) + 1
            n_rmse = (_stays(rmse_ok) + 1) * every
            n_both = np.maximum(n_mass, n_rmse)
            report = _estimate_batch(learner, states)
            com_err = np.linalg.norm(np.asarray(report.com) - spec["com"], axis=1)
            inertia_err = np.abs(np.asarray(report.inertia) - spec["inertia"]).max(axis=(1, 2))
            pi_true = np.asarray(payload_parameters(spec["mass"], spec["com"], spec["inertia"]))
            z = (np.asarray(report.parameters) - pi_true) / np.asarray(report.parameters_std)
            final = np.asarray(final)
            five_pred = _five_feature_batch(five, batch, test[:3])
            five_rmse = np.sqrt(np.mean((np.asarray(five_pred) - test[4]) ** 2, axis=(1, 2)))
            fmt = lambda v: f"{int(np.median(v))} / {int(v.max())}" if (v <= count).all() else f"{int(np.median(v))} / not within {count}"
            rows.append([
                f"{name} ({nominal.n} joints, p = {learner.num_parameters})", excitation, f"{spec['mass']} kg on {spec['link']}",
                fmt(n_mass), fmt(n_rmse), fmt(n_both),
                f"{np.abs(np.asarray(report.mass) - spec['mass']).max() / spec['mass'] * 100:.2f} %",
                f"{com_err.max() * 1000:.1f}", f"{inertia_err.max():.1e}", f"{np.sqrt(np.mean(z**2)):.2f}",
                f"{final.mean():.4f}", f"{five_rmse.mean():.3f}",
                f"{int(np.min(report.identifiable))}", f"{elapsed:.1f} s",
            ])
            print_(" | ".join(rows[-1]), flush=True)
    text = table(
        ["robot", "excitation", "payload", "samples: mass within 1 % (median / worst)",
         "samples: RMSE <= 2 sigma", "samples: both", "mass error at the end (worst)",
         "com error (mm, worst)", "inertia error (kg m^2, worst)", "error / reported std, RMS over the 10 parameters",
         "RMSE vs true torque at the end (N m)",
         "five-feature learner, same data (N m)", "payload parameters identifiable", "time (first row: compiles)"],
        rows,
    )
    return text


# --- 3. wind-up ------------------------------------------------------------------------------


@jax.jit
def _windup(learner, s, tau, truth):
    def body(state, x):
        state, out = learner.step(state, Sample(*x[:4]))
        return state, out.prediction - x[4]

    data = (*s, tau, truth)
    state, before = jax.lax.scan(body, learner.init(jnp.float64), jax.tree.map(lambda a: a[:2200], data))
    _, after = jax.lax.scan(body, state, jax.tree.map(lambda a: a[2200:], data))
    return jnp.concatenate([before, after]), state.rls.P


def windup(print_=print) -> str:
    nominal, real = parse_urdf(minimal_urdf()), parse_urdf(minimal_urdf(payload_mass=0.5))
    runs = []
    for k in range(20):
        rng = np.random.default_rng(k)
        a, b = rng.uniform(-1, 1, (200, 3, 2)), rng.uniform(-1, 1, (200, 3, 2))
        rest = np.zeros((2000, 3, 2))
        rest[:, 0] = a[-1, 0]
        s = np.concatenate([a, rest, b]).transpose(1, 0, 2)
        truth = np.asarray(_torques(real, *s)) + 0.2 * s[1] + 0.1 * np.sign(s[1])
        runs.append((s, truth + 0.01 * np.random.default_rng(1000 + k).standard_normal(truth.shape), truth))
    s, tau, truth = (np.stack(x) for x in zip(*runs))
    lams = np.array([0.95, 0.98, 0.99])
    excited = [0, 1, 2, 9, *range(10, 16)]
    rows = []
    for forgetting in ("directional", "exponential"):
        batch = jax.vmap(lambda lam: PayloadLearner(nominal, lam=lam, forgetting=forgetting))(jnp.asarray(lams))
        run = jax.vmap(jax.vmap(_windup, in_axes=(None, 0, 0, 0)), in_axes=(0, None, None, None))
        error, P = (np.asarray(a) for a in run(batch, s, tau, truth))
        trace = np.trace(P[..., excited, :][..., excited], axis1=-2, axis2=-1)
        for i, lam in enumerate(lams):
            after = np.abs(error[i, :, 2200:2250])
            worst = after.max(axis=(1, 2))
            rows.append([
                f"{lam}", forgetting + (" (default)" if forgetting == "directional" else " (textbook)"),
                f"{trace[i].max():.3g}", f"{np.sqrt(np.mean(after**2, axis=(1, 2))).mean():.4f}",
                f"{worst.max():.4f}", f"{int((worst <= 0.01).sum())} of 20",
            ])
    text = table(
        ["lam", "forgetting", "trace of P, excited block, end of rest (max)", "RMSE 50 samples after motion resumes (mean)",
         "worst abs error there (N m)", "seeds <= 0.01 N m"],
        rows,
    )
    print_(text)
    return text


# --- 4. drift targets ------------------------------------------------------------------------


def drift_targets(quick: bool, print_=print) -> str:
    import drift as D

    seeds = range(40 if quick else 200)
    trajectory, true = D.drift_data(seeds, 0.01)
    small, small_true = D.drift_data(range(50), 0.01, scale=0.1)
    base = D.evaluate(PayloadLearner(D.NOMINAL), trajectory, true)
    learner = PayloadResidualDynamicsLearner(D.NOMINAL, trigger="innovation").learner
    r, sm = D.evaluate(learner, trajectory, true), D.evaluate(learner, small, small_true)
    w = r["rmse"]
    delay = sm["detect"] - D.CHANGE
    rows = [
        ["false alarms before 200", "0 on every seed", f"{int(r['false'].sum())}"],
        ["first alarm at or after 200", "200 (<= 202) on every seed", D._fmt_first(r["detect"])],
        ["RMSE 200-229 (mean / worst)", "<= 0.15 / 0.22", f"{w[(200, 230)].mean():.4f} / {w[(200, 230)].max():.4f}"],
        ["RMSE 230-299 (mean / worst)", "<= 0.005", f"{w[(230, 300)].mean():.4f} / {w[(230, 300)].max():.4f}"],
        ["RMSE 300-399 (mean / worst)", "<= 0.003", f"{w[(300, 400)].mean():.4f} / {w[(300, 400)].max():.4f}"],
        ["RMSE 150-199 vs payload learner at lam = 1 (mean)", "no worse", f"{w[(150, 200)].mean():.5f} vs {base['rmse'][(150, 200)].mean():.5f}"],
        ["10 % change: delay, every seed of 50", "<= 10", D._fmt_first(delay) if (delay >= 0).all() else f"missed on {(delay < 0).sum()}"],
    ]
    text = table([f"payload learner + innovation, seeds 0-{seeds[-1]}, sigma = 0.01", "target", "measured"], rows)
    print_(text)
    return text


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds and samples (a smoke run)")
    parser.add_argument("--no-docs", action="store_true", help="print only, do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    parts = [
        ("Seed benchmark (design document section 4)", seed_benchmark()),
        ("Panda and UR5 with a payload", robot_benchmark(args.quick)),
        ("Covariance wind-up (issue 4 part 3)", windup()),
        ("Drift targets (issue 4 part 2)", drift_targets(args.quick)),
    ]
    total = time.perf_counter() - start
    print(f"total {total:.0f} s")
    body = "\n\n".join(f"### {title}\n\n{text}" for title, text in parts)
    if not args.no_docs and not args.quick:
        write_section(HEADING, NOTES + "\n\n" + body + f"\n\nTotal run time {total:.0f} s.", "PYTHONPATH=src python benchmarks/payload.py")


NOTES = """\
`PayloadLearner` (`dense_armor.payload`; wrapper `PayloadResidualDynamicsLearner`): the 10
inertial parameters of the payload's body, in the payload link's frame, plus per-joint viscous,
Coulomb and offset friction; one RLS over the stacked joint equations; block directional
forgetting when `lam < 1`. Prequential scoring; torques in N m. Definitions of every column are
in the docstring of `benchmarks/payload.py`.

- Seed benchmark: noise-free, the payload learner's error is the prior's (`delta = 1e6`)
  shrinkage, 2e-8 N m, and the mass is 0.5 kg to 8e-8 (targets 1e-7 and 1e-6). With sigma =
  0.01 the held-out RMSE is about `sigma sqrt(p / rows)`: 10 excited parameters (4 payload, 6
  friction) from 80 equations give 0.0034 on average over 20 noise draws, 0.0021 without the
  friction columns; single draws reach 0.0055 (target 4e-3: met on average, not on every
  draw). The mass stays within 0.02 kg on every draw. The arm's joint axes are parallel to
  gravity, so only `m`, `m c_x`, `m c_y`, `I_zz` are identifiable: the report flags the other
  six, which stay exactly at the prior.
- Panda and UR5: with random states the payload mass is within 1 % after 5-9 samples and the
  held-out RMSE within 2 sigma after about 10; with a smooth multi-sine at 100 Hz the mass
  takes 150-320 samples and both criteria 220-350 (2.2-3.5 s of motion). All 10 payload
  parameters are identifiable on both arms. The inertia about the centre of mass is the
  hardest part (errors of about 1e-3 kg m^2 for a payload whose inertia is a few 1e-3, at
  sigma = 0.05 N m); the reported standard deviations are
  calibrated (error / std has an RMS of about 1). The five-feature learner cannot represent a
  payload on a 6-7 joint arm: 0.8-1.9 N m on the same data.
- Wind-up: with directional forgetting the excited block of `P` stays below 1 and unexcited
  directions keep their prior covariance exactly; the textbook update reaches 1e45. After
  motion resumes the worst error is 0.0073 N m at `lam = 0.98`; at `lam = 0.95` (a memory of
  about 20 samples) one seed of 20 reaches 0.0103 (issue target 0.01).
- Drift: the innovation trigger with `reopen = 100` meets the targets except the worst seed
  over samples 230-299, 0.0053 against 0.005 (mean 0.0030); a payload learner restarted
  exactly at sample 200 on the post-change data alone has the same worst seed, 0.0054, so the
  limit is the 10 parameters' noise, not the detector or the response.
"""


if __name__ == "__main__":
    main()
