"""Flat buffers for a pytree: the cheapest way to call a jitted function from a Python loop.

Every array a jitted call takes or returns costs dispatch time (argument parsing, a device
buffer, a Python object: SPEC section 6 measured 1-2 us an array), so a learner's step called
with its ~27 leaves spends more on passing them than on its arithmetic. A :class:`Layout`
records a pytree's structure, shapes and dtypes and packs its leaves into one 1-D buffer per
dtype (``pack``): values are copied, never converted, so ``unpack(pack(t))`` is ``t`` bit for
bit. ``unpack`` is slices and reshapes, which XLA folds into the kernels that read them. A
layout is hashable, so it can be a static argument of ``jax.jit``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Layout"]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Structure, shapes and dtypes of a pytree, and where each leaf sits in its buffer.

    Attributes:
        treedef: the pytree structure (static fields included).
        shapes: each leaf's shape, in leaf order.
        dtypes: each leaf's dtype name, in leaf order.
        groups: the buffers' dtypes, in order of first appearance among the leaves.
        offsets: each leaf's first element in the buffer of its dtype (leaf order).
        sizes: each buffer's length.
    """

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    groups: tuple[str, ...]
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, tree) -> Layout:
        """The layout of ``tree`` (arrays or Python scalars as leaves)."""
        leaves, treedef = jax.tree.flatten(tree)
        shapes = tuple(np.shape(leaf) for leaf in leaves)
        dtypes = tuple(jnp.result_type(leaf).name for leaf in leaves)
        groups = tuple(dict.fromkeys(dtypes))
        fill = dict.fromkeys(groups, 0)
        offsets = []
        for shape, dtype in zip(shapes, dtypes):
            offsets.append(fill[dtype])
            fill[dtype] += math.prod(shape)
        return cls(treedef, shapes, dtypes, groups, tuple(offsets), tuple(fill.values()))

    def pack(self, tree) -> tuple[jax.Array, ...]:
        """One 1-D buffer per dtype in :attr:`groups`. Works on concrete and traced leaves.

        Raises:
            ValueError: ``tree`` does not have this layout.
        """
        leaves, treedef = jax.tree.flatten(tree)
        shapes = tuple(np.shape(leaf) for leaf in leaves)
        if treedef != self.treedef or shapes != self.shapes:
            raise ValueError(f"pytree does not match the layout: {treedef} {shapes}, expected {self.treedef} {self.shapes}")
        buffers = []
        for group in self.groups:
            parts = [jnp.ravel(jnp.asarray(leaf, group)) for leaf, d in zip(leaves, self.dtypes) if d == group]
            buffers.append(parts[0] if len(parts) == 1 else jnp.concatenate(parts))
        return tuple(buffers)

    def unpack(self, buffers) -> Any:
        """The pytree from the buffers of :meth:`pack`, or from longer ones that start with them:
        JAX arrays inside ``jax.jit``; NumPy views of NumPy buffers, with no dispatch."""
        leaves = [
            buffers[self.groups.index(dtype)][start : start + math.prod(shape)].reshape(shape)
            for shape, dtype, start in zip(self.shapes, self.dtypes, self.offsets)
        ]
        return jax.tree.unflatten(self.treedef, leaves)
