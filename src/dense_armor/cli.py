"""The ``dense-armor`` command line (also ``python -m dense_armor``).

Commands:

* ``demo``: the main job on the embedded two-link arm: a payload is picked up, later the
  joints gain friction; the URDF model and the learners predict every torque (prequential)
  and a table compares them.
* ``control``: closed loop: a computed-torque controller that knows only the URDF tracks
  point-to-point moves with an unmodelled payload, with and without the learned residual.
* ``replay ROBOT.urdf LOG``: a logged trajectory (CSV or NPZ) through a chosen learner.
* ``info ROBOT.urdf``: what the parser made of a URDF.

Everything runs in float64 inside ``jax.enable_x64(True)`` (thread-local; the global JAX
configuration is untouched). A user error prints one line ``dense-armor: error: ...`` on
stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import dense_armor
from dense_armor import learners
from dense_armor.logs import LogError, load_log, replay_chunked, write_table
from dense_armor.urdf import URDFError, parse_urdf

PROG = "dense-armor"


class UserError(Exception):
    """A problem with what the user asked for: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


# ----------------------------------------------------------------------------- argument types


def _number(kind, test, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (math.isfinite(value) and test(value)):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


positive = _number(float, lambda v: v > 0, "a positive number")
nonnegative = _number(float, lambda v: v >= 0, "a number >= 0")
forgetting_factor = _number(float, lambda v: 0 < v <= 1, "a forgetting factor in (0, 1]")
count = _number(int, lambda v: v >= 1, "a whole number >= 1")
natural = _number(int, lambda v: v >= 0, "a whole number >= 0")


_odd_window = _number(int, lambda v: v >= 3 and v % 2 == 1, "an odd number >= 3")


# ----------------------------------------------------------------------------- shared helpers


def _require_matplotlib():
    """pyplot on the Agg backend, or a clear UserError when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        raise UserError("--plot needs matplotlib, which is not installed (pip install 'dense_armor[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _check_writable(path: str | None, option: str) -> None:
    if path is not None and not Path(path).parent.resolve().is_dir():
        raise UserError(f"{option} {path}: the folder {Path(path).parent} does not exist")


def _table(headers, rows, align=None) -> str:
    """Plain text table: columns padded to their widest cell; numbers right-aligned."""
    cells = [list(map(str, headers))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(headers))]
    align = align or ["<"] + [">"] * (len(headers) - 1)
    return "\n".join(
        "  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, align, widths)).rstrip() for r in cells
    )


def _fmt(x, digits=3) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


# ----------------------------------------------------------------------------- learners

#: What ``--learner`` accepts, and the documented class each one is configured like.
LEARNER_CLASSES = {
    "five-feature": "ResidualDynamicsLearner",
    "drift-aware": "DriftAwareResidualDynamicsLearner",
    "payload": "PayloadResidualDynamicsLearner",
    "drift-aware-payload": "PayloadResidualDynamicsLearner with a trigger",
}
#: The forgetting factor of each learner when ``--lam`` is not given (the wrappers' defaults).
DEFAULT_LAM = {"five-feature": 1.0, "drift-aware": 0.99, "payload": 1.0, "drift-aware-payload": 1.0}
#: The demo's learners, in the table's order; the demo's plain five-feature learner forgets (0.99).
DEMO_LEARNERS = ("five-feature", "drift-aware", "payload", "drift-aware-payload")
TRIGGERS = ("innovation", "hampel", "cusum")
_INNOVATION = ("k", "h", "min_samples", "min_sigma")


def _lam(kind: str, args) -> float:
    if args.lam is not None:
        return args.lam
    return getattr(args, "default_lam", {}).get(kind, DEFAULT_LAM[kind])


def _learner_name(kind: str, args) -> str:
    """A table label: the learner, and its forgetting factor or trigger."""
    if kind.startswith("drift-aware"):
        base = "drift-aware payload" if kind == "drift-aware-payload" else "drift-aware five-feature"
        return f"{base}, {args.trigger}"
    return f"{kind}, lam {_lam(kind, args):g}"


def _innovation_given(args) -> dict:
    return {k: getattr(args, f"innovation_{k}") for k in _INNOVATION if getattr(args, f"innovation_{k}") is not None}


def _detector(args):
    """The detector named by ``--trigger`` with the options given; ``None`` leaves the
    payload wrapper's own default detector in place."""
    from dense_armor import drift

    if args.trigger == "hampel":
        return drift.Hampel(radius=args.hampel_radius, n_sigmas=args.hampel_n_sigmas)
    if args.trigger == "cusum":
        return drift.CUSUM(radius=args.drift_radius, ref_mult=args.drift_ref_mult, k=args.drift_k, h=args.drift_h)
    given = _innovation_given(args)
    return drift.Innovation(**given) if given else None


def build_learner(kind: str, model, args):
    """The functional learner ``kind`` on ``model``, configured through the documented class
    (so the command line and the classes share their defaults), from the parsed options."""
    from dense_armor.utility.learn import online_dynamics as od

    lam = _lam(kind, args)
    if kind == "five-feature":
        return od.ResidualDynamicsLearner(model, lam=lam, delta=args.delta, forgetting=args.forgetting).learner
    if kind == "drift-aware":
        innovation = {f"innovation_{k}": v for k, v in _innovation_given(args).items()}
        return od.DriftAwareResidualDynamicsLearner(
            model, lam=lam, delta=args.delta, fast_lam=args.fast_lam, warmup_steps=args.warmup_steps,
            drift_radius=args.drift_radius, drift_ref_mult=args.drift_ref_mult, drift_k=args.drift_k,
            drift_h=args.drift_h, detector_warmup=args.detector_warmup, trigger=args.trigger,
            hampel_radius=args.hampel_radius, hampel_n_sigmas=args.hampel_n_sigmas, reopen=args.reopen,
            forgetting=args.forgetting, **innovation,
        ).learner
    if kind in ("payload", "drift-aware-payload"):
        link = getattr(args, "link", None)
        if link is not None and link not in model.frame_names:
            raise UserError(f"--link {link!r} is not a link of the robot (links: {', '.join(model.frame_names)})")
        drift_aware = kind == "drift-aware-payload"
        return od.PayloadResidualDynamicsLearner(
            model, link, lam=lam, delta=args.delta, friction=not getattr(args, "no_friction", False),
            forgetting=args.forgetting, trigger=args.trigger if drift_aware else None,
            detector=_detector(args) if drift_aware else None, reopen=args.reopen if drift_aware else None,
            fast_lam=args.fast_lam, warmup_steps=args.warmup_steps, detector_warmup=args.detector_warmup,
        ).learner
    raise UserError(f"unknown learner {kind!r}; choose one of {', '.join(LEARNER_CLASSES)}")


def _payload_report(learner, state) -> tuple[float, float] | None:
    """(mass, std) learned by a payload learner, ``None`` for other learners."""
    from dense_armor import payload

    if not isinstance(learner, payload.PayloadLearner):
        return None
    est = payload.payload_estimate(learner, state)
    return float(est.mass), float(est.mass_std)


def _add_learner_options(p, lam_help: str):
    g = p.add_argument_group("learner options")
    g.add_argument("--lam", type=forgetting_factor, default=None, help=f"forgetting factor in (0, 1] ({lam_help})")
    g.add_argument("--delta", type=positive, default=1e6, help="initial covariance scale, P0 = delta I (default 1e6)")
    g.add_argument("--forgetting", choices=("directional", "exponential"), default="directional",
                   help="forget only along excited directions (no wind-up), or the textbook update (default directional)")
    g.add_argument("--trigger", choices=TRIGGERS, default="innovation",
                   help="drift trigger of the drift-aware learners (default innovation)")
    g.add_argument("--fast-lam", type=forgetting_factor, default=0.9, help="forgetting factor after a drift alarm (default 0.9)")
    g.add_argument("--warmup-steps", type=natural, default=20, help="samples of --fast-lam after an alarm (default 20)")
    g.add_argument("--reopen", type=nonnegative, default=None,
                   help="on an alarm, add REOPEN * I to the covariance (default with the innovation trigger: 10 for "
                   "the five-feature learner, 100 for the payload learner; else 0)")
    g.add_argument("--detector-warmup", type=natural, default=0, help="samples learned before the trigger is fed (default 0)")
    g.add_argument("--innovation-k", type=nonnegative, default=None,
                   help="innovation trigger: allowance per sample (default 3)")
    g.add_argument("--innovation-h", type=positive, default=None, help="innovation trigger: threshold (default 40)")
    g.add_argument("--innovation-min-samples", type=count, default=None,
                   help="innovation trigger: noise samples before it arms (default 50)")
    g.add_argument("--innovation-min-sigma", type=nonnegative, default=None,
                   help="innovation trigger: noise floor, N m (default 1e-4)")
    g.add_argument("--hampel-radius", type=count, default=20, help="Hampel trigger: window radius (default 20)")
    g.add_argument("--hampel-n-sigmas", type=positive, default=3.0, help="Hampel trigger: threshold in robust sigmas (default 3)")
    g.add_argument("--drift-radius", type=count, default=10, help="CUSUM trigger: window radius (default 10)")
    g.add_argument("--drift-ref-mult", type=count, default=3, help="CUSUM trigger: reference window, in radii (default 3)")
    g.add_argument("--drift-k", type=nonnegative, default=0.5, help="CUSUM trigger: allowance k (default 0.5)")
    g.add_argument("--drift-h", type=positive, default=20.0, help="CUSUM trigger: threshold h (default 20)")


def _add_change_options(p, payload: float, viscous: float, coulomb: float, *, gained: bool) -> None:
    """--payload, --viscous, --coulomb: what the simulated arm carries or gains that the URDF
    does not know; each help ends with its default."""
    what = ("payload mass picked up", "viscous friction gained", "Coulomb friction gained") if gained else (
        "unmodelled payload", "joint viscous friction", "joint Coulomb friction")
    for name, text, unit, default in zip(("payload", "viscous", "coulomb"), what, ("kg", "N m s/rad", "N m"), (payload, viscous, coulomb)):
        p.add_argument(f"--{name}", type=nonnegative, default=default, help=f"{text}, {unit} (default {default:g})")


def _add_run_options(p, sigma: float, seed_help: str, plane: str, plane_help: str, plot_help: str) -> None:
    """--sigma, --seed, --plane, --plot of a simulated run."""
    p.add_argument("--sigma", type=nonnegative, default=sigma, help=f"torque-sensor noise std, N m (default {sigma:g})")
    p.add_argument("--seed", type=natural, default=0, help=f"{seed_help} (default 0)")
    p.add_argument("--plane", choices=("horizontal", "vertical"), default=plane, help=f"{plane_help} (default {plane})")
    p.add_argument("--plot", metavar="FILE.png", help=plot_help)


def _alarm_text(alarm_times, limit=3) -> str:
    if len(alarm_times) == 0:
        return "-"
    shown = ", ".join(f"{t:g}" for t in alarm_times[:limit])
    return shown if len(alarm_times) <= limit else f"{len(alarm_times)}: {shown}, ..."


# ----------------------------------------------------------------------------- demo


def cmd_demo(args) -> int:
    from dense_armor.demo import drift_scenario, phase_rmse

    plt = _require_matplotlib() if args.plot else None
    _check_writable(args.plot, "--plot")
    started = time.perf_counter()
    sc = drift_scenario(
        duration=args.duration, rate=args.rate, payload=args.payload, viscous=args.viscous,
        coulomb=args.coulomb, sigma=args.sigma, seed=args.seed, plane=args.plane,
    )
    model = sc.model
    runs = {}
    for kind in DEMO_LEARNERS:
        learner = build_learner(kind, model, args)
        state, out = learners.replay(learner, learner.init(jnp.float64), sc.measured)
        runs[_learner_name(kind, args)] = (learner, state, jax.tree.map(np.asarray, out))
    nominal = next(iter(runs.values()))[2].nominal
    c1, c2 = sc.changes
    print(
        f"{PROG} demo: two-link arm ({args.plane} plane), {args.duration:g} s at {args.rate:g} Hz, "
        f"torque noise {args.sigma:g} N m"
    )
    print(
        f"  t = {sc.t[c1]:g} s: picks up a {args.payload:g} kg payload; "
        f"t = {sc.t[c2]:g} s: joints gain friction {args.viscous:g} qd + {args.coulomb:g} sign(qd)"
    )
    print("prequential torque RMSE [N m], every sample predicted before it is learned:")
    headers = ["model", *[p[0] for p in sc.phases], "alarms [s]", "payload [kg]"]
    rows = [["nominal URDF", *map(_fmt, phase_rmse(sc.true_tau - nominal, sc.phases)), "-", "-"]]
    errors = {"nominal URDF": sc.true_tau - nominal}
    alarms = {}
    for name, (learner, state, out) in runs.items():
        err = sc.true_tau - out.prediction
        errors[name] = err
        alarms[name] = sc.t[np.nonzero(out.alarm)[0]]
        mass = _payload_report(learner, state)
        mass_text = "-" if mass is None else f"{mass[0]:.4f} +- {mass[1]:.4f}"
        alarm_text = _alarm_text(alarms[name]) if learner_has_detector(learner) else "-"
        rows.append([name, *map(_fmt, phase_rmse(err, sc.phases)), alarm_text, mass_text])
    print(_table(headers, rows))
    print(f"({time.perf_counter() - started:.1f} s)")
    if plt is not None:
        _plot_demo(plt, args.plot, sc, errors, alarms)
        print(f"plot written to {args.plot}")
    return 0


def learner_has_detector(learner) -> bool:
    return getattr(learner, "detector", None) is not None


def _moving_rms(e, window):
    """RMS over joints and the last ``window`` samples (causal: a change shows when it happens), (T,)."""
    sq = np.nan_to_num(np.nanmean(np.asarray(e) ** 2, axis=1))
    csum = np.concatenate([[0.0], np.cumsum(sq)])
    k = np.arange(1, sq.size + 1)
    start = np.maximum(k - window, 0)
    return np.sqrt((csum[k] - csum[start]) / (k - start))


def _plot_demo(plt, path, sc, errors, alarms):
    dt = sc.t[1] - sc.t[0]
    window = max(1, int(round(0.25 / dt)))
    fig, ax = plt.subplots(figsize=(9, 4.2), layout="constrained")
    for k, (name, err) in enumerate(errors.items()):
        rms = _moving_rms(err, window)
        (line,) = ax.semilogy(sc.t, np.maximum(rms, 1e-6), lw=1.2, label=name)
        times = alarms.get(name, [])
        if len(times):
            ax.plot(times, np.full(len(times), 2.5 * (1.4 ** k)), "v", color=line.get_color(), ms=5)
    sigma = float(np.std(np.asarray(sc.measured.tau) - sc.true_tau))
    if sigma > 0:
        ax.axhline(sigma, color="0.5", ls=":", lw=0.8)
        ax.text(sc.t[-1], sigma, "sensor noise", fontsize=8, ha="right", va="bottom", color="0.4")
    for c, what in zip(sc.changes, ("payload picked up", "friction")):
        ax.axvline(sc.t[c], color="k", ls="--", lw=0.8)
        ax.text(sc.t[c], 1e-5, f" {what}", fontsize=8, va="bottom")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("torque error [N m] (RMS over the last 0.25 s)")
    ax.set_ylim(1e-6, 40)
    ax.set_title("Prequential torque error on the two-link arm (triangles: drift alarms)")
    ax.legend(loc="lower right", fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- control


def cmd_control(args) -> int:
    from dense_armor.control import simulate
    from dense_armor.demo import tip_positions, tracking_scenario

    plt = _require_matplotlib() if args.plot else None
    _check_writable(args.plot, "--plot")
    started = time.perf_counter()
    sc = tracking_scenario(payload=args.payload, rate=args.rate, kp=args.kp, kd=args.kd, plane=args.plane, laps=args.laps)
    learner = build_learner(args.learner, sc.nominal, args)
    state = learner.init(jnp.float64)
    noise = args.sigma * np.random.default_rng(args.seed).standard_normal(sc.reference.q.shape)
    runs = [
        simulate(sc.nominal, sc.real, sc.reference, sc.dt, sc.kp, sc.kd, learner, state,
                 args.viscous, args.coulomb, noise, use)
        for use in (False, True)  # one compiled function: use_learner is traced
    ]
    final = runs[1][0]
    rollouts = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *[r for _, r in runs])
    targets = np.array(sc.targets)
    per_lap = len(targets) // args.laps
    tip_ref = tip_positions(sc.nominal, sc.reference.q[targets])
    print(
        f"{PROG} control: computed-torque control of the two-link arm ({args.plane} plane) at "
        f"{args.rate:g} Hz, kp {args.kp:g}, kd {args.kd:g}"
    )
    friction = f", friction {args.viscous:g} qd + {args.coulomb:g} sign(qd)" if args.viscous or args.coulomb else ""
    print(
        f"  {len(targets)} point-to-point moves ({args.laps} laps); unmodelled payload {args.payload:g} kg "
        f"on link2{friction}; the controller knows only the URDF"
    )
    headers = ["controller", "RMS error [mrad]", "max error [mrad]", *[f"tip miss lap {k + 1} [mm]" for k in range(args.laps)]]
    rows = []
    kind, _, detail = _learner_name(args.learner, args).partition(", ")
    names = ["URDF only", f"URDF + {kind} learner ({detail})"]
    summary = {}
    for k, name in enumerate(names):
        e = rollouts.error[k]
        tip = tip_positions(sc.nominal, rollouts.q[k][targets])
        miss = 1e3 * np.linalg.norm(tip - tip_ref, axis=1)
        laps = [float(np.mean(miss[i * per_lap : (i + 1) * per_lap])) for i in range(args.laps)]
        rms = 1e3 * float(np.sqrt(np.mean(e**2)))
        summary[name] = (rms, laps)
        rows.append([name, f"{rms:.2f}", f"{1e3 * np.abs(e).max():.2f}", *[f"{m:.3f}" for m in laps]])
    print(_table(headers, rows))
    mass = _payload_report(learner, final)
    if mass is not None:
        print(f"learned payload: {mass[0]:.4f} +- {mass[1]:.1g} kg (true {args.payload:g} kg)")
    print(f"({time.perf_counter() - started:.1f} s)")
    if plt is not None:
        _plot_control(plt, args.plot, sc, rollouts, names)
        print(f"plot written to {args.plot}")
    return 0


def _plot_control(plt, path, sc, rollouts, names):
    from dense_armor.demo import tip_positions

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained", width_ratios=(2, 1))
    for k, name in enumerate(names):
        e = 1e3 * np.linalg.norm(rollouts.error[k], axis=1)
        ax.semilogy(sc.t, np.maximum(e, 1e-4), lw=1, label=name)
    for i in sc.targets:
        ax.axvline(sc.t[i], color="0.8", lw=0.6, zorder=0)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("joint tracking error |q_ref - q| [mrad]")
    ax.set_ylim(1e-3, None)
    ax.set_title("Tracking error (grey lines: end of each hold)")
    ax.legend(fontsize=8, loc="lower right")
    tip_ref = tip_positions(sc.nominal, sc.reference.q[list(sc.targets)])
    x = np.arange(len(sc.targets))
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        tip = tip_positions(sc.nominal, rollouts.q[k][list(sc.targets)])
        miss = 1e3 * np.linalg.norm(tip - tip_ref, axis=1)
        at = x + (k - (len(names) - 1) / 2) * width
        bx.bar(at, np.maximum(miss, 1e-4), width, label=name)
        for xi, m in zip(at, miss):
            if m < 1e-2:  # too small to see: write it
                bx.text(xi, 1.3e-4, f"{m:.0e} mm", rotation=90, ha="center", va="bottom", fontsize=7)
    bx.set_yscale("log")
    bx.set_ylim(1e-4, None)
    bx.set_xticks(x, [str(k + 1) for k in x])
    bx.set_xlabel("target")
    bx.set_ylabel("tip miss at the end of the hold [mm]")
    bx.set_title("Miss at each target")
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- replay


def _progress_bar(stream):
    start = time.perf_counter()

    def show(done, total):
        width = 30
        filled = int(width * done / total)
        rate = done / max(time.perf_counter() - start, 1e-9)
        stream.write(f"\rreplay [{'#' * filled}{'.' * (width - filled)}] {done}/{total} samples, {rate:,.0f}/s")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


def cmd_replay(args) -> int:
    plt = _require_matplotlib() if args.plot else None
    _check_writable(args.plot, "--plot")
    _check_writable(args.out, "--out")
    model = parse_urdf(args.urdf)
    log = load_log(args.log, model.joint_names, dt=args.dt, window=args.sg_window, order=args.sg_order)
    learner = build_learner(args.learner, model, args)
    trajectory = learners.Sample(log.q, log.qd, log.qdd, log.tau)
    T = len(log)
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    progress = _progress_bar(sys.stderr) if show and T > args.chunk else None
    started = time.perf_counter()
    state, out = replay_chunked(learner, learner.init(jnp.float64), trajectory, args.chunk, progress)
    elapsed = time.perf_counter() - started
    names = model.joint_names
    accepted = out.accepted
    err_nominal = log.tau - out.nominal
    err = out.error
    t = log.t if log.t is not None else (np.arange(T) * log.dt if log.dt else None)

    if args.out:
        columns = {"t": t} if t is not None else {"k": np.arange(T)}
        for j, name in enumerate(names):
            columns[f"tau_{name}"] = log.tau[:, j]
            columns[f"nominal_{name}"] = out.nominal[:, j]
            columns[f"pred_{name}"] = out.prediction[:, j]
            columns[f"err_{name}"] = err[:, j]
        columns["alarm"] = out.alarm.astype(np.int8)
        columns["accepted"] = accepted.astype(np.int8)
        write_table(args.out, columns)

    est = f", {'/'.join(log.estimated)} estimated (Savitzky-Golay, window {args.sg_window}, order {args.sg_order})" if log.estimated else ""
    span = f", {T * log.dt:g} s at {1 / log.dt:g} Hz" if log.dt else ""
    print(f"{PROG} replay: {log.source}: {T} samples{span}{est}")
    print(f"  robot {model.name!r} ({model.n} joints: {', '.join(names)}); learner {_learner_label(args)}")
    quarters = [(f"{'Q' + str(k + 1)}", k * T // 4, (k + 1) * T // 4) for k in range(4)] if T >= 4 else []
    phases = [("all", 0, T)] + quarters
    from dense_armor.demo import phase_rmse

    headers = ["torque RMSE [N m]", *[p[0] for p in phases]]
    rows = [
        ["nominal URDF", *map(_fmt, phase_rmse(err_nominal, phases))],
        ["learner (prequential)", *map(_fmt, phase_rmse(err, phases))],
    ]
    for j, name in enumerate(names):
        rows.append([f"  {name}: nominal / learner", *(
            f"{_fmt(a)} / {_fmt(b)}" for a, b in zip(phase_rmse(err_nominal[:, [j]], phases), phase_rmse(err[:, [j]], phases))
        )])
    print(_table(headers, rows))
    alarm_idx = np.nonzero(out.alarm)[0]
    when = (t[alarm_idx] if t is not None else alarm_idx)
    unit = " [s]" if t is not None else " (sample index)"
    if learner_has_detector(learner):
        print(f"drift alarms{unit}: {_alarm_text(list(when), limit=8)}")
    rejected = int(T - accepted.sum())
    if rejected:
        print(f"skipped {rejected} samples with NaN or inf")
    mass = _payload_report(learner, state)
    if mass is not None:
        from dense_armor import payload

        print(f"learned payload on {learner.link}: {mass[0]:.4f} +- {mass[1]:.4f} kg")
        print(payload.payload_estimate(learner, state).summary(learner.link))
    elif hasattr(state, "rls"):
        w = np.asarray(state.rls.w)
        print(_table(["weights", *learners.FEATURE_NAMES], [[name, *(f"{v:.4g}" for v in w[j])] for j, name in enumerate(names)]))
    print(f"({elapsed:.1f} s, {T / max(elapsed, 1e-9):,.0f} samples/s)")
    if args.out:
        print(f"per-sample predictions and errors written to {args.out}")
    if plt is not None:
        _plot_replay(plt, args.plot, t if t is not None else np.arange(T), t is not None, err_nominal, err, when, names)
        print(f"plot written to {args.plot}")
    return 0


def _learner_label(args) -> str:
    text = f"{args.learner} (lam {_lam(args.learner, args):g}, delta {args.delta:g}"
    if args.learner.startswith("drift-aware"):
        text += f", trigger {args.trigger}"
    return text + ")"


def _plot_replay(plt, path, x, timed, err_nominal, err, alarms, names):
    fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
    window = max(1, len(x) // 200)
    ax.semilogy(x, np.maximum(_moving_rms(err_nominal, window), 1e-9), lw=1, label="nominal URDF")
    ax.semilogy(x, np.maximum(_moving_rms(err, window), 1e-9), lw=1, label="learner (prequential)")
    for a in alarms:
        ax.axvline(a, color="r", lw=0.6, alpha=0.6)
    ax.set_xlabel("time [s]" if timed else "sample")
    ax.set_ylabel(f"torque error [N m] (RMS over {window} samples)")
    ax.set_title("Replay: prediction error" + (" (red: drift alarms)" if len(alarms) else ""))
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- info


def _vec(v, digits=4) -> str:
    v = np.asarray(v, dtype=float)
    v = np.where(np.abs(v) < 1e-12, 0.0, v)  # no -1.9e-17 from rounding
    return "(" + ", ".join(f"{x:.{digits}g}" for x in v) + ")"


def _frames_at_zero(model) -> np.ndarray:
    """(F, 3) frame positions in the base frame at q = 0 (host NumPy: nothing to compile)."""
    world = []
    for i, parent in enumerate(model.parents):
        R, p = np.asarray(model.joint_rotation[i], float), np.asarray(model.joint_translation[i], float)
        world.append((R, p) if parent < 0 else (world[parent][0] @ R, world[parent][0] @ p + world[parent][1]))
    out = []
    for f, body in enumerate(model.frame_bodies):
        p = np.asarray(model.frame_translation[f], float)
        out.append(p if body < 0 else world[body][0] @ p + world[body][1])
    return np.array(out)


def _limit(v) -> str:
    return "-" if not np.isfinite(v) else f"{v:g}"


def cmd_info(args) -> int:
    model = parse_urdf(args.urdf)
    n = model.n
    root = model.frame_names[0]
    print(f"robot {model.name!r} from {args.urdf}: {n} movable joints, {len(model.frame_names)} links, fixed base {root!r}")
    print(f"gravity {_vec(model.gravity)} m/s^2 in the base frame")
    print("\njoints, in the order of q (depth-first, file order):")
    rows = []
    for i in range(n):
        parent = root if model.parents[i] < 0 else model.body_names[model.parents[i]]
        rows.append([
            i, model.joint_names[i], model.joint_kinds[i], parent, model.body_names[i], _vec(model.axis[i]),
            _vec(model.joint_translation[i]), _limit(model.lower[i]), _limit(model.upper[i]),
            _limit(model.velocity_limit[i]), _limit(model.effort_limit[i]),
        ])
    print(_table(["#", "joint", "type", "parent", "child", "axis", "origin [m]", "lower", "upper", "velocity", "effort"], rows,
                 [">", "<", "<", "<", "<", "<", "<", ">", ">", ">", ">"]))
    print("\nbodies (links behind fixed joints merged into the body they hang from):")
    rows = []
    for b in range(n):
        pi = np.asarray(model.inertia[b], dtype=float)
        m = pi[0]
        com = pi[1:4] / m if m > 0 else np.zeros(3)
        ixx, ixy, iyy, ixz, iyz, izz = pi[4:10]
        I_o = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        I_c = I_o - m * (com @ com * np.eye(3) - np.outer(com, com))
        merged = [f for f, body in zip(model.frame_names, model.frame_bodies) if body == b]
        rows.append([b, model.body_names[b], f"{m:.4g}", _vec(com), _vec(np.diag(I_c)), ", ".join(merged)])
    print(_table(["#", "body", "mass [kg]", "com [m]", "inertia diag at com [kg m^2]", "links"], rows,
                 [">", "<", ">", "<", "<", "<"]))
    total = float(np.sum(np.asarray(model.inertia)[:, 0]))
    print(f"moving mass {total:.4g} kg (the fixed base's links carry no dynamics)")
    print("\nframes (every link; position at q = 0 in the base frame):")
    p0 = _frames_at_zero(model)
    rows = []
    for f, name in enumerate(model.frame_names):
        body = model.frame_bodies[f]
        rows.append([f, name, "base" if body < 0 else model.body_names[body], _vec(model.frame_translation[f]), _vec(np.asarray(p0[f]))])
    print(_table(["#", "frame", "on body", "offset in body [m]", "position at q = 0 [m]"], rows, [">", "<", "<", "<", "<"]))
    return 0


# ----------------------------------------------------------------------------- parser and main


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Robot dynamics from a URDF in pure JAX, and online learning of what the URDF gets wrong.",
        epilog="Run 'dense-armor COMMAND --help' for a command's options. Docs: docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {dense_armor.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    demo = sub.add_parser(
        "demo", help="the main job on the embedded two-link arm (payload, then friction)",
        description="The embedded two-link arm follows a smooth trajectory; a third of the way in it picks up a "
        "payload, two thirds in its joints gain friction. The URDF model and the learners predict every torque "
        "before learning it (prequential); the table gives the RMSE per phase, the drift alarms and the learned "
        "payload mass.",
    )
    demo.add_argument("--duration", type=positive, default=30.0, help="seconds (default 30)")
    demo.add_argument("--rate", type=positive, default=100.0, help="samples per second (default 100)")
    _add_change_options(demo, 0.5, 0.2, 0.1, gained=True)
    _add_run_options(demo, 0.01, "trajectory and noise seed", "horizontal",
                     "arm in a horizontal plane (the design document's) or on a wall", "draw the prequential error over time")
    _add_learner_options(demo, "default 0.99 for the five-feature learner, the documented classes' for the others")
    demo.set_defaults(func=cmd_demo, default_lam={"five-feature": 0.99})

    control = sub.add_parser(
        "control", help="closed loop: computed-torque control with an unmodelled payload, with and without the learner",
        description="A computed-torque controller that knows only the URDF moves the two-link arm (on a wall, so "
        "gravity acts) through point-to-point moves while it carries a payload it does not know about. Forward "
        "dynamics by aba, semi-implicit Euler, the whole run in one lax.scan. The same run is made with the nominal "
        "command only and with the learned residual added; the learner learns online from the applied torques.",
    )
    control.add_argument("--learner", choices=tuple(LEARNER_CLASSES), default="payload",
                         help="the learner in the loop (default payload)")
    _add_change_options(control, 0.5, 0.0, 0.0, gained=False)
    control.add_argument("--kp", type=positive, default=400.0, help="position gain, 1/s^2 (default 400)")
    control.add_argument("--kd", type=positive, default=40.0, help="velocity gain, 1/s (default 40)")
    control.add_argument("--rate", type=positive, default=1000.0, help="control rate, Hz (default 1000)")
    control.add_argument("--laps", type=count, default=2, help="laps of the four targets (default 2)")
    _add_run_options(control, 0.0, "noise seed", "vertical",
                     "arm on a wall (gravity acts) or in a horizontal plane", "draw the tracking error and the tip path")
    _add_learner_options(control, "default: the documented classes', 1 but 0.99 for drift-aware")
    control.set_defaults(func=cmd_control)

    replay = sub.add_parser(
        "replay", help="replay a logged trajectory (CSV or NPZ) through a learner",
        description="Replay a log through a learner, prequentially (each sample predicted, then learned). Columns: "
        "q_<joint>, qd_<joint>, qdd_<joint>, tau_<joint> (joint names from the URDF) or q0..q{n-1}, qd0.., qdd0.., "
        "tau0..; optional t (s). q and tau are required; missing qdd (and qd) are estimated by a Savitzky-Golay "
        "differentiator, which needs --dt or a t column. See docs/cli.md.",
    )
    replay.add_argument("urdf", metavar="ROBOT.urdf", help="the robot's URDF")
    replay.add_argument("log", metavar="LOG", help="the log, .csv (with a header line) or .npz")
    replay.add_argument("--learner", choices=tuple(LEARNER_CLASSES), default="five-feature",
                        help="which learner (default five-feature): " + "; ".join(f"{k}: as {v}" for k, v in LEARNER_CLASSES.items()))
    replay.add_argument("--link", help="payload learner: the link carrying the payload (default: the last body)")
    replay.add_argument("--no-friction", action="store_true", help="payload learner: no friction columns")
    replay.add_argument("--dt", type=positive, help="sampling period, s (when the log has no t column)")
    replay.add_argument("--sg-window", type=_odd_window, default=11, help="differentiator window, samples, odd (default 11)")
    replay.add_argument("--sg-order", type=count, default=3, help="differentiator polynomial order (default 3)")
    replay.add_argument("--out", metavar="FILE", help="write per-sample predictions and errors (.csv or .npz)")
    replay.add_argument("--plot", metavar="FILE.png", help="draw the prediction error over the log")
    replay.add_argument("--chunk", type=count, default=2000, help="samples per lax.scan chunk (default 2000)")
    replay.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    _add_learner_options(replay, "default: the documented classes', 1 but 0.99 for drift-aware")
    replay.set_defaults(func=cmd_replay)

    info = sub.add_parser(
        "info", help="what the parser made of a URDF",
        description="Joints (in the order of q), types, axes, limits; bodies after merging fixed joints, with "
        "masses, centres of mass and inertias; every frame and where it is at q = 0.",
    )
    info.add_argument("urdf", metavar="ROBOT.urdf", help="the robot's URDF")
    info.set_defaults(func=cmd_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else 0
    try:
        with jax.enable_x64(True):
            return int(args.func(args) or 0)
    except (UserError, URDFError, LogError, FileNotFoundError, IsADirectoryError, PermissionError, ValueError) as err:
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
