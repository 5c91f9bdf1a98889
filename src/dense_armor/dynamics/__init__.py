"""Nominal rigid-body dynamics as pure, jit-compiled functions of ``(model, q, qd, qdd)``.

Names follow Pinocchio. Every function takes the model first and the arrays positionally, so
``jax.vmap(rnea, in_axes=(None, 0, 0, 0))`` batches states and ``in_axes=(0, ...)`` batches
models (e.g. payloads). The dtype follows the inputs.

Arrays over joints are over the model's coordinates (``model.n``, the order of
``model.joint_names``): a coupled mimic joint (``parse_urdf(..., mimic=True)``) follows its
coordinate, and its force counts on it (virtual work, ``G^T tau``).
"""

from dense_armor.dynamics.forward_dynamics import aba
from dense_armor.dynamics.mass_matrix import crba
from dense_armor.dynamics.kinematics import forward_kinematics, frame_jacobian
from dense_armor.dynamics.regressor import body_regressor, joint_torque_regressor
from dense_armor.dynamics.inverse_dynamics import generalized_gravity, nonlinear_effects, rnea

__all__ = [
    "aba",
    "body_regressor",
    "crba",
    "forward_kinematics",
    "frame_jacobian",
    "generalized_gravity",
    "joint_torque_regressor",
    "nonlinear_effects",
    "rnea",
]
