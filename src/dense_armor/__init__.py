"""dense_armor: robot dynamics from a URDF in pure JAX, and online learning of what it gets wrong."""

from dense_armor.model import Model, attach_payload, payload_parameters, with_inertia
from dense_armor.urdf import URDFError, parse_urdf

__version__ = "0.1.0"

__all__ = [
    "Model",
    "URDFError",
    "attach_payload",
    "parse_urdf",
    "payload_parameters",
    "with_inertia",
    "__version__",
]
