"""Walks over the static kinematic tree: a per-body function in, per-body results out.

An algorithm states its recursion per body (Featherstone's ``for i = 1 to N`` and ``for i = N
to 1``) and a walk runs it over the tree. The walk, chosen once per model by :func:`walk`, is
the one place that decides how a tree pass compiles:

* :class:`Unrolled` (trees of up to :data:`UNROLLED_BODIES` bodies): a Python loop over the
  bodies, each quantity a tuple of 0-d arrays (:mod:`dense_armor.spatial`), so that a whole pass
  traces to straight-line code that XLA fuses into one kernel, and zeros known at trace time
  (a body at rest, a joint axis along z) trace no operation. Fusion copies an ancestor's
  expressions into each descendant's, so its cost grows faster than the depth; past about 12
  bodies in a chain it explodes.
* :class:`Levels` (larger trees): a ``lax.scan`` over the depth levels of the tree, each
  quantity a lane over the bodies of one level (a chain has one body a level). The cost is
  linear in the depth and the compiled program does not grow with it.

Values are nested tuples (the spatial algebra's vectors, pairs, :class:`typing.NamedTuple`)
whose leaves are per-body scalars or arrays (:meth:`Levels.arrays`): for :class:`Unrolled` a
list over the bodies, for :class:`Levels` arrays over the bodies read inside the loop, with a
leading axis over a level's lanes. Algorithms only pass them between the methods below. A
static per-body flag (a joint's kind) is a Python ``bool`` for :class:`Unrolled` and a lane for
:class:`Levels`; :func:`choose` selects on either.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor.compiler import stack
from dense_armor.spatial import ZERO

#: The largest tree that :func:`walk` unrolls.
UNROLLED_BODIES = 12


def walk(parents) -> Unrolled | Levels:
    """The walk for a tree given by its parent indices (``-1`` for the base)."""
    return Unrolled(parents) if len(parents) <= UNROLLED_BODIES else Levels(parents)


def choose(flag, if_true, if_false):
    """``if_true`` where ``flag``, else ``if_false``, leaf by leaf: a Python choice for a static
    flag, ``jnp.where`` for a lane."""
    if isinstance(flag, (bool, np.bool_)):
        return if_true if flag else if_false

    def where(a, b):
        if a is ZERO and b is ZERO:
            return ZERO
        return jnp.where(flag, 0.0 if a is ZERO else a, 0.0 if b is ZERO else b)

    return jax.tree.map(where, if_true, if_false)


def add(a, b):
    """The leafwise sum of two values of one structure (spatial vectors, tuples of them)."""
    return jax.tree.map(lambda x, y: x + y, a, b)


class Unrolled:
    """The walk as a Python loop over the bodies, unrolled into the traced program."""

    def __init__(self, parents):
        self.parents = tuple(int(p) for p in parents)
        self.n = len(self.parents)

    def split(self, x, flag: bool = False) -> list:
        """Per-body values of an array ``x`` (n, ...): body ``i``'s entries as nested tuples of
        0-d arrays, each sliced straight from ``x`` (what fuses best). ``None`` is zero
        (:data:`~dense_armor.spatial.ZERO`); with ``flag``, ``x`` is a static NumPy array and
        its entries Python values."""
        if x is None:
            return [ZERO] * self.n
        if flag:
            return [x[i].item() for i in range(self.n)]
        return [scalars(x, (i,)) for i in range(self.n)]

    def map(self, fn: Callable, *values) -> list:
        """``fn`` applied to each body's values (no tree dependence)."""
        return [fn(*args) for args in zip(*values)]

    def forward(self, fn: Callable, base, *values) -> list:
        """Base to tips: body ``i``'s result is ``fn(result of its parent, *its values)``, the
        parent of a body on the base being ``base``."""
        out = []
        for i, args in enumerate(zip(*values)):
            parent = self.parents[i]
            out.append(fn(base if parent < 0 else out[parent], *args))
        return out

    def backward(self, fn: Callable, zero, *values) -> list:
        """Tips to base: ``result, up = fn(sum of its children's ups, *its values)`` for body
        ``i`` (``zero``, of the structure of ``up``, for a leaf); returns the results."""
        total = [zero] * self.n
        out = [None] * self.n
        for i in reversed(range(self.n)):
            out[i], up = fn(total[i], *(v[i] for v in values))
            if self.parents[i] >= 0:
                total[self.parents[i]] = add(total[self.parents[i]], up)
        return out

    def body(self, values, i: int):
        """Body ``i``'s value."""
        return values[i]

    def array(self, values) -> jax.Array:
        """Per-body scalars as one (n,) array, or tuples of k scalars as (n, k)."""
        return stack([stack(v) if isinstance(v, tuple) else v for v in values])


class Levels:
    """The walk as a ``lax.scan`` over the tree's depth levels, each a lane over its bodies.

    Per-body values are arrays over the bodies (a row each) and a function of rows giving the
    values there. A pass reads its inputs level by level from one level-major array, a body's
    parent from the level before (a gather within a level's lanes) and its children's sum as a
    masked sum over the level after, and writes nothing but the scan's outputs, which one
    gather turns back into rows per body.
    """

    def __init__(self, parents):
        parents = np.asarray(parents)
        self.n = n = len(parents)
        depth = np.zeros(n, int)
        for i, p in enumerate(parents):
            depth[i] = 0 if p < 0 else depth[p] + 1
        levels = [np.flatnonzero(depth == d) for d in range(depth.max() + 1)]
        width = max(len(level) for level in levels)
        position = np.zeros(n, int)  # of each body in its level
        for level in levels:
            position[level] = np.arange(len(level))
        # per level and lane (padding lanes repeat body 0, and have no parent)
        self.bodies = np.zeros((len(levels), width), int)
        self.parent = np.full((len(levels), width), -1)  # the parent's lane in the level before
        for d, level in enumerate(levels):
            self.bodies[d, : len(level)] = level
            if d:
                self.parent[d, : len(level)] = position[parents[level]]
        self.slot = depth * width + position  # each body's row among the levels' lanes

    def split(self, x, flag: bool = False):
        """Per-body values of an array ``x`` (n, ...): nested tuples over its trailing axes of
        lanes. ``None`` is zero; a static ``flag`` array becomes a lane too."""
        return ZERO if x is None else _Lazy((jnp.asarray(x),), _lanes)

    def arrays(self, x):
        """Per-body values of an array ``x`` (n, ...): body ``i``'s ``x[i]``, kept an array
        (with a leading axis over the lanes of a level)."""
        return _Lazy((jnp.asarray(x),), lambda rows: rows)

    def map(self, fn: Callable, *values):
        """``fn`` applied to each body's values: once, to the lanes of all bodies."""
        rows, decode = _encode(values)
        value = fn(*decode(rows))
        packing = _Packing.of(value)
        return _Lazy((packing.pack(value),), packing.unpack)

    def forward(self, fn: Callable, base, *values):
        """Base to tips, as :meth:`Unrolled.forward`; ``base`` is broadcast to every lane."""
        rows, decode = _encode(values)
        inputs = rows[self.bodies]  # (levels, width, k)
        width = self.bodies.shape[1]
        base = jax.tree.map(lambda x: x if x is ZERO else jnp.broadcast_to(x, (width, *jnp.shape(x))), base)
        first = fn(base, *decode(inputs[0]))
        packing = _Packing.of(first)

        def level(previous, x):
            inputs, parent = x
            up = previous.at[jnp.maximum(parent, 0)].get(mode="promise_in_bounds")
            value = packing.pack(fn(packing.unpack(up), *decode(inputs)))
            return value, value

        first = packing.pack(first)
        _, rest = jax.lax.scan(level, first, (inputs[1:], self.parent[1:]))
        return self._results(jnp.concatenate([first[None], rest]), packing)

    def backward(self, fn: Callable, zero, *values):
        """Tips to base, as :meth:`Unrolled.backward`."""
        rows, decode = _encode(values)
        inputs = rows[self.bodies[::-1]]
        width = self.bodies.shape[1]
        zeros = jax.tree.map(lambda z: jnp.zeros((width, *jnp.shape(0.0 if z is ZERO else z)), rows.dtype), zero)
        result, up = fn(zeros, *decode(inputs[0]))
        packing, up_packing = _Packing.of(result), _Packing.of(up)
        lane = np.arange(width)

        def level(below, x):
            inputs, children_parent = x
            # each lane's children: the lanes of the level below whose parent it is
            total = jnp.sum(jnp.where((children_parent[None, :] == lane[:, None])[:, :, None], below[None], 0.0), axis=1)
            result, up = fn(up_packing.unpack(total), *decode(inputs))
            return up_packing.pack(up), packing.pack(result)

        _, rest = jax.lax.scan(level, up_packing.pack(up), (inputs[1:], self.parent[::-1][:-1]))
        return self._results(jnp.concatenate([packing.pack(result)[None], rest])[::-1], packing)

    def _results(self, out, packing):
        """Per-body values from a pass's outputs (levels, width, k)."""
        return _Lazy((out.reshape(-1, out.shape[-1])[self.slot],), packing.unpack)

    def body(self, values, i: int):
        """Body ``i``'s value."""
        rows, decode = _encode((values,))
        return jax.tree.map(lambda x: x if x is ZERO else x[0], decode(rows[np.array([i])])[0])

    def array(self, values) -> jax.Array:
        """Per-body scalars as one (n,) array, or tuples of k scalars as (n, k)."""
        rows, decode = _encode((values,))
        value = decode(rows)[0]
        return jnp.stack(value, -1) if isinstance(value, tuple) else value


class _Lazy(NamedTuple):
    """Per-body values of :class:`Levels`: arrays over the bodies (sources), and the function
    of their rows that gives the values at those bodies."""

    sources: tuple
    fn: Callable


def _encode(values):
    """The sources of per-body values as one array (n, k), and a function of rows of it (any
    leading axes) giving the values there, as lanes."""
    sources = [s for v in values if isinstance(v, _Lazy) for s in v.sources]
    if not sources:
        return jnp.zeros((1, 0)), lambda rows: list(values)
    dtype = jnp.result_type(*(s for s in sources if jnp.issubdtype(s.dtype, jnp.floating)))
    flat = [s.reshape(len(s), -1).astype(dtype) for s in sources]
    bounds = np.cumsum([0, *(x.shape[1] for x in flat)])

    def decode(rows):
        read = iter(
            (rows[..., a:b] > 0.5 if s.dtype == bool else rows[..., a:b]).reshape(*rows.shape[:-1], *s.shape[1:])
            for s, a, b in zip(sources, bounds[:-1], bounds[1:])
        )
        return [v.fn(*(next(read) for _ in v.sources)) if isinstance(v, _Lazy) else v for v in values]

    return jnp.concatenate(flat, 1), decode


def _lanes(x):
    """An array (W, ...) as nested tuples over its trailing axes of (W,) lanes."""
    return x if x.ndim == 1 else tuple(_lanes(x[:, k]) for k in range(x.shape[1]))


class _Packing(NamedTuple):
    """How a value of lanes (nested tuples of arrays with a leading lane axis) lies in one
    array (lanes, k): its leaves flattened, concatenated in groups of at most 8 (XLA:CPU fuses
    a concatenate of at most 8 operands into the computation of its operands), the groups
    padded to one width and stacked along another axis (which XLA does not merge with them)."""

    structure: Any
    shapes: tuple  # each leaf's trailing shape

    @staticmethod
    def of(value) -> _Packing:
        leaves, structure = jax.tree.flatten(value)
        return _Packing(structure, tuple(() if x is ZERO else jnp.shape(x)[1:] for x in leaves))

    def _layout(self):
        sizes = [int(np.prod(s)) for s in self.shapes]
        groups = [list(range(g, min(g + 8, len(sizes)))) for g in range(0, len(sizes), 8)]
        width = max(sum(sizes[i] for i in group) for group in groups)
        start = {}
        for g, group in enumerate(groups):
            offset = g * width
            for i in group:
                start[i] = offset
                offset += sizes[i]
        return groups, width, [(start[i], start[i] + n) for i, n in enumerate(sizes)]

    def pack(self, value) -> jax.Array:
        leaves = jax.tree.leaves(value)
        like = next(x for x in leaves if x is not ZERO)
        lanes = like.shape[0]
        flat = [jnp.zeros((lanes, 1), like.dtype) if x is ZERO else jnp.broadcast_to(x, (lanes, *s)).reshape(lanes, -1)
                for x, s in zip(leaves, self.shapes)]
        groups, width, _ = self._layout()
        rows = [jnp.concatenate([flat[i] for i in group], -1) for group in groups]
        rows = [jnp.pad(r, ((0, 0), (0, width - r.shape[-1]))) for r in rows]
        return jnp.stack(rows, -2).reshape(lanes, -1)

    def unpack(self, rows):
        _, _, spans = self._layout()
        return self.structure.unflatten([rows[..., a:b].reshape(*rows.shape[:-1], *s) for (a, b), s in zip(spans, self.shapes)])


def scalars(x, prefix: tuple = ()):
    """``x[prefix]`` as nested tuples over the remaining axes, each element sliced from ``x``."""
    if len(prefix) == x.ndim:
        return x[prefix]
    return tuple(scalars(x, (*prefix, k)) for k in range(x.shape[len(prefix)]))
