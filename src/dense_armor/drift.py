"""Drift detectors on per-joint scalar streams, as pure ``init`` / ``step`` pairs.

The learners feed each detector one value per joint and sample, ``z`` of shape
``(n,)`` (the standardised prior prediction error), with a flag ``valid``.
Each detector is a small :class:`equinox.Module` holding its hyperparameters:
window lengths are static ints (they fix buffer shapes), the other numbers
are array leaves (traced under ``jax.jit`` and ``eqx.filter_jit``, so a sweep
over thresholds is a ``vmap``). Its state is an immutable ``NamedTuple`` of
fixed-size ring buffers and counters, one row per joint:

    detector = CUSUM()
    state = detector.init(n)
    state, alarm = detector.step(state, z, valid)   # alarm: bool (n,)

``step`` is pure, has no Python branching on traced values, and works under
``jax.jit``, ``jax.vmap`` and ``jax.lax.scan``. Pass the detector as an
argument, ``jax.jit(lambda det, s, z, v: det.step(s, z, v))``, or use
``eqx.filter_jit(detector.step)``; ``jax.jit(detector.step)`` fails because a
module with array fields is not hashable. A sample that is not valid
(``valid`` false, or ``z`` not finite for that joint) leaves that joint's
state bit-for-bit unchanged and raises no alarm. ``valid`` is a bool scalar
or a bool array broadcastable to ``(n,)``; buffers and counters are kept per
joint so a per-joint ``valid`` is allowed.

References:
    Page, E. S. (1954). Continuous inspection schemes. Biometrika 41,
    100-114.
    Hampel, F. R. (1974). The influence curve and its role in robust
    estimation. Journal of the American Statistical Association 69(346),
    383-393.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["CUSUM", "CUSUMState", "Hampel", "HampelState", "Innovation", "InnovationState"]

ArrayLike = jax.typing.ArrayLike

# Consistency constant of the MAD for the normal distribution: 1 / Phi^-1(3/4).
MAD_TO_SIGMA = 1.4826


def _as_array(x: ArrayLike) -> jax.Array:
    return jnp.asarray(x)


def _prepare(z: ArrayLike, valid: ArrayLike, dtype) -> tuple[jax.Array, jax.Array]:
    z = jnp.asarray(z, dtype)
    ok = jnp.broadcast_to(jnp.asarray(valid, bool), z.shape) & jnp.isfinite(z)
    return z, ok


def _ring_write(buf: jax.Array, pos: jax.Array, value: jax.Array, ok: jax.Array) -> jax.Array:
    """Write ``value[j]`` at ``buf[j, pos[j]]`` where ``ok[j]`` (one-hot select, no scatter)."""
    hit = (jnp.arange(buf.shape[-1]) == pos[..., None]) & ok[..., None]
    return jnp.where(hit, value[..., None], buf)


def _ring_read(buf: jax.Array, pos: jax.Array) -> jax.Array:
    """``buf[j, pos[j]]`` for every row ``j``."""
    return jnp.take_along_axis(buf, pos[..., None], axis=-1)[..., 0]


def _advance(pos, count, size, ok):
    pos = jnp.where(ok, (pos + 1) % size, pos)
    count = jnp.where(ok, jnp.minimum(count + 1, size), count)
    return pos, count


class HampelState(NamedTuple):
    """State of :class:`Hampel` for ``n`` joints.

    Attributes:
        window: The last ``radius`` valid values per joint, ring buffer
            ``(n, radius)``.
        pos: Next write position in ``window``, int32 ``(n,)``.
        count: Number of valid values seen, capped at ``radius``, int32
            ``(n,)``.
    """

    window: jax.Array
    pos: jax.Array
    count: jax.Array


def _check_ranges(detector, rules: dict) -> None:
    """A ``ValueError`` for the first of the detector's fields whose ``rules[name](value)`` is
    false; fields built under a transformation (tracers) are not checked."""
    for name, rule in rules.items():
        value = getattr(detector, name)
        if not isinstance(value, jax.core.Tracer) and not bool(np.all(rule(np.asarray(value)))):
            raise ValueError(f"{type(detector).__name__} {name} out of range, got {np.asarray(value).tolist()!r}")


class Hampel(eqx.Module):
    """Hampel identifier on a causal window (reference-free outlier trigger).

    The documented ``HampelScorer(radius=20, n_sigmas=3.0)``. For each joint,
    with ``W`` the previous ``radius`` valid values (the newest value not
    included), ``med = median(W)`` and ``MAD = median(|W - med|)`` (Hampel,
    1974), the new value ``z`` raises an alarm when

        |z - med| > n_sigmas * max(1.4826 * MAD, min_sigma).

    ``1.4826 * MAD`` is the normal-consistent robust estimate of the standard
    deviation. No alarm is raised until ``radius`` valid values have been seen.
    With the default ``min_sigma = 0`` a window whose values are mostly equal
    (``MAD = 0``) makes any different value an alarm; set ``min_sigma`` to the
    smallest standard deviation worth trusting to avoid that.

    Every valid value enters the window, alarmed ones included: the detector
    is a change trigger, not a cleaning filter, so after a persistent shift
    the window fills with the new level and the alarms stop (after about
    ``radius / 2`` samples, when the median moves). Keeping alarmed values out
    would lock the window onto the old level and alarm forever after a real
    change.

    Attributes:
        radius: Window length (static int, ``>= 1``).
        n_sigmas: Threshold in robust standard deviations.
        min_sigma: Floor on the robust standard deviation ``1.4826 * MAD``.
    """

    radius: int = eqx.field(static=True, default=20)
    n_sigmas: jax.Array = eqx.field(converter=_as_array, default=3.0)
    min_sigma: jax.Array = eqx.field(converter=_as_array, default=0.0)

    def __check_init__(self):
        if not isinstance(self.radius, int) or self.radius < 1:
            raise ValueError(f"Hampel radius must be an int >= 1, got {self.radius!r}")
        _check_ranges(self, {"n_sigmas": lambda v: v >= 0, "min_sigma": lambda v: v >= 0})

    def init(self, n: int, dtype: jnp.dtype | None = None) -> HampelState:
        """Empty state for ``n`` joints.

        Args:
            n: Number of streams (joints).
            dtype: Floating dtype of the window; default JAX's default float.

        Returns:
            ``HampelState`` with ``window (n, radius)`` zeros, ``pos`` and
            ``count`` int32 zeros ``(n,)``.
        """
        dtype = jnp.result_type(float) if dtype is None else dtype
        zeros = jnp.zeros((n,), jnp.int32)
        return HampelState(window=jnp.zeros((n, self.radius), dtype), pos=zeros, count=zeros)

    def step(
        self, state: HampelState, z: ArrayLike, valid: ArrayLike = True
    ) -> tuple[HampelState, jax.Array]:
        """Score one value per joint, then push it into the window.

        Args:
            state: Current ``HampelState``.
            z: New values, shape ``(n,)``; cast to the window's dtype.
            valid: Bool scalar or ``(n,)``; invalid or non-finite values are
                ignored (state unchanged, no alarm).

        Returns:
            ``(new_state, alarm)`` with ``alarm`` a bool array ``(n,)``.
        """
        window, pos, count = state
        z, ok = _prepare(z, valid, window.dtype)
        med = jnp.median(window, axis=-1)
        mad = jnp.median(jnp.abs(window - med[..., None]), axis=-1)
        sigma = jnp.maximum(MAD_TO_SIGMA * mad, self.min_sigma.astype(window.dtype))
        full = count >= self.radius
        alarm = ok & full & (jnp.abs(z - med) > self.n_sigmas.astype(window.dtype) * sigma)
        window = _ring_write(window, pos, z, ok)
        pos, count = _advance(pos, count, self.radius, ok)
        return HampelState(window=window, pos=pos, count=count), alarm


class CUSUMState(NamedTuple):
    """State of :class:`CUSUM` for ``n`` joints.

    Attributes:
        recent: Delay line of the last ``radius`` valid values, ring buffer
            ``(n, radius)`` (used by ``reference="adaptive"`` only).
        recent_pos: Next write position in ``recent``, int32 ``(n,)``.
        recent_count: Values in ``recent``, capped at ``radius``, int32 ``(n,)``.
        ref: Reference window of ``radius * ref_mult`` values, ring buffer
            ``(n, radius * ref_mult)``.
        ref_pos: Next write position in ``ref``, int32 ``(n,)``.
        ref_count: Values in ``ref``, capped at its length, int32 ``(n,)``.
        s_pos: Upper CUSUM sum ``S+``, ``(n,)``.
        s_neg: Lower CUSUM sum ``S-``, ``(n,)`` (stays 0 when one-sided).
    """

    recent: jax.Array
    recent_pos: jax.Array
    recent_count: jax.Array
    ref: jax.Array
    ref_pos: jax.Array
    ref_count: jax.Array
    s_pos: jax.Array
    s_neg: jax.Array


class CUSUM(eqx.Module):
    """Page's CUSUM on the stream standardised against a reference window.

    The documented ``CUSUMDriftDetector(radius=10, ref_mult=3, k=0.5, h=20.0,
    two_sided=True, reference="adaptive")``. For each joint, with ``mu`` and
    ``sd`` the mean and sample standard deviation (``ddof=1``) of the
    ``L = radius * ref_mult`` reference values, the new value ``z`` is
    standardised as ``u = (z - mu) / max(sd, min_std)`` and the sums (Page,
    1954) are

        S+ <- max(0, S+ + u - k)
        S- <- max(0, S- - u - k)        (two_sided only)

    An alarm is raised when ``S+ > h`` (or ``S- > h`` when two-sided); both
    sums are then reset to 0. ``k`` is the allowance (half the mean shift, in
    reference standard deviations, that the test is tuned to) and ``h`` the
    decision threshold. Nothing is accumulated and no alarm is raised until
    the reference window is full.

    Reference window:

    * ``"adaptive"``: the reference is the ``L`` values that precede the
      ``radius`` most recent ones, i.e. it lags the stream by ``radius``
      samples: at the ``t``-th valid value ``z_t`` it is
      ``z_{t-radius-L}, ..., z_{t-radius-1}``. The lag keeps a change out of
      the reference for ``radius`` samples so the sums can grow, then the
      reference follows the new level. First possible alarm: the
      ``radius + L + 1``-th valid value.
    * ``"fixed"``: the reference is the first ``L`` valid values, frozen once
      filled (the ``recent`` buffer is unused); first possible alarm: the
      ``L + 1``-th valid value. After a persistent change
      the sums keep crossing ``h`` (an alarm every few samples) until the
      stream returns to the reference level.

    Attributes:
        radius: Length of the recent (guard) window, static int ``>= 1``.
        ref_mult: Reference length as a multiple of ``radius``, static int
            ``>= 1`` (``radius * ref_mult >= 2``).
        k: Allowance, in reference standard deviations.
        h: Decision threshold.
        two_sided: Static bool; also detect downward shifts (``S-``).
        reference: Static, ``"adaptive"`` or ``"fixed"``.
        min_std: Floor on the reference standard deviation (a constant
            reference window would otherwise divide by zero).

    Raises:
        ValueError: unknown ``reference``, or bad window lengths.
    """

    radius: int = eqx.field(static=True, default=10)
    ref_mult: int = eqx.field(static=True, default=3)
    k: jax.Array = eqx.field(converter=_as_array, default=0.5)
    h: jax.Array = eqx.field(converter=_as_array, default=20.0)
    two_sided: bool = eqx.field(static=True, default=True)
    reference: str = eqx.field(static=True, default="adaptive")
    min_std: jax.Array = eqx.field(converter=_as_array, default=1e-6)

    def __check_init__(self):
        if self.reference not in ("adaptive", "fixed"):
            raise ValueError(
                f"CUSUM reference must be 'adaptive' or 'fixed', got {self.reference!r}"
            )
        for name in ("radius", "ref_mult"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"CUSUM {name} must be an int >= 1, got {v!r}")
        _check_ranges(self, {"k": lambda v: v >= 0, "h": lambda v: v > 0, "min_std": lambda v: v > 0})
        if self.radius * self.ref_mult < 2:
            raise ValueError("CUSUM reference window radius * ref_mult must be >= 2")
        if not isinstance(self.two_sided, bool):
            raise ValueError(f"CUSUM two_sided must be a bool, got {self.two_sided!r}")

    @property
    def ref_len(self) -> int:
        """Reference window length ``L = radius * ref_mult``."""
        return self.radius * self.ref_mult

    def init(self, n: int, dtype: jnp.dtype | None = None) -> CUSUMState:
        """Empty state for ``n`` joints.

        Args:
            n: Number of streams (joints).
            dtype: Floating dtype of buffers and sums; default JAX's default
                float.

        Returns:
            ``CUSUMState`` with empty (zero) buffers, counters and sums.
        """
        dtype = jnp.result_type(float) if dtype is None else dtype
        izero = jnp.zeros((n,), jnp.int32)
        fzero = jnp.zeros((n,), dtype)
        return CUSUMState(
            recent=jnp.zeros((n, self.radius), dtype),
            recent_pos=izero,
            recent_count=izero,
            ref=jnp.zeros((n, self.ref_len), dtype),
            ref_pos=izero,
            ref_count=izero,
            s_pos=fzero,
            s_neg=fzero,
        )

    def step(
        self, state: CUSUMState, z: ArrayLike, valid: ArrayLike = True
    ) -> tuple[CUSUMState, jax.Array]:
        """Update the sums with one value per joint, then the windows.

        Args:
            state: Current ``CUSUMState``.
            z: New values, shape ``(n,)``; cast to the state's dtype.
            valid: Bool scalar or ``(n,)``; invalid or non-finite values are
                ignored (state unchanged, no alarm).

        Returns:
            ``(new_state, alarm)`` with ``alarm`` a bool array ``(n,)``.
        """
        dt = state.ref.dtype
        z, ok = _prepare(z, valid, dt)
        L = self.ref_len
        k = self.k.astype(dt)
        h = self.h.astype(dt)

        # Page's sums against the current reference.
        active = ok & (state.ref_count >= L)
        mu = jnp.mean(state.ref, axis=-1)
        sd = jnp.sqrt(jnp.sum((state.ref - mu[..., None]) ** 2, axis=-1) / (L - 1))
        u = (z - mu) / jnp.maximum(sd, self.min_std.astype(dt))
        s_pos = jnp.where(active, jnp.maximum(0, state.s_pos + u - k), state.s_pos)
        alarm = active & (s_pos > h)
        if self.two_sided:
            s_neg = jnp.where(active, jnp.maximum(0, state.s_neg - u - k), state.s_neg)
            alarm = alarm | (active & (s_neg > h))
        else:
            s_neg = state.s_neg
        s_pos = jnp.where(alarm, 0, s_pos)
        s_neg = jnp.where(alarm, 0, s_neg)

        # Windows.
        recent, recent_pos, recent_count = state.recent, state.recent_pos, state.recent_count
        if self.reference == "adaptive":
            # The value leaving the recent window (radius samples old) enters the reference.
            leaving = _ring_read(recent, recent_pos)
            push = ok & (recent_count >= self.radius)
            ref = _ring_write(state.ref, state.ref_pos, leaving, push)
            recent = _ring_write(recent, recent_pos, z, ok)
            recent_pos, recent_count = _advance(recent_pos, recent_count, self.radius, ok)
        else:
            push = ok & (state.ref_count < L)
            ref = _ring_write(state.ref, state.ref_pos, z, push)
        ref_pos, ref_count = _advance(state.ref_pos, state.ref_count, L, push)

        new = CUSUMState(
            recent=recent,
            recent_pos=recent_pos,
            recent_count=recent_count,
            ref=ref,
            ref_pos=ref_pos,
            ref_count=ref_count,
            s_pos=s_pos,
            s_neg=s_neg,
        )
        return new, alarm


class InnovationState(NamedTuple):
    """State of :class:`Innovation` for ``n`` joints.

    Attributes:
        seen: Valid values seen since the last (re)start, int32 ``(n,)``.
        weight: Effective number of values in the noise estimate, ``(n,)``.
        var: Running estimate of the stream's variance (the noise variance
            while nothing changes), ``(n,)``.
        stat: CUSUM statistic on the normalised innovation squared, ``(n,)``.
    """

    seen: jax.Array
    weight: jax.Array
    var: jax.Array
    stat: jax.Array


class Innovation(eqx.Module):
    """CUSUM on the normalised innovation squared against a learned noise level.

    Made for a learner's own standardised prior errors ``z = e / sqrt(1 + x'Px)``
    (the recursive residuals of RLS): while the model holds, each joint's ``z``
    is white with the measurement noise variance ``sigma^2``, whatever the
    learner's state. The detector learns ``sigma^2`` from the stream and tests
    the normalised innovation squared (NIS) ``z^2 / sigma^2``, a chi-square
    variable with one degree of freedom, for an increase. For each joint:

    1. Burn-in: the first ``burn_in`` valid values are ignored (a learner with
       a diffuse prior, ``delta`` large, standardises its first ``p`` errors
       to nearly 0).
    2. Noise estimate: ``var`` is the exponentially weighted mean of ``z^2``
       (forgetting ``noise_lam``, effective count ``weight``). Once armed,
       each ``z^2`` is Winsorised at ``gate * ref`` before it enters, so a
       change (or an outlier) moves the estimate by a bounded amount.
    3. Arming: the test runs once ``weight >= min_samples``. It standardises
       with a conservative reference ``ref = max(var, min_sigma^2) * (1 +
       margin * sqrt(2 / weight))`` (``sqrt(2 / weight)`` is the relative
       standard error of a variance estimated from ``weight`` normal values),
       so a noise estimate that came out low does not turn into false
       alarms.
    4. Test (Page's CUSUM on the NIS; the log-likelihood ratio of a variance
       increase is affine in it): ``stat <- max(0, stat + z^2 / ref - k)``,
       alarm when ``stat > h``; the statistic then restarts at 0.

    Under no change the NIS has mean about 1 and ``P(NIS > x) ~ exp(-x / 2)``:
    with ``k = 3``, ``h = 40`` the statistic stays far below ``h``, while a
    persistent shift of the error by ``a`` noise standard deviations adds about
    ``a^2 + 1 - k`` per sample, so a large shift is flagged within a few
    samples; a shift below about 2.5 the Winsorised noise estimate absorbs
    before the sum reaches ``h`` (this detector is for changes the learner must
    react to, not for drifts within the noise). ``docs/concepts.md`` has the
    measured delays and false-alarm margins.

    After a change the stream's level is that of the new regime (a learner
    that re-opens its covariance, a model that no longer fits exactly), so a
    learner that responds to an alarm calls :meth:`reset` and the detector
    learns the new noise level before it arms again (``burn_in +
    min_samples`` values later). Used alone, the detector keeps its noise
    estimate after an alarm and restarts only its CUSUM statistic.

    Attributes:
        k: Allowance on the NIS per sample (the in-control NIS has mean 1).
        h: Decision threshold on the CUSUM statistic.
        burn_in: Valid values ignored at the start and after a reset.
        min_samples: Effective count of noise values before the test arms.
        noise_lam: Forgetting factor of the noise estimate in (0, 1].
        gate: Winsorising bound on the NIS entering the noise estimate.
        margin: Standard errors added to the noise estimate (conservatism).
        min_sigma: Floor on the noise standard deviation, in the stream's
            units (N m for torques): below it, differences are taken as
            rounding, not change. Keep it above the float precision of the
            torques (float32: about ``1e-7 * |tau|``).

    Raises:
        ValueError: a Python-number hyperparameter out of range.
    """

    k: jax.Array = eqx.field(converter=_as_array, default=3.0)
    h: jax.Array = eqx.field(converter=_as_array, default=40.0)
    burn_in: jax.Array = eqx.field(converter=_as_array, default=10)
    min_samples: jax.Array = eqx.field(converter=_as_array, default=50.0)
    noise_lam: jax.Array = eqx.field(converter=_as_array, default=0.998)
    gate: jax.Array = eqx.field(converter=_as_array, default=9.0)
    margin: jax.Array = eqx.field(converter=_as_array, default=2.0)
    min_sigma: jax.Array = eqx.field(converter=_as_array, default=1e-4)

    def __check_init__(self):
        rules = {
            "k": lambda v: v >= 0,
            "h": lambda v: v > 0,
            "burn_in": lambda v: v >= 0,
            "min_samples": lambda v: v >= 1,
            "noise_lam": lambda v: 0 < v <= 1,
            "gate": lambda v: v >= 1,
            "margin": lambda v: v >= 0,
            "min_sigma": lambda v: v >= 0,
        }
        _check_ranges(self, rules)

    def init(self, n: int, dtype: jnp.dtype | None = None) -> InnovationState:
        """Fresh state for ``n`` joints (nothing seen, not armed).

        Args:
            n: Number of streams (joints).
            dtype: Floating dtype of the statistics; default JAX's default float.
        """
        dtype = jnp.result_type(float) if dtype is None else dtype
        fzero = jnp.zeros((n,), dtype)
        return InnovationState(seen=jnp.zeros((n,), jnp.int32), weight=fzero, var=fzero, stat=fzero)

    def step(
        self, state: InnovationState, z: ArrayLike, valid: ArrayLike = True
    ) -> tuple[InnovationState, jax.Array]:
        """Test one value per joint, then learn it into the noise estimate.

        Args:
            state: Current ``InnovationState``.
            z: Standardised prior errors, shape ``(n,)``; cast to the state's dtype.
            valid: Bool scalar or ``(n,)``; invalid or non-finite values are
                ignored (state unchanged, no alarm).

        Returns:
            ``(new_state, alarm)`` with ``alarm`` a bool array ``(n,)``.
        """
        dt = state.var.dtype
        z, ok = _prepare(z, valid, dt)
        learning = ok & (state.seen >= self.burn_in.astype(jnp.int32))
        armed = learning & (state.weight >= self.min_samples.astype(dt))
        floor = self.min_sigma.astype(dt) ** 2
        spread = jnp.sqrt(2 / jnp.maximum(state.weight, 1))
        ref = jnp.maximum(state.var, floor) * (1 + self.margin.astype(dt) * spread)
        z2 = z * z
        nis = z2 / ref
        stat = jnp.where(armed, jnp.maximum(0, state.stat + nis - self.k.astype(dt)), state.stat)
        alarm = armed & (stat > self.h.astype(dt))
        stat = jnp.where(alarm, 0, stat)
        entering = jnp.where(armed, jnp.minimum(z2, self.gate.astype(dt) * ref), z2)
        weight = jnp.where(learning, self.noise_lam.astype(dt) * state.weight + 1, state.weight)
        var = jnp.where(learning, state.var + (entering - state.var) / weight, state.var)
        seen = jnp.where(ok, state.seen + 1, state.seen)
        return InnovationState(seen=seen, weight=weight, var=var, stat=stat), alarm

    def reset(self, state: InnovationState, where: ArrayLike = True) -> InnovationState:
        """Restart the joints where ``where`` (bool scalar or ``(n,)``): forget the
        noise estimate and disarm until it is learned again."""
        where = jnp.broadcast_to(jnp.asarray(where, bool), state.seen.shape)
        fresh = self.init(state.seen.shape[-1], state.var.dtype)
        return jax.tree.map(lambda a, b: jnp.where(where, a, b), fresh, state)
