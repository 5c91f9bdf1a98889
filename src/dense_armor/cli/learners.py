"""The learners of the command line: their options, and building one through its documented class."""

from __future__ import annotations

from dense_armor.cli.common import UserError, count, forgetting_factor, natural, nonnegative, positive
from dense_armor.robot_learner import MEMORY

#: What ``--learner`` accepts, and the documented class each one is configured like.
LEARNER_CLASSES = {
    "five-feature": "ResidualDynamicsLearner",
    "drift-aware": "DriftAwareResidualDynamicsLearner",
    "payload": "PayloadResidualDynamicsLearner",
    "drift-aware-payload": "PayloadResidualDynamicsLearner with a trigger",
    "robot": "RobotResidualDynamicsLearner",
}
#: The forgetting factor of each learner when ``--lam`` is not given (the wrappers' defaults).
DEFAULT_LAM = {"five-feature": 1.0, "drift-aware": 0.99, "payload": 1.0, "drift-aware-payload": 1.0, "robot": None}
#: The demo's learners, in the table's order; the demo's plain five-feature learner forgets (0.99).
DEMO_LEARNERS = ("five-feature", "drift-aware", "payload", "drift-aware-payload")
TRIGGERS = ("innovation", "hampel", "cusum")
_INNOVATION = ("k", "h", "min_samples", "min_sigma")


def lam(kind: str, args) -> float | None:
    """The learner's ``--lam``, else its default (``None``: the robot learner's memory)."""
    if args.lam is not None:
        return args.lam
    return getattr(args, "default_lam", {}).get(kind, DEFAULT_LAM[kind])


def forgetting_text(kind: str, args) -> str:
    """``lam 0.99``, or the robot learner's default memory."""
    factor = lam(kind, args)
    return f"memory {MEMORY:g} s" if factor is None else f"lam {factor:g}"


def learner_name(kind: str, args) -> str:
    """A table label: the learner, and its forgetting factor or trigger."""
    if kind.startswith("drift-aware"):
        base = "drift-aware payload" if kind == "drift-aware-payload" else "drift-aware five-feature"
        return f"{base}, {args.trigger}"
    return f"{kind}, {forgetting_text(kind, args)}"


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

    factor = lam(kind, args)
    if kind == "robot":
        link = getattr(args, "link", None)
        if link is not None and link not in model.frame_names:
            raise UserError(f"--link {link!r} is not a link of the robot (links: {', '.join(model.frame_names)})")
        return od.RobotResidualDynamicsLearner(
            model, rate=getattr(args, "rate", None) or 1000.0, lam=factor, link=link,
            coulomb_width=args.coulomb_width, detect_payload=not args.no_payload, min_mass=args.min_mass,
            window=args.window, consistent=args.consistent,
        ).learner
    if kind == "five-feature":
        return od.ResidualDynamicsLearner(model, lam=factor, delta=args.delta, forgetting=args.forgetting).learner
    if kind == "drift-aware":
        innovation = {f"innovation_{k}": v for k, v in _innovation_given(args).items()}
        return od.DriftAwareResidualDynamicsLearner(
            model, lam=factor, delta=args.delta, fast_lam=args.fast_lam, warmup_steps=args.warmup_steps,
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
            model, link, lam=factor, delta=args.delta, friction=not getattr(args, "no_friction", False),
            forgetting=args.forgetting, trigger=args.trigger if drift_aware else None,
            detector=_detector(args) if drift_aware else None, reopen=args.reopen if drift_aware else None,
            fast_lam=args.fast_lam, warmup_steps=args.warmup_steps, detector_warmup=args.detector_warmup,
        ).learner
    raise UserError(f"unknown learner {kind!r}; choose one of {', '.join(LEARNER_CLASSES)}")


def payload_report(learner, state) -> tuple[float, float] | None:
    """(mass, std) learned by a payload learner, ``None`` for other learners."""
    from dense_armor import payload

    if not isinstance(learner, payload.PayloadLearner):
        return None
    est = payload.payload_estimate(learner, state)
    return float(est.mass), float(est.mass_std)


def add_learner_options(p, lam_help: str):
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
    r = p.add_argument_group("robot learner options")
    r.add_argument("--coulomb-width", type=positive, default=0.02, help="width of the Coulomb term tanh(qd / width), rad/s (default 0.02)")
    r.add_argument("--no-payload", action="store_true", help="no payload-change detection")
    r.add_argument("--min-mass", type=nonnegative, default=0.6, help="smallest payload change that raises an alarm, kg (default 0.6)")
    r.add_argument("--window", type=positive, default=1.5, help="the payload detector's window, s (default 1.5)")
    r.add_argument("--consistent", action="store_true", help="predict with the nearest physically consistent inertial parameters")
    g.add_argument("--hampel-radius", type=count, default=20, help="Hampel trigger: window radius (default 20)")
    g.add_argument("--hampel-n-sigmas", type=positive, default=3.0, help="Hampel trigger: threshold in robust sigmas (default 3)")
    g.add_argument("--drift-radius", type=count, default=10, help="CUSUM trigger: window radius (default 10)")
    g.add_argument("--drift-ref-mult", type=count, default=3, help="CUSUM trigger: reference window, in radii (default 3)")
    g.add_argument("--drift-k", type=nonnegative, default=0.5, help="CUSUM trigger: allowance k (default 0.5)")
    g.add_argument("--drift-h", type=positive, default=20.0, help="CUSUM trigger: threshold h (default 20)")


def add_change_options(p, payload: float, viscous: float, coulomb: float, *, gained: bool) -> None:
    """--payload, --viscous, --coulomb: what the simulated arm carries or gains that the URDF
    does not know; each help ends with its default."""
    what = ("payload mass picked up", "viscous friction gained", "Coulomb friction gained") if gained else (
        "unmodelled payload", "joint viscous friction", "joint Coulomb friction")
    for name, text, unit, default in zip(("payload", "viscous", "coulomb"), what, ("kg", "N m s/rad", "N m"), (payload, viscous, coulomb)):
        p.add_argument(f"--{name}", type=nonnegative, default=default, help=f"{text}, {unit} (default {default:g})")


def add_run_options(p, sigma: float, seed_help: str, plane: str, plane_help: str, plot_help: str) -> None:
    """--sigma, --seed, --plane, --plot of a simulated run."""
    p.add_argument("--sigma", type=nonnegative, default=sigma, help=f"torque-sensor noise std, N m (default {sigma:g})")
    p.add_argument("--seed", type=natural, default=0, help=f"{seed_help} (default 0)")
    p.add_argument("--plane", choices=("horizontal", "vertical"), default=plane, help=f"{plane_help} (default {plane})")
    p.add_argument("--plot", metavar="FILE.png", help=plot_help)
