"""``dense-armor demo`` and ``dense-armor control``: the main job and the closed loop, on the
embedded two-link arm."""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import learners
from dense_armor.cli.common import PROG, Output, UserError, alarm_text, fmt, require_matplotlib, table
from dense_armor.cli.learners import DEMO_LEARNERS, build_learner, learner_name, payload_report

MAX_SAMPLES = 10_000_000  # a simulated run held in memory: about 1 GB
MAX_CONTROL_SAMPLES = 1_000_000  # a closed loop, simulated twice and sample by sample


def _check_size(samples: float, what: str, least: int, most: float = MAX_SAMPLES) -> None:
    if samples < least:
        raise UserError(f"{what}: {samples:g} samples is too few (at least {least})")
    if samples > most:
        raise UserError(f"{what}: {samples:g} samples is too many to simulate (at most {most:g}); "
                        "use a shorter run or a lower rate")


def cmd_demo(args) -> int:
    from dense_armor.demo import drift_scenario, phase_rmse

    _check_size(args.duration * args.rate, "--duration x --rate", 30)
    plot = Output(args.plot, "--plot", suffixes=(".png",))
    urdf = Output(args.write_urdf, "--write-urdf", suffixes=(".urdf",))
    if args.write_log and Path(args.write_log).suffix.lower() not in (".csv", ".npz", ".mcap", ".db3"):
        raise UserError(f"--write-log {args.write_log}: expected a file ending in .csv or .npz, or a ROS 2 bag (a new "
                        "folder) ending in .mcap or .db3")
    log = Output(args.write_log, "--write-log", suffixes=(".csv", ".npz")) if args.write_log and not _is_bag(args.write_log) else None
    if args.write_log and _is_bag(args.write_log) and Path(args.write_log).exists():
        raise UserError(f"--write-log {args.write_log}: a bag is a new folder; this one exists")
    plt = require_matplotlib() if plot else None
    started = time.perf_counter()
    sc = drift_scenario(
        duration=args.duration, rate=args.rate, payload=args.payload, viscous=args.viscous,
        coulomb=args.coulomb, sigma=args.sigma, seed=args.seed, plane=args.plane,
    )
    model = sc.model
    runs = {}
    for kind in DEMO_LEARNERS:
        learner = build_learner(kind, model, args)
        state, out = learners.replay(learner, learners.init(learner, jnp.float64), sc.measured)
        runs[learner_name(kind, args)] = (learner, state, jax.tree.map(np.asarray, out))
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
    rows = [["nominal URDF", *map(fmt, phase_rmse(sc.true_tau - nominal, sc.phases)), "-", "-"]]
    errors = {"nominal URDF": sc.true_tau - nominal}
    alarms = {}
    for name, (learner, state, out) in runs.items():
        err = sc.true_tau - out.prediction
        errors[name] = err
        alarms[name] = sc.t[np.nonzero(out.alarm)[0]]
        mass = payload_report(learner, state)
        mass_text = "-" if mass is None else f"{mass[0]:.4f} +- {mass[1]:.4f}"
        alarms_shown = alarm_text(alarms[name]) if learner_has_detector(learner) else "-"
        rows.append([name, *map(fmt, phase_rmse(err, sc.phases)), alarms_shown, mass_text])
    print(table(headers, rows))
    print(f"({time.perf_counter() - started:.1f} s)")
    if plt is not None:
        _plot_demo(plt, plot.handle, sc, errors, alarms)
        plot.commit()
        print(f"plot written to {args.plot}")
    if urdf:
        urdf.handle.write(demo_urdf(args.plane).encode())
        urdf.commit()
        print(f"the arm's URDF written to {args.write_urdf}")
    if args.write_log:
        _write_log(args.write_log, log, sc)
        print(f"the run logged as a robot logs it written to {args.write_log}")
    return 0


def _is_bag(path) -> bool:
    return Path(path).suffix.lower() in (".mcap", ".db3")


def demo_urdf(plane: str) -> str:
    """The demo's nominal URDF; for the wall, with a mount that turns the base so that the
    standard gravity (-z) acts in the plane of motion (-y of the base)."""
    from dense_armor.robots import minimal_urdf

    text = minimal_urdf()
    if plane == "vertical":
        mount = ('<link name="wall"/><joint name="mount" type="fixed"><parent link="wall"/><child link="base"/>'
                 '<origin rpy="1.5707963267948966 0 0"/></joint></robot>')
        text = text.replace("</robot>", mount)
    return text


def _write_log(path, output, sc):
    """The run as a robot logs it: stamps, positions, velocities and measured torques (no
    accelerations), a CSV, NPZ or ROS 2 bag (.mcap, .db3) by the name's suffix."""
    from dense_armor.logs import write_bag, write_table

    names = sc.model.joint_names
    q, qd, tau = (np.asarray(a) for a in (sc.measured.q, sc.measured.qd, sc.measured.tau))
    if output is None:
        write_bag(path, sc.t, names, q, qd, tau, storage="mcap" if Path(path).suffix.lower() == ".mcap" else "sqlite3")
        return
    columns = {"t": sc.t}
    for j, name in enumerate(names):
        columns[f"q_{name}"], columns[f"qd_{name}"], columns[f"tau_{name}"] = q[:, j], qd[:, j], tau[:, j]
    write_table(output.handle, columns, Path(path).suffix.lower())
    output.commit()


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
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)


# ----------------------------------------------------------------------------- control


def cmd_control(args) -> int:
    from dense_armor.control import simulate
    from dense_armor.demo import tip_positions, tracking_scenario

    # a lap: 4 moves and 4 holds of 1 s
    _check_size(args.laps * 8 * args.rate, "--laps x --rate", 10, MAX_CONTROL_SAMPLES)
    dt = 1.0 / args.rate
    if dt * np.sqrt(args.kp) >= 2.0 or dt * args.kd >= 2.0:  # the discrete loop's stability bound
        raise UserError(f"--rate {args.rate:g} Hz is too slow for kp {args.kp:g}, kd {args.kd:g} (the loop needs "
                        f"rate > sqrt(kp) / 2 and rate > kd / 2); raise --rate or lower the gains")
    plot = Output(args.plot, "--plot", suffixes=(".png",))
    plt = require_matplotlib() if plot else None
    started = time.perf_counter()
    sc = tracking_scenario(payload=args.payload, rate=args.rate, kp=args.kp, kd=args.kd, plane=args.plane, laps=args.laps)
    learner = build_learner(args.learner, sc.nominal, args)
    state = learners.init(learner, jnp.float64)
    noise = args.sigma * np.random.default_rng(args.seed).standard_normal(sc.reference.q.shape)
    runs = [
        simulate(sc.nominal, sc.real, sc.reference, sc.dt, sc.kp, sc.kd, learner, state,
                 args.viscous, args.coulomb, noise, use)
        for use in (False, True)  # one compiled function: use_learner is traced
    ]
    final = runs[1][0]
    rollouts = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *[r for _, r in runs])
    if not np.all(np.isfinite(rollouts.error)):
        raise UserError(f"the closed loop diverged at {args.rate:g} Hz with kp {args.kp:g}, kd {args.kd:g}: "
                        "raise --rate or lower the gains")
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
    kind, _, detail = learner_name(args.learner, args).partition(", ")
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
    print(table(headers, rows))
    mass = payload_report(learner, final)
    if mass is not None:
        print(f"learned payload: {mass[0]:.4f} +- {mass[1]:.1g} kg (true {args.payload:g} kg)")
    print(f"({time.perf_counter() - started:.1f} s)")
    if plt is not None:
        _plot_control(plt, plot.handle, sc, rollouts, names)
        plot.commit()
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
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)
