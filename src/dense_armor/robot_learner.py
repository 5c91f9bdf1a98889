"""The whole robot learned online, with its URDF as the prior.

:class:`RobotLearner` regresses the measured torque on every body's 10 inertial parameters and
five terms per joint,

    tau = Y(q, qd, qdd) pi + a qdd + f_v qd + f_c s(qd / v0) + f_s (s(qd / v0) - s(qd / (k v0))) + f_0 + noise,

``Y`` the joint-torque regressor (n, 10 B) (:func:`dense_armor.dynamics.joint_torque_regressor`),
``a`` the rotor inertia reflected to each joint (armature), ``f_v`` viscous and ``f_c`` Coulomb
friction (``s = tanh``, a smooth sign of width ``v0``), ``f_s`` the friction's shape at low
speed (a Stribeck term, ``k =`` :data:`STRIBECK_WIDTH`: ``f_s > 0`` static friction above the
sliding friction, ``f_s < 0`` friction that builds up more slowly than the smooth sign, as a
soft constraint's; it vanishes at rest and beyond a few ``k v0``) and ``f_0`` a torque offset,
per coordinate (``B = n`` bodies but for coupled mimic joints). A joint's friction saturates at
a speed of its own, so no one width fits every joint: the Stribeck term gives each its shape.
The ``10 B + 5 n`` parameters are shared by all joints;
one Bayesian recursive least squares learns them from the ``n`` joint equations of each sample,
all but the inertial parameters no torque depends on in any state (:func:`invisible`: most of
those of a body turned by one joint from the fixed base), which stay at the prior at no cost.

The URDF is the prior. Its mean is the URDF's inertial parameters and the model's armature
(zero unless set; no friction or offset); its standard deviation is :class:`Prior`: a fraction
of each inertial parameter (30 %) with floors, and torque-scaled deviations for the joint terms.
The learner keeps the deviation ``w = theta - theta_URDF`` and its covariance ``P`` (the
posterior, in parameter units; in float32 as a factor ``S S'``: ``P`` soon spans more decades
than float32 resolves, its factor half as many), so the first prediction is the URDF's and
directions the data do not excite stay exactly at the prior: with a proper prior the posterior
exists whatever the excitation, and no symbolic reduction to base parameters is needed (the
unidentifiable combinations keep ``P``'s prior variance).

Noise. Each joint's equation is weighted by its spread ``s_j^2``: its noise variance ``r_j`` and,
near rest, the friction band below. ``r_j`` is learned online: after a sample, ``r_j <- r_j (1 +
beta (r_j / s_j^2) (rho_j - 1))`` with ``rho_j = (e_post_j^2 + (X P_post X')_jj) / s_j^2``, whose
expectation is 1 when ``r_j`` is right (``e_post`` the posterior error; the adaptive filter of
Sarkka & Nummenmaa 2009 in its one-step form, each sample counted by the share of its spread
that is noise), averaged over ``noise_time`` seconds, each ``rho_j`` clipped at
:data:`NOISE_CLIP` (a change the learner has not yet followed must not pass for noise). The
errors' lag-one autocorrelation is tracked too: real residuals are correlated in time, and the
payload detector and the reported standard deviations account for it. And their excess per
joint and speed band (:data:`SPEED_BANDS`), the mean squared standardised error there: friction
at low speed misfits, and the payload detector widens those rows' noise by it.

Friction at rest. A joint that stops keeps what its static friction holds, in the direction it
last moved, anywhere within about twice the dry friction, until it moves again: no function of
the state predicts it. So at rest the spread adds that band, ``2 |f_c| (1 - tanh(|qd| / (k_r
v0)))`` with the Coulomb friction learned so far and ``k_r =`` :data:`REST_WIDTH` (identification
leaves out the samples near zero velocity for the same reason; a joint moving slower than ``v0``
but moving slides, and the Coulomb and Stribeck terms learn its friction there), and the
payload detector counts that band once for :data:`HELD_FOR` seconds, the torque a rest holds,
not once a sample.

Residuals that never do harm. The torque a controller gets, :attr:`StepOutput.prediction`,
is the URDF's plus the learned residual ``r = X w`` times a trust ``c_j`` in [0, 1]: the
least-squares coefficient of the URDF's recent error on the learner's recent residual,
``c_j = sum lam^k e_j r_j / sum lam^k r_j^2`` over ``trust_time`` seconds, at least
:data:`TRUST_SAMPLES` samples (0 before any evidence). It is the learner's predictive
uncertainty measured on its own predictions: 0 (the URDF's torque) while the residual has not
yet explained the URDF's error, near 1 once it does, smaller when the residual overshoots. The
result is limited to the URDF's effort limits.

Payload changes. A :class:`~dense_armor.payload_change.PayloadDetector` tests the payload
body's parameters for a change; on an alarm that body's covariance is re-opened and the rest of
the learned robot kept. :attr:`StepOutput.extra` is a :class:`PayloadTrace`: the payload
body's change since the last alarm, fitted against the baseline (the parameters before it).

Same functional shape as the other learners: hyperparameters are pytree leaves, the state is
an immutable :class:`RobotState`, ``step`` is prequential (predict, score, then learn) and
drops into ``lax.scan``; :func:`dense_armor.learners.step`, :func:`~dense_armor.learners.replay`,
:class:`~dense_armor.learners.Stepper` and ``jax.vmap`` work on it. :func:`robot_estimate`
reports every body and joint in physical terms, the most probable physically consistent robot
under the posterior (:func:`dense_armor.inertial.most_probable_consistent`), with standard
deviations and flags for what the data have not excited.

References:
    Atkeson, C., An, C., Hollerbach, J. (1986). Estimation of inertial parameters of
    manipulator loads and links. IJRR 5(3), 101-119.
    Sarkka, S., Nummenmaa, A. (2009). Recursive noise adaptive Kalman filtering by variational
    Bayesian approximations. IEEE Trans. Automatic Control 54(3), 596-600.
    Wensing, P., Kim, S., Slotine, J.-J. (2017). Linear matrix inequalities for physically
    consistent inertial parameter identification. IEEE RA-L 3(1), 60-67.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import inertial, learners, rls
from dense_armor.compiler import full_precision
from dense_armor.dynamics import joint_torque_regressor
from dense_armor.dynamics.tree import subtree_mask
from dense_armor.learners import Learner, Prepared, StepOutput
from dense_armor.model import Model
from dense_armor.payload_change import PayloadDetector

__all__ = [
    "JOINT_MODEL",
    "JOINT_TERMS",
    "PayloadTrace",
    "Prior",
    "RobotEstimate",
    "RobotLearner",
    "RobotState",
    "invisible",
    "joint_columns",
    "robot_estimate",
    "torque_scale",
]

#: The per-joint terms, in their order in ``w`` after the ``10 B`` inertial parameters.
JOINT_TERMS = ("armature", "viscous", "coulomb", "stribeck", "offset")
#: The Stribeck term's slow smooth sign is this many Coulomb widths ``v0`` wide.
STRIBECK_WIDTH = 4.0
#: The joint terms' torque, as the reports write it.
JOINT_MODEL = ("armature qdd + viscous qd + coulomb tanh(qd / coulomb_width) + stribeck (tanh(qd / coulomb_width) - "
               f"tanh(qd / ({STRIBECK_WIDTH:g} coulomb_width))) + offset")
#: The weight, in samples, of the prior's noise level in the running estimate.
PRIOR_SAMPLES = 10.0
#: A sample moves the noise estimate as if its error were at most this many variances: an
#: outlier, or a change the learner has not yet followed, cannot inflate it quickly.
NOISE_CLIP = 4.0
#: The trust's memory, in samples, is at least this: a coefficient fitted to fewer samples is
#: noise, and clipped at 1 it would add that noise to the prediction.
TRUST_SAMPLES = 5.0
#: Edges of the joint-speed bands, in units of the Coulomb width ``v0``, over which the errors'
#: excess variance is tracked: friction at low speed (Stribeck, stiction, a soft constraint)
#: departs from ``tanh(qd / v0)``, and those samples must not pass for a payload.
SPEED_BANDS = (1 / 16, 1 / 2, 1, 2, 4, 8, 16)
#: A sample whose error is beyond this many variances does not count in its band's excess.
EXCESS_LIMIT = 25.0
#: s: how long a joint at rest holds the torque its static friction took when it stopped (a
#: rest's length): to the payload detector, one error that lasts, not one a sample.
HELD_FOR = 1.0
#: A joint slower than about this many Coulomb widths ``v0`` is at rest (the band of torques
#: its static friction holds fades out there): above what a stopped joint's velocity estimate
#: reads, below the speeds where a joint slides on the friction the terms model.
REST_WIDTH = 0.25
#: s, the learner's memory when neither ``lam`` nor ``memory`` is given.
MEMORY = 60.0


def invisible(model: Model) -> np.ndarray:
    """(B, 10) bool: the inertial parameters no joint torque depends on, in any state, among
    those of the bodies moved by one joint from the fixed base (their regressor columns are
    zero). A revolute joint turns its body about an axis ``a`` through the body's origin: the
    torques see ``a' I a`` (the entries ``I_kl`` with ``a_k a_l != 0``) and the first moment's
    components across ``a`` (none with gravity along ``a``), never the mass; a prismatic
    joint's torque sees the mass alone. All false for a traced model (its axes are unknown)."""
    hidden = np.zeros((model.n_bodies, 10), bool)
    if isinstance(model.data, jax.core.Tracer):
        return hidden
    axes, rotations = np.asarray(model.axis, np.float64), np.asarray(model.joint_rotation, np.float64)
    gravity = np.asarray(model.gravity, np.float64)
    zero = 1e-12  # a URDF's axis along a frame's axis is exact
    for b, (parent, kind) in enumerate(zip(model.parents, model.joint_kinds)):
        if parent != -1:
            continue
        a = axes[..., b, :]  # in the body's frame (a batch of models: every one)
        if kind == "prismatic":
            hidden[b, 1:] = True
            continue
        across = np.cross(gravity, np.einsum("...ij,...j->...i", rotations[..., b, :, :], a))
        level = np.all(np.linalg.norm(across, axis=-1) <= zero * max(np.max(np.abs(gravity)), 1.0))
        hidden[b, 0] = True
        hidden[b, 1:4] = level | np.all(np.abs(np.abs(a) - 1.0) <= zero, axis=tuple(range(a.ndim - 1)))
        pairs = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))  # the order of I in the parameters
        hidden[b, 4:] = [np.all(np.abs(a[..., k] * a[..., l]) <= zero) for k, l in pairs]
    return hidden


def joint_columns(qd, qdd, width):
    """(len(JOINT_TERMS), ..., n) each joint term's column (:data:`JOINT_MODEL`) at velocities
    ``qd`` and accelerations ``qdd`` (..., n), ``width`` the Coulomb width ``v0``."""
    smooth = jnp.tanh(qd / width)
    return jnp.stack([qdd, qd, smooth, smooth - jnp.tanh(qd / (STRIBECK_WIDTH * width)), jnp.ones_like(qd)])


def torque_scale(model: Model) -> np.ndarray:
    """(n,) each joint's torque scale, N m (N): its URDF effort limit, 10 where it has none."""
    effort = np.asarray(model.effort_limit, np.float64)
    return np.where(np.isfinite(effort) & (effort > 0), effort, 10.0)


class Prior(NamedTuple):
    """The prior's standard deviations around the URDF (a scalar or one value per joint).

    Inertial parameters: ``max(relative |pi_k|, floor_k)``, ``relative`` per link, the floor by
    kind (mass, first moment, rotational inertia). Joint terms, from zero: the given values or,
    by default, fractions of :func:`torque_scale` ``s``: armature ``0.01 s`` kg m^2, viscous
    ``0.1 s`` N m s/rad, Coulomb and Stribeck ``0.1 s`` N m, offset ``0.05 s`` N m. ``noise`` is the initial
    torque-noise standard deviation, ``0.02 s`` by default (it is then learned).
    """

    relative: float | Any = 0.3
    mass_floor: float = 0.05
    moment_floor: float = 0.005
    inertia_floor: float = 0.002
    armature: float | Any | None = None
    viscous: float | Any | None = None
    coulomb: float | Any | None = None
    stribeck: float | Any | None = None
    offset: float | Any | None = None
    noise: float | Any | None = None

    def std(self, model: Model) -> np.ndarray:
        """(10 B + 5 n,) standard deviations of ``w``: the 10 B inertial parameters, then each
        joint term for every joint."""
        pi = np.abs(np.asarray(model.inertia, np.float64))
        relative = np.broadcast_to(np.asarray(self.relative, np.float64), (model.n_bodies,))
        floor = np.array([self.mass_floor] + [self.moment_floor] * 3 + [self.inertia_floor] * 6)
        inertia = np.maximum(relative[:, None] * pi, floor)
        scale = torque_scale(model)
        terms = [self._joint(self.armature, 0.01, scale), self._joint(self.viscous, 0.1, scale),
                 self._joint(self.coulomb, 0.1, scale), self._joint(self.stribeck, 0.1, scale),
                 self._joint(self.offset, 0.05, scale)]
        std = np.concatenate([inertia.reshape(-1), *terms])
        if not (np.all(np.isfinite(std)) and np.all(std > 0)):
            raise ValueError(f"Prior: every standard deviation must be finite and > 0 ({self})")
        return std

    def noise_std(self, model: Model) -> np.ndarray:
        """(n,) the initial torque-noise standard deviations."""
        std = self._joint(self.noise, 0.02, torque_scale(model))
        if not (np.all(np.isfinite(std)) and np.all(std > 0)):
            raise ValueError(f"Prior: noise must be finite and > 0, got {self.noise!r}")
        return std

    @staticmethod
    def _joint(value, fraction, scale):
        return fraction * scale if value is None else np.broadcast_to(np.asarray(value, np.float64), scale.shape).copy()


class NoiseState(NamedTuple):
    """The learner's running picture of its errors.

    Attributes:
        variance: (n,) each joint's noise variance ``r_j``, (N m)^2.
        weight: () samples behind it (its averaging weight saturates at ``noise_time``).
        lag: (n,) exponentially weighted ``sum e_t e_{t-1}`` of the standardised prior errors
            (each over its predictive standard deviation, noise and parameters).
        power: (n,) the same of ``e_t^2``.
        last: (n,) the last standardised prior error.
        excess: (n, K) each joint's mean squared standardised error per speed band
            (:data:`SPEED_BANDS`): where the model misfits (friction at low speed), above 1.
        excess_weight: (n, K) samples behind each (saturating at ``noise_time``).
    """

    variance: jax.Array
    weight: jax.Array
    lag: jax.Array
    power: jax.Array
    last: jax.Array
    excess: jax.Array
    excess_weight: jax.Array


class TrustState(NamedTuple):
    """Exponentially weighted ``sum e_j r_j`` (cross) and ``sum r_j^2`` (power), (n,) each: the
    URDF's error ``e`` against the learner's residual ``r`` (the trust, ``cross / power``)."""

    cross: jax.Array
    power: jax.Array


class RobotState(NamedTuple):
    """The whole-robot learner's memory (save it and a restart loses nothing).

    Attributes:
        rls: ``w`` (p,) the learned parameters' deviation from the URDF
            (:attr:`RobotLearner.parameter_names`) and its covariance (the posterior, in
            parameter units): ``P`` (p, p) in float64, else a factor ``S`` of it, ``P = S S'``
            (:class:`~dense_armor.rls.FactorState`, :attr:`~dense_armor.rls.FactorState.P`).
        count, rejected, alarms: samples learned, skipped (non-finite), payload alarms.
        noise: the noise picture (:class:`NoiseState`).
        trust: the residual's trust (:class:`TrustState`).
        detector: the payload detector's state, or ``None``.
    """

    rls: rls.RLSState | rls.FactorState
    count: jax.Array
    rejected: jax.Array
    alarms: jax.Array
    noise: NoiseState
    trust: TrustState
    detector: Any


class PayloadTrace(NamedTuple):
    """The payload body's change since the last alarm: the detector's fit against the baseline
    (:meth:`~dense_armor.payload_change.PayloadDetector.fits`); before any alarm, the learned
    correction of that body against the URDF.

    Attributes:
        mass: () kg; mass_std: () kg; com: (3,) the change's centre of mass, m, in the payload
            link's frame (its first moment over its mass).
    """

    mass: jax.Array
    mass_std: jax.Array
    com: jax.Array


class RobotLearner(Learner):
    """Every body's inertial parameters and every joint's armature, friction and offset, one
    Bayesian RLS with the URDF as the prior (see the module docstring).

    Args:
        model: the nominal (URDF) model.
        prior: the prior's standard deviations (:class:`Prior`).
        rate: the sampling rate, Hz (the control loop's; the command line takes the log's):
            the time constants below are in seconds.
        coulomb_width: ``v0``, rad/s (m/s): the Coulomb term is ``tanh(qd / v0)``.
        lam: forgetting factor in (0, 1] (1 keeps every sample); default from ``memory``. Below
            1 the learner forgets along the excited directions only (no wind-up).
        memory: s, the learner's memory when ``lam`` is not given, ``lam = 1 - 1 / (memory
            rate)`` (``None``: 1): what it learned is forgotten over minutes, so that a change
            the payload detector does not catch (friction with temperature, wear, a light
            payload) is followed, slowly, rather than never.
        noise_time: s, the memory of the noise estimate.
        trust_time: s, the memory of the residual's trust (short: a dropped payload makes the
            residual wrong in one sample), at least :data:`TRUST_SAMPLES` samples.
        detector: a :class:`~dense_armor.payload_change.PayloadDetector` (default), or
            ``None`` for no payload detection.
        link: the link carrying the payload; default the link of the last body.
        consistent: predict with each body's nearest physically consistent parameters
            (:func:`~dense_armor.inertial.nearest_consistent`, cheap enough for every step;
            :func:`robot_estimate` and ``dense-armor identify`` project in the posterior's metric).

    Raises:
        ValueError: an out-of-range hyperparameter, a prior with a non-positive deviation.
    """

    model: Model
    std: np.ndarray | jax.Array
    noise0: np.ndarray | jax.Array
    rate: float | jax.Array
    coulomb_width: float | jax.Array
    lam: float | jax.Array
    noise_time: float | jax.Array
    trust_time: float | jax.Array
    detector: PayloadDetector | None
    body: int = eqx.field(static=True)
    link: str = eqx.field(static=True)
    consistent: bool = eqx.field(static=True)
    forgets: bool = eqx.field(static=True)
    learned: tuple[int, ...] = eqx.field(static=True)
    replay_unroll: ClassVar[int] = 1  # a step of a hundred kernels

    def __init__(self, model: Model, prior: Prior = Prior(), *, rate: float = 1000.0, coulomb_width: float = 0.02,
                 lam: float | None = None, memory: float | None = MEMORY, noise_time: float = 10.0, trust_time: float = 0.01,
                 detector: PayloadDetector | None = PayloadDetector(), link: str | None = None,
                 consistent: bool = False):
        for name, value in (("rate", rate), ("coulomb_width", coulomb_width), ("noise_time", noise_time),
                            ("trust_time", trust_time), ("memory", 1.0 if memory is None else memory)):
            if isinstance(value, (int, float)) and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if lam is None:
            lam = 1.0 if memory is None else 1.0 - 1.0 / (memory * rate)
        learners.check_hyperparameters(lam, 1.0)
        if link is None:
            link = model.body_names[-1]
        self.model = model
        self.std = prior.std(model)
        self.noise0 = prior.noise_std(model)
        self.rate, self.coulomb_width, self.lam = rate, coulomb_width, lam
        self.noise_time, self.trust_time = noise_time, trust_time
        self.detector = detector
        self.body = model.body_index(link)
        hidden = invisible(model)
        hidden[self.body] = False  # the payload's: the detector fits all ten
        bodies = 10 * model.n_bodies
        self.learned = tuple(int(k) for k in np.flatnonzero(~hidden.reshape(-1))) + tuple(range(bodies, bodies + self._terms))
        self.link = link
        self.consistent = bool(consistent)
        self.forgets = not (isinstance(lam, (int, float)) and lam == 1.0)  # lam = 1: no forgetting to trace

    @property
    def _columns(self) -> slice:
        """The payload body's parameters in ``w``."""
        start = self.learned.index(10 * self.body)
        return slice(start, start + 10)

    def _joint_columns(self, term: str, full: bool = False) -> slice:
        """One of :data:`JOINT_TERMS` in ``w`` (or, ``full``, among all ``10 B + 5 n``
        parameters), a parameter per joint (its column of ``X`` is diagonal:
        :func:`joint_columns`)."""
        start = (10 * self.model.n_bodies if full else self._bodies) + self.model.n * JOINT_TERMS.index(term)
        return slice(start, start + self.model.n)

    @property
    def _ancestors_masses(self) -> np.ndarray:
        """Where in ``w`` the masses of the payload body's ancestors are (those learned)."""
        ancestors = np.flatnonzero(subtree_mask(self.model)[self.body])  # the body and its ancestors
        return np.array([self.learned.index(10 * a) for a in ancestors if a != self.body and 10 * a in self.learned], int)

    @property
    def _terms(self) -> int:
        """How many joint-term parameters there are, one per term and joint (they come last)."""
        return len(JOINT_TERMS) * self.model.n

    @property
    def _bodies(self) -> int:
        """How many of the bodies' parameters are learned (they come first in ``w``)."""
        return len(self.learned) - self._terms

    @property
    def num_parameters(self) -> int:
        """``p``: ``10 B + 5 n`` (``15 n`` without coupled mimic joints) less the
        :func:`invisible` ones."""
        return len(self.learned)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Names of the entries of ``w``: the bodies' learned parameters, then each joint term."""
        bodies = tuple(f"{b} {k}" for b in self.model.body_names for k in inertial.NAMES)
        names = bodies + tuple(f"{t} {j}" for t in JOINT_TERMS for j in self.model.joint_names)
        return tuple(names[k] for k in self.learned)

    def full(self, w, P=None):
        """``w`` (..., p) as all ``10 B + 5 n`` parameters, the :func:`invisible` ones 0 (the
        URDF's); with ``P`` (p, p) also its covariance, theirs the prior's."""
        learned = np.asarray(self.learned)
        full = jnp.zeros((*w.shape[:-1], 10 * self.model.n_bodies + self._terms), w.dtype).at[..., learned].set(w)
        if P is None:
            return full
        return full, jnp.diag(jnp.asarray(self.std, P.dtype) ** 2).at[np.ix_(learned, learned)].set(P)

    def init(self, dtype=None) -> RobotState:
        """The prior: ``w = 0`` (the URDF), ``P = diag(std^2)``; the prior's noise level."""
        dtype = learners.state_dtype(dtype)
        n, zero = self.model.n, jnp.zeros((), jnp.int32)
        std = jnp.asarray(self.std, dtype)[np.asarray(self.learned)]
        fzero, bands = jnp.zeros(n, dtype), (n, len(SPEED_BANDS) + 1)
        return RobotState(
            # float64 resolves the covariance itself; a narrower float, its factor (half the decades)
            rls=rls.RLSState(jnp.zeros_like(std), jnp.diag(std**2)) if dtype == jnp.float64
            else rls.FactorState(jnp.zeros_like(std), jnp.diag(std)),
            count=zero, rejected=zero, alarms=zero,
            noise=NoiseState(jnp.asarray(self.noise0, dtype) ** 2, jnp.asarray(PRIOR_SAMPLES, dtype), fzero, fzero, fzero,
                             jnp.ones(bands, dtype), jnp.full(bands, PRIOR_SAMPLES, dtype)),
            trust=TrustState(fzero, fzero),
            detector=None if self.detector is None else self.detector.init(jnp.zeros_like(std), dtype),
        )

    def features(self, q, qd, qdd, dtype):
        """Rows ``X`` (n, p) and the nominal torque ``Y pi_URDF + armature qdd`` (n,), the
        model's ``rnea``, at one state."""
        Y = joint_torque_regressor(self.model, q, qd, qdd).astype(dtype)
        q, qd, qdd = (jnp.asarray(a, dtype) for a in (q, qd, qdd))
        nominal = Y @ jnp.asarray(self.model.inertia, dtype).reshape(-1) + jnp.asarray(self.model.armature, dtype) * qdd
        joint = [jnp.diag(x) for x in joint_columns(qd, qdd, jnp.asarray(self.coulomb_width, dtype))]
        return jnp.concatenate([Y[:, np.asarray(self.learned[: self._bodies])], *joint], axis=1), nominal

    def _deviation(self, w):
        """The ``w`` a prediction uses: the nearest physically consistent bodies if asked."""
        if not self.consistent:
            return w
        urdf = jnp.asarray(self.model.inertia, w.dtype)
        bodies = inertial.nearest_consistent(urdf + self.full(w)[: urdf.size].reshape(urdf.shape)) - urdf
        return jnp.concatenate([bodies.reshape(-1)[np.asarray(self.learned[: self._bodies])], w[self._bodies :]])

    def _gate(self, nominal, residual, trust: TrustState):
        """The torque a controller gets: the URDF's plus the trusted residual, within the
        effort limits."""
        c = jnp.clip(trust.cross / jnp.where(trust.power > 0, trust.power, 1.0), 0.0, 1.0)
        limit = jnp.asarray(self.model.effort_limit, nominal.dtype)
        return jnp.clip(nominal + c * residual, -limit, limit)

    @full_precision
    def predict(self, state: RobotState, q, qd, qdd) -> jax.Array:
        """Predicted torque (n,): the URDF's plus the trusted residual, within the effort limits."""
        X, nominal = self.features(q, qd, qdd, state.rls.w.dtype)
        return self._gate(nominal, X @ self._deviation(state.rls.w), state.trust)

    @full_precision
    def learn(self, state: RobotState, prepared: Prepared) -> tuple[RobotState, StepOutput]:
        """The stateful half of :meth:`~dense_armor.learners.Learner.step`: predict, score, learn."""
        dtype = state.rls.w.dtype
        X, target, nominal, valid = prepared
        rate = jnp.asarray(self.rate, dtype)
        residual = X @ self._deviation(state.rls.w)
        prediction = self._gate(nominal, residual, state.trust)
        error = target - X @ state.rls.w  # the learner's own prior error

        # the residual's trust: its recent agreement with the URDF's error
        keep = jnp.exp(-1.0 / jnp.maximum(jnp.asarray(self.trust_time, dtype) * rate, TRUST_SAMPLES))
        trust = TrustState(keep * state.trust.cross + target * residual, keep * state.trust.power + residual**2)

        # rows whitened by each joint's spread: its noise and, at rest, the band of torques its
        # static friction can hold (about twice the dry friction), which depends on how the
        # joint got there (a joint still moving, however slowly, slides: the terms model it)
        n = self.model.n
        speed = jnp.abs(jnp.diagonal(X[:, self._joint_columns("viscous")]))  # the velocity is the viscous column
        band_at_rest = 2.0 * jnp.abs(state.rls.w[self._joint_columns("coulomb")]) * (
            1.0 - jnp.tanh(speed / (REST_WIDTH * self.coulomb_width)))
        scale = jnp.sqrt(state.noise.variance + band_at_rest**2)
        Xw, ew = X / scale[:, None], error / scale
        noise = state.noise
        correlation = _correlation(noise)

        rls_state, alarm, extra, detector = state.rls, jnp.zeros((), bool), None, state.detector
        G, product = rls.rows_covariance(state.rls, Xw)  # X P X', and the update's largest product
        # the prior errors over their predictive spread (noise and the parameters' uncertainty):
        # what the errors' correlation is measured on, so that a transient the learner expects
        # (a body re-opened after an alarm) cannot pass for correlated noise
        standard = ew / jnp.sqrt(1.0 + jnp.diagonal(G))
        # each joint's speed band, and its excess there
        band = jax.nn.one_hot(jnp.sum(speed[:, None] >= jnp.asarray(SPEED_BANDS, dtype) * self.coulomb_width, axis=1),
                              len(SPEED_BANDS) + 1, dtype=dtype)
        rows, y = Xw, target / scale
        if self.detector is not None:
            # the detector's rows carry their band's excess too: misfit is not a payload; and
            # the torque held at rest counts once for HELD_FOR, not once a sample
            resting = noise.variance + HELD_FOR * rate * band_at_rest**2
            r = scale / jnp.sqrt(resting * jnp.maximum(jnp.sum(band * noise.excess, axis=1), 1.0))
            # errors whitened by their prior covariance, I + tau X P X' (the parameters'
            # uncertainty counted at the errors' correlation time): a configuration the
            # learner has not yet learned does not look like a payload
            L = jnp.linalg.cholesky(jnp.eye(n, dtype=dtype) + correlation * rls._sym(r[:, None] * G * r[None, :]))
            columns = self._columns
            # what a drop can take: the body's mass, and the mass the learner has added to the
            # links before it (a payload's mass is shared out between them: an unidentifiable split)
            carried = jnp.asarray(self.model.inertia, dtype)[self.body, 0] + state.rls.w[columns.start] + jnp.sum(
                jnp.maximum(state.rls.w[self._ancestors_masses], 0.0))
            # the detector arms on seconds of motion (a joint faster than the Coulomb width)
            detector, alarm, baseline, fitted, fitted_std, signature = self.detector.step(
                state.detector, Xw, ew, r, L, (target - X @ state.detector.baseline) / scale, state.rls.w, carried, columns,
                correlation, rate, valid, jnp.any(speed >= self.coulomb_width))
            # a payload change: back to the baseline, the payload body with a payload prior of
            # its own (no covariance with the rest) ...
            body = jnp.arange(self.num_parameters)
            body = (body >= columns.start) & (body < columns.stop)
            def reopened(state):  # read by the update and by the rare settling branch, never stored
                state = rls.decouple(state, columns, jnp.asarray(self.detector.prior, dtype) ** 2, where=alarm)
                return state._replace(w=jnp.where(alarm, baseline, state.w))

            rls_state = reopened(rls_state)
            # ... and, while it settles, learned alone (the rest held: their columns moved
            # into the target)
            settling = alarm | self.detector.settling(state.detector, rate)
            held = jnp.where(settling & ~body, 1.0, 0.0).astype(dtype)
            y = y - (rows * held) @ rls_state.w
            rows = rows * (1.0 - held)
            product = jax.lax.cond(settling, lambda: rls.rows_covariance(reopened(state.rls), rows)[1], lambda: product)

        lam = jnp.asarray(self.lam, dtype)
        rls_state, innovation = rls.learn_rows(rls_state, rows, y, lam, directional=self.forgets, product=product)
        if self.detector is not None:
            detector = self.detector.absorb(detector, innovation.gain, signature)

        # noise: E[(e_post^2 + (X P_post X')_jj) / s_j^2] = 1 when the spread s_j is right (S =
        # I + G: the update after directional forgetting is one with lam = 1); a sample moves
        # r_j by the share of its spread that is noise (a joint at rest says little about it)
        raw = innovation.standardized**2 + innovation.explained
        ratio = jnp.minimum(raw, NOISE_CLIP)
        weight = jnp.minimum(noise.weight + 1.0, jnp.asarray(self.noise_time, dtype) * rate)
        variance = noise.variance * (1.0 + noise.variance / scale**2 * (ratio - 1.0) / weight)
        floor = (1e-3 * jnp.asarray(self.noise0, dtype)) ** 2
        decay = 1.0 - 1.0 / weight
        # the errors' correlation, once the learner has settled, from the samples that look
        # like noise: a change it has not followed is correlated by nature, and must not blind
        # the payload test (before, every sample counts: the learner's own transient is no change)
        unsettled = False if self.detector is None else ~self.detector.moved_enough(state.detector, rate)
        noisy = ((raw < NOISE_CLIP) & (standard**2 < NOISE_CLIP)) | unsettled
        # an error beyond EXCESS_LIMIT variances is a change (or an outlier), not misfit
        band = band * (standard**2 < EXCESS_LIMIT)[:, None]
        excess_weight = jnp.minimum(noise.excess_weight + band, jnp.asarray(self.noise_time, dtype) * rate)
        excess = noise.excess + band * (standard[:, None] ** 2 - noise.excess) / excess_weight
        noise = NoiseState(
            variance=jnp.maximum(variance, floor), weight=weight,
            lag=jnp.where(noisy, decay * noise.lag + standard * noise.last, noise.lag),
            power=jnp.where(noisy, decay * noise.power + standard**2, noise.power), last=standard,
            excess=excess, excess_weight=excess_weight,
        )

        if self.detector is not None:
            # before any alarm, the body's learned correction; after one, the change fitted
            # to the samples since it
            fitted_since = state.detector.alarmed
            learned_std = jnp.sqrt(jnp.maximum(rls.variances(rls_state)[columns.start], 0.0) * correlation)
            change = jnp.where(fitted_since, fitted, rls_state.w[columns] - detector.baseline[columns])
            mass = change[0]
            com = change[1:4] / jnp.where(jnp.abs(mass) > 0, mass, 1.0)
            extra = PayloadTrace(mass, jnp.where(fitted_since, fitted_std, learned_std), com)

        learned = RobotState(
            rls=rls_state, count=state.count + 1, rejected=state.rejected, alarms=state.alarms + alarm,
            noise=noise, trust=trust, detector=detector,
        )
        return learners.commit(state, learned, valid, nominal, prediction - nominal, target + nominal - prediction,
                               alarm, extra)


def _correlation(noise: NoiseState) -> jax.Array:
    """The errors' integrated autocorrelation time, samples: ``(1 + rho) / (1 - rho)`` with
    ``rho`` their lag-one autocorrelation (an AR(1) picture), the median over the joints (1
    before any evidence)."""
    rho = jnp.clip(noise.lag / jnp.where(noise.power > 0, noise.power, 1.0), 0.0, 0.999)
    return jnp.median((1.0 + rho) / (1.0 - rho))


class RobotEstimate(NamedTuple):
    """What a :class:`RobotLearner` has learned, in physical terms (NumPy or JAX arrays).

    Bodies (leading axis B, in the model's order, each in its link's frame) and joints (n,) of
    the most probable physically consistent robot under the posterior (every body a rigid body,
    armature and friction >= 0: :func:`dense_armor.inertial.most_probable_consistent`, which
    moves the parameters where the data leave them free); each quantity with ``*_std`` (one standard
    deviation from the posterior, the data's information divided by the errors' correlation
    time) and ``*_unexcited`` (the data's information about it is below the prior's: it sits
    near its prior).

    Attributes:
        mass: (B,) kg. com: (B, 3) m. inertia: (B, 3, 3) about the centre of mass, kg m^2.
        parameters: (B, 10) the consistent parameters (the order of :mod:`dense_armor.spatial`,
            ``I`` about the origin).
        learned: (B, 10) the learned parameters before the projection.
        projected: (B,) bool, the body's learned parameters were not physically consistent (the
            projection moved it; the others may move a little with it).
        armature: (n,) kg m^2; viscous: (n,) N m s/rad; coulomb, stribeck, offset: (n,) N m.
        noise_std: (n,) N m, each joint's learned noise level.
        correlation: () samples, the errors' integrated autocorrelation time.
    """

    mass: Any
    mass_std: Any
    mass_unexcited: Any
    com: Any
    com_std: Any
    com_unexcited: Any
    inertia: Any
    inertia_std: Any
    inertia_unexcited: Any
    parameters: Any
    learned: Any
    projected: Any
    armature: Any
    armature_std: Any
    armature_unexcited: Any
    viscous: Any
    viscous_std: Any
    viscous_unexcited: Any
    coulomb: Any
    coulomb_std: Any
    coulomb_unexcited: Any
    stribeck: Any
    stribeck_std: Any
    stribeck_unexcited: Any
    offset: Any
    offset_std: Any
    offset_unexcited: Any
    noise_std: Any
    correlation: Any


def _widened(P, std, correlation):
    """The posterior covariance with the data's information divided by the errors'
    correlation time (``correlation`` samples carry about one sample's information):
    ``(D^-2 + (P^-1 - D^-2) / tau)^-1``, in the prior-scaled form for conditioning."""
    scaled = rls._sym(P / (std[:, None] * std[None, :]))  # D^-1 P D^-1: 1 at the prior
    eye = jnp.eye(P.shape[-1], dtype=P.dtype)
    information = jnp.linalg.inv(scaled) - eye  # the data's, prior-scaled
    return jnp.linalg.inv(eye + rls._sym(information) / jnp.maximum(correlation, 1.0)) * (std[:, None] * std[None, :])


def _physical(pi):
    """``(m, c (3,), I_c (3, 3))`` of one body, flattened (13,)."""
    m, c, I = inertial.to_com(pi)
    return jnp.concatenate([m[None], c, I.reshape(-1)])


@full_precision
def robot_estimate(learner: RobotLearner, state: RobotState, threshold=1.0) -> RobotEstimate:
    """The learned robot in physical terms, with standard deviations and flags. Traceable.

    Args:
        learner: the :class:`RobotLearner`.
        state: its state.
        threshold: a quantity is unexcited when the data's information about it is below
            ``threshold`` times the prior's (its posterior variance above ``1 / (1 +
            threshold)`` of its prior variance; default 1: the prior still dominates).
    """
    learners.check_precision(state.rls.w.dtype)
    w, P = learner.full(state.rls.w, state.rls.P)
    dtype = w.dtype
    bodies = learner.model.n_bodies
    std = jnp.asarray(learner.std, dtype)
    cov = _widened(P, std, _correlation(state.noise))
    keep = 1.0 / (1.0 + jnp.asarray(threshold, dtype))

    def blocks(M):  # (B, 10, 10) each body's block of M
        return jnp.einsum("kikj->kij", M[: 10 * bodies, : 10 * bodies].reshape(bodies, 10, bodies, 10))

    def quadratic(J, M):  # (B, k) the variances of J theta, J (B, k, 10) on each body's block of M
        return jnp.einsum("bki,bij,bkj->bk", J, blocks(M), J)

    urdf = jnp.concatenate([jnp.asarray(learner.model.inertia, dtype).reshape(-1), jnp.zeros(learner._terms, dtype)])
    urdf = urdf.at[learner._joint_columns("armature", full=True)].set(jnp.asarray(learner.model.armature, dtype))  # the others: 0
    bounded = np.zeros(urdf.shape, bool)  # armature and friction are >= 0 on a real robot (its shape has either sign)
    for term in ("armature", "viscous", "coulomb"):
        bounded[learner._joint_columns(term, full=True)] = True
    physical = inertial.most_probable_consistent(urdf + w, P, bodies, bounded)
    learned = (urdf + w)[: 10 * bodies].reshape(bodies, 10)
    consistent = physical[: 10 * bodies].reshape(bodies, 10)
    J = jax.vmap(jax.jacfwd(_physical))(consistent)  # (B, 13, 10)
    value, spread = jax.vmap(_physical)(consistent), jnp.sqrt(jnp.maximum(quadratic(J, cov), 0.0))
    # the data's information on J theta below threshold times the prior's
    flags = quadratic(J, P) > keep * quadratic(J, jnp.diag(std**2))
    joint = {}
    for term in JOINT_TERMS:
        at = learner._joint_columns(term, full=True)
        joint[term] = (physical[at], jnp.sqrt(jnp.maximum(jnp.diagonal(cov)[at], 0.0)),
                       jnp.diagonal(P)[at] > keep * std[at] ** 2)
    return RobotEstimate(
        mass=value[:, 0], mass_std=spread[:, 0], mass_unexcited=flags[:, 0],
        com=value[:, 1:4], com_std=spread[:, 1:4], com_unexcited=flags[:, 1:4],
        inertia=value[:, 4:].reshape(bodies, 3, 3), inertia_std=spread[:, 4:].reshape(bodies, 3, 3),
        inertia_unexcited=flags[:, 4:].reshape(bodies, 3, 3),
        parameters=consistent, learned=learned, projected=inertial.inconsistency(learned) > 0,
        **{f"{term}{suffix}": joint[term][k] for term in JOINT_TERMS for k, suffix in enumerate(("", "_std", "_unexcited"))},
        noise_std=jnp.sqrt(state.noise.variance), correlation=_correlation(state.noise),
    )


estimate = jax.jit(robot_estimate)
"""Jitted :func:`robot_estimate`."""


def _pm(value, std, unexcited=False) -> str:
    text = f"{float(value):.4g} +- {float(std):.2g}"
    return text + " *" if bool(unexcited) else text


def summary(learner: RobotLearner, est: RobotEstimate) -> str:
    """The estimate as text: a line per body (mass, centre of mass, principal moments about
    it) and per joint (armature, friction, offset, noise), ``*`` marking what the data have not
    identified (its uncertainty is about the prior's; its value may still have moved with what
    it is correlated with, and the consistency projection may move it)."""
    model = learner.model
    lines = ["bodies (most probable physically consistent; * not identified: its uncertainty about the prior's):"]
    for k, name in enumerate(model.body_names):
        com = ", ".join(_pm(est.com[k][i], est.com_std[k][i], est.com_unexcited[k][i]) for i in range(3))
        moments = np.linalg.eigvalsh(np.asarray(est.inertia[k], np.float64))
        projected = " (projected)" if bool(est.projected[k]) else ""
        lines.append(f"  {name}: mass {_pm(est.mass[k], est.mass_std[k], est.mass_unexcited[k])} kg, "
                     f"com ({com}) m, principal moments ({', '.join(f'{m:.3g}' for m in moments)}) kg m^2{projected}")
    lines.append("joints:")
    for j, name in enumerate(model.joint_names):
        terms = ", ".join(f"{term} {_pm(getattr(est, term)[j], getattr(est, term + '_std')[j], getattr(est, term + '_unexcited')[j])}"
                          for term in JOINT_TERMS)
        lines.append(f"  {name}: {terms}, noise {float(est.noise_std[j]):.3g} N m")
    return "\n".join(lines)


def report(learner: RobotLearner, est: RobotEstimate) -> dict:
    """The estimate as plain JSON-ready data: ``bodies`` and ``joints`` keyed by name."""
    model = learner.model

    def value(x):
        x = np.asarray(x)
        return x.tolist() if x.ndim else (bool(x) if x.dtype == bool else float(x))

    bodies = {}
    for k, name in enumerate(model.body_names):
        bodies[name] = {key: value(getattr(est, key)[k]) for key in (
            "mass", "mass_std", "mass_unexcited", "com", "com_std", "com_unexcited", "inertia", "inertia_std",
            "inertia_unexcited", "parameters", "projected")}
        bodies[name]["units"] = "kg, m, kg m^2 about the centre of mass, in the link's frame"
    joints = {}
    for j, name in enumerate(model.joint_names):
        joints[name] = {f"{term}{suffix}": value(getattr(est, term + suffix)[j])
                        for term in JOINT_TERMS for suffix in ("", "_std", "_unexcited")}
        joints[name]["noise_std"] = value(est.noise_std[j])
    return {"bodies": bodies, "joints": joints, "coulomb_width": value(learner.coulomb_width),
            "correlation_samples": value(est.correlation),
            "model": f"tau = Y(q, qd, qdd) pi + {JOINT_MODEL}"}
