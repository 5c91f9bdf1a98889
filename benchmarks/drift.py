"""The drift benchmark (SPEC section 4): a payload and friction appear at sample 200 of 400.

    PYTHONPATH=src python benchmarks/drift.py            # table over seeds 0-19, plot, docs
    PYTHONPATH=src python benchmarks/drift.py --check    # also the targets over seeds 0-199

Two-link arm of the design document. Sample ``t`` of seed ``s`` is
``np.random.default_rng(s).uniform(-1, 1, (400, 3, n))[t]`` read as ``(q, qd, qdd)``; the
measured torque is the real robot's plus ``sigma * np.random.default_rng(1000 + s)
.standard_normal((400, n))``. Samples 0-199: the real robot is the payload-free URDF (the
learners' nominal model); from sample 200: a 0.5 kg payload on link 2 (``minimal_urdf(0.5)``)
plus viscous ``0.2 qd_j`` and Coulomb ``0.1 sign(qd_j)`` friction on every joint.
Prequential: each learner predicts, is scored against the noise-free real torque, then learns.

Every learner runs as ``jax.vmap`` over seeds of :func:`dense_armor.learners.replay` (one
``lax.scan``; one compile per learner structure). Rows: fixed forgetting (``lam = 1``;
``lam = 0.99`` with the default directional forgetting and with the textbook exponential one),
the design document's drift-aware learner with its documented Hampel and CUSUM settings
(``DriftAwareResidualDynamicsLearner`` defaults, ``drift_h`` = 20, 10, 5), the innovation
trigger (:class:`dense_armor.drift.Innovation`, re-opening the covariance on an alarm) on the
five-feature learner, and the payload learner (:mod:`dense_armor.payload`) with the same trigger
when that module is present, with its default friction columns (viscous, Coulomb, offset) and
with viscous and Coulomb only; ``--check`` also reports, for each, the bound of a learner of
the same structure restarted exactly at the change with a flat prior.

Also measures the covariance wind-up protocol (issue 4, part 3) and float32 against float64
over 10^5 samples (part 4), which tests/test_learners.py asserts.

Writes the tables to docs/benchmarks.md, section "Drift benchmark", and the plot of the
prequential error over time to docs/figures/drift.png.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import platform
import re
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from dense_armor.drift import Innovation  # noqa: E402
from dense_armor.learners import ResidualLearner, replay  # noqa: E402
from dense_armor.utility.learn.online_dynamics import DriftAwareResidualDynamicsLearner  # noqa: E402

try:
    from dense_armor.payload import PayloadLearner  # noqa: E402
except ImportError:  # the payload learner is optional here
    PayloadLearner = None
try:
    from dense_armor.utility.learn.online_dynamics import PayloadResidualDynamicsLearner  # noqa: E402
except ImportError:
    PayloadResidualDynamicsLearner = None

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table  # noqa: E402
from protocols import CHANGE, NOMINAL, VERTICAL, T, drift_batch, precision_trajectory, replay_P, windup_batch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks.md"
FIGURE = ROOT / "docs" / "figures" / "drift.png"
HEADING = "Drift benchmark"

WINDOWS = ((150, 200), (200, 230), (230, 300), (300, 400))

_replay_seeds = jax.jit(jax.vmap(replay, in_axes=(None, None, 0)))


# --- learners ---------------------------------------------------------------------------


def _wrapper(**kwargs):
    """The functional learner behind ``DriftAwareResidualDynamicsLearner(**kwargs)``."""
    return DriftAwareResidualDynamicsLearner(NOMINAL, **kwargs).learner


def innovation_learner(lam: float = 1.0):
    """The five-feature learner with the innovation trigger: no forgetting until an alarm,
    then the covariance re-opened by 10 (weights kept)."""
    return ResidualLearner(
        NOMINAL, lam=lam, detector=Innovation(), reopen=10.0, fast_lam=1.0, warmup_steps=0
    )


def payload_learner():
    """The payload learner with the innovation trigger, as its wrapper configures it
    (``PayloadResidualDynamicsLearner(model, trigger="innovation")``: ``lam = 1``, the
    covariance re-opened by 100 on an alarm)."""
    if PayloadResidualDynamicsLearner is not None:
        return PayloadResidualDynamicsLearner(NOMINAL, trigger="innovation").learner
    kwargs = {"lam": 1.0, "detector": Innovation()}
    if "reopen" in inspect.signature(PayloadLearner).parameters:
        kwargs["reopen"] = 10.0
    return PayloadLearner(NOMINAL, **kwargs)


def payload_learner_viscous_coulomb():
    """The payload learner with only the friction terms of the benchmark's change (viscous and
    Coulomb, no offset columns), otherwise as :func:`payload_learner`: 8 excited parameters
    instead of 10."""
    return PayloadLearner(NOMINAL, friction=("viscous", "coulomb"), detector=Innovation(), reopen=100.0)


def restarted(learner_without_detector, trajectory, true) -> dict:
    """The bound for a learner that responds to the change: the same structure restarted
    exactly at the change with a flat prior (it knows the change point; least squares on the
    new regime's data alone). Per-seed RMSE over the windows after the change."""
    after = jax.tree.map(lambda a: a[:, CHANGE:], trajectory)
    state = learner_without_detector.init(jnp.float64)
    _, out = _replay_seeds(learner_without_detector, state, after)
    err = np.asarray(out.prediction) - true[:, CHANGE:]
    return {w: np.sqrt(np.mean(err[:, w[0] - CHANGE : w[1] - CHANGE] ** 2, axis=(1, 2))) for w in WINDOWS[1:]}


def learners() -> dict[str, object]:
    """The table's rows: name -> functional learner."""
    rows = {
        "lam = 1": ResidualLearner(NOMINAL, lam=1.0),
        "lam = 0.99 (directional, default)": ResidualLearner(NOMINAL, lam=0.99),
        "lam = 0.99 (exponential, textbook)": ResidualLearner(NOMINAL, lam=0.99, forgetting="exponential"),
        "Hampel (documented defaults)": _wrapper(),
        "CUSUM h = 20": _wrapper(trigger="cusum", drift_h=20.0),
        "CUSUM h = 10": _wrapper(trigger="cusum", drift_h=10.0),
        "CUSUM h = 5": _wrapper(trigger="cusum", drift_h=5.0),
        "innovation, lam = 1 (five-feature)": innovation_learner(),
        'innovation, wrapper defaults (lam = 0.99)': _wrapper(trigger="innovation"),
    }
    if PayloadLearner is not None:
        rows["payload learner + innovation"] = payload_learner()
        rows["payload learner (viscous, Coulomb) + innovation"] = payload_learner_viscous_coulomb()
    return rows


# --- evaluation -------------------------------------------------------------------------


def evaluate(learner, trajectory, true) -> dict:
    """Replay ``learner`` over every seed (one vmapped scan); per-seed metrics."""
    state = learner.init(jnp.float64)
    _, out = _replay_seeds(learner, state, trajectory)
    err = np.asarray(out.prediction) - true  # prediction before learning vs noise-free torque
    alarm = np.asarray(out.alarm)
    first = np.array([np.flatnonzero(a)[0] if a.any() else -1 for a in alarm])
    detect = np.array([CHANGE + np.flatnonzero(a[CHANGE:])[0] if a[CHANGE:].any() else -1 for a in alarm])
    return {
        "rmse": {w: np.sqrt(np.mean(err[:, w[0] : w[1]] ** 2, axis=(1, 2))) for w in WINDOWS},
        "first": first,
        "detect": detect,
        "false": alarm[:, :CHANGE].sum(axis=1),
        "alarm": alarm,
        "curve": np.sqrt(np.mean(err**2, axis=2)).mean(axis=0),  # (T,) mean over seeds
    }


def _fmt_first(values) -> str:
    hit = values[values >= 0]
    none = int((values < 0).sum())
    if hit.size == 0:
        return "none"
    text = f"{hit.min()}-{hit.max()}" if hit.min() != hit.max() else f"{hit.min()}"
    return text + (f" ({none} none)" if none else "")


def results_table(results: dict) -> str:
    header = ["learner"] + [f"RMSE {a}-{b - 1}" for a, b in WINDOWS] + [
        "first alarm", "first alarm >= 200", "false alarms < 200 (seeds)"
    ]
    rows = []
    for name, r in results.items():
        cells = [f"{r['rmse'][w].mean():.4f} / {r['rmse'][w].max():.4f}" for w in WINDOWS]
        false = f"{int(r['false'].sum())} ({int((r['false'] > 0).sum())})"
        rows.append([name, *cells, _fmt_first(r["first"]), _fmt_first(r["detect"]), false])
    return table(header, rows)


# --- targets (issue 4, part 2) -----------------------------------------------------------


def check(print_=print) -> tuple[str, bool]:
    """The targets over seeds 0-199 (sigma = 0.01) and the 10 % change over seeds 0-49."""
    sigma = 0.01
    trajectory, true = drift_batch(range(200), sigma)
    small, small_true = drift_batch(range(50), sigma, scale=0.1)
    base = evaluate(ResidualLearner(NOMINAL, lam=1.0), trajectory, true)
    pre_base = base["rmse"][(150, 200)]
    rows, ok_all = [], True
    subjects = {
        "five-feature + innovation (lam = 1)": (innovation_learner(), 0.31, None),
        "five-feature + innovation (wrapper defaults)": (_wrapper(trigger="innovation"), 0.31, None),
    }
    bounds = {}
    if PayloadLearner is not None:
        subjects["payload learner + innovation"] = (payload_learner(), 0.15, 0.22)
        subjects["payload learner (viscous, Coulomb) + innovation"] = (payload_learner_viscous_coulomb(), 0.15, 0.22)
        bounds["payload learner + innovation"] = restarted(PayloadLearner(NOMINAL), trajectory, true)
        bounds["payload learner (viscous, Coulomb) + innovation"] = restarted(
            PayloadLearner(NOMINAL, friction=("viscous", "coulomb")), trajectory, true
        )
    for name, (learner, target_mean, target_worst) in subjects.items():
        r = evaluate(learner, trajectory, true)
        s = evaluate(learner, small, small_true)
        post = r["rmse"][(200, 230)]
        pre = r["rmse"][(150, 200)]
        delay = s["detect"] - CHANGE
        checks = [
            ("false alarms before 200, every seed", "0", f"{int(r['false'].sum())} on {int((r['false'] > 0).sum())} seeds", r["false"].sum() == 0),
            ("first alarm >= 200, every seed", "200 (<= 202)", _fmt_first(r["detect"]), bool(np.all((r["detect"] >= 200) & (r["detect"] <= 202)))),
            ("RMSE 200-229 mean", f"<= {target_mean}", f"{post.mean():.4f}", post.mean() <= target_mean),
        ]
        if target_worst is not None:
            checks.append(("RMSE 200-229 worst", f"<= {target_worst}", f"{post.max():.4f}", post.max() <= target_worst))
        else:
            checks.append(("RMSE 200-229 worst", "(reported)", f"{post.max():.4f}", True))
        if PayloadLearner is not None and name.startswith("payload"):
            for w, t in (((230, 300), 0.005), ((300, 400), 0.003)):
                m = r["rmse"][w]
                checks.append((f"RMSE {w[0]}-{w[1] - 1} mean", f"<= {t}", f"{m.mean():.4f}", m.mean() <= t))
                checks.append((f"RMSE {w[0]}-{w[1] - 1} worst", f"<= {t}", f"{m.max():.4f}", m.max() <= t))
                b = bounds[name][w]
                checks.append((
                    f"bound: restarted at 200, flat prior, RMSE {w[0]}-{w[1] - 1} mean / worst",
                    "(reported)", f"{b.mean():.4f} / {b.max():.4f}", True,
                ))
        elif "lam = 1" in name:
            checks.append(("RMSE 150-199 vs lam = 1 (mean)", f"<= {pre_base.mean():.5f}", f"{pre.mean():.5f}", pre.mean() <= pre_base.mean() * (1 + 1e-9)))
        else:  # lam = 0.99 forgets a little before the change, by design
            checks.append(("RMSE 150-199 vs lam = 1 (mean)", f"(reported; lam = 1: {pre_base.mean():.5f})", f"{pre.mean():.5f}", True))
        checks.append(("10 % change: delay, every seed of 50", "<= 10", _fmt_first(delay) if (delay >= 0).all() else f"missed on {(delay < 0).sum()} seeds", bool(np.all((delay >= 0) & (delay <= 10)))))
        checks.append(("10 % change: false alarms before 200", "0", f"{int(s['false'].sum())}", s["false"].sum() == 0))
        for what, target, got, ok in checks:
            rows.append([name, what, target, got, "yes" if ok else "**no**"])
            ok_all &= bool(ok)
    text = table(["learner", "target", "required", "measured", "met"], rows)
    print_(text)
    return text, ok_all


# --- covariance wind-up and float32 (issue 4, parts 3 and 4) -----------------------------


def windup(print_=print) -> str:
    """200 exciting samples, 2000 at rest (q held, qd = qdd = 0), 200 exciting; lam = 0.95;
    real robot = the changed robot throughout; sigma = 0.01; seeds 0-19."""
    batch, true = windup_batch(range(20))
    excited = np.array([0, 1, 2, 4])  # the g feature is 0 on the planar arm
    rows = []
    for forgetting in ("directional", "exponential"):
        learner = ResidualLearner(NOMINAL, lam=0.95, forgetting=forgetting)
        pred, P = (np.asarray(a) for a in replay_P(learner, learner.init(jnp.float64), batch))
        trace = np.trace(P[..., excited[:, None], excited[None, :]], axis1=-2, axis2=-1)
        err = (pred - true)[:, 2200:2250]
        per_seed = np.sqrt(np.mean(err**2, axis=(1, 2)))
        rows.append([
            forgetting, f"{trace[:, 50:200].max():.3g}", f"{trace[:, 2199].max():.3g}",
            f"{per_seed.mean():.3g} / {per_seed.max():.3g}", f"{np.abs(err).max():.3g}",
        ])
    text = table(
        ["lam = 0.95", "max trace, excited block, samples 50-199", "at the end of the rest",
         "RMSE 50 samples after motion resumes (mean / worst seed)", "max abs error there"],
        rows,
    )
    print_(text)
    return text


def precision(print_=print) -> str:
    """float32 vs float64, lam = 0.99, 10^5 samples, the arm in a vertical plane (gravity
    excites every feature), default forgetting and covariance form."""
    batch = jax.tree.map(lambda a: a[None], precision_trajectory())  # one seed
    rows = []
    for delta in (1e6, 1e3):
        learner = ResidualLearner(VERTICAL, lam=0.99, delta=delta)
        p64, _ = replay_P(learner, learner.init(jnp.float64), batch)
        p32, P32 = replay_P(learner, learner.init(jnp.float32), jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), batch))
        diff = np.abs(np.asarray(p32, np.float64) - np.asarray(p64))[0]
        P32 = np.asarray(P32)[0]
        eig = np.linalg.eigvalsh(P32[::10].astype(np.float64))
        rows.append([
            f"{delta:g}", str(bool(np.isfinite(P32).all() and np.isfinite(diff).all())),
            str(bool((P32 == np.swapaxes(P32, -1, -2)).all())), f"{(eig.min(-1) / eig.max(-1)).min():.1e}",
            f"{diff[1000:10000].max():.1e}", f"{diff[10000:].max():.1e}",
        ])
    text = table(
        ["delta", "finite", "P symmetric", "min eig / max eig of P", "max abs(pred32 - pred64), samples 1e3-1e4 (N m)", "samples 1e4-1e5"],
        rows,
    )
    print_(text)
    return text


# --- plot and docs ----------------------------------------------------------------------


def plot(results: dict, sigma: float, path: Path = FIGURE) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(results)
    fig, (ax, axa) = plt.subplots(
        2, 1, figsize=(12.5, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.5]}
    )
    colors = plt.cm.tab10(np.linspace(0, 1, 10))
    t = np.arange(T)
    for i, name in enumerate(names):
        ax.semilogy(t, results[name]["curve"], lw=1.3 if "innovation" in name or "payload" in name else 0.9,
                    color=colors[i % 10], ls="-" if i < 10 else "--", label=name)
        frac = results[name]["alarm"].mean(axis=0)
        hit = frac > 0
        axa.scatter(t[hit], np.full(hit.sum(), i), s=6 + 60 * frac[hit], color=colors[i % 10], marker="|")
    for a in (ax, axa):
        a.axvline(CHANGE, color="k", ls="--", lw=0.8)
    ax.set_ylabel("prequential torque error, N m\n(RMS over joints, mean over seeds)")
    ax.set_title(f"Drift benchmark: payload + friction at sample {CHANGE}, sigma = {sigma} N m, seeds 0-19")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_ylim(bottom=3e-4)
    ax.grid(alpha=0.3, which="both")
    axa.set_yticks(range(len(names)), names, fontsize=6)
    axa.set_ylim(-0.7, len(names) - 0.3)
    axa.set_xlabel("sample")
    axa.set_title("alarms (tick size: fraction of seeds alarming at that sample)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_section(body: str, command: str) -> None:
    """Replace (or append) this benchmark's section of docs/benchmarks.md, nothing else."""
    stamp = (
        f"Command: `{command}` — {datetime.date.today().isoformat()}, "
        f"{platform.machine()}, jax {jax.__version__}."
    )
    section = f"## {HEADING}\n\n{stamp}\n\n{body.strip()}\n"
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else (
        "# Benchmarks\n\nLatest measurements; each section says the command that made it.\n"
    )
    pattern = re.compile(rf"^## {re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip() + "\n\n" + section
    DOCS.write_text(text.rstrip() + "\n", encoding="utf-8")


NOTES = """\
Each cell is mean / worst over seeds 0-19 of the per-seed RMSE (N m, both joints) of the
prior prediction against the noise-free real torque. "first alarm": range over seeds of the
first alarm index (a value below 200 is a false alarm); "first alarm >= 200": the detection;
"false alarms < 200": alarms before the change, summed over seeds (seeds with any).

- Fixed forgetting trades accuracy before the change for tracking after it. The default
  directional forgetting (the covariance wind-up safeguard, `rls.update(directional=True)`)
  forgets only along each sample's feature vector, so with random motion its memory is about
  `p / (1 - lam)` samples (p = 4 features excited on this planar arm) instead of
  `1 / (1 - lam)`: at `lam = 0.99` it tracks more slowly than the textbook update, the price
  of never winding up.
- The design document's triggers, Hampel and CUSUM on the standardised prior error, compare
  the error with a short window of its own past: Hampel fires on the learner's convergence
  noise long before the change, CUSUM fires falsely at the lower thresholds; and their
  response, `fast_lam = 0.9` for 20 samples (milder still under directional forgetting),
  barely changes the error after the change even when they detect it.
- The innovation trigger (`drift.Innovation`) learns the noise level of the learner's own
  standardised prior errors, arms after 10 + 50 samples, and accumulates the normalised
  innovation squared in a CUSUM (`k = 3`, `h = 40`). On the alarm the learner adds `10 I` to
  every joint's covariance, keeping its weights, and restarts the detector, which learns the
  new regime's error level before it arms again. With `lam = 1` the learner is exactly the
  `lam = 1` learner until the change, so it loses nothing before it.
- The payload learner (`dense_armor.payload`) with the same trigger re-opens its covariance by
  100 (its wrapper's default). Over samples 230-299 its error is at the noise limit of the
  parameters it estimates: a learner of the same structure restarted exactly at sample 200
  with a flat prior (least squares on the new regime's data alone, knowing the change point;
  the "bound" rows of the targets) has the same worst seed. Re-opening by 1e3 or 1e4 instead
  (flatter) gives the same numbers, by 10 (a prior std of 0.03 in the parameters, smaller than
  the change) worse ones: the size of the re-opening cannot buy accuracy here, only fewer
  parameters can. With the default friction columns (viscous, Coulomb and a constant offset
  per joint: 10 excited parameters) the worst of 200 seeds misses 0.005; with only the terms
  the benchmark's change has (viscous and Coulomb: 8 parameters) every target is met.
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="also check the targets on seeds 0-199")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    args = parser.parse_args(argv)
    start = time.time()
    rows = learners()
    body = [NOTES]
    plotted = None
    for sigma in (0.0, 0.01):
        trajectory, true = drift_batch(range(20), sigma)
        results = {name: evaluate(learner, trajectory, true) for name, learner in rows.items()}
        text = results_table(results)
        print(f"\n### sigma = {sigma} N m, seeds 0-19\n\n{text}", flush=True)
        body.append(f"### sigma = {sigma} N m, seeds 0-19\n\n{text}\n")
        if sigma == 0.01:
            plotted = results
    if PayloadLearner is not None and "reopen" not in inspect.signature(PayloadLearner).parameters:
        body.append(
            "The payload learner row runs `dense_armor.payload.PayloadLearner` (as found in the "
            "working tree) with `lam = 1` and the innovation trigger; it has no `reopen` yet, so "
            "its response to the alarm is its fast forgetting only.\n"
        )
    if not args.no_write:
        plot(plotted, 0.01)
        body.append(
            "![Prequential error over time](figures/drift.png)\n\n"
            "`docs/figures/drift.png`: prequential error over time (sigma = 0.01, mean over seeds "
            "0-19), change point dashed, alarms below.\n"
        )
    print("\n### Covariance wind-up protocol\n", flush=True)
    body.append(
        "### Covariance wind-up protocol (issue 4, part 3)\n\n"
        "200 exciting samples, 2000 at rest (q held, qd = qdd = 0), 200 exciting; lam = 0.95; the "
        "changed robot throughout; sigma = 0.01; seeds 0-19. The excited block of P is that of "
        "qdd, qd, sign(qd) and the bias (the gravity feature is 0 on this planar arm). The "
        "directional learner's error after the rest is its error without the rest (the "
        "five-feature model's misfit, about 0.25 RMSE on the worst seed, 0.9 N m at most).\n\n"
        + windup() + "\n"
    )
    print("\n### float32 vs float64\n", flush=True)
    body.append(
        "### float32 vs float64 over 10^5 samples (issue 4, part 4)\n\n"
        "lam = 0.99, the arm in a vertical plane (every feature excited), default directional "
        "forgetting and textbook covariance form (`P - K x' P`, symmetrised). float32 cannot "
        "hold P's first updates from a 1e6 prior exactly and directional forgetting keeps that "
        "early error for long; a prior of 1e3 keeps float32 within 3e-5 N m.\n\n"
        + precision() + "\n"
    )
    ok = True
    if args.check:
        print("\n### Targets (sigma = 0.01; seeds 0-199; 10 % change: seeds 0-49)\n", flush=True)
        text, ok = check()
        body.append("### Targets (issue 4; sigma = 0.01 N m, seeds 0-199; 10 % change: seeds 0-49)\n\n" + text + "\n")
    print(f"\n{time.time() - start:.0f} s", flush=True)
    if not args.no_write:
        command = "PYTHONPATH=src python benchmarks/drift.py" + (" --check" if args.check else "")
        write_section("\n".join(body), command)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
