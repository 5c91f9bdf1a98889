# Tests compare against float64 references, so switch x64 on for the whole test session.
import jax

jax.config.update("jax_enable_x64", True)
