"""The joint-torque regressor: inverse dynamics linear in the inertial parameters.

``rnea(q, qd, qdd) == joint_torque_regressor(q, qd, qdd) @ model.inertia.reshape(-1)``, with
the parameters of each body in the order of :mod:`dense_armor.spatial`.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import spatial
from dense_armor.compiler import stage
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.mass_matrix import motion_subspaces
from dense_armor.model import Model

# the symmetric unit matrices of (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz), as index pairs
_INERTIA_ENTRIES = (((0, 0),), ((0, 1), (1, 0)), ((1, 1),), ((0, 2), (2, 0)), ((1, 2), (2, 1)), ((2, 2),))


def body_force_regressor(motion, acceleration):
    """The 10 columns ``(n, f)`` of a body's spatial force ``I a + v x* I v`` per inertial
    parameter, from its velocity ``(w, v)`` and acceleration ``(wd, vd)`` in its own frame::

        m:    (0, vd + w x v)
        h_e:  (e x vd + w x (e x v) - v x (e x w),  -e x wd - w x (e x w))
        I_E:  (E wd + w x (E w), 0)
    """
    w, v = motion
    wd, vd = acceleration
    zero = (spatial.ZERO,) * 3
    columns = [(zero, spatial.add(vd, spatial.cross(w, v)))]
    for axis in range(3):
        def e_x(x, axis=axis):  # e x x for the unit vector e along axis
            out = [spatial.ZERO] * 3
            out[(axis + 1) % 3] = -x[(axis + 2) % 3]
            out[(axis + 2) % 3] = x[(axis + 1) % 3]
            return tuple(out)

        n = spatial.sub(spatial.add(e_x(vd), spatial.cross(w, e_x(v))), spatial.cross(v, e_x(w)))
        columns.append((n, spatial.scale(-1.0, spatial.add(e_x(wd), spatial.cross(w, e_x(w))))))
    for pairs in _INERTIA_ENTRIES:
        def E(x, pairs=pairs):
            out = [spatial.ZERO] * 3
            for r, c in pairs:
                out[r] = out[r] + x[c]
            return tuple(out)

        columns.append((spatial.add(E(wd), spatial.cross(w, E(w))), zero))
    return columns


def _force_terms() -> tuple[tuple, np.ndarray]:
    """:func:`body_force_regressor` as integer combinations of terms of ``(v, a)``.

    The 60 entries of a body's force columns are linear in its acceleration and quadratic in its
    velocity. Returns the terms, indices into ``(w, v, wd, vd)`` (12): the six accelerations
    (one index) and the velocity products that occur (two), and the coefficients (10, 6, terms)
    of column, component (n, f) and term, found by evaluating the function on unit vectors.
    """

    def columns(x):
        motion, acceleration = (tuple(x[0:3]), tuple(x[3:6])), (tuple(x[6:9]), tuple(x[9:12]))
        return np.array([[0.0 if y is spatial.ZERO else y for y in (*n, *f)] for n, f in body_force_regressor(motion, acceleration)])

    e = np.eye(12)
    terms = [(t,) for t in range(6, 12)]
    coefficients = [columns(e[t]) for t in range(6, 12)]
    for i in range(6):
        for j in range(i, 6):
            c = columns(e[i]) if i == j else columns(e[i] + e[j]) - columns(e[i]) - columns(e[j])
            if c.any():
                terms.append((i, j))
                coefficients.append(c)
    return tuple(terms), np.stack(coefficients, -1)


_TERMS, _COEFFICIENTS = _force_terms()


def _combine(coefficients, terms):
    """``sum(c * t)`` over the nonzero integer coefficients, as additions."""
    out = spatial.ZERO
    for c, term in zip(coefficients, terms):
        if c:
            term = term if c == 1 else -term if c == -1 else c * term
            out = term if out is spatial.ZERO else out + term
    return jnp.zeros_like(terms[0]) if out is spatial.ZERO else out


def _compose_motions(upper, lower) -> list:
    """World-frame velocity and acceleration increments ``(P, Q)`` of two segments of a path:
    ``P = P1 + P2`` and ``Q = Q1 + Q2 + P1 x P2`` (each joint's ``S qd`` crossed with the
    velocity of the joints above it: ``sum_j V_parent(j) x S_j qd_j`` over a path)."""
    P1, Q1, P2, Q2 = ((tuple(x[0:3]), tuple(x[3:6])) for x in (upper[:6], upper[6:], lower[:6], lower[6:]))
    P = spatial.sadd(P1, P2)
    Q = spatial.sadd(spatial.sadd(Q1, Q2), spatial.cross_motion(P1, P2))
    return [*P[0], *P[1], *Q[0], *Q[1]]


def _regressor(model: Model, q, qd, qdd, dtype, bodies: slice = slice(None)):
    """The regressor's columns (B, 10 K) of the ``bodies`` (K of them), every joint's rows."""
    n = model.n_bodies
    prismatic = tr.prismatic_mask(model)
    root = np.asarray(model.parents) < 0
    # as rows: the model's arrays and the state
    R0, p0 = tr.placement_lanes([*tr.model_rows(model, "joint_rotation", dtype), *tr.model_rows(model, "joint_translation", dtype)])
    a, g = (tuple(tr.model_rows(model, key, dtype)) for key in ("axis", "gravity"))
    c, s, slide = tr.joint_angles(model, q)
    q, qd, qdd = q[None], qd[None], qdd[None]
    # world placements of the link frames
    R = spatial.matmul(R0, spatial.rodrigues(a, c, s))
    p = spatial.add(p0, spatial.scale(slide, spatial.matvec(R0, a)))
    local = tr.stack_rows(tr.placement_values((R, p)))
    R, p = tr.placement_lanes(tr.unstack_rows(tr.accumulate(model, local, tr.compose_placements, width=12), 12))
    # every joint's motion subspace S in world coordinates, and its S qd and S qdd (the base's
    # acceleration, -g, added at the joints on the base)
    S = motion_subspaces(prismatic, spatial.matvec(R, a), p)
    Sqd, Sqdd = (spatial.scale(qd, S[0]), spatial.scale(qd, S[1])), (spatial.scale(qdd, S[0]), spatial.scale(qdd, S[1]))
    Sqdd = Sqdd[0], tuple(jnp.where(root, x - y, x) for x, y in zip(Sqdd[1], g))
    joints = tr.stack_rows([*Sqd[0], *Sqd[1], *Sqdd[0], *Sqdd[1], *S[0], *S[1]])
    # body velocities and accelerations: sums over the ancestors, in world coordinates
    motion = tr.unstack_rows(tr.accumulate(model, joints, _compose_motions, width=12), 12)
    V, A = (tuple(motion[0:3]), tuple(motion[3:6])), (tuple(motion[6:9]), tuple(motion[9:12]))
    S = tr.unstack_rows(joints, 18)[12:]
    # in the frame of each of the bodies: its velocity and acceleration, and every joint's motion
    # subspace psi[j, k] (rows j, columns k)
    R, p, V, A = jax.tree.map(lambda row: row[:, bodies], (R, p, V, A))
    v, acc = spatial.motion_to_child(R, p, V), spatial.motion_to_child(R, p, A)
    S_j = [row.T for row in S]  # (n, 1): joints along the rows
    psi = spatial.motion_to_child(R, p, (tuple(S_j[:3]), tuple(S_j[3:])))
    k = p[0].shape[-1]
    rows = stage(jnp.concatenate([jnp.concatenate([*psi[0], *psi[1]]), tr.stack_rows([*v[0], *v[1], *acc[0], *acc[1]]).reshape(12, k)]))
    psi, va = rows[: 6 * n].reshape(6, n, k), [rows[6 * n + i : 6 * n + i + 1] for i in range(12)]
    # F[r, k, c]: component r of body k's force per parameter c, in the body's frame, from the
    # velocity products, a stage of its own (fused with psi, the regressor compiles far slower)
    terms = tr.unstack_rows(tr.stack_rows([va[t[0]] if len(t) == 1 else va[t[0]] * va[t[1]] for t in _TERMS]), len(_TERMS))
    F = jnp.stack([
        jnp.stack([jnp.stack([_combine(_COEFFICIENTS[5 * h + col, r], terms)[0] for col in range(5)], -1) for h in range(2)], -2).reshape(k, 10)
        for r in range(6)
    ])
    F = stage(F)
    # Y[j, 10 k + c] = psi[j, k] . F[k, c] for j the joint of k or of one of its ancestors
    Y = sum(psi[r][:, :, None] * F[r][None, :, :] for r in range(6))
    return jnp.where(tr.subtree_mask(model).T[:, bodies, None], Y, 0.0).reshape(n, 10 * k)


@jax.jit
def joint_torque_regressor(model: Model, q, qd, qdd):
    """Joint-torque regressor ``Y(q, qd, qdd)`` with ``Y @ pi == rnea(q, qd, qdd)``.

    Over rows of bodies (see :mod:`dense_armor.dynamics.tree`): world placements and then world
    velocities and accelerations composed down the tree by pointer jumping, each body's force
    per parameter in its own frame (integer combinations of its acceleration and of products of
    its velocity's components), and every joint's motion subspace in the frame of each body below it,
    ``Y[j, 10 k + c] = psi[j, k] . F[k, c]``, in stages (:func:`dense_armor.compiler.stage`).

    Args:
        model: the robot.
        q, qd, qdd: (n,) joint positions, velocities and accelerations.

    Returns:
        (n, 10 B), B bodies: columns ``10 k .. 10 k + 9`` belong to body ``k``, in the parameter order
        ``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)`` (Pinocchio's
        ``computeJointTorqueRegressor``).
    """
    dtype, (q, qd, qdd) = model.check(q=q, qd=qd, qdd=qdd)
    return tr.generalized(model, dtype, _regressor(model, *tr.joint_values(model, dtype, q, qd, qdd), dtype))


@partial(jax.jit, static_argnums=4)
def body_regressor(model: Model, q, qd, qdd, body: int, transform=None):
    """The 10 regressor columns (n, 10) of one body: how its inertial parameters move every
    joint (zero for the joints not between the body and the base). The regressor's own pass,
    with only this body's forces and projections.

    Args:
        body: the body's index (static).
        transform: optional (10, 10) ``T``: the columns of parameters ``pi'`` with
            ``pi_body = T @ pi'`` instead (say, of a link behind a fixed joint, in its frame).
    """
    dtype, (q, qd, qdd) = model.check(q=q, qd=qd, qdd=qdd)
    columns = _regressor(model, *tr.joint_values(model, dtype, q, qd, qdd), dtype, slice(body, body + 1))
    if transform is not None:
        columns = jnp.matmul(columns, jnp.asarray(transform, dtype), precision=jax.lax.Precision.HIGHEST)
    return tr.generalized(model, dtype, columns)
