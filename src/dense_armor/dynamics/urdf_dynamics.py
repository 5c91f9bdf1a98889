"""``RigidBodyModel``: the design document's stateful face of the functional dynamics.

Every method converts its inputs to float64 NumPy, enters JAX's scoped 64-bit mode
(``jax.enable_x64``, thread-local: the global configuration is untouched) and calls the
module-level jitted function, so all instances of one robot structure share one compiled
function. Results are float64 NumPy arrays.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from dense_armor import dynamics
from dense_armor.host import fetch
from dense_armor.model import Model
from dense_armor.urdf import DEFAULT_GRAVITY, parse_urdf


def as_float64(value, name: str, n: int | None = None):
    """A user array as float64 of shape (n,), inside ``jax.enable_x64``.

    NumPy-converted on the host; a JAX array or tracer (``jax.jit`` around a method) is cast.

    Raises:
        ValueError: naming the argument: not real numbers (text, complex), or not of length ``n``.
    """
    if not isinstance(value, jax.Array):
        try:
            value = np.asarray(value)
        except (TypeError, ValueError) as err:  # ragged nesting
            raise ValueError(f"{name}: not an array of numbers ({err})") from None
    if value.dtype.kind not in "biuf":  # a complex value's imaginary part would be dropped
        raise ValueError(f"{name}: expected real numbers, got {value.dtype}")
    value = value.astype(np.float64) if isinstance(value, jax.Array) else np.asarray(value, np.float64)
    if n is not None and value.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) for the {n} joints, got {tuple(value.shape)}")
    return value


class RigidBodyModel:
    """Nominal rigid-body dynamics of a URDF robot.

    Args:
        urdf: path to a URDF file, or the XML text.
        gravity: (3,) gravity in the base frame, m/s^2.
        mimic: couple the URDF's mimic joints to the joints they mimic (see
            :func:`~dense_armor.urdf.parse_urdf`).

    Attributes:
        model: the functional :class:`~dense_armor.model.Model` (a pytree for ``jax.jit``,
            ``vmap`` and ``grad``).
        n: number of coordinates; joint_names: the order of ``q``.
    """

    def __init__(self, urdf: str | os.PathLike, gravity=DEFAULT_GRAVITY, *, mimic: bool = False):
        self.model: Model = parse_urdf(urdf, gravity, mimic=mimic)

    @property
    def n(self) -> int:
        return self.model.n

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.model.joint_names

    def _call(self, fn, *args, **arrays):
        # each step written out: a control loop calls this every tick, and Python's own work
        # between two jitted calls costs several times what it costs alone
        model = self.model
        with jax.enable_x64(True):
            # read without putting the caller to sleep; float64 NumPy, so arithmetic outside the
            # 64-bit scope stays float64 (a tracer, under jax.jit around a method, as it is)
            return fetch(fn(model, *[as_float64(v, k, model.n) for k, v in arrays.items()], *args))

    def mass_matrix(self, q):
        """``M(q)`` (n, n)."""
        return self._call(dynamics.crba, q=q)

    def bias_forces(self, q, qd):
        """``C(q, qd) qd + g(q)`` (n,)."""
        return self._call(dynamics.nonlinear_effects, q=q, qd=qd)

    def gravity_forces(self, q):
        """``g(q)`` (n,)."""
        return self._call(dynamics.generalized_gravity, q=q)

    def inverse_dynamics(self, q, qd, qdd):
        """``M(q) qdd + C(q, qd) qd + g(q)`` (n,) by the RNEA."""
        return self._call(dynamics.rnea, q=q, qd=qd, qdd=qdd)

    def forward_dynamics(self, q, qd, tau):
        """Joint accelerations (n,) under torques ``tau``."""
        return self._call(dynamics.aba, q=q, qd=qd, tau=tau)

    def regressor(self, q, qd, qdd):
        """Joint-torque regressor (n, 10 B)."""
        return self._call(dynamics.joint_torque_regressor, q=q, qd=qd, qdd=qdd)

    def forward_kinematics(self, q):
        """World placement ``(R (F, 3, 3), p (F, 3))`` of every link in ``model.frame_names``."""
        return self._call(dynamics.forward_kinematics, q=q)

    def frame_jacobian(self, q, frame: str | int):
        """Geometric Jacobian (6, n) of a link's origin, rows (linear; angular), base axes."""
        return self._call(dynamics.frame_jacobian, self.model.frame_index(frame), q=q)
