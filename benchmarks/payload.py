"""The payload benchmark (SPEC section 4) and the payload learner's rows of the issue's targets.

    PYTHONPATH=src python benchmarks/payload.py [--quick]

1. Seed benchmark (design document section 4): two-link arm, real robot with a 0.5 kg payload,
   ``default_rng(0).uniform(-1, 1, (40, 3, 2))`` to learn and ``(20, 3, 2)`` to test; RMSE
   against the real (noise-free) torque; noise-free, and with sigma = 0.01 N m on the learned
   torques (``default_rng(1000 + k)``, k = 0-19). URDF alone, the five-feature learner and the
   payload learner (all friction columns, viscous and Coulomb, none). Also the mean RMSE and
   the share of draws above 4e-3 over draws k = 0-999.
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
   Also the same motion and noise without the rest (reference), and both readings of the
   issue's "worst error": the worst seed's RMSE and the largest single error.
4. Drift targets (issue 4 part 2) of the payload learner with the innovation trigger as its
   wrapper configures it (``trigger="innovation"``: ``reopen = 100``), with the default friction
   columns and with viscous and Coulomb only, seeds 0-199, using benchmarks/drift.py's data and
   scoring; and the bound of a learner restarted exactly at the change with a flat prior.
5. float32 against float64 over 10^5 samples at ``lam = 0.99`` (issue 4 part 4; as
   tests/test_payload.py), ``delta`` 1e6 and 1e3, textbook and Joseph covariance forms.

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
from protocols import (  # noqa: E402
    CHANGE, NOMINAL, VERTICAL, drift_batch, precision_trajectory, seed_data, seed_noise, windup_batch, windup_errors,
)

from dense_armor import attach_payload, learners, parse_urdf, payload_parameters  # noqa: E402
from dense_armor.dynamics import rnea  # noqa: E402
from dense_armor.learners import ResidualLearner, Sample  # noqa: E402
from dense_armor.payload import PayloadLearner, payload_estimate  # noqa: E402
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
DRAWS = 1000  # noise draws for the seed benchmark's tail probability (the table's columns use 0-19)


# --- 1. seed benchmark --------------------------------------------------------------------


@jax.jit
def _fit(learner, trajectory, test):
    state, _ = learners.replay(learner, learner.init(jnp.float64), trajectory)
    predictions = jax.vmap(lambda q, qd, qdd: learner.predict(state, q, qd, qdd))(*test)
    return state, predictions


_fit_batch = jax.jit(jax.vmap(_fit, in_axes=(None, 0, None)))
_estimate_batch = jax.jit(jax.vmap(payload_estimate, in_axes=(None, 0)))


def seed_benchmark(print_=print) -> str:
    nominal, _, train, tau, test, tau_test = seed_data()
    # Noise draws k = 0-19 (the benchmark) and k = 0-999 (the tail probability), each
    # default_rng(1000 + k) on the 40 learned torques.
    noise = seed_noise(tau.shape, DRAWS)
    batch = Sample(*(np.broadcast_to(a, (DRAWS + 1, *a.shape)) for a in train), np.concatenate([tau[None], tau + noise]))
    rmse = lambda pred: np.sqrt(np.mean((np.asarray(pred) - tau_test) ** 2, axis=(-2, -1)))
    rows = [["URDF alone", f"{rmse(_torques(nominal, *test)):.3f}", "-", "-", "-", "-", "-"]]
    subjects = {
        "five-feature learner (lam = 1)": ResidualLearner(nominal),
        "payload learner, default (friction: viscous, Coulomb, offset)": PayloadLearner(nominal),
        "payload learner, friction=('viscous', 'coulomb')": PayloadLearner(nominal, friction=("viscous", "coulomb")),
        "payload learner, friction=False (the seed arm's structure: payload only)": PayloadLearner(nominal, friction=False),
    }
    for name, learner in subjects.items():
        states, predictions = _fit_batch(learner, batch, test)
        r_all = rmse(predictions)
        r = r_all[:21]
        cells = [
            f"{r[0]:.2e}" if r[0] < 1e-3 else f"{r[0]:.3f}", f"{r[1:].mean():.4f} / {r[1:].max():.4f}",
            f"{(r[1:] <= 4e-3).sum()} of 20", f"{r_all[1:].mean():.4f} / {(r_all[1:] > 4e-3).mean() * 100:.1f} %",
        ]
        states = jax.tree.map(lambda a: a[:21], states)
        if isinstance(learner, PayloadLearner):
            report = _estimate_batch(learner, states)
            mass = np.abs(np.asarray(report.mass) - 0.5)
            cells += [f"{mass[0]:.1e}", f"{mass[1:].max():.4f} ({int(report.identifiable[0])} of 10 identifiable)"]
        else:
            cells += ["-", "-"]
        rows.append([name, *cells])
    text = table(
        ["seed benchmark", "RMSE noise-free (N m)", "RMSE sigma = 0.01, mean / worst of 20", "draws <= 4e-3",
         f"{DRAWS} draws: mean RMSE / share > 4e-3",
         "mass error noise-free (kg)", "mass error sigma = 0.01, worst of 20 (kg)"],
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


def windup(print_=print) -> str:
    lams = np.array([0.95, 0.98, 0.99])
    excited = [0, 1, 2, 9, *range(10, 16)]
    rows = []
    for rest_length in (2000, 0):
        # The protocol, and the same motion and noise without the rest (the error the learner
        # makes anyway at that forgetting factor).
        trajectory, truth = windup_batch(range(20), rest=rest_length)
        resume = 200 + rest_length
        for forgetting in ("directional", "exponential") if rest_length else ("directional",):
            batch = jax.vmap(lambda lam: PayloadLearner(NOMINAL, lam=lam, forgetting=forgetting))(jnp.asarray(lams))
            one = lambda learner, trajectory, truth: windup_errors(learner, trajectory, truth, resume)  # noqa: E731
            run = jax.vmap(jax.vmap(one, in_axes=(None, 0, 0)), in_axes=(0, None, None))
            error, P = (np.asarray(a) for a in run(batch, trajectory, truth))
            trace = np.trace(P[..., excited, :][..., excited], axis1=-2, axis2=-1)
            for i, lam in enumerate(lams):
                after = error[i, :, resume : resume + 50]
                worst = np.abs(after).max(axis=(1, 2))
                per_seed = np.sqrt(np.mean(after**2, axis=(1, 2)))
                rows.append([
                    f"{lam}", forgetting + (" (default)" if forgetting == "directional" else " (textbook)"),
                    "2000 samples" if rest_length else "none (reference)",
                    f"{trace[i].max():.3g}" if rest_length else "-",
                    f"{per_seed.mean():.4f} / {per_seed.max():.4f}",
                    f"{worst.max():.4f}", f"{int((worst <= 0.01).sum())} of 20",
                ])
    text = table(
        ["lam", "forgetting", "rest", "trace of P, excited block, end of rest (max)",
         "RMSE 50 samples after motion resumes, per seed (mean / worst)",
         "max abs error there, worst seed (N m)", "seeds with max abs error <= 0.01 N m"],
        rows,
    )
    print_(text)
    return text


# --- 4. drift targets ------------------------------------------------------------------------


def drift_targets(quick: bool, print_=print) -> str:
    import drift as D

    seeds = range(40 if quick else 200)
    trajectory, true = drift_batch(seeds, 0.01)
    small, small_true = drift_batch(range(50), 0.01, scale=0.1)
    subjects = {
        "default (viscous, Coulomb, offset)": (
            PayloadResidualDynamicsLearner(NOMINAL, trigger="innovation").learner, PayloadLearner(NOMINAL)),
        "friction=('viscous', 'coulomb')": (
            D.payload_learner_viscous_coulomb(), PayloadLearner(NOMINAL, friction=("viscous", "coulomb"))),
    }
    columns = {}
    for name, (learner, plain) in subjects.items():
        base = D.evaluate(plain, trajectory, true)
        r, sm = D.evaluate(learner, trajectory, true), D.evaluate(learner, small, small_true)
        bound = D.restarted(plain, trajectory, true)
        w = r["rmse"]
        delay = sm["detect"] - CHANGE
        columns[name] = [
            f"{int(r['false'].sum())}",
            D._fmt_first(r["detect"]),
            f"{w[(200, 230)].mean():.4f} / {w[(200, 230)].max():.4f}",
            f"{w[(230, 300)].mean():.4f} / {w[(230, 300)].max():.4f}",
            f"{w[(300, 400)].mean():.4f} / {w[(300, 400)].max():.4f}",
            f"{bound[(230, 300)].mean():.4f} / {bound[(230, 300)].max():.4f}",
            f"{w[(150, 200)].mean():.5f} vs {base['rmse'][(150, 200)].mean():.5f}",
            D._fmt_first(delay) if (delay >= 0).all() else f"missed on {(delay < 0).sum()}",
        ]
    targets = [
        ("false alarms before 200", "0 on every seed"),
        ("first alarm at or after 200", "200 (<= 202) on every seed"),
        ("RMSE 200-229 (mean / worst)", "<= 0.15 / 0.22"),
        ("RMSE 230-299 (mean / worst)", "<= 0.005"),
        ("RMSE 300-399 (mean / worst)", "<= 0.003"),
        ("bound: restarted exactly at 200, flat prior, RMSE 230-299", "(reported)"),
        ("RMSE 150-199 vs the same learner at lam = 1 without trigger (mean)", "no worse"),
        ("10 % change: delay, every seed of 50", "<= 10"),
    ]
    rows = [[what, target, *(columns[name][i] for name in subjects)] for i, (what, target) in enumerate(targets)]
    text = table(
        [f"payload learner + innovation (reopen = 100), seeds 0-{seeds[-1]}, sigma = 0.01", "target",
         *(f"friction: {name}" for name in subjects)],
        rows,
    )
    print_(text)
    return text


# --- 5. float32 ----------------------------------------------------------------------------


@partial(jax.jit, static_argnums=3)
def _replay_chunks(learner, state, traj, first):
    """Predictions at every sample, ``P`` after each of the first ``first`` samples and after
    every 10th sample (``traj`` reshaped to (chunks, 10, ...))."""
    step = lambda s, x: learner.step(s, x)  # noqa: E731
    head = jax.tree.map(lambda a: a[0], traj)

    def early(s, x):
        s, o = step(s, x)
        return s, (o.prediction, s.rls.P)

    _, (_, P_first) = jax.lax.scan(early, state, jax.tree.map(lambda a: a[:first], head))

    def chunk(s, xs):
        s, o = jax.lax.scan(step, s, xs)
        return s, (o.prediction, s.rls.P)

    _, (prediction, P) = jax.lax.scan(chunk, state, traj)
    return prediction, P, P_first


def float32_study(print_=print) -> str:
    """float32 vs float64, lam = 0.99, 10^5 samples, the arm in a vertical plane, payload and
    friction, sigma = 0.01 (as tests/test_payload.py)."""
    T = 100_000
    traj = jax.tree.map(lambda a: a.reshape(T // 10, 10, *a.shape[1:]), precision_trajectory(T))
    traj32 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), traj)
    rows = []
    for delta in (1e6, 1e3):
        for joseph in (False, True):
            learner = PayloadLearner(VERTICAL, lam=0.99, delta=delta, joseph=joseph)
            p64 = np.asarray(_replay_chunks(learner, learner.init(jnp.float64), traj, 10)[0]).reshape(T, 2)
            p32, P32, P_first = (np.asarray(a, np.float64) for a in _replay_chunks(learner, learner.init(jnp.float32), traj32, 10))
            diff = np.abs(p32.reshape(T, 2) - p64).max(axis=-1)
            ratio = lambda P: (lambda e: e.min(-1) / e.max(-1))(np.linalg.eigvalsh(P))  # noqa: E731
            early, later = ratio(P_first), ratio(P32)
            indefinite = np.flatnonzero(early < 0)
            rows.append([
                f"{delta:g}", "Joseph" if joseph else "textbook (default)",
                str(bool(np.isfinite(p32).all() and np.isfinite(P32).all())),
                str(bool((P32 == np.swapaxes(P32, -1, -2)).all())),
                f"{early.min():.1e}" + (f" (samples {indefinite.min()}-{indefinite.max()} indefinite)" if indefinite.size else ""),
                f"{later.min():.1e}",
                f"{diff[:1000].max():.1e}", f"{diff[1000:].max():.1e}",
            ])
    text = table(
        ["delta", "covariance form", "finite", "P symmetric", "min eig / max eig of P, samples 0-9",
         "same after samples 9, 19, ... (10^4 checks)", "max abs(pred32 - pred64), samples 0-999 (N m)", "samples 1000-99999"],
        rows,
    )
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
        ("float32 vs float64 over 10^5 samples (issue 4 part 4)", float32_study()),
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
  0.01 the held-out RMSE is about `sigma sqrt(p / rows)` for `p` excited parameters and 80
  equations. The seed arm's real robot is the payload alone (SPEC: `payload_mass = 0.5`; the
  design document's code adds no friction), so the configuration that matches it is
  `friction=False` (4 excited parameters): mean 0.0021 over the 20 draws, 19 of 20 within
  4e-3, the worst (draw 16) 0.0044; over 1000 draws 0.7 % exceed 4e-3. That worst draw is the
  least-squares fit of the exact model (the learner at `lam = 1` is least squares with a
  negligible prior), so no estimator without prior knowledge of the payload does reliably
  better: the target holds on the mean, not on every draw. The default (viscous, Coulomb and
  offset columns: 10 excited parameters) gives 0.0034 mean, 16 of 20. The mass stays within
  0.02 kg on every draw. The arm's joint axes are parallel to gravity, so only `m`, `m c_x`,
  `m c_y`, `I_zz` are identifiable: the report flags the other six, which stay exactly at the
  prior.
- Panda and UR5: with random states the payload mass is within 1 % after 5-9 samples and the
  held-out RMSE within 2 sigma after about 10; with a smooth multi-sine at 100 Hz the mass
  takes 150-320 samples and both criteria 220-350 (2.2-3.5 s of motion). All 10 payload
  parameters are identifiable on both arms. The inertia about the centre of mass is the
  hardest part (errors of about 1e-3 kg m^2 for a payload whose inertia is a few 1e-3, at
  sigma = 0.05 N m); the reported standard deviations are
  calibrated (error / std has an RMS of about 1). The five-feature learner cannot represent a
  payload on a 6-7 joint arm: 0.8-1.9 N m on the same data.
- Wind-up: with directional forgetting the excited block of `P` stays below 1 and unexcited
  directions keep their prior covariance exactly; the textbook update reaches 1e45. The
  issue's "worst error over the 50 samples after motion resumes <= 0.01 N m": the worst
  seed's RMSE there (how tests/test_learners.py reads the five-feature learner's 0.55) is
  0.0036 at `lam = 0.95`, 0.0025 at 0.98; the largest single error is 0.0073 at 0.98 and, at
  0.95 (a memory of about 20 samples), 0.0103 on one seed of 20. Without the rest (same motion
  and noise) that largest error is 0.0088 at 0.95: at rest only the offset columns are
  excited, and directional forgetting then forgets them at the full rate, so their estimate is
  the last ~20 rest samples' average. That is what `lam = 0.95` asks for, not wind-up; at 0.98
  and 0.99 the error after the rest is no larger than without it.
- Drift: the innovation trigger with `reopen = 100` meets every target but the worst seed over
  samples 230-299 with the default friction columns: 0.0053 against 0.005 (mean 0.0030). A
  payload learner restarted exactly at sample 200 (flat prior, least squares on the
  post-change data alone, knowing the change point) has the same worst seed, 0.0054: the limit
  is the noise of 10 parameters, not the detector or the response, and a re-opening of 1e3 or
  1e4 gives the same numbers (10: worse). With the friction terms the benchmark's change has
  (`friction=('viscous', 'coulomb')`: 8 parameters) every target is met (worst 0.0043).
- float32 (a GPU batch's dtype), 10^5 samples at `lam = 0.99`: finite, `P` exactly symmetric
  and positive semi-definite from the 10th sample on, predictions within 3e-5 N m of float64
  from sample 1000 on. With the default `delta = 1e6`, `P` is indefinite in samples 0-5
  (fewer equations than excited parameters; float32 rounding of the 1e6 prior) and the
  early predictions differ by up to 2e-2 N m; `delta = 1e3` is clean throughout. The Joseph
  form is worse in float32.
"""


if __name__ == "__main__":
    main()
