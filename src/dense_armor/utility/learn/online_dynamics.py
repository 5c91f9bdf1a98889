"""The design document's online-learning API: thin stateful wrappers over the functional core.

Each wrapper enters JAX's scoped 64-bit mode (``jax.enable_x64``; the global configuration is
untouched) and calls a jitted function; the residual learners step through a
:class:`~dense_armor.learners.Stepper`, whose ``learn_one`` returns once the step is queued
(whatever reads the learner next waits for it). A learner may be called from several threads:
each call holds the learner's lock, so calls take turns and none is lost. The state stays a
public pytree (``.state``), to save, vmap, or hand to :mod:`dense_armor.learners`.
"""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import learners, payload, rls, robot_learner
from dense_armor.drift import CUSUM, Hampel, Innovation
from dense_armor.host import fetch
from dense_armor.learners import ResidualLearner, Sample, StepOutput
from dense_armor.model import Model
from dense_armor.robots import write_minimal_urdf

__all__ = [
    "CUSUMDriftDetector",
    "DriftAwareResidualDynamicsLearner",
    "HampelScorer",
    "PayloadResidualDynamicsLearner",
    "RecursiveLeastSquares",
    "RobotResidualDynamicsLearner",
    "Regressor",
    "ResidualDynamicsLearner",
    "write_minimal_urdf",
]


@jax.jit
def _rls_learn(state, x, y, lam, rejected):
    """:func:`~dense_armor.rls.update_if_finite`, the rejected samples counted on the device (so
    that ``learn_one`` need not wait for the step)."""
    state, ok = rls.update_if_finite(state, x, y, lam)
    return state, rejected + (~ok).astype(rejected.dtype)


_rls_predict = jax.jit(rls.predict)
_detector_step = jax.jit(lambda detector, state, z: detector.step(state, z, True))


class Regressor(abc.ABC):
    """An online regressor over dict features: ``learn_one(x, y)``, ``predict_one(x)``."""

    @abc.abstractmethod
    def learn_one(self, x: Mapping[str, float], y: float) -> "Regressor":
        """Learn one sample; returns ``self``."""

    @abc.abstractmethod
    def predict_one(self, x: Mapping[str, float]) -> float:
        """Predict the target of one sample."""


def _functional(model) -> Model:
    """The :class:`~dense_armor.model.Model` of a :class:`RigidBodyModel` (or a model itself)."""
    model = getattr(model, "model", model)
    if not isinstance(model, Model):
        raise TypeError(f"model: expected a RigidBodyModel or a Model (parse_urdf), got {type(model).__name__}; "
                        "for a URDF file, RigidBodyModel(path)")
    return model


class RecursiveLeastSquares(Regressor):
    """Recursive least squares with exponential forgetting, over dict features.

    ``K = P x / (lam + x'Px)``, ``w <- w + K (y - x'w)``, ``P <- (P - K x'P) / lam``, then
    ``P`` symmetrised; ``P0 = delta I``, ``w0 = 0``. With ``lam = 1`` and a large ``delta``
    the weights equal the least-squares fit of the samples seen.

    Args:
        lam: forgetting factor in (0, 1].
        delta: initial covariance scale, > 0.
        feature_keys: the feature order; ``None`` sorts the keys of the first dict seen.
            A missing key counts as 0; an unknown key is an error.

    Examples:
        >>> import numpy as np
        >>> from dense_armor.utility.learn.online_dynamics import RecursiveLeastSquares
        >>> rls = RecursiveLeastSquares(lam=1.0, delta=1e10,
        ...                             feature_keys=["a", "b"])
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        >>> y = X @ np.array([2.0, -3.0])
        >>> for i in range(3):
        ...     _ = rls.learn_one({"a": float(X[i, 0]), "b": float(X[i, 1])},
        ...                       float(y[i]))
        >>> bool(np.allclose(rls._w, np.array([2.0, -3.0]), atol=1e-6))
        True
    """

    def __init__(self, lam: float = 1.0, delta: float = 1e6, feature_keys: Optional[Sequence[str]] = None):
        learners.check_hyperparameters(lam, delta)
        if feature_keys is not None and len(set(feature_keys)) != len(list(feature_keys)):
            raise ValueError(f"feature_keys: a key is given twice: {list(feature_keys)}")
        self._lock = threading.RLock()  # one call at a time: the state is read, stepped, written
        self.lam = lam
        self.delta = delta
        self.feature_keys = feature_keys
        self._keys: Optional[list] = None if feature_keys is None else list(feature_keys)
        self.state: Optional[rls.RLSState] = None
        self._rejected = np.zeros((), np.int32)

    def _vector(self, x: Mapping[str, float]) -> tuple[np.ndarray, list]:
        """The features as a vector, and the keys (checked before anything changes)."""
        if not isinstance(x, Mapping) or not x:
            raise ValueError(f"x: expected a non-empty dict of features, got {x!r}")
        keys = sorted(x) if self._keys is None else self._keys
        unknown = set(x) - set(keys)
        if unknown:
            raise ValueError(f"x: unknown features {sorted(unknown)}; the features are {keys}")
        vec = np.array([x.get(k, 0.0) for k in keys])
        if vec.shape != (len(keys),) or vec.dtype.kind not in "biuf":  # no text, no None, no nesting
            raise ValueError(f"x: every feature must be a real number, got {x!r}")
        return vec.astype(np.float64), keys

    def learn_one(self, x: Mapping[str, float], y: float) -> "RecursiveLeastSquares":
        if np.asarray(y).shape != () or np.asarray(y).dtype.kind not in "biuf":
            raise ValueError(f"y: expected one real number, got {y!r}")
        with self._lock, jax.enable_x64(True):
            vec, keys = self._vector(x)  # both checked before anything changes
            self._keys = keys
            if self.state is None:
                self.state = rls.init(len(self._keys), self.delta, dtype=jnp.float64)
            self.state, self._rejected = _rls_learn(self.state, vec, np.float64(y), self.lam, self._rejected)
        return self

    @property
    def rejected(self) -> int:
        """Samples skipped: a NaN or inf, or an update that would not be finite."""
        with self._lock:
            return int(fetch(self._rejected))

    def predict_one(self, x: Mapping[str, float]) -> float:
        with self._lock:
            vec, _ = self._vector(x)
            if self.state is None:
                return 0.0
            with jax.enable_x64(True):
                return float(fetch(_rls_predict(self.state, vec)))

    @property
    def _w(self) -> Optional[np.ndarray]:
        """The weights, in the order of the feature keys (``None`` before the first sample)."""
        return None if self.state is None else np.asarray(self.state.w)

    @property
    def _P(self) -> Optional[np.ndarray]:
        """The covariance matrix."""
        return None if self.state is None else np.asarray(self.state.P)


class ResidualDynamicsLearner:
    """Online residual torque learner over a nominal :class:`RigidBodyModel`.

    Features per joint j: ``[qdd_j, qd_j, sign(qd_j), g_j, 1]``; target per joint:
    ``tau_j - (M(q) qdd + C(q, qd) qd + g(q))_j``; one RLS per joint.

    Args:
        model: the nominal model (a :class:`RigidBodyModel` or a functional ``Model``).
        lam: forgetting factor in (0, 1], for every joint.
        delta: initial covariance scale, > 0.
        forgetting: ``"directional"`` (default) forgets only along the excited direction, so
            a robot at rest cannot wind the covariance up; with random motion its memory is
            about ``p / (1 - lam)`` samples, ``p`` the number of features the motion excites
            (4 or 5). ``"exponential"`` is the textbook update (memory ``1 / (1 - lam)``,
            winds up without excitation). The same update at ``lam = 1``.

    Examples:
        >>> import numpy as np
        >>> from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
        >>> from dense_armor.utility.learn.online_dynamics import (
        ...     ResidualDynamicsLearner, write_minimal_urdf,
        ... )
        >>> path = write_minimal_urdf()
        >>> m = RigidBodyModel(path)
        >>> learner = ResidualDynamicsLearner(m)
        >>> q = np.zeros(m.n)
        >>> tau = learner.predict_torque(q, q, q)
        >>> tau.shape
        (2,)
    """

    def __init__(self, model, lam: float = 1.0, delta: float = 1e6, forgetting: str = "directional"):
        learner = ResidualLearner(_functional(model), lam=lam, delta=delta, forgetting=forgetting)
        self._init(model, learner)
        self.forgetting = forgetting
        self.lam = lam
        self.delta = delta

    def _init(self, model, learner: ResidualLearner):
        self._lock = threading.RLock()  # one call at a time: the state is read, stepped, written
        self.model = model
        self.n = learner.model.n
        with jax.enable_x64(True):
            self.learner = jax.tree.map(jnp.asarray, learner)
        self._stepper = None

    @property
    def _steps(self) -> learners.Stepper:
        """The Stepper that learn_one goes through (the state packed, the learner compiled
        in), holding the state: made on first use, so that building a learner for its
        ``learner`` alone (the command line) costs no state."""
        if self._stepper is None:  # the lock only to make it: every learn_one reads this
            with self._lock, jax.enable_x64(True):
                if self._stepper is None:
                    self._stepper = learners.Stepper(self.learner, learners.init(self.learner, jnp.float64))
        return self._stepper

    @property
    def state(self):
        """The learner's state pytree (:class:`~dense_armor.learners.LearnerState` or the
        payload learner's), to save, vmap or hand to :mod:`dense_armor.learners`."""
        return self._steps.state

    @state.setter
    def state(self, state):
        with jax.enable_x64(True):
            self._steps.state = state

    def learn_one(self, q, qd, qdd, tau) -> "ResidualDynamicsLearner":
        """Learn one sample of measured torques ``tau`` (n,) at ``(q, qd, qdd)``; returns ``self``
        as soon as the step is queued (JAX's asynchronous dispatch): whatever reads the learner
        next (a prediction, :attr:`last`, the state) waits for it."""
        with self._lock, jax.enable_x64(True):
            self._steps.learn(q, qd, qdd, tau)  # checks and casts the arrays itself
        return self

    @property
    def last(self) -> Optional[StepOutput]:
        """The last learned sample's outputs (prior prediction and error, alarm, ...; NumPy),
        ``None`` before the first."""
        with self._lock, jax.enable_x64(True):
            return None if self._stepper is None else self._stepper.last

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        """Predicted torque (n,): the URDF's plus the learned residual."""
        with self._lock, jax.enable_x64(True):
            return self._steps.predict(q, qd, qdd)

    def learn_many(self, q, qd, qdd, tau) -> StepOutput:
        """Learn a trajectory (each (T, n)) with one ``lax.scan``; returns the per-sample outputs."""
        with self._lock, jax.enable_x64(True):
            trajectory = Sample(*(np.asarray(a, np.float64) for a in (q, qd, qdd, tau)))
            for name, a in zip(Sample._fields, trajectory):
                if a.ndim != 2 or a.shape[1] != self.n:
                    raise ValueError(f"{name}: expected shape (T, {self.n}), got {a.shape}")
            return self._steps.replay(trajectory)

    @property
    def weights(self) -> np.ndarray:
        """(n, 5) learned residual weights on :data:`dense_armor.learners.FEATURE_NAMES`."""
        return np.asarray(self.state.rls.w)

    def save(self, path: str | os.PathLike) -> None:
        """Save the learner state to the file ``path`` (NPZ; bit-exact), with what it belongs
        to (the kind of learner, the robot, the options, the library's version)."""
        with self._lock:
            learners.save_state(path, self.state, self.learner)

    def load(self, path: str | os.PathLike) -> "ResidualDynamicsLearner":
        """Restore a state saved by :meth:`save` of a learner like this one (same kind, robot
        and options; refused with a ``ValueError`` otherwise); returns ``self``."""
        with self._lock, jax.enable_x64(True):
            self.state = learners.load_state(path, self.state, self.learner)
        return self


class DriftAwareResidualDynamicsLearner(ResidualDynamicsLearner):
    """:class:`ResidualDynamicsLearner` with a per-joint drift trigger on the standardised
    prior error; when any joint fires, every joint forgets with ``fast_lam`` for
    ``warmup_steps`` samples, then returns to ``lam``.

    Args:
        model: the nominal model.
        lam: slow (steady-state) forgetting factor.
        delta: initial covariance scale.
        fast_lam: forgetting factor after a drift alarm.
        warmup_steps: samples of ``fast_lam`` after an alarm.
        drift_radius, drift_ref_mult, drift_k, drift_h, drift_two_sided, drift_reference:
            the CUSUM trigger (see :class:`dense_armor.drift.CUSUM`).
        detector_warmup: samples learned before the trigger is fed.
        trigger: ``"hampel"`` (default), ``"cusum"`` or ``"innovation"``: a CUSUM on the
            normalised innovation squared against a noise level learned from the learner's own
            prior errors, armed once that estimate has converged
            (:class:`dense_armor.drift.Innovation`). It is the trigger that works on the drift
            benchmark (docs/benchmarks.md); Hampel and CUSUM are kept as documented.
        hampel_radius, hampel_n_sigmas: the Hampel trigger (:class:`dense_armor.drift.Hampel`).
        innovation_k, innovation_h, innovation_min_samples, innovation_min_sigma: the
            innovation trigger's allowance, threshold, noise samples before it arms, and noise
            floor (N m).
        reopen: on an alarm, add ``reopen * I`` to every joint's covariance (weights kept, see
            :func:`dense_armor.rls.reopen`); ``None`` (default) means 10 with the innovation
            trigger and 0 (no re-opening, the documented behaviour) with Hampel and CUSUM.
        forgetting: ``"directional"`` (default; forgets only along the excited direction, so a
            robot at rest cannot wind the covariance up) or ``"exponential"`` (the textbook
            update). Both are the same update at ``lam = 1``.

    Examples:
        >>> import numpy as np
        >>> from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
        >>> from dense_armor.utility.learn.online_dynamics import (
        ...     DriftAwareResidualDynamicsLearner, write_minimal_urdf,
        ... )
        >>> path = write_minimal_urdf()
        >>> m = RigidBodyModel(path)
        >>> learner = DriftAwareResidualDynamicsLearner(m)
        >>> tau = learner.predict_torque(np.zeros(m.n), np.zeros(m.n),
        ...                              np.zeros(m.n))
        >>> tau.shape
        (2,)
    """

    def __init__(
        self,
        model,
        lam: float = 0.99,
        delta: float = 1e6,
        fast_lam: float = 0.9,
        warmup_steps: int = 20,
        drift_radius: int = 10,
        drift_ref_mult: int = 3,
        drift_k: float = 0.5,
        drift_h: float = 20.0,
        drift_two_sided: bool = True,
        drift_reference: str = "adaptive",
        detector_warmup: int = 0,
        trigger: str = "hampel",
        hampel_radius: int = 20,
        hampel_n_sigmas: float = 3.0,
        innovation_k: float = 3.0,
        innovation_h: float = 40.0,
        innovation_min_samples: int = 50,
        innovation_min_sigma: float = 1e-4,
        reopen: Optional[float] = None,
        forgetting: str = "directional",
    ):
        if trigger == "hampel":
            detector = Hampel(radius=hampel_radius, n_sigmas=hampel_n_sigmas)
        elif trigger == "cusum":
            detector = CUSUM(
                radius=drift_radius, ref_mult=drift_ref_mult, k=drift_k, h=drift_h,
                two_sided=drift_two_sided, reference=drift_reference,
            )
        elif trigger == "innovation":
            detector = Innovation(
                k=innovation_k, h=innovation_h, min_samples=innovation_min_samples,
                min_sigma=innovation_min_sigma,
            )
        else:
            raise ValueError(f"trigger must be 'hampel', 'cusum' or 'innovation', got {trigger!r}")
        if reopen is None:
            reopen = 10.0 if trigger == "innovation" else 0.0
        learner = ResidualLearner(
            _functional(model), lam=lam, delta=delta, detector=detector,
            fast_lam=fast_lam, warmup_steps=warmup_steps, detector_warmup=detector_warmup,
            reopen=reopen, forgetting=forgetting,
        )
        self._init(model, learner)
        self.lam, self.delta, self.fast_lam, self.warmup_steps = lam, delta, fast_lam, warmup_steps
        self.trigger = trigger
        self.detector_warmup = detector_warmup
        self.reopen, self.forgetting = reopen, forgetting

    @property
    def drift_detected(self) -> bool:
        """Whether the last learned sample raised a drift alarm."""
        last = self.last
        return bool(last.alarm) if last is not None else False


class _DriftDetector:
    """A stateful single-stream wrapper over a functional drift detector."""

    def __init__(self, detector):
        self.detector = detector
        with jax.enable_x64(True):
            self.state = detector.init(1, jnp.float64)
        self.drift_detected = False

    def update(self, x: float) -> bool:
        """Feed one value; returns (and stores in ``drift_detected``) whether it alarms."""
        with jax.enable_x64(True):
            self.state, alarm = _detector_step(self.detector, self.state, np.array([x], np.float64))
        self.drift_detected = bool(alarm[0])
        return self.drift_detected


class HampelScorer(_DriftDetector):
    """Hampel outlier trigger on a causal window (see :class:`dense_armor.drift.Hampel`)."""

    def __init__(self, radius: int = 20, n_sigmas: float = 3.0):
        super().__init__(Hampel(radius=radius, n_sigmas=n_sigmas))


class CUSUMDriftDetector(_DriftDetector):
    """Page's CUSUM against a windowed reference (see :class:`dense_armor.drift.CUSUM`)."""

    def __init__(self, radius: int = 10, ref_mult: int = 3, k: float = 0.5, h: float = 20.0,
                 two_sided: bool = True, reference: str = "adaptive"):
        super().__init__(CUSUM(radius=radius, ref_mult=ref_mult, k=k, h=h, two_sided=two_sided, reference=reference))


class _SharedParameters(ResidualDynamicsLearner):
    """What the learners of one shared parameter vector add to the class API."""

    @property
    def weights(self) -> np.ndarray:
        """(p,) learned parameters, named by :attr:`parameter_names`."""
        return np.asarray(self.state.rls.w)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Names of the weights."""
        return self.learner.parameter_names

    @property
    def drift_detected(self) -> bool:
        """Whether the last learned sample raised an alarm (drift, or a payload change)."""
        last = self.last
        return bool(last.alarm) if last is not None else False


class PayloadResidualDynamicsLearner(_SharedParameters):
    """Online payload and friction learner: what the URDF misses, in physical terms.

    Features: the joint-torque regressor columns of the body carrying ``link`` (the payload's
    10 inertial parameters, shared by all joints) plus, per joint, viscous ``qd_j``, Coulomb
    ``sign(qd_j)`` and offset columns; target ``tau - (M(q) qdd + C(q, qd) qd + g(q))``; one
    RLS over the stacked joint equations (:class:`dense_armor.payload.PayloadLearner`).
    :meth:`estimate` reports the payload's mass, centre of mass and inertia and the friction
    coefficients with standard deviations, and flags what the data have not excited.

    Args:
        model: the nominal model (a :class:`RigidBodyModel` or a functional ``Model``).
        link: the link carrying the payload; default the link of the last body. The estimate
            is expressed in this link's frame.
        lam: forgetting factor in (0, 1].
        delta: prior covariance scale, ``P0 = delta I`` around ``w0 = 0``, > 0.
        friction: ``True`` (viscous, Coulomb and offset per joint), ``False``, or a subset of
            ``("viscous", "coulomb", "offset")``.
        forgetting: ``"directional"`` (default: forgets only along excited directions, so a
            robot at rest cannot wind the covariance up) or ``"exponential"`` (textbook).
        trigger: ``None`` (default, no drift detection), ``"innovation"`` (the NIS CUSUM
            against a learned noise level, :class:`dense_armor.drift.Innovation`), or the
            documented ``"hampel"`` / ``"cusum"`` triggers, each with its default settings, on
            the whitened prior error.
        detector: a functional detector (``init(n, dtype)``, ``step(state, z, valid)``) to use
            instead of ``trigger``'s.
        reopen: on an alarm, add ``reopen * I`` to the covariance (weights kept); ``None``
            (default) means 100 with the innovation trigger (on the drift benchmark that
            re-learns as fast as a learner restarted at the change) and 0 with the others.
        fast_lam, warmup_steps, detector_warmup: the response to an alarm, as in
            :class:`DriftAwareResidualDynamicsLearner`.

    Examples:
        >>> import numpy as np
        >>> from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
        >>> from dense_armor.utility.learn.online_dynamics import (
        ...     PayloadResidualDynamicsLearner, write_minimal_urdf,
        ... )
        >>> learner = PayloadResidualDynamicsLearner(RigidBodyModel(write_minimal_urdf()))
        >>> learner.weights.shape
        (16,)
    """

    def __init__(
        self,
        model,
        link: Optional[str] = None,
        lam: float = 1.0,
        delta: float = 1e6,
        friction=True,
        forgetting: str = "directional",
        trigger: Optional[str] = None,
        detector=None,
        reopen: Optional[float] = None,
        fast_lam: float = 0.9,
        warmup_steps: int = 20,
        detector_warmup: int = 0,
    ):
        detectors = {None: None, "innovation": Innovation, "hampel": Hampel, "cusum": CUSUM}
        if trigger not in detectors:
            raise ValueError(f"trigger must be None, 'innovation', 'hampel' or 'cusum', got {trigger!r}")
        if detector is None and trigger is not None:
            detector = detectors[trigger]()
        if reopen is None:
            reopen = 100.0 if trigger == "innovation" else 0.0
        learner = payload.PayloadLearner(
            _functional(model), link, lam=lam, delta=delta, friction=friction,
            forgetting=forgetting, detector=detector, reopen=reopen,
            fast_lam=fast_lam, warmup_steps=warmup_steps, detector_warmup=detector_warmup,
        )
        self._init(model, learner)
        self.link, self.friction, self.forgetting = learner.link, learner.friction, forgetting
        self.lam, self.delta, self.fast_lam, self.warmup_steps = lam, delta, fast_lam, warmup_steps
        self.trigger, self.reopen, self.detector_warmup = trigger, reopen, detector_warmup

    def estimate(self, threshold: float = 1.0) -> payload.PayloadEstimate:
        """The physical report (NumPy): mass, centre of mass, inertia about it, friction, each
        with a standard deviation and an ``*_unexcited`` flag; see
        :func:`dense_armor.payload.payload_estimate`."""
        with jax.enable_x64(True):
            report = payload.estimate(self.learner, self.state, np.float64(threshold))
        return jax.tree.map(np.asarray, report)

    def summary(self, threshold: float = 1.0) -> str:
        """The estimate as a few lines of text, saying how many payload parameters the data
        determine and which are still at the prior."""
        return self.estimate(threshold).summary(self.link)


class RobotResidualDynamicsLearner(_SharedParameters):
    """The whole robot learned online with its URDF as the prior: the learner for real robots.

    Every body's inertial parameters and every joint's armature, viscous and Coulomb friction
    and torque offset, one Bayesian RLS whose prior mean is the URDF and whose prior
    uncertainty is ``prior``; each joint's noise level learned online; the residual a
    controller gets gated by its recent evidence and limited by the effort limits; payload
    changes detected in the payload link's parameters, which are then re-learned while the rest
    of the robot is kept (:class:`dense_armor.robot_learner.RobotLearner`). :meth:`estimate`
    reports every body and joint in physical terms (the most probable physically consistent), with
    standard deviations and flags for what the data have not excited.

    Args:
        model: the nominal model (a :class:`RigidBodyModel` or a functional ``Model``).
        prior: a :class:`dense_armor.robot_learner.Prior` (default: 30 % of each inertial
            parameter with floors; joint terms scaled by the effort limits).
        rate: the sampling rate, Hz: the learner's time constants are in seconds.
        coulomb_width: the width of the Coulomb term ``tanh(qd / width)``, rad/s.
        lam: forgetting factor in (0, 1]; default ``1 - 1 / (60 s rate)``, a memory of a
            minute (1: keep every sample).
        link: the link carrying payloads; default the link of the last body.
        detect_payload: detect payload changes (default ``True``).
        min_mass: kg, the smallest payload change that raises an alarm.
        window: s, the detector's window.
        consistent: predict with the nearest physically consistent inertial parameters.

    Examples:
        >>> import numpy as np
        >>> from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
        >>> from dense_armor.utility.learn.online_dynamics import (
        ...     RobotResidualDynamicsLearner, write_minimal_urdf,
        ... )
        >>> learner = RobotResidualDynamicsLearner(RigidBodyModel(write_minimal_urdf()))
        >>> learner.weights.shape  # link1 turns about gravity's axis: its I_zz alone shows
        (21,)
        >>> learner.parameter_names[:2]
        ('link1 I_zz', 'link2 m')
    """

    def __init__(self, model, prior=None, rate: float = 1000.0, coulomb_width: float = 0.02, lam: Optional[float] = None,
                 link: Optional[str] = None, detect_payload: bool = True, min_mass: float = 0.6, window: float = 1.5,
                 consistent: bool = False):
        from dense_armor.payload_change import PayloadDetector

        detector = PayloadDetector(window=window, min_mass=min_mass) if detect_payload else None
        learner = robot_learner.RobotLearner(
            _functional(model), robot_learner.Prior() if prior is None else prior, rate=rate,
            coulomb_width=coulomb_width, lam=lam, detector=detector, link=link, consistent=consistent,
        )
        self._init(model, learner)
        self.prior, self.rate, self.coulomb_width, self.lam = prior, rate, coulomb_width, lam
        self.link, self.detect_payload, self.min_mass, self.window = learner.link, detect_payload, min_mass, window
        self.consistent = consistent

    def estimate(self, threshold: float = 1.0) -> robot_learner.RobotEstimate:
        """The learned robot in physical terms (NumPy); see
        :func:`dense_armor.robot_learner.robot_estimate`."""
        with jax.enable_x64(True):
            report = robot_learner.estimate(self.learner, self.state, np.float64(threshold))
        return jax.tree.map(np.asarray, report)

    def summary(self, threshold: float = 1.0) -> str:
        """The estimate as a table of text, one line per body and per joint."""
        return robot_learner.summary(self.learner, self.estimate(threshold))
