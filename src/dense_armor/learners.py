"""Online residual-dynamics learners: immutable state, one jitted prequential step.

A learner is an :class:`equinox.Module` holding the nominal model and the hyperparameters
(floats are pytree leaves, so under ``jax.jit`` a new ``lam`` is a new argument, not a
recompile, and a sweep over ``lam`` is a ``vmap``). Its state is a :class:`LearnerState`
pytree. :func:`step` predicts first, then learns (prequential evaluation), and returns the
prior prediction and error; :func:`replay` runs the same step over a whole trajectory with
``lax.scan``; ``jax.vmap`` over learners and trajectories runs a batch of robots at once.
A step is two halves (:class:`Learner`): ``prepare`` (no state: screening, nominal dynamics,
features) and ``learn`` (the state: predict, score, learn); :func:`replay` vmaps the first over
the trajectory and scans only the second. :class:`Stepper` is the control-loop form: the same
step compiled for one learner, its state packed (:mod:`dense_armor.packing`), the cheapest call
from Python.

The five-feature learner (the design document) keeps one RLS per joint on
``x_j = [qdd_j, qd_j, sign(qd_j), g_j, 1]`` with target ``tau_j - rnea(q, qd, qdd)_j``.

Drift. With a ``detector``, the standardised prior error ``z_j = e_j / sqrt(1 + x_j' P_j x_j)``
feeds a per-joint detector (:mod:`dense_armor.drift`). When any joint alarms the learner
responds (:func:`respond`): every joint forgets with ``fast_lam`` for ``warmup_steps`` samples
(the design document's response), every joint's covariance is re-opened,
``P <- P + reopen I`` with the weights kept (:func:`dense_armor.rls.reopen`; ``reopen = 0``,
the default, re-opens nothing), and a detector that learns its stream's statistics
(:class:`~dense_armor.drift.Innovation`, which has a ``reset``) restarts, since the response
changes that stream. The combination that works on the drift benchmark (docs/benchmarks.md):
``lam = 1``, ``detector=Innovation()``, ``reopen = 10``, no fast forgetting.

Covariance wind-up. By default (``forgetting="directional"``) the RLS forgets only along each
sample's feature vector (:func:`dense_armor.rls.update` with ``directional=True``), so a robot
at rest (``qd = qdd = 0``: only the gravity and bias features excited) cannot inflate ``P``
along the directions it does not excite. At ``lam = 1`` it is the textbook update, bit for bit
in the non-zero entries. With random motion exciting ``p`` features, its memory is about
``p / (1 - lam)`` samples rather than the textbook ``1 / (1 - lam)``; ``forgetting=
"exponential"`` gives the textbook update (which, on the planar arm, whose gravity feature is
always 0, overflows to inf after about 7e4 samples at ``lam = 0.99`` even in float64).

Precision. The covariance is updated in the textbook form ``P - K x' P`` (then symmetrised) in
every dtype; ``joseph=True`` selects the Joseph form. For float32 use ``delta`` of 1e2-1e4
(``docs/design.md``, "float32 learners", has the measurements).

A sample with a NaN or inf is skipped inside the step: the state is unchanged except for the
``rejected`` counter, and the outputs of that step are NaN.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import compiler, rls
from dense_armor.compiler import dot_last, full_precision, join, materialize
from dense_armor.drift import CUSUM, Hampel, Innovation
from dense_armor.dynamics import generalized_gravity, rnea
from dense_armor.host import fetch
from dense_armor.model import Model
from dense_armor.packing import Layout

FEATURE_NAMES = ("qdd", "qd", "sign_qd", "g", "bias")
FORGETTING = ("directional", "exponential")


class Sample(NamedTuple):
    """One sample (each (n,)) or a trajectory (each (T, n)): positions (rad or m),
    velocities, accelerations and measured joint torques (N m or N)."""

    q: Any
    qd: Any
    qdd: Any
    tau: Any


class StepOutput(NamedTuple):
    """What one prequential step reports (a leading T axis after :func:`replay`).

    Attributes:
        prediction: (n,) torque predicted before learning the sample (nominal + residual).
        error: (n,) ``tau - prediction``, the prior error.
        nominal: (n,) the URDF model's torque ``rnea(q, qd, qdd)``.
        alarm: () bool, a drift alarm was raised at this sample.
        accepted: () bool, the sample was finite and was learned.
        extra: what a learner reports beyond these (a pytree of arrays), or ``None``.
    """

    prediction: jax.Array
    error: jax.Array
    nominal: jax.Array
    alarm: jax.Array
    accepted: jax.Array
    extra: Any = None


class Prepared(NamedTuple):
    """The part of a step that does not depend on the learner's state (:meth:`Learner.prepare`).

    Attributes:
        x: features, (n, p) for the learner's rows (zeros for a rejected sample).
        target: (n,) ``tau - nominal``, what the residual model learns.
        nominal: (n,) the URDF model's torque ``rnea(q, qd, qdd)``.
        valid: () bool, the sample is finite.
    """

    x: jax.Array
    target: jax.Array
    nominal: jax.Array
    valid: jax.Array


class LearnerState(NamedTuple):
    """The learner's whole memory; save it and a restarted controller loses nothing.

    Attributes:
        rls: per-joint RLS state, ``w`` (n, 5) and ``P`` (n, 5, 5).
        count: samples learned.
        rejected: samples skipped for non-finite values.
        countdown: samples left with the fast forgetting factor.
        alarms: drift alarms raised so far.
        detector: the drift detector's state (windows), or ``None``.
    """

    rls: rls.RLSState
    count: jax.Array
    rejected: jax.Array
    countdown: jax.Array
    alarms: jax.Array
    detector: Any


def _concrete(value):
    """A hyperparameter as a NumPy array, or ``None`` when it is traced (not checked)."""
    if isinstance(value, jax.core.Tracer):
        return None
    if isinstance(value, (str, bytes)) or not np.isrealobj(value) or np.asarray(value).dtype.kind not in "biuf":
        raise ValueError(f"expected a real number, got {value!r}")
    return np.asarray(value, np.float64)


def check_hyperparameters(lam, delta, fast_lam=1.0):
    """Raise ValueError for ``lam`` or ``fast_lam`` outside (0, 1], or ``delta`` not a finite
    number above 0 (Python numbers, NumPy and concrete JAX arrays; traced values and a ``delta``
    of ``None``, :func:`prior_scale`'s default, pass)."""
    for name, value in (("lam", lam), ("fast_lam", fast_lam)):
        a = _concrete(value)
        if a is not None and not np.all((a > 0.0) & (a <= 1.0)):
            raise ValueError(f"{name} must be in (0, 1], got {value}")
    a = None if delta is None else _concrete(delta)
    if a is not None and not np.all(np.isfinite(a) & (a > 0) & (a < 1e300)):
        raise ValueError(f"delta must be a finite number > 0 (and below 1e300), got {delta}")


def prior_scale(delta, dtype) -> jax.Array:
    """``delta`` (``P0 = delta I``) in ``dtype``; ``None`` chooses by precision: 1e6 in float64,
    1e3 below it, where the first updates from a larger prior are lost to rounding
    (``docs/design.md``, "float32 learners")."""
    if delta is None:
        delta = 1e6 if jnp.finfo(dtype).bits >= 64 else 1e3
    return jnp.asarray(delta, dtype)


def check_response(reopen, forgetting="directional", warmup_steps=0, detector_warmup=0):
    """Raise ValueError for ``reopen``, ``warmup_steps`` or ``detector_warmup`` below 0, or an
    unknown ``forgetting``."""
    for name, value in (("reopen", reopen), ("warmup_steps", warmup_steps), ("detector_warmup", detector_warmup)):
        a = _concrete(value)
        if a is not None and not np.all(np.isfinite(a) & (a >= 0)):
            raise ValueError(f"{name} must be >= 0, got {value}")
    if forgetting not in FORGETTING:
        raise ValueError(f"forgetting must be one of {FORGETTING}, got {forgetting!r}")


def update(learner, state: rls.RLSState, x, y, lam) -> rls.RLSState:
    """The RLS update a learner uses: its ``forgetting`` and covariance form.

    Any module with ``forgetting`` (``"directional"`` or ``"exponential"``) and ``joseph``
    fields can call it; ``x (..., p)``, ``y (...)``.
    """
    return rls.update(
        state, x, y, lam,
        directional=learner.forgetting == "directional",
        joseph=learner.joseph,
    )


def respond(learner, alarm, detector_state, rls_state: rls.RLSState, countdown, lam):
    """A learner's response to a drift alarm (bool scalar, any joint), shared by the learners.

    On an alarm: restart the countdown of ``warmup_steps`` samples with ``fast_lam``;
    re-open every estimator's covariance by ``learner.reopen`` (:func:`rls.reopen`, weights
    kept; a learner without that field re-opens nothing); and, for a detector with a ``reset`` method (:class:`~dense_armor.drift.Innovation`),
    restart it, since the learner's response changes the stream it watches.

    Returns:
        ``(detector_state, rls_state, countdown, lam)``: the forgetting factor to use for
        this sample and the countdown left after it.
    """
    dtype = rls_state.w.dtype
    countdown = jnp.where(alarm, jnp.asarray(learner.warmup_steps, jnp.int32), countdown)
    lam = jnp.where(countdown > 0, jnp.asarray(learner.fast_lam, dtype), lam)
    countdown = jnp.maximum(countdown - 1, 0)
    reopen = jnp.asarray(getattr(learner, "reopen", 0.0), dtype)
    rls_state = rls.reopen(rls_state, reopen, alarm & (reopen > 0))
    if hasattr(learner.detector, "reset"):
        detector_state = learner.detector.reset(detector_state, alarm)
    return detector_state, rls_state, countdown, lam


def state_dtype(dtype=None) -> np.dtype:
    """The dtype of a new learner state: ``dtype``, by default JAX's default float.

    Raises:
        ValueError: float64 outside JAX's 64-bit mode (:func:`check_precision`).
    """
    dtype = jnp.dtype(dtype or jnp.result_type(float))
    check_precision(dtype)
    return dtype


def check_precision(dtype) -> None:
    """Raise ValueError for a state of a precision JAX is not computing in (a float64 state
    outside 64-bit mode, whose arithmetic would silently fall to float32). At trace time: free
    once compiled."""
    if jax.dtypes.canonicalize_dtype(dtype) != dtype:
        raise ValueError(f"a {jnp.dtype(dtype).name} learner state needs JAX's 64-bit mode: call inside "
                         "jax.enable_x64(True), or set jax.config.update('jax_enable_x64', True)")


class Learner(eqx.Module):
    """What every learner shares: a step split into a state-free and a stateful half.

    A subclass provides ``features(q, qd, qdd, dtype) -> (x, nominal)`` and
    ``learn(state, prepared) -> (state, output)``. :meth:`step` is ``learn(prepare(sample))``;
    :func:`replay` runs :meth:`prepare` over the whole trajectory at once (``vmap``: the nominal
    dynamics of every sample in a few wide kernels) and only :meth:`learn` in the ``lax.scan``,
    the same arithmetic as a loop of :meth:`step` calls.
    """

    #: Samples per iteration of :func:`replay`'s loop. Two halve the loop's own cost (counter,
    #: slices, carry copies), which counts when a step is a few kernels; a step of a hundred
    #: kernels pays only twice the compile time for it.
    replay_unroll: ClassVar[int] = 2

    @full_precision
    def prepare(self, sample: Sample, dtype) -> Prepared:
        """Check, validate and featurise one sample: no state involved.

        A sample with a NaN or inf is zeroed (its features stay finite) and marked invalid; one
        whose update overflows (a finite but absurd reading, ``qd^2`` past the dtype's range) is
        rejected by :func:`commit`.
        """
        check_precision(dtype)
        _, (tau,) = self.model.check(tau=sample.tau)
        arrays = [jnp.asarray(a, dtype) for a in (sample.q, sample.qd, sample.qdd, tau)]
        valid = finite(*arrays)
        q, qd, qdd, tau = (jnp.where(valid, a, 0) for a in arrays)
        x, nominal = self.features(q, qd, qdd, dtype)
        return Prepared(x=x, target=tau - nominal, nominal=nominal, valid=valid)

    @full_precision
    def step(self, state, sample: Sample):
        """Predict, score, then learn one sample (prequential)."""
        return self.learn(state, self.prepare(sample, state.rls.w.dtype))


class ResidualLearner(Learner):
    """One RLS per joint on ``[qdd_j, qd_j, sign(qd_j), g_j, 1]``, optionally drift-aware.

    Attributes:
        model: the nominal (URDF) model.
        lam: forgetting factor in (0, 1].
        delta: initial covariance scale, ``P0 = delta I``; by default 1e6 in float64 and 1e3 in
            float32 (:func:`prior_scale`).
        detector: ``None``, or a :class:`~dense_armor.drift.Hampel`,
            :class:`~dense_armor.drift.CUSUM` or :class:`~dense_armor.drift.Innovation` on the
            standardised prior error.
        fast_lam: forgetting factor for ``warmup_steps`` samples after an alarm.
        warmup_steps: samples of fast forgetting after an alarm.
        detector_warmup: samples learned before the detector is fed.
        reopen: ``>= 0``; on an alarm every joint's covariance becomes ``P + reopen I``
            (weights kept). 0 (default): no re-opening.
        forgetting: static, ``"directional"`` (default, no wind-up) or ``"exponential"``.
        joseph: static, update the covariance in Joseph form (default ``False``).

    Raises:
        ValueError: ``lam`` or ``fast_lam`` outside (0, 1], ``delta <= 0``, ``reopen < 0``, an
            unknown ``forgetting``.
    """

    model: Model
    lam: float | jax.Array = 1.0
    delta: float | jax.Array | None = None
    detector: Hampel | CUSUM | Innovation | None = None
    fast_lam: float | jax.Array = 0.9
    warmup_steps: int | jax.Array = 20
    detector_warmup: int | jax.Array = 0
    reopen: float | jax.Array = 0.0
    forgetting: str = eqx.field(static=True, default="directional")
    joseph: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        check_hyperparameters(self.lam, self.delta, self.fast_lam)
        check_response(self.reopen, self.forgetting, self.warmup_steps, self.detector_warmup)

    def init(self, dtype=None) -> LearnerState:
        """The initial state: ``w = 0``, ``P = delta I`` for every joint."""
        dtype = state_dtype(dtype)
        zero = jnp.zeros((), jnp.int32)
        return LearnerState(
            rls=rls.init(len(FEATURE_NAMES), prior_scale(self.delta, dtype), batch_shape=(self.model.n,), dtype=dtype),
            count=zero,
            rejected=zero,
            countdown=zero,
            alarms=zero,
            detector=None if self.detector is None else self.detector.init(self.model.n, dtype),
        )

    def features(self, q, qd, qdd, dtype):
        """Features (n, 5) and the nominal torque (n,) at one state."""
        _, (q, qd, qdd) = self.model.check(q=q, qd=qd, qdd=qdd)
        q, qd, qdd = (a.astype(dtype) for a in (q, qd, qdd))
        # Each RNEA computed once, not once per entry of what reads it (materialize).
        nominal = materialize(rnea(self.model, q, qd, qdd))
        gravity = materialize(generalized_gravity(self.model, q))
        x = jnp.stack([qdd, qd, jnp.sign(qd), gravity, jnp.ones_like(q)], axis=-1)
        return x, nominal

    @full_precision
    def predict(self, state: LearnerState, q, qd, qdd) -> jax.Array:
        """Predicted torque (n,): nominal plus learned residual."""
        x, nominal = self.features(q, qd, qdd, state.rls.w.dtype)
        return nominal + rls.predict(state.rls, x)

    @full_precision
    def learn(self, state: LearnerState, prepared: Prepared) -> tuple[LearnerState, StepOutput]:
        """The stateful half of :meth:`Learner.step`: predict, score, then learn."""
        dtype = state.rls.w.dtype
        x, target, nominal, valid = prepared
        residual = rls.predict(state.rls, x)
        error = target - residual

        lam = jnp.asarray(self.lam, dtype)
        rls_state = state.rls
        countdown, detector, alarm = state.countdown, state.detector, jnp.zeros((), bool)
        if self.detector is not None:
            z = error / jnp.sqrt(1.0 + rls.prior_variance(state.rls, x))
            fed = valid & (state.count >= self.detector_warmup)
            detector, alarms = self.detector.step(state.detector, z, fed)
            alarm = jnp.any(alarms)
            detector, rls_state, countdown, lam = respond(
                self, alarm, detector, rls_state, countdown, lam
            )
        learned = LearnerState(
            rls=update(self, rls_state, x, target, lam),
            count=state.count + 1,
            rejected=state.rejected,
            countdown=countdown,
            alarms=state.alarms + alarm,
            detector=detector,
        )
        return commit(state, learned, valid, nominal, residual, error, alarm)


def finite(*arrays) -> jax.Array:
    """() bool: every entry of every array is finite."""

    def nan_if_not(a):  # x * 0 is NaN exactly for NaN and inf; summed an axis at a time (fusible)
        while a.ndim:
            a = dot_last(a, jnp.zeros_like(a))
        return a

    return jnp.isfinite(sum(nan_if_not(jnp.asarray(a)) for a in arrays))


def commit(state, learned, valid, nominal, residual, error, alarm, extra=None):
    """Finish a prequential step: keep ``learned`` for a valid sample, else ``state`` with one
    more rejection (the detector's own state already ignored it), and the step's outputs (NaN
    for a rejected sample; ``extra`` as given). A sample whose update overflowed (a finite but
    absurd reading) is rejected too, and the detector's state restored: it never reaches the
    state."""
    overflow = ~finite(learned.rls.w)
    valid = valid & ~overflow
    new = jax.tree.map(lambda a, b: jnp.where(valid, a, b), learned, state)
    detector = jax.tree.map(lambda a, b: jnp.where(overflow, b, a), learned.detector, state.detector)
    new = new._replace(rejected=state.rejected + (~valid), detector=detector)
    nan = jnp.full_like(nominal, jnp.nan)
    output = StepOutput(
        prediction=jnp.where(valid, nominal + residual, nan),
        error=jnp.where(valid, error, nan),
        nominal=jnp.where(valid, nominal, nan),
        alarm=alarm & valid,
        accepted=valid,
        extra=extra,
    )
    return new, output


@compiler.jit(static_argnums=1)
def init(learner: Learner, dtype):
    """``learner.init(dtype)`` compiled as one program: called eagerly, each of its operations
    is compiled and dispatched on its own (a whole-robot learner's, about 20)."""
    return learner.init(dtype)


@compiler.jit
def step(learner: ResidualLearner, state: LearnerState, sample: Sample) -> tuple[LearnerState, StepOutput]:
    """One jitted prequential step: predict, score, learn. See :meth:`ResidualLearner.step`."""
    return learner.step(state, sample)


@compiler.jit
def replay(learner: ResidualLearner, state: LearnerState, trajectory: Sample, mask=None) -> tuple[LearnerState, StepOutput]:
    """Run :func:`step` over a trajectory (each field (T, n)) with ``lax.scan``.

    Args:
        mask: ``None``, or (T,) bool: samples where it is false (padding) leave the state as it
            was and are not counted as rejected.

    Returns:
        The final state and the per-sample :class:`StepOutput` (each field with a leading T).
    """
    dtype = state.rls.w.dtype
    prepared = jax.vmap(lambda sample: learner.prepare(sample, dtype))(trajectory)
    if mask is not None:
        prepared = prepared._replace(valid=prepared.valid & mask)

    watching = learner.detector is not None

    def learn(state, xs):
        prepared, keep = xs
        new, out = learner.learn(state, prepared)
        if keep is not None:
            new = new._replace(rejected=jnp.where(keep, new.rejected, state.rejected))
        # Only what needs the state leaves the loop: each output is a write per sample.
        return new, (out.prediction, out.alarm if watching else None, out.extra)

    state, (prediction, alarm, extra) = jax.lax.scan(learn, state, (prepared, mask), unroll=learner.replay_unroll)
    valid = prepared.valid
    nominal = jnp.where(valid[:, None], prepared.nominal, jnp.nan)
    error = prepared.target + nominal - prediction  # tau - prediction; NaN where rejected
    return state, StepOutput(prediction, error, nominal, alarm if watching else jnp.zeros_like(valid), valid, extra)


def _report_parts(output: StepOutput) -> list:
    """A step's outputs as the parts of one vector ``[prediction, error, nominal, alarm,
    accepted, extra...]`` (3n + 2 and the extra's leaves, flattened)."""
    dtype = output.prediction.dtype
    flags = jnp.stack([output.alarm, output.accepted]).astype(dtype)
    extra = [jnp.ravel(leaf).astype(dtype) for leaf in jax.tree.leaves(output.extra)]
    return [output.prediction, output.error, output.nominal, flags, *extra]


class Stepper:
    """A learner and its state, stepped from a Python control loop at the least dispatch cost.

    :func:`step` passes every leaf of the learner, its state and the sample (17-29 arrays)
    and returns 11, each at a dispatch cost. A stepper compiles :meth:`Learner.step` (and
    :meth:`Learner.predict`) for this one learner: the learner (model and hyperparameters) is a
    compile-time constant, which XLA folds. The state stays on the device, packed into one
    buffer per dtype, its largest leaves in buffers of their own
    (:class:`~dense_armor.packing.Layout`, bit-exact), from one step to the next; a step takes
    them and the sample (one array), writes the new state over them (the buffers are donated),
    and returns its outputs, ``[prediction, error, nominal, alarm, accepted, extra]`` (one
    array).

    :meth:`step` waits for the step and returns its outputs; :meth:`learn` only queues it (JAX's
    asynchronous dispatch) and returns at once, so that steps run on XLA's thread while the
    caller goes on; the next step, :meth:`predict`, :attr:`last` or :attr:`state` wait for it.
    :meth:`tick` is a control loop's tick in one call: the step of the measured sample, then the
    learner's torque at the reference state (the feed-forward command). Same arithmetic as
    :func:`step` and :func:`predict`; each program compiles once, on its first call. A stepper
    of a float64 state computes in float64 wherever it is called: it enters
    ``jax.enable_x64`` for its own calls when the caller is not in 64-bit mode.

    Args:
        learner: a :class:`Learner`; to change it (a new ``lam``, a new model), make a new
            stepper.
        state: its state, e.g. ``learner.init()``.

    Example::

        stepper = Stepper(learner, learner.init())
        out = stepper.step(q, qd, qdd, tau)   # a StepOutput of NumPy values
        stepper.learn(q, qd, qdd, tau)         # queued; stepper.last is its StepOutput
        feedforward = stepper.tick(q, qd, qdd, tau, q_ref, qd_ref, qdd_ref)  # learn, then (n,) at the reference
        stepper.state                          # a copy of the state pytree, NumPy leaves
    """

    def __init__(self, learner: Learner, state):
        self.learner = learner
        self._layout = layout = Layout.of(state)
        self._dtype = np.dtype(state.rls.w.dtype)
        self._wide = not {"float64", "int64", "uint64", "complex128"}.isdisjoint(layout.dtypes)  # needs 64-bit mode
        # Cached: on this path an equinox attribute lookup (learner.model.n) costs microseconds.
        self._n = n = learner.model.n

        def arrays(sample, first, count):  # (n,) each, from the arrays joined by _sample
            return [sample[k * n : (k + 1) * n] for k in range(first, first + count)]

        def packed_step(buffers, sample):
            state, output = learner.step(layout.unpack(buffers), Sample(*arrays(sample, 0, 4)))
            return tuple(layout.pack(state)), join(_report_parts(output))

        def packed_tick(buffers, sample):
            state, output = learner.step(layout.unpack(buffers), Sample(*arrays(sample, 0, 4)))
            command = learner.predict(state, *arrays(sample, 4, 3))  # at the reference, after learning
            return tuple(layout.pack(state)), join([command, *_report_parts(output)])

        def packed_predict(buffers, sample):
            return learner.predict(layout.unpack(buffers), *arrays(sample, 0, 3))

        # each step writes the new state over the old (donated buffers): no allocation, and a wide
        # step (the payload learner's) stays on XLA:CPU's calling thread (docs/design.md)
        self._step = compiler.jit(packed_step, nested=False, donate_argnums=0)
        self._tick = compiler.jit(packed_tick, nested=False, donate_argnums=0)
        self._predict = compiler.jit(packed_predict, nested=False)
        self._extra = None  # the extra output's structure and shapes, traced at the first step
        self._lock = threading.Lock()  # one step at a time: each reads the state the last wrote
        self.state = state

    @property
    def state(self):
        """A copy of the current state pytree (NumPy leaves); waits for the queued steps."""
        with self._lock:
            return self._layout.unpack([np.array(b) for b in self._buffers])

    @state.setter
    def state(self, state):
        if Layout.of(state) != self._layout:
            raise ValueError("state: not a state of this learner (another structure, shape or dtype)")
        with self._precision():
            buffers = tuple(jnp.array(b) for b in self._layout.pack(state))  # copies: the next step donates them
        with self._lock:
            self._buffers, self._report, self._last = buffers, None, None

    def _precision(self):
        """64-bit mode for the calls of a stepper with 64-bit state, if the caller is not in it
        (outside it, JAX would compute them in float32)."""
        return jax.enable_x64(True) if self._wide and not jax.config.jax_enable_x64 else contextlib.nullcontext()

    def step(self, q, qd, qdd, tau) -> StepOutput:
        """Predict, score, then learn one sample (each (n,)); the step's outputs as NumPy.
        Safe from several threads (steps take turns)."""
        sample = self._sample(q, qd, qdd, tau)
        with self._lock, self._precision():
            self._queue(sample)
            return self._output()

    def learn(self, q, qd, qdd, tau) -> None:
        """:meth:`step`, returning as soon as the step is queued (its outputs: :attr:`last`)."""
        sample = self._sample(q, qd, qdd, tau)
        with self._lock, self._precision():
            self._queue(sample)

    def tick(self, q, qd, qdd, tau, q_ref, qd_ref, qdd_ref) -> np.ndarray:
        """One tick of a control loop in one call: :meth:`step` on the measured sample (each
        (n,)), then the learner's torque (n,) at the reference state ``(q_ref, qd_ref, qdd_ref)``
        (what :meth:`predict` would then return: the feed-forward command), as NumPy. The step's
        outputs are :attr:`last`. One dispatch where :meth:`learn` and :meth:`predict` take two."""
        sample = self._sample(q, qd, qdd, tau, q_ref, qd_ref, qdd_ref)
        with self._lock, self._precision():
            self._buffers, out = self._tick(self._buffers, sample)
            out = fetch(out)
            self._report, self._last = out[self._n :], None  # read by _output as it is
            return out[: self._n]

    def replay(self, trajectory: Sample) -> StepOutput:
        """:func:`replay` of a trajectory (each field (T, n)) from the current state, in one
        ``lax.scan``: as :meth:`learn` sample by sample. Returns the per-sample outputs (NumPy,
        leading axis T); the last of them becomes :attr:`last`."""
        with self._lock, self._precision():
            state, outputs = replay(self.learner, self._layout.unpack(self._buffers), trajectory)
            outputs = jax.tree.map(np.asarray, outputs)
            self._buffers = tuple(jnp.array(b) for b in self._layout.pack(state))
            if len(outputs.accepted):
                self._report, self._last = None, jax.tree.map(lambda x: x[-1], outputs)
        return outputs

    @property
    def last(self) -> StepOutput | None:
        """The last step's outputs (NumPy; ``None`` before the first step); waits for it."""
        with self._lock, self._precision():
            return None if self._report is None and self._last is None else self._output()

    def predict(self, q, qd, qdd) -> np.ndarray:
        """The learner's prediction (n,) at one state (:meth:`Learner.predict`), after the
        queued steps."""
        sample = self._sample(q, qd, qdd)
        with self._lock, self._precision():
            return fetch(self._predict(self._buffers, sample))

    def _sample(self, *arrays) -> np.ndarray:
        """The arrays, each (n,), as one new array of the state's dtype (a new one every call:
        JAX may read a NumPy argument in place, after the call has returned)."""
        n = self._n
        try:
            sample = np.concatenate(arrays, dtype=self._dtype, casting="same_kind")
            # k arrays, none longer than n, of k n elements in all: each of n
            shaped = sample.shape == (len(arrays) * n,) and max(map(len, arrays)) == n
        except (ValueError, TypeError):
            shaped = False
        if not shaped:
            names = (*Sample._fields, "q_ref", "qd_ref", "qdd_ref")
            for name, x in zip(names, arrays):
                if np.shape(x) != (n,):
                    raise ValueError(f"{name}: expected shape ({n},) for the {n} joints, got {np.shape(x)}")
            raise ValueError(f"{', '.join(names[: len(arrays)])}: expected real numbers, castable to {self._dtype.name}")
        return sample

    def _queue(self, sample) -> None:
        self._buffers, self._report = self._step(self._buffers, sample)
        self._last = None

    def _output(self) -> StepOutput:
        if self._last is None:
            out = fetch(self._report)
            n = self._n
            a, b, c = n, 2 * n, 3 * n
            self._last = StepOutput(out[:a], out[a:b], out[b:c], out[c] != 0, out[c + 1] != 0, self._unflatten_extra(out[c + 2 :]))
        return self._last

    def _unflatten_extra(self, flat):
        if self._extra is None:
            zeros = jnp.zeros(self._n, self._dtype)
            extra = jax.eval_shape(self.learner.step, self._layout.unpack(self._buffers), Sample(zeros, zeros, zeros, zeros))[1].extra
            self._extra = (jax.tree.structure(extra), [leaf.shape for leaf in jax.tree.leaves(extra)])
        treedef, shapes = self._extra
        if not shapes:
            return jax.tree.unflatten(treedef, [])
        leaves, start = [], 0
        for shape in shapes:
            size = math.prod(shape)
            leaves.append(flat[start : start + size].reshape(shape))
            start += size
        return jax.tree.unflatten(treedef, leaves)


@compiler.jit
def predict(learner: ResidualLearner, state: LearnerState, q, qd, qdd) -> jax.Array:
    """Predicted torque (n,) at one state, without learning."""
    check_precision(state.rls.w.dtype)
    return learner.predict(state, q, qd, qdd)


def identity(learner) -> dict[str, str]:
    """What a learner state belongs to: the learner's kind, a hash of the robot (structure and
    parameters), a hash of the learner's options (every other leaf and static field) and their
    values, and the library's version."""
    from dense_armor import __version__

    def digest(tree) -> str:
        leaves, treedef = jax.tree.flatten(tree)
        return _sha256(leaves, hashlib.sha256(str(treedef).encode())).hexdigest()[:16]

    options = _options(learner)
    structure = str(jax.tree.structure(learner, is_leaf=_is_model))
    model = learner.model
    return {
        "kind": type(learner).__name__,
        "robot": digest(model),
        "robot_name": f"{model.name} ({model.n} joints: {', '.join(model.joint_names)})",
        "options": digest([*options.values(), structure]),
        # the values themselves, so that equal options given as 1 or 1.0 (float32 or float64) match
        "option_values": json.dumps({"structure": structure, **{k: np.asarray(v, float).tolist() for k, v in options.items()}}),
        "version": __version__,
    }


def _is_model(x) -> bool:
    return isinstance(x, Model)


def _options(learner) -> dict:
    """The learner's leaves but its model's, by their paths (``.lam``, ``.detector.h``)."""
    flat = jax.tree_util.tree_flatten_with_path(learner, is_leaf=_is_model)[0]
    return {jax.tree_util.keystr(path): leaf for path, leaf in flat if not _is_model(leaf)}


def _other_options(stored: dict, expected: dict) -> str | None:
    """What differs between the saved options and these (``None``: nothing but their types),
    from the values a file keeps; a file without them differs by its hash alone."""
    if "option_values" not in stored:
        return "options"
    saved, now = json.loads(stored["option_values"]), json.loads(expected["option_values"])
    if saved.keys() != now.keys():  # options that one version of a learner has and another not
        names = [f"{', '.join(k.lstrip('.') for k in sorted(keys))} {where}" for keys, where in
                 ((now.keys() - saved.keys(), "here, not in the file"), (saved.keys() - now.keys(), "in the file, not here")) if keys]
        version = stored.get("version", "before 0.1.0")
        return "; ".join(names) + (f": the file is of dense_armor {version}, this is {expected['version']}"
                                   if version != expected["version"] else ": a learner of another version")
    if saved.get("structure") != now["structure"]:
        return "options"
    for key in now:
        if key != "structure" and not np.array_equal(np.asarray(saved[key], float), np.asarray(now[key], float)):
            return f"{key.lstrip('.')} = {saved[key]} in the file, {now[key]} here"
    return None


def save_state(path, state, learner=None) -> None:
    """Write a learner state pytree to the ``.npz`` file ``path`` (that very name, or an open
    binary file), bit-exactly, with a checksum of its arrays and the :func:`identity` of
    ``learner`` when given."""
    leaves = jax.tree.leaves(state)
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    arrays["checksum"] = np.array(_checksum(arrays.values()))
    arrays["paths"] = np.array(json.dumps(_paths(state)))
    if learner is not None:
        arrays.update({f"identity_{k}": np.array(v) for k, v in identity(learner).items()})
    if hasattr(path, "write"):
        np.savez(path, **arrays)
        return
    with open(path, "wb") as f:  # np.savez given a name would append ".npz"
        np.savez(f, **arrays)


def saved_options(path: str | Path) -> dict:
    """The options a state file was saved with, by their paths in the learner (``{".rate": 1000.0,
    ...}``); empty for a file saved without its learner (or before option values were kept).

    Raises:
        ValueError: the file is not a learner state file.
    """
    stored = _read(path)[1]
    values = json.loads(stored.get("option_values", "{}"))
    values.pop("structure", None)
    return values


def _read(path):
    """A state file's arrays and its identity (``{}`` when saved without one)."""
    import zipfile

    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):  # a .npy file: one array
            raise ValueError("a single array")
        with data:
            loaded = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        why = "" if "pickle" in str(err) else f": {err}"  # NumPy's word for any file it cannot read as arrays
        raise ValueError(f"{path}: not a learner state file (an NPZ written by save){why}") from None
    return loaded, {k[len("identity_") :]: str(v) for k, v in loaded.items() if k.startswith("identity_")}


def load_state(path: str | Path, like, learner=None):
    """Read a state written by :func:`save_state`, shaped like the template ``like``.

    Checks, before anything is returned: the file is an NPZ of this structure (each array where
    the template has it: ``.rls.S``, not ``.rls.P``), shapes and dtypes, its arrays those its
    checksum was computed from (a file saved before checksums has
    none); with ``learner``, that it was saved for the same kind of learner, robot and options
    (a file saved without its learner's identity is refused); every array is finite and each
    covariance symmetric positive semi-definite. Loading never executes code, and a float64
    state loads as float64 outside JAX's 64-bit mode too (:class:`Stepper` steps it there; the
    functional ``step`` asks for the mode).

    Raises:
        ValueError: naming the file and what does not match.
    """
    leaves, treedef = jax.tree.flatten(like)
    loaded, stored = _read(path)
    files = set(loaded)
    if learner is not None:
        if not stored:
            raise ValueError(f"{path}: the state does not say which learner and robot it belongs to (saved without its "
                             "learner): it cannot be checked, so it is not loaded")
        expected = identity(learner)
        for key, what in (("kind", "learner"), ("robot", "robot")):
            if stored.get(key) != expected[key]:
                saved = stored.get("robot_name", "?") if key == "robot" else stored.get(key, "?")
                now = expected["robot_name"] if key == "robot" else expected[key]
                raise ValueError(f"{path}: a state of another {what} (saved for {saved}; this one is {now})")
        differs = stored.get("options") != expected["options"] and _other_options(stored, expected)
        if differs:
            raise ValueError(f"{path}: a state of another learner configuration ({differs}; a state belongs to "
                             "the options it was learned with)")
    now = _paths(like)
    if "paths" in files:
        saved = json.loads(str(loaded["paths"]))
        if saved != now:
            differs = next((f"{a} in the file, {b} here" for a, b in zip(saved, now) if a != b), "more arrays")
            raise ValueError(f"{path}: a state of another layout ({differs}): of another learner, precision or "
                             "version of dense_armor")
    elif any(p.endswith(".S") for p in now):  # same shapes, another meaning
        raise ValueError(f"{path}: a state saved before the whole-robot learner kept its float32 covariance as a "
                         "factor: it cannot be read as one")
    names = [f"leaf_{i}" for i in range(len(leaves))]
    kept = {f"identity_{k}" for k in stored} | {"checksum", "paths"}
    if any(name not in files for name in names) or files - set(names) - kept:
        raise ValueError(f"{path}: holds {len(files - kept)} arrays, the learner's state has "
                         f"{len(leaves)}: a state of another learner or robot")
    arrays = [loaded[name] for name in names]
    if "checksum" in files and str(loaded["checksum"]) != _checksum(arrays):  # files before it have none
        raise ValueError(f"{path}: the state's arrays do not match the checksum saved with them: an edited or damaged state")
    for i, (old, new) in enumerate(zip(leaves, arrays)):
        dtype = old.dtype if hasattr(old, "dtype") else jnp.result_type(old)  # a float64 template's own, even outside x64
        if np.shape(old) != new.shape or dtype != new.dtype:
            raise ValueError(
                f"{path}: array {i} is {new.dtype}{list(new.shape)}, expected "
                f"{dtype}{list(np.shape(old))}: a state of another learner or robot"
            )
        if np.issubdtype(new.dtype, np.floating) and not np.all(np.isfinite(new)):
            raise ValueError(f"{path}: array {i} holds NaN or inf: a damaged state")
    with jax.enable_x64(True):  # a float64 state stays float64 outside 64-bit mode (JAX would cast it)
        state = jax.tree.unflatten(treedef, [jnp.asarray(a) for a in arrays])
    for P in _covariances(state):
        P = np.asarray(P)
        if not np.array_equal(P, np.swapaxes(P, -1, -2)):
            raise ValueError(f"{path}: a covariance is not symmetric: a damaged or edited state")
        eig = np.linalg.eigvalsh(P.astype(np.float64))
        tol = 1e4 * np.finfo(P.dtype).eps * np.abs(eig).max(axis=-1, keepdims=True)  # float32's rounding of a 1e6 prior
        if np.any(eig < -tol):
            raise ValueError(f"{path}: a covariance is not positive semi-definite: a damaged or edited state")
    return state


def _paths(state) -> list[str]:
    """Where each array of a state sits in it (``.rls.w``, ``.noise.variance``...)."""
    return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(state)[0]]


def _sha256(arrays, h=None):
    """SHA-256 (continuing ``h``) of the arrays' dtypes, shapes and bytes, in order."""
    h = hashlib.sha256() if h is None else h
    for a in map(np.asarray, arrays):
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h


def _checksum(arrays) -> str:
    """The state file's check on its arrays."""
    return _sha256(arrays).hexdigest()


def _covariances(state) -> list:
    """The RLS covariances in a learner state."""
    return [leaf.P for leaf in jax.tree.leaves(state, is_leaf=lambda x: isinstance(x, rls.RLSState))
            if isinstance(leaf, rls.RLSState)]
