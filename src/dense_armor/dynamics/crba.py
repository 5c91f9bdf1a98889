"""Joint-space mass matrix by the Composite Rigid Body Algorithm."""

from __future__ import annotations

import jax

from dense_armor import spatial
from dense_armor.dynamics import tree as tr
from dense_armor.model import Model


def _crba(model: Model, joints, dtype):
    """Rows of ``M(q)`` as nested lists of scalars."""
    composite = tr.inertias(model, dtype)
    for i in reversed(range(model.n)):
        joint = joints[i]
        if joint.parent >= 0:
            moved = spatial.inertia_to_parent(composite[i], joint.R, joint.p)
            composite[joint.parent] = spatial.inertia_add(composite[joint.parent], moved)
    zero = 0.0 * joints[0].axis[0]
    M = [[zero] * model.n for _ in range(model.n)]
    for i, joint in enumerate(joints):
        force = tr.subspace_force(joint, composite[i])
        M[i][i] = tr.project(joint, force)
        j = i
        while joints[j].parent >= 0:
            force = spatial.force_to_parent(joints[j].R, joints[j].p, force)
            j = joints[j].parent
            M[i][j] = M[j][i] = tr.project(joints[j], force)
    return M


@jax.jit
def crba(model: Model, q):
    """Joint-space mass matrix by the Composite Rigid Body Algorithm.

    Args:
        model: the robot.
        q: (n,) joint positions.

    Returns:
        (n, n) symmetric positive-definite ``M(q)`` (kg m^2, kg for prismatic joints).
    """
    dtype, (q,) = tr.check(model, q=q)
    return tr.matrix(_crba(model, tr.joints(model, q, dtype), dtype))
