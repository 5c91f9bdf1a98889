"""dense_armor: robot dynamics from a URDF in pure JAX, and online learning of what it gets wrong.

The functional API is flat: ``dense_armor.parse_urdf``, the dynamics (``dense_armor.rnea``,
``crba``, ``aba``, ...) and the learners (``dense_armor.ResidualLearner``, ``PayloadLearner``,
``RobotLearner``, ``Sample``, ``Stepper``; their ``step`` and ``replay`` stay in
``dense_armor.learners``, ``dense_armor.replay`` being a module). The design document's
classes keep their paths (``dense_armor.dynamics.urdf_dynamics``,
``dense_armor.utility.learn.online_dynamics``).
"""

import importlib

from dense_armor import dynamics
from dense_armor.dynamics import *  # noqa: F403 (its __all__: rnea, crba, aba, ...)
from dense_armor.model import Model, attach_payload, payload_parameters, with_inertia
from dense_armor.urdf import URDFError, parse_urdf

__version__ = "0.1.0"

# The learners are imported when first named: the dynamics alone load in half the time.
_LEARNERS = {
    "ResidualLearner": "learners", "Sample": "learners", "Stepper": "learners", "PayloadLearner": "payload",
    "RobotLearner": "robot_learner",
}


def __getattr__(name: str):
    if name in _LEARNERS:
        return getattr(importlib.import_module(f"dense_armor.{_LEARNERS[name]}"), name)
    raise AttributeError(f"module 'dense_armor' has no attribute {name!r}")


__all__ = [
    *dynamics.__all__,
    *_LEARNERS,
    "Model",
    "URDFError",
    "attach_payload",
    "parse_urdf",
    "payload_parameters",
    "with_inertia",
    "__version__",
]
