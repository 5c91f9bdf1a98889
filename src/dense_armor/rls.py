"""Recursive least squares (RLS) with exponential forgetting, as pure functions.

The estimator after ``t`` samples ``(x_i, y_i)`` minimises

    sum_i lam^(t - i) (y_i - x_i' w)^2 + lam^t delta^-1 |w|^2,

the exponentially weighted least-squares cost plus the prior ``w0 = 0``,
``P0 = delta I`` (Ljung & Soderstrom, 1983). One sample updates the state by

    K = P x / (lam + x' P x)           (gain)
    w <- w + K (y - x' w)              (weights)
    P <- (P - K x' P) / lam            (covariance)
    P <- 0.5 (P + P')                  (symmetrise)

State is an immutable :class:`RLSState` ``(w, P)`` with any leading batch
dims: one RLS per joint is ``w (n, p)``, ``P (n, p, p)``; one shared RLS is
``w (p,)``, ``P (p, p)``. Every function broadcasts over the leading dims of
its arguments, so it can be called directly on a batch, under ``jax.vmap`` or
inside ``jax.lax.scan``. ``lam`` may be a Python float or a (traced) array
broadcast against the batch dims, so a sweep over ``lam`` is a ``vmap``, not a
recompile. Nothing here is jitted at module level: callers jit their step.

Precision: the state's dtype (set by :func:`init`) is kept; ``x``, ``y``,
``lam`` and ``max_trace`` are cast to it, so a float32 state stays float32
inside a ``lax.scan`` carry even when x64 is enabled.

Covariance wind-up: with ``lam < 1`` and data that do not excite some
direction of ``w`` (a robot standing still: ``qd = qdd = 0``), the textbook
update multiplies ``P`` along that direction by ``1 / lam`` every step, so it
grows like ``lam^-t`` (about 1e44 after 2000 steps at ``lam = 0.95``) and the
next excited sample is computed from a ruined ``P``. Two safeguards, both off
by default so the plain call is the textbook update:

* ``directional=True`` (:func:`update` only): forget only along the excited
  direction ``x`` (directional / restricted forgetting, after Kulhavy, 1987,
  and Bittanti, Bolzern & Campi, 1990). In information form ``R = P^-1``:
  ``R <- R - (1 - lam) x x' / (x' P x) + x x'``, i.e. the information about
  the scalar ``x' w`` is multiplied by ``lam`` before the sample is added and
  the information in directions that ``x`` does not probe is kept (``R``
  stays positive definite by Cauchy-Schwarz). The gain is unchanged,
  ``K = P x / (lam + x' P x)``, and the covariance update becomes

      P <- P - K x' P + (1 - lam) / (lam + x' P x) * P u u' P / (u' P u),

  with ``u = x / max|x|`` (the same direction, scaled to avoid underflow).
  ``x = 0`` leaves ``P`` unchanged. With persistently exciting data it forgets
  less than exponential forgetting; with ``lam = 1`` both are the same update.
* ``max_trace=c`` (:func:`update` and :func:`update_rows`): after the update,
  ``P <- P * min(1, c / trace(P))``, a hard bound on the covariance (as in
  the bounded-trace remedies for estimator wind-up, Astrom & Wittenmark,
  *Adaptive Control*). It keeps ``P``'s shape and caps its size; unexcited
  directions are still forgotten, up to the bound.

Square-root form: :class:`FactorState` keeps a factor ``S`` of the covariance, ``P = S S'``, and
:func:`factor_update` updates it (the same estimate as :func:`block_update`): ``S`` spans half
the decades ``P`` does, and ``S S'`` is positive semi-definite whatever the rounding, so float32
holds a posterior that spans more than its resolution. :func:`rows_covariance`,
:func:`learn_rows`, :func:`variances` and :func:`decouple` take either form.

Numerical form: ``joseph=True`` computes the same covariance in the Kalman
filter's Joseph form, ``P <- (I - K x') (P / lam) (I - K x')' + K K'``, a sum
of positive semi-definite terms that damps rounding errors where the
subtraction ``P - K x' P`` can let them grow. For float32 use a ``delta`` no
larger than needed (1e2-1e4 for features of order one); ``docs/design.md``
("float32 learners") has the measurements.

References:
    Ljung, L., Soderstrom, T. (1983). Theory and Practice of Recursive
    Identification. MIT Press.
    Kulhavy, R. (1987). Restricted exponential forgetting in real-time
    identification. Automatica 23(5), 589-600.
    Bittanti, S., Bolzern, P., Campi, M. (1990). Convergence and exponential
    convergence of identification algorithms with directional forgetting
    factor. Automatica 26(5), 929-932.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor.compiler import dot_last, full_precision, max_last

__all__ = [
    "RLSState",
    "FactorState",
    "init",
    "predict",
    "prior_variance",
    "reopen",
    "update",
    "update_if_finite",
    "update_rows",
    "block_update",
    "factor_update",
    "rows_covariance",
    "learn_rows",
    "variances",
    "decouple",
    "Innovation",
]

ArrayLike = jax.typing.ArrayLike


class RLSState(NamedTuple):
    """State of one or a batch of recursive least-squares estimators.

    Attributes:
        w: Weights, shape ``(..., p)``.
        P: Covariance (inverse of the weighted information matrix), shape
            ``(..., p, p)``, symmetric positive definite.
    """

    w: jax.Array
    P: jax.Array


def _check_lam(lam: ArrayLike) -> None:
    if isinstance(lam, (int, float)) and not 0.0 < lam <= 1.0:
        raise ValueError(f"lam must be in (0, 1], got {lam!r}")


def _matvec(P: jax.Array, x: jax.Array) -> jax.Array:
    """``P x``, batched (:func:`~dense_armor.compiler.dot_last`)."""
    return dot_last(P, x[..., None, :])


def _sym(P: jax.Array) -> jax.Array:
    return 0.5 * (P + jnp.swapaxes(P, -1, -2))


def spd_solve(S: jax.Array, B: jax.Array) -> jax.Array:
    """``S^-1 B`` for a well-conditioned symmetric positive definite ``S`` (..., m, m) and ``B``
    (..., m, k), by Cholesky: no pivoting (an LU solve applies its row swaps in a loop of small
    kernels)."""
    batch = jnp.broadcast_shapes(S.shape[:-2], B.shape[:-2])
    S, B = jnp.broadcast_to(S, (*batch, *S.shape[-2:])), jnp.broadcast_to(B, (*batch, *B.shape[-2:]))
    return jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(S), True), B)


def _bound_trace(P: jax.Array, max_trace: ArrayLike | None) -> jax.Array:
    if max_trace is None:
        return P
    c = jnp.asarray(max_trace, P.dtype)
    tr = jnp.trace(P, axis1=-2, axis2=-1)
    scale = jnp.where(tr > c, c / jnp.where(tr > 0, tr, 1), 1)
    return P * scale[..., None, None]


def init(
    num_features: int,
    delta: ArrayLike = 1e6,
    batch_shape: tuple[int, ...] = (),
    dtype: jnp.dtype | None = None,
) -> RLSState:
    """Initial state ``w0 = 0``, ``P0 = delta I``.

    Args:
        num_features: Number of features ``p``.
        delta: Initial covariance scale, ``> 0``; a scalar or an array
            broadcastable to ``batch_shape`` (one value per estimator).
            Large values mean little confidence in ``w0 = 0``.
        batch_shape: Leading batch dims, e.g. ``(n,)`` for one RLS per joint.
        dtype: Floating dtype of the state; default JAX's default float
            (float64 when x64 is enabled, else float32).

    Returns:
        ``RLSState`` with ``w`` of shape ``(*batch_shape, p)`` and ``P`` of
        shape ``(*batch_shape, p, p)``.

    Raises:
        ValueError: ``num_features < 1`` or a Python-number ``delta <= 0``.
    """
    if int(num_features) < 1:
        raise ValueError(f"num_features must be >= 1, got {num_features!r}")
    if isinstance(delta, (int, float)) and not delta > 0:
        raise ValueError(f"delta must be > 0, got {delta!r}")
    if dtype is None:
        dtype = jnp.result_type(float)
    p = int(num_features)
    batch_shape = tuple(batch_shape)
    d = jnp.asarray(delta, dtype)
    P = jnp.broadcast_to(d[..., None, None] * jnp.eye(p, dtype=dtype), (*batch_shape, p, p))
    w = jnp.zeros((*batch_shape, p), dtype)
    return RLSState(w=w, P=P)


@full_precision
def predict(state: RLSState, x: ArrayLike) -> jax.Array:
    """Prediction ``x' w``.

    Args:
        state: ``w (..., p)``.
        x: Features, shape ``(..., p)``; leading dims broadcast against
            ``w``'s (``x (m, p)`` with ``w (p,)`` predicts ``m`` rows).

    Returns:
        Predictions, shape ``broadcast(...)``.
    """
    w = state.w
    return dot_last(jnp.asarray(x, w.dtype), w)


@full_precision
def prior_variance(state: RLSState, x: ArrayLike) -> jax.Array:
    """Prior variance factor ``x' P x`` of the prediction ``x' w``.

    Reading RLS as a Kalman filter (random-walk weights, ``P / lam`` the
    predicted covariance in units of the noise variance ``sigma^2``), the
    prior (predict-before-learn) error ``e = y - x' w`` has variance
    ``sigma^2 (1 + x' P x / lam)``; the learners use this to standardise it.

    Args:
        state: ``P (..., p, p)``.
        x: Features, shape ``(..., p)``, broadcast as in :func:`predict`.

    Returns:
        ``x' P x``, shape ``broadcast(...)``, ``>= 0`` while ``P`` is PSD.
    """
    x = jnp.asarray(x, state.P.dtype)
    return dot_last(x, _matvec(state.P, x))


@full_precision
def update(
    state: RLSState,
    x: ArrayLike,
    y: ArrayLike,
    lam: ArrayLike = 1.0,
    *,
    directional: bool = False,
    max_trace: ArrayLike | None = None,
    joseph: bool = False,
) -> RLSState:
    """One RLS step with one scalar observation per estimator.

    ``K = P x / (lam + x' P x)``, ``w += K (y - x' w)``,
    ``P = (P - K x' P) / lam``, ``P = 0.5 (P + P')``; see the module
    docstring for the ``directional`` and ``max_trace`` wind-up safeguards and
    the ``joseph`` form.

    Args:
        state: ``w (..., p)``, ``P (..., p, p)``.
        x: Features, shape ``(..., p)``.
        y: Target, shape ``(...)``.
        lam: Forgetting factor in ``(0, 1]``; Python float or array of shape
            ``(...)`` (one per estimator). Traced values are not checked.
        directional: Static flag. Forget only along ``x`` (no wind-up on
            unexciting data); ``False`` (default) is the textbook update.
        max_trace: ``None`` (default, no bound) or a scalar / ``(...)`` array:
            rescale ``P`` so that ``trace(P) <= max_trace``.
        joseph: Static flag. Compute the covariance in Joseph form, the same
            update in exact arithmetic, more robust in float32.

    Returns:
        New ``RLSState``; batch dims are the broadcast of the inputs' leading
        dims, dtype is the state's.

    Raises:
        ValueError: a Python-number ``lam`` outside ``(0, 1]``.
    """
    _check_lam(lam)
    w, P = state
    dt = w.dtype
    x = jnp.asarray(x, dt)
    y = jnp.asarray(y, dt)
    lam = jnp.asarray(lam, dt)
    lam2 = lam[..., None, None]

    Px = _matvec(P, x)  # = (x' P)' since P = P'
    s = dot_last(x, Px)  # x' P x
    denom = lam + s
    K = Px / denom[..., None]
    w_new = w + K * (y - dot_last(x, w))[..., None]

    if directional:
        # Forget along x only: Pu = P u with u = x / max|x|, so tiny x cannot underflow su.
        scale = max_last(jnp.abs(x))
        nz = scale > 0
        inv = 1 / jnp.where(nz, scale, 1)[..., None]
        Pu = Px * inv
        su = dot_last(x * inv, Pu)
        ok = nz & (su > 0)
        su = jnp.where(ok, su, 1)
        PuPu = Pu[..., :, None] * Pu[..., None, :]
    if joseph:
        # Kalman form: predicted Pf (forgetting), then
        # P = (I - K x') Pf (I - K x')' + K K'.
        if directional:
            Pf = P + jnp.where(ok, (1 - lam) / (lam * su), 0)[..., None, None] * PuPu
        else:
            Pf = P / lam2
        A = jnp.eye(P.shape[-1], dtype=dt) - K[..., :, None] * x[..., None, :]
        P_new = A @ Pf @ jnp.swapaxes(A, -1, -2) + K[..., :, None] * K[..., None, :]
    else:
        KxP = K[..., :, None] * Px[..., None, :]
        if directional:
            coef = jnp.where(ok, (1 - lam) / (denom * su), 0)
            P_new = P - KxP + coef[..., None, None] * PuPu
        else:
            P_new = (P - KxP) / lam2
    P_new = _bound_trace(_sym(P_new), max_trace)
    return RLSState(w=w_new, P=P_new)


class Innovation(NamedTuple):
    """What a block of observations said before it was learned (:func:`block_update`).

    Attributes:
        error: ``(..., m)`` prior errors ``y - X w``.
        standardized: ``(..., m)`` ``S^-1 e``, ``S = lam I + X P X'`` the prior errors'
            covariance in noise units (``I + X P X' / lam`` with directional forgetting).
        explained: ``(..., m)`` the diagonal of ``S^-1 X P X'``.
        gain: ``(..., p, m)`` ``K``, the update ``w <- w + K e`` (``P_new X'``).
    """

    error: jax.Array
    standardized: jax.Array
    explained: jax.Array
    gain: jax.Array


@full_precision
def block_update(
    state: RLSState,
    X: ArrayLike,
    y: ArrayLike,
    lam: ArrayLike = 1.0,
    *,
    directional: bool = False,
    max_trace: ArrayLike | None = None,
    joseph: bool = False,
    PXt: ArrayLike | None = None,
) -> tuple[RLSState, Innovation]:
    """:func:`update_rows`, also returning the block's :class:`Innovation`; ``PXt`` is ``P X'``
    (..., p, m) when the caller has it already (the update's largest product).

    Directional forgetting of the block is ``P_f = P + c P X' G^+ X P``, ``c = (1 - lam) /
    lam``, ``G = X P X'`` (in information form ``R <- R - (1 - lam) X' G^+ X + X' X``, the block
    form of Kulhavy's restricted forgetting), then a plain (``lam = 1``) update. With ``PXt``
    given, ``P_f X' = P X' / lam`` is used (exact for ``P`` positive definite, and without a new
    product with ``P``), and the two are one correction of ``P`` by ``P X' (c G^+ X P - K' /
    lam)``, ``K' = (I + G / lam)^-1 X P / lam``: one product of the size of ``P``, not two.
    """
    _check_lam(lam)
    w, P = state
    dt = w.dtype
    X = jnp.asarray(X, dt)
    y = jnp.asarray(y, dt)
    lam = jnp.asarray(lam, dt)
    m, p = X.shape[-2], X.shape[-1]
    Xt = jnp.swapaxes(X, -1, -2)

    given = PXt is not None
    # P X', not X P (P is symmetric): the products of P's size then sum over the left operand's
    # last axis, the form XLA:CPU hands to its matrix library; those over the m rows alone are
    # written out (compiler.dot_last), which fuses them with their neighbours
    PXt = jnp.asarray(PXt, dt) if given else P @ Xt
    G = _sym(X @ PXt)
    err = y - jnp.einsum("...mi,...i->...m", X, w)
    lam0 = lam[..., None, None]
    if directional:
        g, V = jnp.linalg.eigh(G)
        tol = jnp.sqrt(jnp.finfo(dt).eps) * jnp.max(jnp.abs(g), axis=-1, keepdims=True)
        keep = g > tol
        forget = jnp.where(keep, (1 - lam[..., None]) / (lam[..., None] * jnp.where(keep, g, 1)), 0)
        Ct = dot_last(PXt[..., :, None, :], jnp.swapaxes(V, -1, -2)[..., None, :, :])  # P X' V, summed over the m rows
        if given and not joseph:
            return _eigen_update(w, P, V, jnp.maximum(g, 0), Ct, forget, err, lam, max_trace)
        forgotten = (Ct * forget[..., None, :]) @ jnp.swapaxes(V, -1, -2) @ jnp.swapaxes(PXt, -1, -2)  # c P X' G^+ X P
        if given:  # P_f X' = P X' / lam; the Joseph form (the only one here) needs P_f itself
            P = P + forgotten
            PXt, G = PXt / lam0, G / lam0
        else:  # P_f X' from the forgotten P as stored (more accurate for a vague float32 prior)
            P = _sym(P + forgotten)
            PXt = P @ Xt
            G = _sym(X @ PXt)
        lam = jnp.ones_like(lam)
    lam2 = lam[..., None, None]
    S = _sym(lam2 * jnp.eye(m, dtype=dt) + G)
    # pivoted LU, not Cholesky: with a vague float32 prior S can lose definiteness to rounding
    solved = jnp.linalg.solve(S, jnp.concatenate([jnp.swapaxes(PXt, -1, -2), err[..., None]], axis=-1))
    Kt, standardized = solved[..., :p], solved[..., p]  # K' = S^-1 X P, and S^-1 e
    w_new = w + jnp.einsum("...mi,...m->...i", Kt, err)
    if joseph:
        A = jnp.eye(p, dtype=dt) - jnp.swapaxes(Kt, -1, -2) @ X
        P_new = A @ (P / lam2) @ jnp.swapaxes(A, -1, -2) + jnp.swapaxes(Kt, -1, -2) @ Kt
    else:
        P_new = (P - PXt @ Kt) / lam2
    P_new = _bound_trace(_sym(P_new), max_trace)
    return RLSState(w=w_new, P=P_new), Innovation(err, standardized, jnp.sum(Kt * X, axis=-1), jnp.swapaxes(Kt, -1, -2))


def _eigen_update(w, P, V, g, Ct, forget, err, lam, max_trace):
    """Directional forgetting and the update in one correction of ``P``, from the rows'
    ``X P X' = V diag(g) V'`` and ``Ct = P X' V``: the update sees ``S = I + X P X' / lam``, so ``S^-1 = V diag(lam / (lam + g)) V'``, and ``P <- P + Ct diag(d) Ct'``
    with ``d = c / g - 1 / (lam (lam + g))`` (``c / g`` the forgetting, 0 where ``g`` is not
    excited). Written ``Dt (sign(d) Dt)'``, ``Dt = Ct sqrt|d|``, the correction is symmetric as
    computed: no symmetrising pass over ``P``."""
    lam = lam[..., None]
    inv = 1 / (lam + g)
    Ve = jnp.einsum("...m,...mk->...k", err, V)  # V' e
    w_new = w + jnp.einsum("...ik,...k->...i", Ct, inv * Ve)
    d = forget - inv / lam
    Dt = Ct * jnp.sqrt(jnp.abs(d))[..., None, :]
    P_new = _bound_trace(P + Dt @ jnp.swapaxes(Dt * jnp.sign(d)[..., None, :], -1, -2), max_trace)
    gain = dot_last((Ct * inv[..., None, :])[..., :, None, :], V[..., None, :, :])  # K = P X' V diag(inv) V'
    innovation = Innovation(err, jnp.einsum("...ik,...k->...i", V, lam * inv * Ve), jnp.einsum("...ik,...k->...i", V**2, g * inv), gain)
    return RLSState(w=w_new, P=P_new), innovation


class FactorState(NamedTuple):
    """RLS state with the covariance kept as a square-root factor, ``P = S S'``.

    ``S`` spans the square root of ``P``'s range: where ``P`` spans the prior of a direction
    the data never excite and the residue of a direction they identify well (nine decades on a
    robot after a minute at 1 kHz, past float32's resolution), ``S`` spans half as many, and
    ``S S'`` is positive semi-definite whatever the rounding.

    Attributes:
        w: Weights, shape ``(..., p)``.
        S: Any factor of the covariance, shape ``(..., p, p)`` (not triangular: it is
            multiplied on the right at each update).
    """

    w: jax.Array
    S: jax.Array

    @property
    def P(self) -> jax.Array:
        """The covariance ``S S'`` (..., p, p)."""
        return self.S @ jnp.swapaxes(self.S, -1, -2)


@full_precision
def factor_update(
    state: FactorState,
    X: ArrayLike,
    y: ArrayLike,
    lam: ArrayLike = 1.0,
    *,
    directional: bool = False,
    F: ArrayLike | None = None,
) -> tuple[FactorState, Innovation]:
    """:func:`block_update` on a :class:`FactorState`: the same estimate, its factor updated.

    With ``F = S' X'`` (..., p, m) (passed when the caller has it) and ``F' F = X P X' = V
    diag(g) V'``, every update is ``S <- S (c I + F V diag(q) V' F')``: it scales the directions
    ``u_k = F v_k / sqrt(g_k)`` that the rows probe by ``f_k = 1 / sqrt(lam_k + g_k)`` and the
    rest by ``c``, so ``P <- S (c^2 (I - U U') + U diag(f^2) U') S'`` and ``q = (f - c) / g``.
    Without directional forgetting ``lam_k = lam`` and ``c = 1 / sqrt(lam)``: ``(P - P X' (lam
    I + X P X')^-1 X P) / lam``. With it ``c = 1`` and ``lam_k = lam`` on the excited directions
    (``g_k`` above ``sqrt(eps)`` of the largest), 1 on the others: :func:`block_update`'s
    information form ``R <- R - (1 - lam) X' G^+ X + X' X``. The gain is ``K = P_new X' = S F V
    diag(f^2) V'``.
    """
    _check_lam(lam)
    w, S = state
    dt = w.dtype
    X = jnp.asarray(X, dt)
    y = jnp.asarray(y, dt)
    lam = jnp.asarray(lam, dt)[..., None]
    F = jnp.asarray(F, dt) if F is not None else jnp.swapaxes(S, -1, -2) @ jnp.swapaxes(X, -1, -2)
    g, V = jnp.linalg.eigh(jnp.swapaxes(F, -1, -2) @ F)
    g = jnp.maximum(g, 0)
    FV = F @ V
    PXtV = S @ FV  # P X' V = S F V, (..., p, m)
    err = y - jnp.einsum("...mi,...i->...m", X, w)
    if directional:
        keep = g > jnp.sqrt(jnp.finfo(dt).eps) * jnp.max(g, axis=-1, keepdims=True)
        lam_k, a = jnp.where(keep, lam, 1), jnp.ones_like(lam)
        forget = jnp.where(keep, (1 - lam) / jnp.where(keep, g, 1), 0)  # (1 - lam_k) / g
    else:
        lam_k, a = lam, jnp.sqrt(lam)
        forget = jnp.zeros_like(g)
    inv = 1 / (lam_k + g)
    # q = (f - c) / g, c = 1 / a, written without dividing by a vanishing g:
    # (1/b - 1/a) / g = ((a^2 - lam_k) / g - 1) / (a b (a + b)), b = sqrt(lam_k + g)
    b = jnp.sqrt(lam_k + g)
    q = (forget - 1) / (a * b * (a + b))
    S_new = S / a[..., None] + (PXtV * q[..., None, :]) @ jnp.swapaxes(FV, -1, -2)
    Ve = jnp.einsum("...m,...mk->...k", err, V)  # V' e
    w_new = w + jnp.einsum("...ik,...k->...i", PXtV, inv * Ve)
    gain = (PXtV * inv[..., None, :]) @ jnp.swapaxes(V, -1, -2)
    seen = lam_k if directional else jnp.ones_like(lam_k)  # S^-1 = V diag(seen / (lam_k + g)) V'
    innovation = Innovation(err, jnp.einsum("...ik,...k->...i", V, seen * inv * Ve), jnp.einsum("...ik,...k->...i", V**2, g * inv), gain)
    return FactorState(w_new, S_new), innovation


@full_precision
def rows_covariance(state: RLSState | FactorState, X: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """The rows' prior covariance ``X P X'`` (m, m), in noise units, and the product an update
    of the rows reuses (:func:`learn_rows`'s ``product``): ``P X'`` for an :class:`RLSState`,
    ``S' X'`` for a :class:`FactorState` (then ``X P X' = F' F``, positive semi-definite as
    computed). One state, rows ``X`` (m, p)."""
    X = jnp.asarray(X, state.w.dtype)
    if isinstance(state, FactorState):
        F = state.S.T @ X.T
        return F.T @ F, F
    PXt = state.P @ X.T
    return _sym(X @ PXt), PXt


@full_precision
def learn_rows(state: RLSState | FactorState, X: ArrayLike, y: ArrayLike, lam: ArrayLike, *, directional: bool,
               product: jax.Array) -> tuple[RLSState | FactorState, Innovation]:
    """:func:`block_update` of an :class:`RLSState`, :func:`factor_update` of a
    :class:`FactorState`, given the rows' ``product`` from :func:`rows_covariance`."""
    if isinstance(state, FactorState):
        return factor_update(state, X, y, lam, directional=directional, F=product)
    return block_update(state, X, y, lam, directional=directional, PXt=product)


def variances(state: RLSState | FactorState) -> jax.Array:
    """The diagonal of ``P`` (..., p): each weight's variance."""
    if isinstance(state, FactorState):
        return jnp.sum(state.S**2, axis=-1)
    return jnp.diagonal(state.P, axis1=-2, axis2=-1)


@full_precision
def decouple(state: RLSState | FactorState, block: slice, variance: ArrayLike, where: ArrayLike = True):
    """Where ``where``, the covariance with ``block``'s weights made independent of the rest and
    their variances raised by ``variance`` (k,): the rest's covariance kept, the block's ``P_bb +
    diag(variance)``, none between them; the weights kept. One state. A factor keeps its other
    rows and rebuilds the block's in the orthogonal complement of theirs (a QR, computed only
    where ``where``: under ``vmap``, everywhere)."""
    dt = state.w.dtype
    variance = jnp.asarray(variance, dt)
    p = state.w.shape[-1]
    inside = np.zeros(p, bool)
    inside[block] = True
    if isinstance(state, FactorState):
        S = jnp.asarray(state.S)
        rest = np.flatnonzero(~inside)

        def rebuilt():
            complement = jnp.linalg.qr(S[rest].T, mode="complete")[0][:, len(rest) :]  # (p, k)
            L = jnp.linalg.cholesky(_sym(S[block] @ S[block].T) + jnp.diag(variance))
            return L @ complement.T

        return state._replace(S=S.at[block].set(jax.lax.cond(where, rebuilt, lambda: S[block])))
    P = jnp.asarray(state.P)
    opened = jnp.where(inside[:, None] & inside[None, :], P.at[block, block].add(jnp.diag(variance)),
                       jnp.where(inside[:, None] | inside[None, :], 0.0, P))
    return state._replace(P=jnp.where(where, opened, P))


@full_precision
def update_rows(
    state: RLSState,
    X: ArrayLike,
    y: ArrayLike,
    lam: ArrayLike = 1.0,
    *,
    directional: bool = False,
    max_trace: ArrayLike | None = None,
    joseph: bool = False,
) -> RLSState:
    """One RLS step with ``m`` observations of one shared weight vector.

    Block (Woodbury) form, all ``m`` rows in one time step:
    ``K = P X' (lam I + X P X')^-1`` (``p x m``), ``w += K (y - X w)``,
    ``P = (P - K X P) / lam``, ``P = 0.5 (P + P')``. With ``lam = 1`` this
    equals ``m`` sequential :func:`update` calls on the rows; with ``lam < 1``
    the ``m`` rows share one forgetting step (each gets weight 1 at this
    step), where ``m`` sequential calls would forget ``m`` times. Rows with
    unequal noise variances ``r``: pass ``X / sqrt(r)`` and ``y / sqrt(r)``.

    Args:
        state: ``w (..., p)``, ``P (..., p, p)``.
        X: Rows, shape ``(..., m, p)``.
        y: Targets, shape ``(..., m)``.
        lam: Forgetting factor in ``(0, 1]``; Python float or ``(...)`` array.
        directional: Static flag. Forget only along the span of ``X``'s rows,
            ``P <- P + (1 - lam) / lam * P X' (X P X')^+ X P``, then update with
            ``lam = 1`` (the block form of :func:`update`'s ``directional``).
        max_trace: ``None`` (default) or a bound on ``trace(P)`` as in
            :func:`update`.
        joseph: Static flag, Joseph form as in :func:`update`:
            ``P = (I - K X) (P / lam) (I - K X)' + K K'``.

    Returns:
        New ``RLSState`` (batch dims broadcast, the state's dtype).

    Raises:
        ValueError: a Python-number ``lam`` outside ``(0, 1]``.
    """
    return block_update(state, X, y, lam, directional=directional, max_trace=max_trace, joseph=joseph)[0]


def finite(state: RLSState) -> jax.Array:
    """() bool: ``w`` and the diagonal of ``P`` are finite (a NaN or inf anywhere in ``P``
    reaches its diagonal by the next update)."""
    return jnp.all(jnp.isfinite(state.w)) & jnp.all(jnp.isfinite(jnp.diagonal(state.P, axis1=-2, axis2=-1)))


@full_precision
def update_if_finite(
    state: RLSState, x: ArrayLike, y: ArrayLike, lam: ArrayLike = 1.0, **options
) -> tuple[RLSState, jax.Array]:
    """:func:`update`, or the unchanged state when ``x`` or ``y`` holds a NaN or inf, or the
    update would not be finite (a sample too large to learn).

    Returns:
        The new state and a bool: whether the sample was learned. A bad sample never
        reaches ``w`` or ``P``.
    """
    ok = jnp.all(jnp.isfinite(jnp.asarray(x))) & jnp.all(jnp.isfinite(jnp.asarray(y)))
    new = update(state, jnp.where(ok, x, 0), jnp.where(ok, y, 0), lam, **options)
    ok = ok & finite(new)
    return jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, state), ok


def reopen(state: RLSState, amount: ArrayLike, where: ArrayLike = True) -> RLSState:
    """Re-open the covariance, ``P <- P + amount I``, keeping the weights.

    The response to a detected change: the current weights become the prior
    mean of the new regime with covariance ``P + amount I`` (covariance
    resetting, Goodwin & Sin, *Adaptive Filtering, Prediction and Control*,
    1984), so the next samples move ``w`` quickly while nothing learned is
    thrown away (directions the new data do not excite keep their weights).
    ``amount`` is in the units of ``P``: with features of order one, about the
    squared weight change expected, divided by the squared prediction error
    expected once the new regime is learned.

    Args:
        state: ``w (..., p)``, ``P (..., p, p)``.
        amount: ``>= 0``, scalar or ``(...)``.
        where: Bool scalar or ``(...)``: estimators to re-open (others unchanged).

    Returns:
        New ``RLSState`` with the same ``w``.
    """
    P = state.P
    amount = jnp.asarray(amount, P.dtype)
    eye = jnp.eye(P.shape[-1], dtype=P.dtype)
    opened = P + amount[..., None, None] * eye
    P_new = jnp.where(jnp.asarray(where, bool)[..., None, None], opened, P)
    return RLSState(w=state.w, P=P_new)
