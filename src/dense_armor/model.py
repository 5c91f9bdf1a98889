"""The rigid-body model: a static pytree of arrays.

Topology (names, joint kinds, parent indices) is static and hashable, so two models parsed
from the same URDF share every compiled function. Placements, axes, inertial parameters,
limits and gravity are array leaves, so a model can be ``jax.vmap``-ed over payloads and
differentiated with respect to its inertial parameters.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import spatial

JOINT_KINDS = ("revolute", "continuous", "prismatic")


class Model(eqx.Module):
    """A fixed-base kinematic tree with one body per movable joint.

    Bodies are numbered like joints (body ``i`` is moved by joint ``i``); links behind fixed
    joints are merged into the body they hang from and kept as frames.

    Attributes:
        name: robot name from the URDF.
        joint_names: (n,) movable joint names, the order of ``q`` (depth-first, file order).
        joint_kinds: (n,) ``"revolute"``, ``"continuous"`` or ``"prismatic"``.
        parents: (n,) parent body of each joint, ``-1`` for the fixed base.
        body_names: (n,) name of the link each joint moves.
        frame_names: (F,) every URDF link, depth-first; ``frame_names[0]`` is the root.
        frame_bodies: (F,) body each frame is rigidly attached to, ``-1`` for the base.
        joint_rotation: (n, 3, 3) joint origin orientation in the parent body frame.
        joint_translation: (n, 3) joint origin position in the parent body frame, m.
        axis: (n, 3) unit joint axis in the joint frame.
        inertia: (n, 10) inertial parameters of each body in its frame
            ``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)``, I about the origin.
        frame_rotation: (F, 3, 3) and frame_translation: (F, 3): frame placement in its body.
        lower, upper: (n,) position limits (rad or m, +-inf when absent).
        velocity_limit, effort_limit: (n,) limits (inf when absent).
        gravity: (3,) gravity acceleration in the base frame, m/s^2.
    """

    name: str = eqx.field(static=True)
    joint_names: tuple[str, ...] = eqx.field(static=True)
    joint_kinds: tuple[str, ...] = eqx.field(static=True)
    parents: tuple[int, ...] = eqx.field(static=True)
    body_names: tuple[str, ...] = eqx.field(static=True)
    frame_names: tuple[str, ...] = eqx.field(static=True)
    frame_bodies: tuple[int, ...] = eqx.field(static=True)
    joint_rotation: jax.Array | np.ndarray
    joint_translation: jax.Array | np.ndarray
    axis: jax.Array | np.ndarray
    inertia: jax.Array | np.ndarray
    frame_rotation: jax.Array | np.ndarray
    frame_translation: jax.Array | np.ndarray
    lower: jax.Array | np.ndarray
    upper: jax.Array | np.ndarray
    velocity_limit: jax.Array | np.ndarray
    effort_limit: jax.Array | np.ndarray
    gravity: jax.Array | np.ndarray

    @property
    def n(self) -> int:
        """Number of movable joints (the length of ``q``)."""
        return len(self.joint_names)

    def frame_index(self, frame: str | int) -> int:
        """Index into ``frame_names`` of a link name (an int is returned as is)."""
        if isinstance(frame, int):
            return frame
        try:
            return self.frame_names.index(frame)
        except ValueError:
            raise ValueError(f"unknown frame {frame!r}; frames: {', '.join(self.frame_names)}") from None

    def body_index(self, link: str) -> int:
        """The body a link belongs to (after merging fixed joints)."""
        body = self.frame_bodies[self.frame_index(link)]
        if body < 0:
            raise ValueError(f"link {link!r} is part of the fixed base; it carries no dynamics")
        return body


def payload_parameters(mass, com=(0.0, 0.0, 0.0), inertia=None):
    """Inertial parameters (10,) of a payload, traceable (vmap over ``mass`` works).

    Args:
        mass: kg.
        com: (3,) centre of mass in the frame it is attached to, m.
        inertia: (3, 3) rotational inertia about the centre of mass, kg m^2 (default: a point mass).
    """
    mass = jnp.asarray(mass)
    if not jnp.issubdtype(mass.dtype, jnp.floating):
        mass = mass.astype(float)
    c = jnp.asarray(com, mass.dtype)
    I_c = jnp.zeros((3, 3), mass.dtype) if inertia is None else jnp.asarray(inertia, mass.dtype)
    return spatial.params_from_com(mass, c, I_c, jnp)


def attach_payload(model: Model, link: str, mass, com=(0.0, 0.0, 0.0), inertia=None) -> Model:
    """A new model with a rigid payload fixed to ``link``.

    Args:
        model: the robot.
        link: the link carrying the payload (any link, also one behind fixed joints).
        mass, com, inertia: as in :func:`payload_parameters`, ``com`` in the link's frame.

    Returns:
        The model with the payload's parameters added to the body of ``link``. Traceable:
        ``jax.vmap(lambda m: attach_payload(model, "link2", m))(masses)`` is a batch of models.
    """
    body = model.body_index(link)
    frame = model.frame_index(link)
    params = payload_parameters(mass, com, inertia)
    R = spatial.as_tuple(jnp.asarray(model.frame_rotation[frame], params.dtype))
    p = spatial.as_tuple(jnp.asarray(model.frame_translation[frame], params.dtype))
    in_body = jnp.stack(spatial.rigid_params_to_parent(spatial.as_tuple(params), R, p))
    select = jnp.arange(model.n) == body  # a broadcast, not a scatter: any batch sharding propagates
    inertia_new = jnp.asarray(model.inertia, params.dtype) + jnp.where(select[:, None], in_body, 0.0)
    return eqx.tree_at(lambda m: m.inertia, model, inertia_new)


def with_inertia(model: Model, inertia) -> Model:
    """A new model with all inertial parameters replaced by ``inertia`` (n, 10)."""
    inertia = jnp.asarray(inertia)
    if inertia.shape != (model.n, 10):
        raise ValueError(f"inertia: expected shape ({model.n}, 10), got {inertia.shape}")
    return eqx.tree_at(lambda m: m.inertia, model, inertia)
