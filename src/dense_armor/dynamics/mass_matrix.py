"""Joint-space mass matrix."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.model import Model


def world_inertia(params, R, p):
    """Inertial parameters of a body placed at ``(R, p)``, about the world origin in world axes.

    Same as :func:`spatial.rigid_params_to_parent`, written for lanes without the products by
    structural zeros.
    """
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = params
    I = ((ixx, ixy, ixz), (ixy, iyy, iyz), (ixz, iyz, izz))
    RI = spatial.matmul(R, I)
    h = spatial.matvec(R, (hx, hy, hz))
    shift = 2.0 * spatial.dot(h, p) + m * spatial.dot(p, p)
    mp = spatial.scale(m, p)

    def entry(r, c):
        x = spatial.dot(RI[r], R[c]) - (p[r] * h[c] + h[r] * p[c] + mp[r] * p[c])
        return x + shift if r == c else x

    return (m, *spatial.add(h, mp), entry(0, 0), entry(0, 1), entry(1, 1), entry(0, 2), entry(1, 2), entry(2, 2))


def motion_subspaces(prismatic: np.ndarray, z, p):
    """Every joint's motion subspace ``S`` in world coordinates, as lanes ``(w, v)``: a revolute
    joint turns about its world axis ``z`` through ``p`` (``(z, p x z)``), a prismatic one slides
    along ``z``. ``z``, ``p``: the joints' world axes and origins, as lanes or rows; ``prismatic``:
    the static mask of prismatic joints (:func:`tree.prismatic_mask`)."""
    pz = spatial.cross(p, z)
    return tuple(jnp.where(prismatic, 0.0, x) for x in z), tuple(jnp.where(prismatic, x, y) for x, y in zip(z, pz))


def _mass_matrix(model: Model, q, dtype, frames=None):
    """The mass matrix (n, n) of the coordinates at the joints' positions ``q`` (B,), from the
    joint frames with their parents' (:func:`tree.joint_frames`, read from the model if not given)."""
    world, inertia = tr.joint_frame_placements(model, q, dtype, frames)
    R, p = tr.placements_at(world)
    S = motion_subspaces(tr.prismatic_mask(model), tuple(row[2] for row in R), p)  # a joint frame's axis is its z
    bodies = tr.read(tr.pack([*world_inertia(inertia, R, p), *S[0], *S[1]]), np.arange(model.n_bodies))
    # composite inertias Ic_j = sum of I_k over the subtree of j
    D = tr.subtree_mask(model)
    composite = tr.columns(tr.masked_sum(D, bodies), 10)
    S = tr.columns(bodies, 16)[10:]
    F = spatial.rigid_momentum(composite, (tuple(S[:3]), tuple(S[3:])))
    # M_ij = S_i . F_j for i an ancestor of j, and symmetric
    upper = jnp.where(D.T, sum(a[:, None] * b[None, :] for a, b in zip(S, (*F[0], *F[1]))), 0.0)
    M = tr.generalized_inertia(model, dtype, upper + upper.T - jnp.where(np.eye(model.n_bodies, dtype=bool), upper, 0.0))
    return M + jnp.diag(jnp.asarray(model.armature, dtype))


@jax.jit
def crba(model: Model, q):
    """Joint-space mass matrix ``M(q)`` (Pinocchio's ``crba``).

    The Composite-Rigid-Body Algorithm in world coordinates, over lanes of bodies (see
    :mod:`dense_armor.dynamics.tree`): world placements of the joint frames by pointer jumping
    (:func:`tree.joint_frame_placements`), every body's inertia about the world origin,
    composite inertias as subtree sums ``Ic_j = sum I_k`` (no transforms: all in one frame),
    ``F_j = Ic_j S_j`` and ``M_ij = S_i . F_j`` for ``i`` an ancestor of ``j`` (why this layout,
    not the tree walk: ``docs/design.md``, "Tree walks").

    Args:
        model: the robot.
        q: (n,) joint positions.

    Returns:
        (n, n) symmetric positive-definite ``M(q)`` (kg m^2, kg for prismatic joints), the
        model's armature on its diagonal.
    """
    dtype, (q,) = model.check(q=q)
    q, _, _ = tr.joint_values(model, dtype, q)
    return _mass_matrix(model, q, dtype)
