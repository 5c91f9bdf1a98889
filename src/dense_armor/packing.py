"""Flat buffers for a pytree: the cheapest way to call a jitted function from a Python loop.

Every array a jitted call takes or returns costs dispatch time (argument parsing, a device
buffer, a Python object), so a learner's step called with its 17-29 leaves spends more on
passing them than on its arithmetic (``docs/design.md``, "Dispatch and other global
settings"). A :class:`Layout` records a pytree's structure, shapes and dtypes and packs its
leaves into one 1-D buffer per storage dtype (``pack``); ``unpack`` is slices, reshapes and
casts, which XLA folds into the kernels that read them; ``pack`` joins the leaves with
:func:`dense_armor.compiler.join` (for a small tree, fused with their computation). Values are
stored exactly, so ``unpack(pack(t))`` is ``t`` bit for bit: a leaf keeps its dtype, except
that int8/16/32, uint8/16/32 and bool leaves ride in a float64 buffer when the tree has one
(float64 holds every such value exactly), which saves an array a call. A layout is hashable,
so it can be a static argument of ``jax.jit``.

Keep a small robot's buffers at 512 bytes or less where you can: XLA:CPU runs a program's
kernels one after the other on the calling thread only when every buffer they touch is that
small (or when there are at most 8 kernels); otherwise it hands kernels to its thread pool.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor.compiler import join

__all__ = ["Layout"]

#: dtypes stored exactly in a float64 buffer.
_EXACT_IN_FLOAT64 = frozenset({"bool", "int8", "int16", "int32", "uint8", "uint16", "uint32"})


@dataclasses.dataclass(frozen=True)
class Layout:
    """Structure, shapes and dtypes of a pytree, and where each leaf sits in its buffer.

    Attributes:
        treedef: the pytree structure (static fields included).
        shapes: each leaf's shape, in leaf order.
        dtypes: each leaf's dtype name, in leaf order.
        stored: each leaf's storage dtype name (its own, or float64; see the module docstring).
        groups: the buffers' dtypes, in order of first appearance among the leaves.
        offsets: each leaf's first element in the buffer of its storage dtype (leaf order).
        sizes: each buffer's length.
    """

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    stored: tuple[str, ...]
    groups: tuple[str, ...]
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, tree) -> Layout:
        """The layout of ``tree`` (arrays or Python scalars as leaves)."""
        leaves, treedef = jax.tree.flatten(tree)
        shapes = tuple(np.shape(leaf) for leaf in leaves)
        # an array's own dtype (a float64 NumPy leaf stays float64 without x64, for the reader to
        # refuse, not to cast); a Python scalar's JAX's
        dtypes = tuple((leaf.dtype if hasattr(leaf, "dtype") else jnp.result_type(leaf)).name for leaf in leaves)
        merge = "float64" in dtypes
        stored = tuple("float64" if merge and d in _EXACT_IN_FLOAT64 else d for d in dtypes)
        groups = tuple(dict.fromkeys(stored))
        fill = dict.fromkeys(groups, 0)
        offsets = []
        for shape, dtype in zip(shapes, stored):
            offsets.append(fill[dtype])
            fill[dtype] += math.prod(shape)
        return cls(treedef, shapes, dtypes, stored, groups, tuple(offsets), tuple(fill.values()))

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
            parts = [
                jnp.ravel(jnp.asarray(leaf, dtype).astype(group))
                for leaf, dtype, storage in zip(leaves, self.dtypes, self.stored) if storage == group
            ]
            buffers.append(join(parts))
        return tuple(buffers)

    def unpack(self, buffers) -> Any:
        """The pytree from the buffers of :meth:`pack`, or from longer ones that start with them:
        JAX arrays inside ``jax.jit``; NumPy arrays (views where no cast is needed) from NumPy
        buffers, with no dispatch."""
        leaves = []
        for shape, dtype, storage, start in zip(self.shapes, self.dtypes, self.stored, self.offsets):
            leaf = buffers[self.groups.index(storage)][start : start + math.prod(shape)].reshape(shape)
            leaves.append(leaf if dtype == storage else leaf.astype(dtype))
        return jax.tree.unflatten(self.treedef, leaves)
