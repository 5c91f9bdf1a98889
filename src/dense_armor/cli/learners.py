"""The learners of the command line: their options, and building one through its documented class."""

from __future__ import annotations

import inspect

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
#: The demo's learners, in the table's order; the demo's plain five-feature learner forgets (0.99).
DEMO_LEARNERS = ("five-feature", "drift-aware", "payload", "drift-aware-payload")
TRIGGERS = ("innovation", "hampel", "cusum")
_DETECTOR_OPTIONS = {  # the drift-aware payload learner's trigger: its keywords, from the options
    "innovation": {"k": "innovation_k", "h": "innovation_h", "min_samples": "innovation_min_samples",
                   "min_sigma": "innovation_min_sigma"},
    "hampel": {"radius": "hampel_radius", "n_sigmas": "hampel_n_sigmas"},
    "cusum": {"radius": "drift_radius", "ref_mult": "drift_ref_mult", "k": "drift_k", "h": "drift_h"},
}


def learner_class(kind: str):
    """The documented class that builds the learner ``kind``."""
    from dense_armor.utility.learn import online_dynamics as od

    if kind not in LEARNER_CLASSES:
        raise UserError(f"unknown learner {kind!r}; choose one of {', '.join(LEARNER_CLASSES)}")
    return getattr(od, LEARNER_CLASSES[kind].split()[0])


def defaults(kind: str) -> dict:
    """The documented class's keyword defaults: the one place they are set."""
    parameters = inspect.signature(learner_class(kind)).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def options(kind: str, args) -> dict:
    """The keywords the command line passes to the class of ``kind``: the options given (a
    learner option left out keeps the class's default), and what the command chooses itself."""
    given = {key: getattr(args, key) for key in defaults(kind) if getattr(args, key, None) is not None}
    if "lam" not in given and kind in getattr(args, "default_lam", {}):
        given["lam"] = args.default_lam[kind]
    if kind == "robot":
        given["detect_payload"] = not args.no_payload
    elif kind == "payload":
        for key in ("trigger", "reopen"):  # no trigger: nothing to respond with
            given.pop(key, None)
    elif kind == "drift-aware-payload":
        names = _DETECTOR_OPTIONS[args.trigger]
        chosen = {key: getattr(args, name) for key, name in names.items() if getattr(args, name, None) is not None}
        if chosen:
            from dense_armor import drift

            given["detector"] = {"innovation": drift.Innovation, "hampel": drift.Hampel, "cusum": drift.CUSUM}[args.trigger](**chosen)
    if kind in ("payload", "drift-aware-payload"):
        given["friction"] = not getattr(args, "no_friction", False)
    return given


def refuse_others(kind: str, args) -> None:
    """A :class:`UserError` for a learner option given that the learner ``kind`` does not take
    (it would be silently ignored: ``--delta`` for the robot learner)."""
    takes = set(defaults(kind)) | {"no_payload" if kind == "robot" else "no_friction"}
    if kind == "payload":
        takes -= {"trigger", "reopen"}  # no trigger: nothing to respond with
    which = f"--learner {kind}"
    if kind.startswith("drift-aware"):  # another trigger's options would do nothing
        takes -= {name for names in _DETECTOR_OPTIONS.values() for name in names.values()}
        takes |= set(_DETECTOR_OPTIONS[args.trigger].values())
        which += f" --trigger {args.trigger}"
    # the rate is the log's, the trigger has a default: neither tells what was given
    every = set().union(*map(defaults, LEARNER_CLASSES), {"no_payload", "no_friction"}) - {"rate", "trigger"}
    for key in sorted(every - takes):
        if getattr(args, key, None) not in (None, False):
            raise UserError(f"--{key.replace('_', '-')} does not apply to {which}")


def setting(kind: str, args, key: str):
    """The value of one keyword of the learner the command line builds."""
    return {**defaults(kind), **options(kind, args)}[key]


def forgetting_text(kind: str, args) -> str:
    """``lam 0.99``, or the robot learner's default memory."""
    factor = setting(kind, args, "lam")
    return f"memory {MEMORY:g} s" if factor is None else f"lam {factor:g}"


def learner_name(kind: str, args) -> str:
    """A table label: the learner, and its forgetting factor or trigger."""
    if kind.startswith("drift-aware"):
        base = "drift-aware payload" if kind == "drift-aware-payload" else "drift-aware five-feature"
        return f"{base}, {args.trigger}"
    return f"{kind}, {forgetting_text(kind, args)}"


def build_learner(kind: str, model, args):
    """The functional learner ``kind`` on ``model``, built by its documented class from the
    parsed options (:func:`options`), so the command line and the classes share their defaults."""
    link = getattr(args, "link", None)
    if link is not None and link not in model.frame_names:
        raise UserError(f"--link {link!r} is not a link of the robot (links: {', '.join(model.frame_names)})")
    return learner_class(kind)(model, **options(kind, args)).learner


def payload_report(learner, state):
    """``(mass, std, estimate)`` learned by a payload learner (kg, kg, a
    :class:`~dense_armor.payload.PayloadEstimate`), ``None`` for other learners."""
    import jax

    from dense_armor import payload

    if not isinstance(learner, payload.PayloadLearner):
        return None
    with jax.enable_x64(True):  # one compiled program, kept in the compile cache
        est = payload.estimate(learner, state)
    return float(est.mass), float(est.mass_std), est


def add_learner_options(p, lam_help: str):
    """The learner options; each left out keeps the documented class's default, which its help
    states (read from the class)."""
    five, drift, robot = defaults("five-feature"), defaults("drift-aware"), defaults("robot")

    def default(value) -> str:
        return f"default {value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else f"default {value}"

    g = p.add_argument_group("learner options")
    g.add_argument("--lam", type=forgetting_factor, default=None, help=f"forgetting factor in (0, 1] ({lam_help})")
    g.add_argument("--delta", type=positive, help=f"initial covariance scale, P0 = delta I ({default(five['delta'])})")
    g.add_argument("--forgetting", choices=("directional", "exponential"),
                   help=f"forget only along excited directions (no wind-up), or the textbook update ({default(five['forgetting'])})")
    g.add_argument("--trigger", choices=TRIGGERS, default="innovation",
                   help="drift trigger of the drift-aware learners (default innovation)")
    g.add_argument("--fast-lam", type=forgetting_factor, help=f"forgetting factor after a drift alarm ({default(drift['fast_lam'])})")
    g.add_argument("--warmup-steps", type=natural, help=f"samples of --fast-lam after an alarm ({default(drift['warmup_steps'])})")
    g.add_argument("--reopen", type=nonnegative, default=None,
                   help="on an alarm, add REOPEN * I to the covariance (default with the innovation trigger: 10 for "
                   "the five-feature learner, 100 for the payload learner; else 0)")
    g.add_argument("--detector-warmup", type=natural,
                   help=f"samples learned before the trigger is fed ({default(drift['detector_warmup'])})")
    g.add_argument("--innovation-k", type=nonnegative,
                   help=f"innovation trigger: allowance per sample ({default(drift['innovation_k'])})")
    g.add_argument("--innovation-h", type=positive, help=f"innovation trigger: threshold ({default(drift['innovation_h'])})")
    g.add_argument("--innovation-min-samples", type=count,
                   help=f"innovation trigger: noise samples before it arms ({default(drift['innovation_min_samples'])})")
    g.add_argument("--innovation-min-sigma", type=nonnegative,
                   help=f"innovation trigger: noise floor, N m ({default(drift['innovation_min_sigma'])})")
    r = p.add_argument_group("robot learner options")
    r.add_argument("--coulomb-width", type=positive,
                   help=f"width of the Coulomb term tanh(qd / width), rad/s ({default(robot['coulomb_width'])})")
    r.add_argument("--no-payload", action="store_true", help="no payload-change detection")
    r.add_argument("--min-mass", type=nonnegative,
                   help=f"smallest payload change that raises an alarm, kg ({default(robot['min_mass'])})")
    r.add_argument("--window", type=positive, help=f"the payload detector's window, s ({default(robot['window'])})")
    r.add_argument("--consistent", action="store_true", help="predict with each body's nearest physically consistent inertial parameters")
    g.add_argument("--hampel-radius", type=count, help=f"Hampel trigger: window radius ({default(drift['hampel_radius'])})")
    g.add_argument("--hampel-n-sigmas", type=positive,
                   help=f"Hampel trigger: threshold in robust sigmas ({default(drift['hampel_n_sigmas'])})")
    g.add_argument("--drift-radius", type=count, help=f"CUSUM trigger: window radius ({default(drift['drift_radius'])})")
    g.add_argument("--drift-ref-mult", type=count,
                   help=f"CUSUM trigger: reference window, in radii ({default(drift['drift_ref_mult'])})")
    g.add_argument("--drift-k", type=nonnegative, help=f"CUSUM trigger: allowance k ({default(drift['drift_k'])})")
    g.add_argument("--drift-h", type=positive, help=f"CUSUM trigger: threshold h ({default(drift['drift_h'])})")


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
