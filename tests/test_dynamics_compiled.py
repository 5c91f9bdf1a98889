"""The compiled shape of the dynamics on Panda: a guard against fusion cliffs, without timing.

These count what one jaxlib version's XLA emits, so they are benchmarks of compilation rather
than tests of behaviour: they run under the ``perf`` marker (``python -m pytest -m perf``),
outside the default run and CI, except the check that a structure compiles once.

XLA:CPU's fusion decisions decide the speed of these functions far more than their arithmetic
(``docs/benchmarks.md``): a concatenate of more than 8 operands, or a scalar shared by more
than 15 outputs, splits one kernel into dozens that recompute each other's work, and more than
8 independent kernels are dispatched to a thread pool at microseconds each. These tests count
the kernels (fusions) and the multiplications in the optimised HLO, with bounds at or above the
current figures (rnea 6 kernels, crba 9) and below a cliff (rnea once compiled to 9 kernels
recomputing 12.5k multiplications, crba to 138), and the kernels in the loop of a ``lax.scan``
(rnea 7, crba 9; 11-13 when XLA sliced the model's leaf inside the loop).
"""

from __future__ import annotations

import re

import chex
import hlo
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from urdf_factory import example_robot_urdf

from dense_armor.dynamics import crba, generalized_gravity, joint_torque_regressor, nonlinear_effects, rnea
from dense_armor.urdf import parse_urdf

PANDA = "panda_description/urdf/panda.urdf"



@pytest.fixture(scope="module")
def panda():
    model = parse_urdf(example_robot_urdf(PANDA))
    q, qd, qdd = np.random.default_rng(0).uniform(-1, 1, (3, model.n))
    return model, q, qd, qdd


def compiled_counts(fn, *args) -> tuple[int, int]:
    """(kernels, multiplications) of the optimised HLO: fusions and library calls at the top
    level, multiply instructions anywhere."""
    text = fn.lower(*args).compile().as_text()
    kernels = hlo.count(hlo.entry(text), "fusion", "custom-call", "dot")
    multiplies = len(re.findall(r" multiply\(", text))
    return kernels, multiplies


@pytest.mark.perf
@pytest.mark.parametrize(
    "fn, nargs, max_kernels, max_multiplies",
    [
        # at most 8 kernels: XLA:CPU then runs them in order on the calling thread; crba's
        # ninth is the last stage of the placements' composition (docs/design.md, "Tree walks")
        (rnea, 3, 8, 3000),
        (nonlinear_effects, 2, 8, 3000),
        (generalized_gravity, 1, 8, 2000),
        (crba, 1, 9, 1000),
    ],
)
def test_no_fusion_cliff(panda, fn, nargs, max_kernels, max_multiplies):
    model, *states = panda
    kernels, multiplies = compiled_counts(fn, model, *states[:nargs])
    assert kernels <= max_kernels, f"{fn.__name__}: {kernels} kernels > {max_kernels}"
    assert multiplies <= max_multiplies, f"{fn.__name__}: {multiplies} multiplies > {max_multiplies} (recomputation?)"


@pytest.mark.perf
@pytest.mark.parametrize("fn, nargs, max_kernels", [(rnea, 3, 8), (crba, 1, 9)])
def test_scan_reads_the_model_outside_its_loop(panda, fn, nargs, max_kernels):
    """What depends only on the model (its joint frames, read by one gather) is computed once,
    before the loop: the loop runs the state's kernels and the loop's own (counter and copy),
    rnea 7 in all and crba 9 (11-13 and more when the model's arrays were read in the loop)."""
    model, *states = panda
    xs = tuple(np.tile(x, (16, 1)) for x in states[:nargs])
    run = jax.jit(lambda m, *xs: jax.lax.scan(lambda c, x: (c, fn(m, *x)), 0.0, xs)[1])
    text = run.lower(model, *xs).compile().as_text()
    loop = hlo.loop_body(text)
    kernels = hlo.count(loop, "fusion", "custom-call", "dot", "copy", "gather")
    assert kernels <= max_kernels, loop


def kernel_chain(fn, *args) -> list[tuple[str, set[str]]]:
    """The top-level kernels of the optimised HLO in execution order, each with the kernels whose
    outputs it reads (through bitcasts and tuples)."""
    text = fn.lower(*args).compile().as_text()
    alias, kernels = {}, []
    for name, op, operands in re.findall(r"^\s*(?:ROOT )?%(\S+) = .*? ([\w-]+)\((.*?)\)(?:, |$)", hlo.entry(text), re.M):
        sources = {alias.get(x, x) for x in re.findall(r"%([\w.\-]+)", operands)}
        if op in ("bitcast", "get-tuple-element", "tuple", "opt-barrier"):
            alias[name] = next(iter(sources), name) if len(sources) == 1 else name
        elif op in ("fusion", "custom-call", "dot", "copy", "gather", "concatenate"):
            kernels.append((name, sources))
    return kernels


@pytest.mark.perf
def test_regressor_is_a_chain_of_kernels(panda):
    """Every kernel of the regressor reads the output of the kernel before it: XLA:CPU then runs
    them in order on the calling thread, however many there are (37 independent kernels went to
    its thread pool: 5-6x the dispatch floor for one call, against 2.2-2.4x as a chain)."""
    model, q, qd, qdd = panda
    chain = kernel_chain(joint_torque_regressor, model, q, qd, qdd)
    assert len(chain) <= 16, [name for name, _ in chain]  # 13 now
    for (before, _), (name, sources) in zip(chain, chain[1:]):
        assert before in sources, f"{name} does not read {before}: {chain}"


@pytest.mark.slow
@pytest.mark.parametrize("fn, nargs", [(rnea, 3), (crba, 1)])
def test_compiles_once_per_structure(panda, fn, nargs):
    """New values and a re-parsed model reuse one trace."""
    model, *states = panda
    chex.clear_trace_counter()
    traced = jax.jit(chex.assert_max_traces(n=1)(lambda m, *x: fn(m, *x)))
    again = parse_urdf(example_robot_urdf(PANDA))
    for k, m in enumerate((model, again, model)):
        traced(m, *(jnp.asarray(x) + 0.1 * k for x in states[:nargs]))
    assert traced._cache_size() == 1
