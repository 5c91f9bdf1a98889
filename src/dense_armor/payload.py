"""A physically meaningful residual learner: the inertial parameters of a payload, and friction.

The five-feature learner of :mod:`dense_armor.learners` fits each joint on its own. A payload
is one rigid body whose 10 inertial parameters move every joint, linearly: the RNEA is linear
in the inertial parameters, so a payload ``pi`` on body ``b`` adds ``Y_b(q, qd, qdd) @ pi`` to
the joint torques, with ``Y_b`` the (n, 10) regressor columns of body ``b``
(:func:`dense_armor.dynamics.body_regressor`). :class:`PayloadLearner` regresses the residual

    tau - rnea(q, qd, qdd)  =  Y_b(q, qd, qdd) T pi  +  diag(qd) f_v  +  diag(sign qd) f_c  +  f_0

on the columns of the chosen body (``T`` re-expresses parameters given in the frame of the
chosen link, if that link sits behind fixed joints on body ``b``) and, optionally, per-joint
viscous ``f_v``, Coulomb ``f_c`` and offset ``f_0`` columns. The parameters
``w = (pi, f_v, f_c, f_0)`` are shared by all joints, so one RLS learns from the ``n`` stacked
joint equations of each sample (:func:`dense_armor.rls.block_update`).

Same functional shape as :class:`dense_armor.learners.ResidualLearner`: hyperparameters are
pytree leaves, the state is an immutable :class:`PayloadState`, ``step`` is prequential
(predict, score, then learn) and drops into ``lax.scan``; :func:`dense_armor.learners.step`,
:func:`~dense_armor.learners.replay`, :func:`~dense_armor.learners.predict`,
:func:`~dense_armor.learners.save_state` and :func:`~dense_armor.learners.load_state` work on it,
and ``jax.vmap`` over learners (e.g. ``lam``) or over trajectories (e.g. payload masses) works.
A sample with a NaN or inf is skipped (state unchanged but for the ``rejected`` counter, NaN
outputs).

Covariance wind-up. With ``lam < 1`` exponential forgetting inflates ``P`` by ``1 / lam`` per
sample along every direction the data do not excite (a robot at rest). The default
``forgetting="directional"`` forgets only the information that the sample replaces: in
information form ``R <- R - (1 - lam) X' (X P X')^+ X + X' X`` (the block form of Kulhavy's
restricted forgetting; ``X' (X P X')^+ X`` is the information ``R`` holds about ``X w``), i.e.

    P_f = P + (1 - lam) / lam * P X' (X P X')^+ X P,     then a plain (lam = 1) block update.

The gain is the textbook ``K = P X' (lam I + X P X')^-1``; ``P`` stays bounded in excited
directions and untouched in the others, so unexcited parameters stay at their prior.
``forgetting="exponential"`` is the textbook update (wind-up included).

Drift. With a ``detector`` (e.g. :class:`dense_armor.drift.Innovation`), each sample's prior
error is whitened by its covariance, ``z = L^-1 e`` with ``L L' = I + X P X' / lam`` (``n``
values, white with the noise variance while the model holds), and fed to the detector; on an
alarm :func:`dense_armor.learners.respond` re-opens the covariance by ``reopen`` (weights kept)
and lowers the forgetting factor to ``fast_lam`` for ``warmup_steps`` samples, and the noise
statistics restart so that the report describes the new regime.

Precision (float32, what a GPU batch runs). In float64 ``P X'`` is computed once and the
forgetting and the update are one correction of ``P`` (:func:`dense_armor.rls.block_update`, as
the whole-robot learner does); in float32 the update forms ``P X'`` again from the forgotten
``P`` as stored, as that correction can overflow from a vague prior. float32 cannot follow the
first updates from a prior more than about 1 / eps = 1e7 times the posterior (``P`` turns
indefinite and predictions can go astray for hundreds of samples), so ``delta`` defaults to 1e3
there and 1e6 in float64 (``docs/design.md``, "float32 learners", has the measurements); no
square-root form is implemented.

Physical report. :func:`payload_estimate` turns ``w`` and ``P`` into mass, centre of mass,
rotational inertia about the centre of mass and friction coefficients, each with a standard
deviation ``sqrt(diag(J sigma^2 P J'))`` (``J`` the Jacobian of the conversion, ``sigma^2`` a
running estimate of the noise variance kept in the state) and a flag for what the data have not
excited. A direction ``v`` (eigenvector of ``P``) is unexcited when the information the data put
there is below ``threshold`` times the prior's, ``delta / (v' P v) - 1 < threshold``; a reported
quantity is flagged when it depends on an unexcited direction. Those directions keep their prior
(``w = 0``: no payload, no friction) and, their regressor columns being zero on the data seen,
contribute nothing to the predictions. On the planar two-link arm (joint axes along gravity) only
``m``, ``m c_x``, ``m c_y`` and ``I_zz`` of the payload are identifiable: the report says
``identifiable = 4`` and flags the other six.

References:
    Atkeson, C., An, C., Hollerbach, J. (1986). Estimation of inertial parameters of
    manipulator loads and links. IJRR 5(3), 101-119.
    Kulhavy, R. (1987). Restricted exponential forgetting in real-time identification.
    Automatica 23(5), 589-600.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import inertial, learners, rls, spatial
from dense_armor.compiler import full_precision
from dense_armor.dynamics import body_regressor, rnea
from dense_armor.learners import (Learner, Prepared, StepOutput, check_hyperparameters, check_precision, check_response, prior_scale,
                                  state_dtype)
from dense_armor.model import Model

__all__ = [
    "FRICTION_TERMS",
    "PARAMETER_NAMES",
    "NoiseState",
    "PayloadEstimate",
    "PayloadLearner",
    "PayloadState",
    "estimate",
    "payload_estimate",
]

PARAMETER_NAMES = ("m", "m c_x", "m c_y", "m c_z", "I_xx", "I_xy", "I_yy", "I_xz", "I_yz", "I_zz")
FRICTION_TERMS = ("viscous", "coulomb", "offset")


class NoiseState(NamedTuple):
    """Running estimate of the measurement-noise variance, from the RLS's own innovations.

    With ``e`` the prior error of a sample and ``S = I + X P X' / lam`` its covariance in units
    of the noise variance, ``sse <- lam sse + e' S^-1 e`` is exactly the minimum of the
    (exponentially weighted) least-squares cost since the anchor, prior term included:
    ``rss(w) + prior (w - anchor)' anchor_P^-1 (w - anchor)``. Less that term it is the
    weighted residual sum of squares, whose expectation is ``sigma^2 (rows - r rows2 / rows)``
    for ``r`` excited parameter directions. The anchor is the prior ``(0, delta I)`` at the
    start; a drift alarm restarts the statistics with the state after the response as anchor,
    so the estimate is the new regime's.

    Attributes:
        sse: () weighted sum of normalised squared innovations.
        rows: () weighted count of joint equations learned, ``rows <- lam rows + n``.
        rows2: () the same with squared weights, ``rows2 <- lam^2 rows2 + n``.
        prior: () weight left on the anchor, ``prior <- lam prior`` (1 at the anchor).
        anchor: (p,) and anchor_P: (p, p): the prior mean and covariance the statistics
            started from.
    """

    sse: jax.Array
    rows: jax.Array
    rows2: jax.Array
    prior: jax.Array
    anchor: jax.Array
    anchor_P: jax.Array


class PayloadState(NamedTuple):
    """The payload learner's whole memory (save it and a restart loses nothing).

    :class:`dense_armor.learners.LearnerState`'s fields, with one RLS instead of one per joint,
    plus the noise estimate.

    Attributes:
        rls: one RLS shared by all joints, ``w (p,)`` and ``P (p, p)``, ``p = 10 + k n`` with
            ``k`` the number of friction terms; ``w = (pi, viscous, coulomb, offset)``.
        count, rejected, countdown, alarms, detector: as in
            :class:`dense_armor.learners.LearnerState`.
        noise: the running noise-variance estimate.
    """

    rls: rls.RLSState
    count: jax.Array
    rejected: jax.Array
    countdown: jax.Array
    alarms: jax.Array
    detector: Any
    noise: NoiseState


def _friction_terms(friction) -> tuple[str, ...]:
    if friction is True:
        return FRICTION_TERMS
    if friction is False or friction is None:
        return ()
    if isinstance(friction, str):
        friction = (friction,)
    terms = tuple(friction)
    unknown = [t for t in terms if t not in FRICTION_TERMS]
    if unknown or len(set(terms)) != len(terms):
        raise ValueError(f"friction: expected True, False or a subset of {FRICTION_TERMS}, got {friction!r}")
    return tuple(t for t in FRICTION_TERMS if t in terms)


def _frame_transform(model: Model, frame: int):
    """(10, 10) map from inertial parameters in a link's frame to its body's frame, or ``None``."""
    R = np.asarray(model.frame_rotation[frame], np.float64)
    p = np.asarray(model.frame_translation[frame], np.float64)
    if np.array_equal(R, np.eye(3)) and not np.any(p):
        return None
    Rt, pt = spatial.as_tuple(R), spatial.as_tuple(p)
    return np.array([spatial.rigid_params_to_parent(tuple(np.eye(10)[k]), Rt, pt) for k in range(10)]).T


class PayloadLearner(Learner):
    """Inertial parameters of one body (the payload) plus per-joint friction, one shared RLS.

    Args:
        model: the nominal (URDF) model.
        link: name of the link carrying the payload; default the link of the last body. The
            payload's parameters are learned and reported in this link's frame.
        lam: forgetting factor in (0, 1].
        delta: prior covariance scale, ``P0 = delta I`` (prior ``w0 = 0``), > 0; by default 1e6
            in float64 and 1e3 in float32 (:func:`~dense_armor.learners.prior_scale`).
        friction: ``True`` (viscous, Coulomb and offset columns per joint), ``False``, or a
            subset of ``("viscous", "coulomb", "offset")``.
        forgetting: ``"directional"`` (default; no covariance wind-up) or ``"exponential"``
            (the textbook update). Irrelevant when ``lam = 1``.
        detector: ``None`` or a drift detector with ``init(n, dtype)`` and
            ``step(state, z, valid) -> (state, alarms)`` (:class:`~dense_armor.drift.Innovation`,
            :class:`~dense_armor.drift.Hampel`, :class:`~dense_armor.drift.CUSUM`, ...); it is
            fed the whitened prior innovation ``z = L^-1 e`` (``L L' = I + X P X' / lam``): ``n``
            values per sample, white with the noise variance while the model holds.
        fast_lam: forgetting factor for ``warmup_steps`` samples after an alarm.
        warmup_steps: samples of fast forgetting after an alarm.
        detector_warmup: samples learned before the detector is fed.
        reopen: ``>= 0``; on an alarm the covariance becomes ``P + reopen I``, the weights are
            kept (:func:`dense_armor.learners.respond`). 0 (default): no re-opening.
        joseph: compute the covariance update in Joseph form (for float32).

    Attributes:
        body: index of the body carrying the payload; link: its link's name.
        frame_transform: (10, 10) link-frame to body-frame parameter map, or ``None``.
    """

    model: Model
    frame_transform: jax.Array | np.ndarray | None
    lam: float | jax.Array
    delta: float | jax.Array | None
    detector: Any
    fast_lam: float | jax.Array
    warmup_steps: int | jax.Array
    detector_warmup: int | jax.Array
    reopen: float | jax.Array
    body: int = eqx.field(static=True)
    link: str = eqx.field(static=True)
    friction: tuple[str, ...] = eqx.field(static=True)
    forgetting: str = eqx.field(static=True)
    joseph: bool = eqx.field(static=True)

    def __init__(
        self,
        model: Model,
        link: str | None = None,
        *,
        lam: float | jax.Array = 1.0,
        delta: float | jax.Array | None = None,
        friction: bool | tuple[str, ...] = True,
        forgetting: str = "directional",
        detector: Any = None,
        fast_lam: float | jax.Array = 0.9,
        warmup_steps: int | jax.Array = 20,
        detector_warmup: int | jax.Array = 0,
        reopen: float | jax.Array = 0.0,
        joseph: bool = False,
    ):
        check_hyperparameters(lam, delta, fast_lam)
        check_response(reopen, forgetting, warmup_steps, detector_warmup)
        if link is None:
            link = model.body_names[-1]
        self.model = model
        self.body = model.body_index(link)
        self.link = link
        self.frame_transform = _frame_transform(model, model.frame_index(link))
        self.friction = _friction_terms(friction)
        self.forgetting = forgetting
        self.joseph = bool(joseph)
        self.lam, self.delta, self.detector = lam, delta, detector
        self.fast_lam, self.warmup_steps, self.detector_warmup = fast_lam, warmup_steps, detector_warmup
        self.reopen = reopen

    @property
    def num_parameters(self) -> int:
        """``p = 10 + n * len(friction)``."""
        return 10 + self.model.n * len(self.friction)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Names of the entries of ``w``: the 10 payload parameters, then friction per joint."""
        return PARAMETER_NAMES + tuple(f"{t} {j}" for t in self.friction for j in self.model.joint_names)

    def init(self, dtype=None) -> PayloadState:
        """The initial state: ``w = 0``, ``P = delta I``, no noise estimate yet."""
        dtype = state_dtype(dtype)
        delta = prior_scale(self.delta, dtype)
        zero = jnp.zeros((), jnp.int32)
        fzero = jnp.zeros((), dtype)
        p = self.num_parameters
        return PayloadState(
            rls=rls.init(self.num_parameters, delta, dtype=dtype),
            count=zero,
            rejected=zero,
            countdown=zero,
            alarms=zero,
            detector=None if self.detector is None else self.detector.init(self.model.n, dtype),
            noise=NoiseState(
                sse=fzero, rows=fzero, rows2=fzero, prior=jnp.ones((), dtype),
                anchor=jnp.zeros(p, dtype), anchor_P=delta * jnp.eye(p, dtype=dtype),
            ),
        )

    def features(self, q, qd, qdd, dtype):
        """Regressor rows ``X`` (n, p) and the nominal torque (n,) at one state."""
        _, (q, qd, qdd) = self.model.check(q=q, qd=qd, qdd=qdd)
        q, qd, qdd = (a.astype(dtype) for a in (q, qd, qdd))
        value = {"viscous": qd, "coulomb": jnp.sign(qd), "offset": jnp.ones_like(qd)}
        friction = [jnp.diag(value[term]) for term in self.friction]  # one column per term and joint
        X = body_regressor(self.model, q, qd, qdd, self.body, self.frame_transform)
        return jnp.concatenate([X, *friction], 1), rnea(self.model, q, qd, qdd)

    @full_precision
    def predict(self, state: PayloadState, q, qd, qdd) -> jax.Array:
        """Predicted torque (n,): nominal plus ``X w``."""
        X, nominal = self.features(q, qd, qdd, state.rls.w.dtype)
        return nominal + X @ state.rls.w

    @full_precision
    def learn(self, state: PayloadState, prepared: Prepared) -> tuple[PayloadState, StepOutput]:
        """The stateful half of :meth:`~dense_armor.learners.Learner.step`: predict, score, learn."""
        dtype = state.rls.w.dtype
        n = self.model.n
        X, target, nominal, valid = prepared
        residual = X @ state.rls.w
        error = target - residual
        lam = jnp.asarray(self.lam, dtype)
        rls_state, noise = state.rls, state.noise
        countdown, detector, alarm = state.countdown, state.detector, jnp.zeros((), bool)
        if self.detector is not None:
            lam_now = jnp.where(countdown > 0, jnp.asarray(self.fast_lam, dtype), lam)
            # z = L^-1 e with L L' = I + X P X' / lam, the prior innovation's covariance / sigma^2
            L = jnp.linalg.cholesky(jnp.eye(n, dtype=dtype) + rls._sym(X @ state.rls.P @ X.T) / lam_now)
            z = jax.scipy.linalg.solve_triangular(L, error, lower=True)
            fed = valid & (state.count >= self.detector_warmup)
            detector, alarms = self.detector.step(state.detector, z, fed)
            alarm = jnp.any(alarms)
            detector, rls_state, countdown, lam = learners.respond(self, alarm, detector, rls_state, countdown, lam)
            # A new regime: restart the noise statistics from the state after the response.
            zero = jnp.zeros((), dtype)
            fresh = NoiseState(zero, zero, zero, jnp.ones((), dtype), rls_state.w, rls_state.P)
            noise = jax.tree.map(lambda a, b: jnp.where(alarm, a, b), fresh, noise)
        directional = self.forgetting == "directional"
        # P X', the update's largest product, computed once in float64; in float32 the update
        # forms it from the forgotten P as stored, which from a vague prior keeps P finite
        PXt = rls_state.P @ X.T if jnp.finfo(dtype).bits >= 64 else None
        learned_rls, innovation = rls.block_update(rls_state, X, target, lam, directional=directional, joseph=self.joseph,
                                                   PXt=PXt)
        # the whitened prior error's square, e' (I + X P X' / lam)^-1 e: the innovation's S is
        # that after directional forgetting, lam I + X P X' without it
        zz = (1.0 if directional else lam) * (error @ innovation.standardized)
        noise = NoiseState(
            sse=lam * noise.sse + zz,
            rows=lam * noise.rows + n,
            rows2=lam**2 * noise.rows2 + n,
            prior=lam * noise.prior,
            anchor=noise.anchor,
            anchor_P=noise.anchor_P,
        )
        learned = PayloadState(
            rls=learned_rls,
            count=state.count + 1,
            rejected=state.rejected,
            countdown=countdown,
            alarms=state.alarms + alarm,
            detector=detector,
            noise=noise,
        )
        return learners.commit(state, learned, valid, nominal, residual, error, alarm)


class PayloadEstimate(NamedTuple):
    """What a :class:`PayloadLearner` has learned, in physical terms, in the payload link's frame.

    Each quantity comes with ``*_std`` (one standard deviation, from ``sigma^2 P``) and
    ``*_unexcited`` (bool: it depends on a direction the data have not excited; it then sits at
    its prior and its std is the prior's). Friction fields are ``None`` when not learned.

    Attributes:
        mass: () kg.
        com: (3,) centre of mass, m.
        inertia: (3, 3) rotational inertia about the centre of mass, kg m^2.
        parameters: (10,) ``(m, m c, I_o)`` with ``I_o`` about the link origin (the order of
            :mod:`dense_armor.spatial`).
        viscous: (n,) N m s/rad; coulomb: (n,) N m; offset: (n,) N m.
        noise_std: () running estimate of the torque-noise standard deviation, N m (NaN before
            there are more equations than excited parameters).
        excited: () number of parameter directions (of ``p``) the data have excited.
        identifiable: () number of independent combinations of the 10 payload parameters the
            data determine (4 on a planar arm whose joint axes are parallel to gravity).
        information: (p,) data information over prior information along the eigenvectors of
            ``P``, ascending (``< threshold``: unexcited).
    """

    mass: jax.Array
    mass_std: jax.Array
    mass_unexcited: jax.Array
    com: jax.Array
    com_std: jax.Array
    com_unexcited: jax.Array
    inertia: jax.Array
    inertia_std: jax.Array
    inertia_unexcited: jax.Array
    parameters: jax.Array
    parameters_std: jax.Array
    parameters_unexcited: jax.Array
    viscous: jax.Array | None
    viscous_std: jax.Array | None
    viscous_unexcited: jax.Array | None
    coulomb: jax.Array | None
    coulomb_std: jax.Array | None
    coulomb_unexcited: jax.Array | None
    offset: jax.Array | None
    offset_std: jax.Array | None
    offset_unexcited: jax.Array | None
    noise_std: jax.Array
    excited: jax.Array
    identifiable: jax.Array
    information: jax.Array

    def summary(self, link: str = "the payload link") -> str:
        """A few lines of text: the estimate with standard deviations and what is unidentified."""
        f = lambda v, s: f"{float(v):.6g} +- {float(s):.2g}"
        lines = [
            f"payload on {link}: {int(self.identifiable)} of 10 inertial parameters identifiable "
            f"from the data so far",
            f"  mass {f(self.mass, self.mass_std)} kg" + (" (not excited)" if bool(self.mass_unexcited) else ""),
        ]
        com = [f"{'xyz'[k]} {f(self.com[k], self.com_std[k])}" for k in range(3) if not bool(self.com_unexcited[k])]
        lines.append("  centre of mass (m): " + (", ".join(com) if com else "not excited"))
        pairs = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))
        inertia = [
            f"{'xyz'[i]}{'xyz'[j]} {f(self.inertia[i, j], self.inertia_std[i, j])}"
            for i, j in pairs
            if not bool(self.inertia_unexcited[i, j])
        ]
        lines.append("  inertia about the centre of mass (kg m^2): " + (", ".join(inertia) if inertia else "not excited"))
        unexcited = [name for name, u in zip(PARAMETER_NAMES, np.asarray(self.parameters_unexcited)) if u]
        if unexcited:
            lines.append(f"  not excited (kept at the prior 0): {', '.join(unexcited)}")
        for term in FRICTION_TERMS:
            value = getattr(self, term)
            if value is not None:
                std = getattr(self, f"{term}_std")
                lines.append(f"  {term}: " + ", ".join(f(v, s) for v, s in zip(np.asarray(value), np.asarray(std))))
        lines.append(f"  noise std {float(self.noise_std):.3g} N m")
        return "\n".join(lines)


def _physical(pi):
    """(mass, com (3,), inertia about the com (3, 3)) from the 10 parameters; ``com = h / m``."""
    m, h = pi[0], pi[1:4]
    c = h / m
    ixx, ixy, iyy, ixz, iyz, izz = pi[4:10]
    I_o = jnp.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return m, c, I_o - m * (jnp.dot(c, c) * jnp.eye(3, dtype=pi.dtype) - jnp.outer(c, c))


@full_precision
def payload_estimate(learner: PayloadLearner, state: PayloadState, threshold=1.0) -> PayloadEstimate:
    """The learned payload and friction in physical terms, with standard deviations and flags.

    Args:
        learner: the :class:`PayloadLearner`.
        state: its state.
        threshold: a direction is unexcited when the data's information along it is below
            ``threshold`` times the prior's (default 1: the prior still dominates).

    Returns:
        A :class:`PayloadEstimate`. Traceable (``jax.jit``, ``jax.vmap`` over states).
    """
    check_precision(state.rls.w.dtype)
    w, P = state.rls
    dtype = w.dtype
    p = w.shape[-1]
    n = learner.model.n
    tol = jnp.sqrt(jnp.finfo(dtype).eps)
    delta = prior_scale(learner.delta, dtype)

    # Excitation: eigen-decomposition of P relative to the prior delta I.
    evals, evecs = jnp.linalg.eigh(rls._sym(P))
    info = delta / jnp.where(evals > 0, evals, jnp.finfo(dtype).tiny) - 1
    unexcited = info < jnp.asarray(threshold, dtype)
    U = evecs * unexcited  # unexcited directions as columns (others zeroed)
    excited = jnp.sum(~unexcited)

    # Noise variance from the RLS cost less the prior's term: E[rss] = sigma^2 (rows - r rows2 / rows).
    sse, rows, rows2, prior, anchor, anchor_P = state.noise
    d = w - anchor
    rss = jnp.maximum(sse - prior * (d @ jnp.linalg.solve(anchor_P, d)), 0)
    dof = rows - excited * rows2 / jnp.where(rows > 0, rows, 1)
    noise_var = jnp.where(dof > 0.5, rss / jnp.where(dof > 0.5, dof, 1), jnp.nan)
    cov = noise_var * P

    def flags(J):
        # J (k, p): does each row lean on an unexcited direction?
        # (NaN, e.g. a centre of mass at zero mass, counts as leaning.)
        lean = jnp.linalg.norm(J @ U, axis=-1)
        return ~(lean <= tol * jnp.maximum(jnp.linalg.norm(J, axis=-1), jnp.finfo(dtype).tiny))

    def std(J):
        return jnp.sqrt(jnp.maximum(jnp.einsum("ki,ij,kj->k", J, cov, J), 0))

    eye = jnp.eye(p, dtype=dtype)
    pi = w[:10]
    mass, com, inertia = inertial.to_com(pi)
    J = jax.jacfwd(lambda v: jnp.concatenate([jnp.ravel(a) for a in _physical(v[:10])]))(w)  # (13, p)
    s, u = std(J), flags(J)
    s_params, u_params = std(eye[:10]), flags(eye[:10])

    friction = {}
    for k, term in enumerate(learner.friction):
        rows_k = eye[10 + k * n : 10 + (k + 1) * n]
        friction[term] = (w[10 + k * n : 10 + (k + 1) * n], std(rows_k), flags(rows_k))
    none = (None, None, None)
    v, c, o = (friction.get(t, none) for t in FRICTION_TERMS)

    Up = U[:10]
    identifiable = 10 - jnp.sum(jnp.linalg.svd(Up, compute_uv=False) > tol)

    return PayloadEstimate(
        mass=mass, mass_std=s[0], mass_unexcited=u[0],
        com=com, com_std=s[1:4], com_unexcited=u[1:4],
        inertia=inertia, inertia_std=s[4:].reshape(3, 3), inertia_unexcited=u[4:].reshape(3, 3),
        parameters=pi, parameters_std=s_params, parameters_unexcited=u_params,
        viscous=v[0], viscous_std=v[1], viscous_unexcited=v[2],
        coulomb=c[0], coulomb_std=c[1], coulomb_unexcited=c[2],
        offset=o[0], offset_std=o[1], offset_unexcited=o[2],
        noise_std=jnp.sqrt(noise_var),
        excited=excited,
        identifiable=identifiable,
        information=info,
    )


estimate = jax.jit(payload_estimate)
"""Jitted :func:`payload_estimate` (one compile cache for all learners of a structure)."""
