"""The rigid-body model: a static pytree of arrays.

Topology (names, joint kinds, parent indices) is static and hashable, so two models parsed
from the same URDF share every compiled function. Placements, axes, inertial parameters,
limits and gravity are arrays, stored together in the model's one leaf, so a model can be
``jax.vmap``-ed over payloads and differentiated with respect to its inertial parameters.
"""

from __future__ import annotations

import math
import operator

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import inertial, spatial
from dense_armor.compiler import stage

JOINT_KINDS = ("revolute", "continuous", "prismatic")


#: Static fields of a model: the topology, hashable, part of the pytree structure.
STATIC = ("name", "joint_names", "joint_kinds", "parents", "body_names", "frame_names", "frame_bodies", "mimics")
#: Array fields of a model, in their order in :attr:`Model.data`.
ARRAYS = (
    "joint_rotation", "joint_translation", "axis", "inertia", "frame_rotation", "frame_translation",
    "lower", "upper", "velocity_limit", "effort_limit", "armature", "damping", "friction", "gravity",
    "mimic_multiplier", "mimic_offset",
)


class Model:
    """A fixed-base kinematic tree with one body per movable joint.

    Bodies are numbered like the tree's joints (body ``i`` is moved by joint ``i``); links
    behind fixed joints are merged into the body they hang from and kept as frames. Each joint
    has a coordinate of its own, except coupled mimic joints (URDF ``<mimic>``, parsed with
    ``mimic=True``), which follow another joint's coordinate: ``q_i = multiplier * q_c +
    offset``. Without them (the default) coordinates and bodies are numbered alike.

    A pytree with one leaf, :attr:`data`, every array flattened and concatenated: a jitted
    function that takes the model passes one array for it (each array a call takes costs
    dispatch time). The named arrays below are views of ``data``, made when the
    model is built or unflattened, so under ``jax.jit`` they are sliced once, at the top of the
    traced function, not inside a ``lax.scan`` that uses them. ``vmap`` over models batches
    ``data`` (the views keep the leading batch axes); a gradient with respect to a model is a
    model whose arrays are the gradients. Change arrays with :meth:`replace`.

    Attributes:
        name: robot name from the URDF.
        joint_names: (n,) the joints with a coordinate, the order of ``q`` (depth-first, file order).
        joint_kinds: (B,) each body's joint: ``"revolute"``, ``"continuous"`` or ``"prismatic"``.
        parents: (B,) parent body of each body, ``-1`` for the fixed base.
        body_names: (B,) name of the link each joint moves.
        frame_names: (F,) every URDF link, depth-first; ``frame_names[0]`` is the root.
        frame_bodies: (F,) body each frame is rigidly attached to, ``-1`` for the base.
        mimics: (M,) the coupled mimic joints, ``(name, body, coordinate)`` each: the joint
            moving ``body`` follows coordinate ``coordinate``; empty by default.
        data: (..., size) every array of :data:`ARRAYS`, flattened and concatenated in that order.
        joint_rotation: (B, 3, 3) joint origin orientation in the parent body frame.
        joint_translation: (B, 3) joint origin position in the parent body frame, m.
        axis: (B, 3) unit joint axis in the joint frame.
        inertia: (B, 10) inertial parameters of each body in its frame
            ``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)``, I about the origin.
        frame_rotation: (F, 3, 3) and frame_translation: (F, 3): frame placement in its body.
        lower, upper: (n,) position limits of the coordinates (rad or m, +-inf when absent).
        velocity_limit, effort_limit: (n,) limits (inf when absent).
        armature: (n,) each coordinate's rotor inertia reflected to it, kg m^2 (kg): part of the
            dynamics (``M(q) + diag(armature)``, as Pinocchio's); zero unless set.
        damping, friction: (n,) the URDF's ``<dynamics damping friction>`` (N m s/rad, N m),
            kept for the user; not part of the rigid-body dynamics (as in Pinocchio).
        gravity: (3,) gravity acceleration in the base frame, m/s^2.
        mimic_multiplier, mimic_offset: (M,) each mimic joint's ``q_i = multiplier * q_c + offset``.
    """

    def __init__(self, *, name, joint_names, joint_kinds, parents, body_names, frame_names, frame_bodies, mimics=(),
                 mimic_multiplier=(), mimic_offset=(), armature=None, damping=None, friction=None, **arrays):
        """Keyword arguments: the attributes above, the arrays of :data:`ARRAYS` by name (NumPy
        arrays make a NumPy ``data``, JAX or traced ones a JAX one; ``armature``, ``damping`` and
        ``friction`` default to zeros). An array may carry leading batch axes; the others are
        broadcast to them."""
        zeros = np.zeros(len(joint_names))
        arrays.update(mimic_multiplier=mimic_multiplier, mimic_offset=mimic_offset, armature=zeros if armature is None else armature,
                      damping=zeros if damping is None else damping, friction=zeros if friction is None else friction)
        if sorted(arrays) != sorted(ARRAYS):
            raise TypeError(f"Model: expected the arrays {', '.join(ARRAYS)}; got {', '.join(arrays)}")
        mimics = tuple((str(joint), int(body), int(coordinate)) for joint, body, coordinate in mimics)
        static = (name, tuple(joint_names), tuple(joint_kinds), tuple(parents), tuple(body_names),
                  tuple(frame_names), tuple(frame_bodies), mimics)
        if len(joint_names) + len(mimics) != len(parents):
            raise ValueError(f"Model: {len(joint_names)} coordinates and {len(mimics)} mimic joints for {len(parents)} bodies")
        shapes = _shapes(static)
        values = [arrays[key] for key in ARRAYS]
        xp = jnp if any(isinstance(x, jax.Array) for x in values) else np
        values = [xp.asarray(x, float) if np.size(x) == 0 else xp.asarray(x) for x in values]
        for key, x, shape in zip(ARRAYS, values, shapes):
            if x.shape[x.ndim - len(shape) :] != shape:
                raise ValueError(f"Model: {key} has shape {x.shape}, expected {shape}")
        batch = np.broadcast_shapes(*(x.shape[: x.ndim - len(shape)] for x, shape in zip(values, shapes)))
        parts = [xp.broadcast_to(x, (*batch, *shape)).reshape(*batch, -1) for x, shape in zip(values, shapes)]
        self._build(static, xp.concatenate(parts, axis=-1))

    def _build(self, static, data):
        set_ = object.__setattr__
        for key, value in zip(STATIC, static):
            set_(self, key, value)
        set_(self, "_static", static)
        set_(self, "data", data)
        set_(self, "_flat", ((data,), static))  # what the pytree flattening returns, see below
        if isinstance(data, (np.ndarray, jax.Array)):  # not for tree_map placeholders (shardings, None)
            if isinstance(data, jax.core.Tracer):
                # Each view its own buffer, here: XLA would otherwise slice data again wherever a
                # view is read, inside the body of any lax.scan the model is used in.
                views = stage(_views(static, data))
            elif isinstance(data, jax.Array):
                views = _device_views(static, data)  # one compiled call, not one per view
            else:
                views = _views(static, data)
            for key, view in zip(ARRAYS, views):
                set_(self, key, view)

    def check(self, **arrays):
        """Cast the named arrays to one floating dtype and check each has shape (n,), one value
        per coordinate.

        Returns:
            The dtype and the arrays in the order given (``None`` stays ``None``).

        Raises:
            ValueError: naming the argument and the expected length.
        """
        given = [jnp.asarray(a) for a in arrays.values() if a is not None]
        dtype = jnp.result_type(*given) if given else jnp.result_type(float)
        if not jnp.issubdtype(dtype, jnp.floating):
            dtype = jnp.result_type(float)
        out = []
        for name, a in arrays.items():
            if a is None:
                out.append(None)
                continue
            a = jnp.asarray(a, dtype)
            if a.shape != (self.n,):
                raise ValueError(f"{name}: expected shape ({self.n},) for the {self.n} joints, got {a.shape}")
            out.append(a)
        return dtype, out

    def indices(self, key: str) -> np.ndarray:
        """Where the elements of the array ``key`` (of :data:`ARRAYS`) sit in :attr:`data`: an int
        array of that array's shape, so that ``data[..., model.indices(key)]`` is the array. For
        quantities derived from several arrays: one gather reads them all."""
        if key not in ARRAYS:
            raise KeyError(f"Model has no array {key!r}; the arrays are {', '.join(ARRAYS)}")
        start, shape = _spans(self._static)[key]
        return start + np.arange(math.prod(shape)).reshape(shape)

    def __setattr__(self, key, value):
        raise AttributeError(f"Model is immutable; use model.replace({key}=...)")

    @classmethod
    def _unflatten(cls, static, children):
        model = object.__new__(cls)
        model._build(static, children[0])
        return model

    def __repr__(self) -> str:
        return f"Model({self.name!r}, n={self.n}, joints={self.joint_names}, data={getattr(self.data, 'shape', self.data)})"

    def replace(self, **arrays) -> Model:
        """A new model with the named arrays (of :data:`ARRAYS`) replaced; traceable."""
        unknown = set(arrays) - set(ARRAYS)
        if unknown:
            raise TypeError(f"Model.replace: unknown arrays {', '.join(sorted(unknown))}; the arrays are {', '.join(ARRAYS)}")
        return Model(**dict(zip(STATIC, self._static)), **{key: arrays.get(key, getattr(self, key)) for key in ARRAYS})

    @property
    def n(self) -> int:
        """Number of coordinates (the length of ``q``)."""
        return len(self.joint_names)

    @property
    def n_bodies(self) -> int:
        """Number of bodies (movable joints, mimic joints included)."""
        return len(self.parents)

    @property
    def coordinates(self) -> np.ndarray:
        """(B,) static: the coordinate each body's joint follows (its own, or a mimic's)."""
        return _coordinates(self._static)

    @property
    def coordinate_bodies(self) -> np.ndarray:
        """(n,) static: the body each coordinate's own joint moves."""
        mimic = {body for _, body, _ in self.mimics}
        return np.array([b for b in range(self.n_bodies) if b not in mimic], int)

    @property
    def body_joint_names(self) -> tuple[str, ...]:
        """(B,) the name of the joint that moves each body."""
        names = {body: joint for joint, body, _ in self.mimics}
        own = iter(self.joint_names)
        return tuple(names[b] if b in names else next(own) for b in range(self.n_bodies))

    def frame_index(self, frame: str | int) -> int:
        """Index into ``frame_names`` of a link name (an int is returned as is)."""
        if isinstance(frame, (int, np.integer)) and not isinstance(frame, bool):
            if not 0 <= frame < len(self.frame_names):
                raise ValueError(f"frame index {frame} is out of range: the robot has {len(self.frame_names)} frames")
            return int(frame)
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


# A pytree whose flattening is one attribute read: ``attrgetter`` runs in C, where a Python
# ``tree_flatten`` method costs every jitted call that takes a model (docs/design.md).
jax.tree_util.register_pytree_node(Model, operator.attrgetter("_flat"), Model._unflatten)


def _views(static, data) -> list:
    """The arrays of :data:`ARRAYS`, each a slice of ``data`` (..., size) reshaped."""
    return [data[..., start : start + math.prod(shape)].reshape(*data.shape[:-1], *shape) for start, shape in _spans(static).values()]


_device_views = jax.jit(_views, static_argnums=0)


def _spans(static) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Where each array of :data:`ARRAYS` starts in :attr:`Model.data`, and its shape."""
    spans, start = {}, 0
    for key, shape in zip(ARRAYS, _shapes(static)):
        spans[key] = start, shape
        start += math.prod(shape)
    return spans


def _shapes(static) -> tuple[tuple[int, ...], ...]:
    """The shapes of the arrays of :data:`ARRAYS` for a model's static fields."""
    n, bodies, frames, mimics = len(static[1]), len(static[3]), len(static[5]), len(static[7])
    return ((bodies, 3, 3), (bodies, 3), (bodies, 3), (bodies, 10), (frames, 3, 3), (frames, 3), (n,), (n,), (n,), (n,),
            (n,), (n,), (n,), (3,), (mimics,), (mimics,))


def _coordinates(static) -> np.ndarray:
    """(B,) the coordinate each body's joint follows, from a model's static fields."""
    follows = {body: coordinate for _, body, coordinate in static[7]}
    out, own = [], 0
    for b in range(len(static[3])):
        if b in follows:
            out.append(follows[b])
        else:
            out.append(own)
            own += 1
    return np.array(out, int)


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
    return inertial.from_com(mass, c, I_c)


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
    select = jnp.arange(model.n_bodies) == body  # a broadcast, not a scatter: any batch sharding propagates
    inertia_new = jnp.asarray(model.inertia, params.dtype) + jnp.where(select[:, None], in_body, 0.0)
    return model.replace(inertia=inertia_new)


def with_inertia(model: Model, inertia) -> Model:
    """A new model with all inertial parameters replaced by ``inertia`` (n, 10)."""
    inertia = jnp.asarray(inertia)
    if inertia.shape != (model.n_bodies, 10):
        raise ValueError(f"inertia: expected shape ({model.n_bodies}, 10), got {inertia.shape}")
    return model.replace(inertia=inertia)


def locked_positions(model: Model, positions) -> dict[str, float]:
    """Every joint that locking the coordinates ``{name: position}`` fixes, with its position:
    those named, and each coupled mimic joint of one of them at ``k x + o``."""
    out = {name: float(x) for name, x in positions.items()}
    for (joint, _, c), k, o in zip(model.mimics, np.asarray(model.mimic_multiplier), np.asarray(model.mimic_offset)):
        if model.joint_names[c] in positions:
            out[joint] = float(k) * out[model.joint_names[c]] + float(o)
    return out


def lock_joints(model: Model, positions) -> Model:
    """The model with the named joints locked: fixed at the given positions (Pinocchio's
    ``buildReducedModel``).

    Each locked joint's body is merged into its parent body at that position (its inertia
    moved into the parent's frame; on the base, it carries no dynamics), its child joints and
    frames hang from the parent, and the remaining joints keep their order. A coupled mimic
    joint is locked with the joint it follows. Host NumPy: the model's arrays must be concrete.

    Args:
        model: the robot.
        positions: ``{joint name: position}`` (rad or m).

    Raises:
        ValueError: a name that is not a coordinate of the model (a coupled mimic joint
            included), a non-finite position, or every joint locked.
    """
    positions = dict(positions)
    followers = {joint: model.joint_names[c] for joint, _, c in model.mimics}
    for name in positions:
        if name in followers:
            raise ValueError(f"lock: {name!r} mimics {followers[name]!r}; lock {followers[name]!r}, and it follows")
    unknown = [name for name in positions if name not in model.joint_names]
    if unknown:
        raise ValueError(f"lock: {', '.join(map(repr, unknown))} is not a movable joint (joints: {', '.join(model.joint_names)})")
    for name, value in positions.items():
        if not np.isfinite(value):
            raise ValueError(f"lock: the position of {name!r} is not finite: {value}")
    if len(positions) == model.n:
        raise ValueError("lock: every joint would be locked; the model needs one movable joint")
    arrays = {key: np.array(getattr(model, key), np.float64) for key in ARRAYS}
    parents = list(model.parents)
    frame_bodies = list(model.frame_bodies)
    at = locked_positions(model, positions)
    locked = np.array([name in at for name in model.body_joint_names])
    keep = [i for i in range(model.n_bodies) if not locked[i]]
    for i in np.flatnonzero(locked):
        # where body i sits in its parent, at the locked position
        R0, p0, a = arrays["joint_rotation"][i], arrays["joint_translation"][i], arrays["axis"][i]
        x = at[model.body_joint_names[i]]
        if model.joint_kinds[i] == "prismatic":
            R, p = R0, p0 + x * R0 @ a
        else:
            K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
            R, p = R0 @ (np.eye(3) + np.sin(x) * K + (1 - np.cos(x)) * K @ K), p0
        up = parents[i]
        if up >= 0:
            arrays["inertia"][up] += np.array(spatial.rigid_params_to_parent(tuple(arrays["inertia"][i]), spatial.as_tuple(R), tuple(p)))
        for c in range(model.n_bodies):  # children of i now hang from its parent
            if parents[c] == i:
                parents[c] = up
                arrays["joint_rotation"][c] = R @ arrays["joint_rotation"][c]
                arrays["joint_translation"][c] = R @ arrays["joint_translation"][c] + p
        for f, body in enumerate(frame_bodies):
            if body == i:
                frame_bodies[f] = up
                arrays["frame_rotation"][f] = R @ arrays["frame_rotation"][f]
                arrays["frame_translation"][f] = R @ arrays["frame_translation"][f] + p
    renumber = {old: new for new, old in enumerate(keep)}
    renumber[-1] = -1
    coordinates = [c for c, name in enumerate(model.joint_names) if name not in positions]
    mimics = [k for k, (_, body, _) in enumerate(model.mimics) if not locked[body]]
    kept = {**dict.fromkeys(("joint_rotation", "joint_translation", "axis", "inertia"), keep),
            **dict.fromkeys(("lower", "upper", "velocity_limit", "effort_limit", "armature", "damping", "friction"), coordinates),
            **dict.fromkeys(("mimic_multiplier", "mimic_offset"), mimics)}
    return Model(
        name=model.name,
        joint_names=[model.joint_names[c] for c in coordinates],
        joint_kinds=[model.joint_kinds[i] for i in keep],
        parents=[renumber[parents[i]] for i in keep],
        body_names=[model.body_names[i] for i in keep],
        frame_names=model.frame_names,
        frame_bodies=[renumber[b] for b in frame_bodies],
        mimics=[(joint, renumber[body], coordinates.index(c)) for joint, body, c in (model.mimics[k] for k in mimics)],
        **{key: value[kept[key]] if key in kept else value for key, value in arrays.items()},
    )
