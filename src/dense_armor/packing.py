"""Flat buffers for a pytree: the cheapest way to call a jitted function from a Python loop.

Every array a jitted call takes or returns costs dispatch time (argument parsing, a device
buffer, a Python object), so a learner's step called with its 17-29 leaves spends more on
passing them than on its arithmetic (``docs/design.md``, "Dispatch and other global
settings"). A :class:`Layout` records a pytree's structure, shapes and dtypes and packs its
leaves into one 1-D buffer per storage dtype (``pack``); ``unpack`` is slices, reshapes and
casts, which XLA folds into the kernels that read them; ``pack`` joins the leaves with
:func:`dense_armor.compiler.join`, fused with their computation while the join stays a chain
of selects. A leaf that would make its buffer's join a concatenate (more than
:data:`~dense_armor.compiler.JOIN_SELECTS` selects, the largest leaves first) is a buffer of
its own instead: a concatenate copies every leaf, by a kernel each, where a step given its
buffers to write over (donated) updates a leaf of its own in place. Values are stored exactly,
so ``unpack(pack(t))`` is ``t`` bit for bit: a leaf keeps its dtype, except that int8/16/32,
uint8/16/32 and bool leaves ride in a float64 buffer when the tree has one (float64 holds every
such value exactly), which saves an array a call. A layout is hashable, so it can be a static
argument of ``jax.jit``.

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

from dense_armor.compiler import JOIN_SELECTS, join

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
        groups: the joined buffers' dtypes, in order of first appearance among their leaves.
        offsets: each joined leaf's first element in the buffer of its storage dtype (leaf
            order; -1 for a leaf of its own).
        sizes: each joined buffer's length.
        alone: the leaves (their indices, in order) that are buffers of their own, after the
            joined ones.
    """

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    stored: tuple[str, ...]
    groups: tuple[str, ...]
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    alone: tuple[int, ...] = ()

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
        sizes = [math.prod(shape) for shape in shapes]
        alone = set()
        for group in dict.fromkeys(stored):  # a join of more than JOIN_SELECTS selects loses its largest leaf
            joined = sorted((k for k, s in enumerate(stored) if s == group), key=lambda k: (-sizes[k], k))
            while len(joined) > 1 and len(joined) * sum(sizes[k] for k in joined) > JOIN_SELECTS:
                alone.add(joined.pop(0))
        groups = tuple(dict.fromkeys(s for k, s in enumerate(stored) if k not in alone))
        fill = dict.fromkeys(groups, 0)
        offsets = []
        for k, dtype in enumerate(stored):
            offsets.append(-1 if k in alone else fill[dtype])
            fill[dtype] += 0 if k in alone else sizes[k]
        return cls(treedef, shapes, dtypes, stored, groups, tuple(offsets), tuple(fill.values()), tuple(sorted(alone)))

    def pack(self, tree) -> tuple[jax.Array, ...]:
        """One 1-D buffer per dtype in :attr:`groups`, then each leaf of :attr:`alone` as it is.
        Works on concrete and traced leaves.

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
                for leaf, dtype, storage, start in zip(leaves, self.dtypes, self.stored, self.offsets)
                if storage == group and start >= 0
            ]
            buffers.append(join(parts))
        return tuple(buffers) + tuple(jnp.asarray(leaves[k], self.dtypes[k]) for k in self.alone)

    def unpack(self, buffers) -> Any:
        """The pytree from the buffers of :meth:`pack`, or from longer joined ones that start
        with them: JAX arrays inside ``jax.jit``; NumPy arrays (views where no cast is needed)
        from NumPy buffers, with no dispatch."""
        own = dict(zip(self.alone, buffers[len(self.groups) :]))
        leaves = []
        for k, (shape, dtype, storage, start) in enumerate(zip(self.shapes, self.dtypes, self.stored, self.offsets)):
            if k in own:
                leaves.append(own[k])
                continue
            leaf = buffers[self.groups.index(storage)][start : start + math.prod(shape)].reshape(shape)
            leaves.append(leaf if dtype == storage else leaf.astype(dtype))
        return jax.tree.unflatten(self.treedef, leaves)
