"""A rigid body's 10 inertial parameters: physical quantities, and physical consistency.

The parameters are ``pi = (m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)`` in a body
frame: the mass, the first moment ``h = m c`` and the rotational inertia ``I`` about the frame
origin (the order of :mod:`dense_armor.spatial` and of the regressor).

Not every 10-vector is a rigid body. ``pi`` is *physically consistent* when some density of
mass over space has it, which holds exactly when the pseudo-inertia matrix

    J = [[S, h], [h', m]],    S = 0.5 tr(I) 1 - I   (the second moment of the mass, int x x' dm)

is positive semi-definite (Wensing, Kim & Slotine 2017). That gives ``m >= 0``, principal
moments about the centre of mass that are non-negative and satisfy the triangle inequality,
and nothing else. :func:`nearest_consistent` projects onto that set: the positive semi-definite
``J`` nearest in the Frobenius norm (eigenvalues clipped at zero), an exact, branch-free
projection that moves consistent parameters not at all.

Every function works on NumPy or JAX arrays with leading batch axes ``(..., 10)``.

References:
    Wensing, P., Kim, S., Slotine, J.-J. (2017). Linear matrix inequalities for physically
    consistent inertial parameter identification: a statistical perspective on the mass
    distribution. IEEE Robotics and Automation Letters 3(1), 60-67.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "from_com",
    "from_pseudo_inertia",
    "inconsistency",
    "most_probable_consistent",
    "nearest_consistent",
    "pseudo_inertia",
    "rotational_inertia",
    "to_com",
]

#: Names of the 10 parameters, in their order.
NAMES = ("m", "m c_x", "m c_y", "m c_z", "I_xx", "I_xy", "I_yy", "I_xz", "I_yz", "I_zz")


def _xp(x):
    if isinstance(x, (np.ndarray, np.generic, float, int)):
        return np
    import jax.numpy as jnp

    return jnp


def rotational_inertia(params):
    """The symmetric (..., 3, 3) ``I`` about the frame origin from the last 6 parameters."""
    xp = _xp(params)
    ixx, ixy, iyy, ixz, iyz, izz = (params[..., k] for k in range(4, 10))
    return xp.stack([xp.stack([ixx, ixy, ixz], -1), xp.stack([ixy, iyy, iyz], -1), xp.stack([ixz, iyz, izz], -1)], -2)


def _parallel_axis(m, c, xp):
    """``m ([c]^T [c]) = m (c'c 1 - c c')``: a point mass's inertia about the origin, (..., 3, 3)."""
    eye = xp.eye(3, dtype=c.dtype)
    return m[..., None, None] * ((c * c).sum(-1)[..., None, None] * eye - c[..., :, None] * c[..., None, :])


def from_com(mass, com, inertia_com):
    """Parameters (..., 10) from the mass (kg), centre of mass (..., 3) (m) and the rotational
    inertia (..., 3, 3) about the centre of mass (kg m^2), all in one frame."""
    xp = _xp(com) if _xp(mass) is np else _xp(mass)
    c = xp.asarray(com)
    m = xp.asarray(mass, c.dtype) + xp.zeros(c.shape[:-1], c.dtype)
    I = xp.asarray(inertia_com, c.dtype) + _parallel_axis(m, c, xp)
    h = m[..., None] * c
    return xp.concatenate([m[..., None], h, xp.stack([I[..., 0, 0], I[..., 0, 1], I[..., 1, 1], I[..., 0, 2], I[..., 1, 2], I[..., 2, 2]], -1)], -1)


def to_com(params):
    """``(mass, com (..., 3), inertia about the com (..., 3, 3))``; a zero mass gives com 0."""
    xp = _xp(params)
    m = params[..., 0]
    positive = m > 0
    c = xp.where(positive[..., None], params[..., 1:4] / xp.where(positive, m, 1.0)[..., None], 0.0)
    return m, c, rotational_inertia(params) - _parallel_axis(m, c, xp)


def pseudo_inertia(params):
    """The (..., 4, 4) pseudo-inertia ``J = [[0.5 tr(I) 1 - I, h], [h', m]]``."""
    xp = _xp(params)
    I = rotational_inertia(params)
    S = 0.5 * xp.trace(I, axis1=-2, axis2=-1)[..., None, None] * xp.eye(3, dtype=I.dtype) - I
    h = params[..., 1:4]
    top = xp.concatenate([S, h[..., :, None]], -1)
    bottom = xp.concatenate([h, params[..., :1]], -1)[..., None, :]
    return xp.concatenate([top, bottom], -2)


def from_pseudo_inertia(J):
    """The parameters (..., 10) of a pseudo-inertia (..., 4, 4): ``I = tr(S) 1 - S``."""
    xp = _xp(J)
    S = J[..., :3, :3]
    I = xp.trace(S, axis1=-2, axis2=-1)[..., None, None] * xp.eye(3, dtype=S.dtype) - S
    return xp.concatenate([J[..., 3:, 3], J[..., :3, 3], xp.stack([I[..., 0, 0], I[..., 0, 1], I[..., 1, 1], I[..., 0, 2], I[..., 1, 2], I[..., 2, 2]], -1)], -1)


def inconsistency(params):
    """``max(0, -lambda_min(J))`` (...,): how far the parameters are from a rigid body, in
    kg m^2 (0 for a physically consistent body)."""
    xp = _xp(params)
    J = pseudo_inertia(params)
    return xp.maximum(0.0, -xp.linalg.eigvalsh(0.5 * (J + xp.swapaxes(J, -1, -2)))[..., 0])


def nearest_consistent(params):
    """The physically consistent parameters nearest to ``params``: the pseudo-inertia's
    negative eigenvalues set to zero (the Frobenius-nearest positive semi-definite ``J``).
    Consistent parameters come back unchanged (to rounding)."""
    xp = _xp(params)
    J = pseudo_inertia(params)
    values, vectors = xp.linalg.eigh(0.5 * (J + xp.swapaxes(J, -1, -2)))
    clipped = (vectors * xp.maximum(values, 0.0)[..., None, :]) @ xp.swapaxes(vectors, -1, -2)
    return xp.where((values[..., :1] >= 0), params, from_pseudo_inertia(clipped))


def most_probable_consistent(mean, cov, bodies: int, nonnegative=None, stages: int = 14, steps: int = 400):
    """The physically consistent parameters most probable under a Gaussian posterior: the
    minimiser of ``(x - mean)' cov^-1 (x - mean)`` over ``x`` (p,) whose first ``bodies``
    blocks of 10 have positive semi-definite pseudo-inertias and whose ``nonnegative`` entries
    are ``>= 0``. JAX arrays; traceable.

    :func:`nearest_consistent` moves each body alone in the Frobenius norm of ``J``, which can
    move combinations the data pinned down; in the posterior's metric the move goes where the
    data are silent, and the other parameters (the joints' terms, correlated bodies) follow.
    A log-barrier interior-point method (Boyd & Vandenberghe 2004, section 11.3) with damped
    Newton steps in whitened coordinates (``x = mean + s L z``, ``s`` the standard deviations,
    ``L L'`` the correlations: the distance is ``|z|^2``): ``stages`` barrier weights, from the
    start's distance down by tenths, each until centred, ``steps`` Newton steps at most in
    all; the result is feasible (strictly in float64, to rounding in float32). Parameters
    already consistent come back unchanged. In float32 the solve is approximate where ``cov``
    spans more than a few decades.

    Args:
        mean: (p,) the posterior mean; bodies first, in the order of :data:`NAMES`.
        cov: (p, p) its covariance, positive definite.
        bodies: how many 10-blocks lead ``mean``.
        nonnegative: optional (p,) bool, the entries after the bodies' bounded below by 0
            (friction, armature).
    """
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import block_diag, cho_factor, cho_solve, solve_triangular

    p, dtype, n = mean.shape[-1], mean.dtype, 10 * bodies
    bounded = jnp.zeros(p, bool) if nonnegative is None else jnp.asarray(nonnegative, bool).at[:n].set(False)
    scale = jnp.sqrt(jnp.diagonal(cov))
    # whitened coordinates: x = mean + scale L z, L L' the correlation matrix; the distance is |z|^2
    T = scale[:, None] * jnp.linalg.cholesky(cov / (scale[:, None] * scale[None, :]))  # dx/dz
    basis = jnp.asarray(pseudo_inertia(np.eye(10)), dtype)  # (10, 4, 4) the A_i of J = sum x_i A_i

    def x_of(z):
        return mean + T @ z

    def barrier(x):  # -sum log det J_b - sum log x_j: NaN outside the feasible set
        R = jnp.linalg.cholesky(pseudo_inertia(x[:n].reshape(bodies, 10)))
        return -2.0 * jnp.sum(jnp.log(jnp.diagonal(R, axis1=-2, axis2=-1))) - jnp.sum(jnp.log(jnp.where(bounded, x, 1.0)[n:]))

    def barrier_derivatives(x):  # gradient -tr(J^-1 A_i) and Hessian tr(J^-1 A_i J^-1 A_j), and 1/x's
        J = pseudo_inertia(x[:n].reshape(bodies, 10))
        inverse = jax.vmap(lambda J: cho_solve(cho_factor(J), jnp.eye(4, dtype=dtype)))(J)
        products = jnp.einsum("bkl,ilm->bikm", inverse, basis)
        blocks = jnp.einsum("bikm,bjmk->bij", products, products)
        reciprocal = jnp.where(bounded, 1.0 / jnp.where(bounded, x, 1.0), 0.0)[n:]
        gradient = jnp.concatenate([-jnp.einsum("bikk->bi", products).reshape(-1), -reciprocal])
        return gradient, block_diag(*blocks, jnp.diag(reciprocal**2))

    def objective(z, mu):
        return 0.5 * z @ z + mu * barrier(x_of(z))

    def newton(carry):
        z, stage, count = carry
        mu = mu0 * jnp.asarray(10.0, dtype) ** -stage
        g, K = barrier_derivatives(x_of(z))
        gradient = z + mu * (T.T @ g)
        step = -jnp.linalg.solve(jnp.eye(p, dtype=dtype) + mu * (T.T @ K @ T), gradient)
        # the longest halving of the step that stays feasible and decreases enough (Armijo)
        value = objective(z, mu)
        trial = jax.vmap(lambda a: objective(z + a * step, mu))(lengths)
        ok = jnp.isfinite(trial) & (trial <= value + 0.25 * lengths * (gradient @ step))
        moved = z + lengths[jnp.argmax(ok)] * step
        ok = jnp.any(ok) & jnp.isfinite(objective(moved, mu))  # feasible when evaluated alone too
        z = jnp.where(ok, moved, z)
        # centred (the Newton decrement of objective / mu), or no step improves: the next weight
        centred = (-(gradient @ step) < 1e-6 * mu) | ~ok
        return z, stage + centred.astype(stage.dtype), count + 1

    # a strictly feasible start: each pseudo-inertia's eigenvalues floored a little above 0, on
    # the scale of the body or, for a body at 0, of its uncertainty
    J = pseudo_inertia(mean[:n].reshape(bodies, 10))
    values, vectors = jnp.linalg.eigh(0.5 * (J + jnp.swapaxes(J, -1, -2)))
    floor = 1e-6 * jnp.maximum(jnp.max(jnp.abs(values), -1, keepdims=True), jnp.max(scale[:n].reshape(bodies, 10), -1, keepdims=True))
    start = from_pseudo_inertia((vectors * jnp.maximum(values, floor)[..., None, :]) @ jnp.swapaxes(vectors, -1, -2))
    x0 = jnp.concatenate([start.reshape(-1), jnp.where(bounded, jnp.maximum(mean, 1e-3 * scale), mean)[n:]])
    lengths = 0.5 ** jnp.arange(40, dtype=dtype)
    z0 = solve_triangular(T, x0 - mean, lower=True)
    mu0 = jnp.maximum(0.5 * z0 @ z0, jnp.finfo(dtype).tiny) / (4 * bodies + jnp.sum(bounded))  # the start's distance over the barrier's terms
    z, _, _ = jax.lax.while_loop(lambda c: (c[1] < stages) & (c[2] < steps), newton, (z0, jnp.asarray(0), jnp.asarray(0)))
    x = x_of(z)
    # rounding can leave float32 a hair outside (its solve is approximate when cov spans decades)
    x = jnp.concatenate([nearest_consistent(x[:n].reshape(bodies, 10)).reshape(-1), jnp.where(bounded, jnp.maximum(x, 0.0), x)[n:]])
    inside = jnp.all(values[..., 0] >= 0) & jnp.all(jnp.where(bounded, mean >= 0, True))
    return jnp.where(inside, mean, x)
