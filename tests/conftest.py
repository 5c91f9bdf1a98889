# Tests compare against float64 references, so switch x64 on for the whole test session.
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

# The benchmark protocols' data is defined once, in benchmarks/protocols.py (SPEC section 4).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
