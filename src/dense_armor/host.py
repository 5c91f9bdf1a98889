"""Results of jitted calls read back into Python at the least latency.

With JAX's default asynchronous dispatch a jitted call returns once its program is queued, and
XLA:CPU runs it on a thread of its own (unless its cost model finds it trivial). Reading the
result (``np.asarray``, ``float``, ``block_until_ready``) then puts the calling thread to sleep
until the result is ready, and the thread the result wakes loses about as long again to the
operating system's scheduler as a small program takes to run (on a busy 2-core machine, often
more). :func:`fetch` polls the result instead, for up to :data:`SPIN` seconds, before it
blocks: a control loop's call of tens of microseconds is over before the poll ends, and the
calling thread never sleeps (``docs/design.md``, "A step from a Python loop").
"""

from __future__ import annotations

import time

import jax
import numpy as np

__all__ = ["SPIN", "fetch"]

#: s :func:`fetch` polls for a result before it blocks on it.
SPIN = 1e-3


def fetch(tree):
    """A pytree of arrays (a JAX array, a tuple of them, a state) as NumPy, once computed.

    Tracers (a ``jax.jit`` around the caller) and other leaves are returned as they are."""
    deadline = time.perf_counter() + SPIN

    def read(x):
        if isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array):
            return x
        while not x.is_ready() and time.perf_counter() < deadline:
            pass
        return np.asarray(x)

    return read(tree) if isinstance(tree, jax.Array) else jax.tree.map(read, tree)
