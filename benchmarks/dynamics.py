"""Rigid-body dynamics speed: dense_armor against Pinocchio (C++ through its Python bindings).

For the 2-link arm of the design document, UR5 and Panda (7 joints, fingers locked; and with
its two fingers, 9 joints), float64:

* one call from Python (median over many calls) of ``rnea``, ``crba``, ``aba``,
  ``generalized_gravity`` and ``joint_torque_regressor``, next to Pinocchio's same functions,
  the dispatch floor of an empty jitted function (``jax.jit(lambda x: x + 1)``) and the floor of
  a jitted function that takes the model and returns ``q``;
* the cost per state inside ``jax.lax.scan`` over 10^4 states (``rnea``, ``crba``, ``aba``);
* one ``vmap`` call over 1024 states of ``(crba, nonlinear_effects, generalized_gravity)``,
  next to Pinocchio looping over the same states;
* compile time of each function (``jit(...).lower(...).compile()``, a fresh process, so no
  compilation cache);
* the cost against the number of bodies: serial chains of 8, 16, 32 and 64 random revolute
  joints (``common.serial_chain``), one call of ``rnea``, ``crba`` and ``aba`` and its compile
  time, beside Pinocchio's on the same chains;
* one call of each method of the design document's ``RigidBodyModel`` (NumPy in and out), in a
  process with JAX's defaults, beside Pinocchio's same function.

Single calls are measured twice, in two child processes: with JAX's asynchronous CPU dispatch
(the default) and without (``jax_cpu_enable_async_dispatch = False``). The model is put on the
device once (``jax.device_put``); a model with a NumPy leaf, as ``parse_urdf`` returns it, is
copied to the device on every call. Per robot, the floors, the four functions and Pinocchio's
four are timed in interleaved rounds (``common.interleaved_us``), so their ratios hold while the
machine's speed drifts.

Run: ``PYTHONPATH=src python benchmarks/dynamics.py`` (about 4 minutes on 2 cores); it prints
the tables and replaces the "Rigid-body dynamics" section of ``docs/benchmarks.md``.
``--robots Panda`` restricts the robots, ``--no-docs`` leaves the docs alone.

``--against [REVISION]`` measures instead this checkout and an earlier git revision (by default
``common.ARCHITECTURE_MAIN``) side by side (the revision's ``src`` exported to a temporary
folder, each tree in its own fresh processes, alternated): single calls against the dispatch
floor, throughput against the revision's, in a section of its own (about 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ARCHITECTURE_MAIN, alternated, best, example_robot_urdf, in_child, interleaved_us, median_us, pinocchio_model,  # noqa: E402
                    robots, serial_chain, table, write_section)

HEADING = "Rigid-body dynamics"
AGAINST_HEADING = "Rigid-body dynamics against an earlier main"
NOTES = """\
dense_armor against Pinocchio 4.1 (C++ through its Python bindings), float64: the design
document's 2-link arm, UR5, Panda with its fingers locked (7 joints) and with them (9 joints).

How to read it. "x floor" divides by the dispatch floor of an empty jitted function; a function
that takes the model pays about 1.1x that before computing anything (the model's arrays travel
as one leaf; as eleven they cost 1.7x), and each further array about 0.08x. The model is put on
the device once: with the NumPy leaf `parse_urdf` returns, every call copies it again.
A model closed over as a constant costs the same in a scan as one passed as an argument
(Panda, 2026-11-30: `rnea` 0.44-0.45 us a state either way, `crba` 1.69-1.73): `rnea` and `crba`
read it through one gather, which XLA folds whole. (When `rnea` read each array, XLA folded the
constants into the graph and split it into about 60 kernels, 4 us a state.)
Medians on a shared 2-core machine; between runs the sub-microsecond and single-call figures
move by up to 2x with the load of other processes; single calls are timed in interleaved rounds
(the floors, the four functions and Pinocchio's, in turn), so their ratios hold within a run.
With asynchronous dispatch (JAX's default) a program that XLA:CPU's cost model does not find
trivial runs on a thread of XLA's, and a caller that blocks on its result (`block_until_ready`, as
the async column does) is put to sleep and woken: the async column's larger figures. The design
document's `RigidBodyModel` (its own table) polls for the result instead (`dense_armor.host.fetch`;
until 2026-12-07 it blocked: Panda's `forward_dynamics` took 61-63 us a call against 27-32,
`docs/design.md`, "A step from a Python loop").

What the code does (see `docs/design.md`, "Tree walks"). XLA:CPU's fusion decisions matter
more than the arithmetic: on trees of up to 12 bodies `rnea`, `nonlinear_effects` and
`generalized_gravity` are straight-line scalar code in joint frames (each body's axes turned so
that its joint axis is z; derived from the model by one gather and one kernel, which XLA hoists
out of a scan), 6 kernels in all for `rnea`, and `aba` a Cholesky solve with `crba`; larger trees
run the RNEA and the articulated-body algorithm as a `lax.scan` over the tree's depth levels;
`crba` and the kinematics work in world coordinates on the joint frames' placements, composed
down the tree by pointer jumping over rows of bodies (the regressor's composition; `aba` on
larger trees reads them too), with masked sums over the tree for composite inertias: 9 kernels
for `crba` on UR5 and Panda (up to 8 XLA:CPU runs in order on the calling thread; interleaved
against the lanes it replaced, `crba` in a scan measured 1.00-1.16x, `docs/design.md`). The regressor
is a chain of 13 kernels on Panda, each reading the one before, which XLA:CPU also runs on the
calling thread (its 37 independent kernels went to the thread pool, 5.7-6.1x the floor). Its call
itself, the model and three arrays in and a 3.9 kB result out, costs about 1.4x the floor.

Targets (issue 2): one jitted call <= 2x the floor; in `lax.scan`, Panda `rnea` <= 0.5 us and
`crba` <= 2 us a state; the 1024-state `vmap` of the three <= 5 ms; compile <= 5 s per function
(Panda). Chains (the last table; issue 14): at 64 joints each of `rnea`, `crba` and `aba` at most
16x the 8-joint call and compiled in at most 30 s. Before the level walk the 16-joint chain's
`rnea` took 218 ms a call and a 32-joint chain did not finish compiling in 150 s."""
SCAN_STATES = 10_000
BATCH = 1024
SINGLE = ("rnea", "crba", "aba", "generalized_gravity", "joint_torque_regressor")
PIN_NAMES = {
    "rnea": "rnea",
    "crba": "crba",
    "aba": "aba",
    "generalized_gravity": "computeGeneralizedGravity",
    "joint_torque_regressor": "computeJointTorqueRegressor",
    "nonlinear_effects": "nonLinearEffects",
}
SCANNED = ("rnea", "crba", "aba")


def all_robots() -> dict[str, str]:
    out = robots()
    out["Panda + fingers"] = example_robot_urdf("panda_description/urdf/panda.urdf").read_text()
    return out


def _states(n: int, count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, (count, n)) for _ in range(3))


def measure(robot_names: list[str], async_dispatch: bool, full: bool) -> dict:
    """One child process: every figure for the robots, with the given dispatch mode."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", async_dispatch)
    import jax.numpy as jnp
    import pinocchio as pin

    from dense_armor import dynamics
    from dense_armor.urdf import parse_urdf

    results = {}
    floor = jax.jit(lambda x: x + 1)
    for name in robot_names:
        xml = all_robots()[name]
        model = jax.device_put(parse_urdf(xml))
        n = model.n
        q, qd, qdd = (jnp.asarray(x[0]) for x in _states(n, 1))
        args = {
            "rnea": (model, q, qd, qdd),
            "crba": (model, q),
            "aba": (model, q, qd, qdd),
            "generalized_gravity": (model, q),
            "joint_torque_regressor": (model, q, qd, qdd),
        }
        r = {"n": n}
        model_floor = jax.jit(lambda model, q: q)
        calls = {
            "floor": lambda: jax.block_until_ready(floor(q)),
            "model_floor": lambda: jax.block_until_ready(model_floor(model, q)),
        }
        for fn in SINGLE:
            f = getattr(dynamics, fn)
            if full:
                start = time.perf_counter()
                f.lower(*args[fn]).compile()
                r[f"compile_{fn}"] = time.perf_counter() - start
            calls[f"call_{fn}"] = lambda f=f, a=args[fn]: jax.block_until_ready(f(*a))
        if full:  # Pinocchio's same calls, in the same interleaved rounds
            pm, pdata, pin_args = _pinocchio(xml, n, q, qd, qdd)
            for fn in SINGLE:
                f = getattr(pin, PIN_NAMES[fn])
                calls[f"pin_{fn}"] = lambda f=f, a=pin_args[fn]: f(pm, pdata, *a)
        r |= interleaved_us(calls, rounds=15, per_round=100)
        if not full:
            results[name] = r
            continue
        for fn, extra in (("nonlinear_effects", (model, q, qd)), ("forward_kinematics", (model, q))):
            start = time.perf_counter()
            getattr(dynamics, fn).lower(*extra).compile()
            r[f"compile_{fn}"] = time.perf_counter() - start
        # per state inside lax.scan
        xs = tuple(jnp.asarray(x) for x in _states(n, SCAN_STATES, seed=1))
        scans = {
            "rnea": jax.jit(lambda m, xs: jax.lax.scan(lambda c, x: (c, dynamics.rnea(m, *x)), 0, xs)[1]),
            "crba": jax.jit(lambda m, xs: jax.lax.scan(lambda c, x: (c, dynamics.crba(m, x[0])), 0, xs)[1]),
            "aba": jax.jit(lambda m, xs: jax.lax.scan(lambda c, x: (c, dynamics.aba(m, *x)), 0, xs)[1]),
        }
        for fn, g in scans.items():
            start = time.perf_counter()
            jax.block_until_ready(g(model, xs))
            r[f"compile_scan_{fn}"] = time.perf_counter() - start
            times = []
            for _ in range(5):
                start = time.perf_counter()
                jax.block_until_ready(g(model, xs))
                times.append(time.perf_counter() - start)
            r[f"scan_{fn}"] = float(np.median(times)) / SCAN_STATES * 1e6
        # one vmap call over a batch of states
        batch = tuple(jnp.asarray(x) for x in _states(n, BATCH, seed=2))

        def three(m, q, qd):
            return dynamics.crba(m, q), dynamics.nonlinear_effects(m, q, qd), dynamics.generalized_gravity(m, q)

        vm = jax.jit(jax.vmap(three, in_axes=(None, 0, 0)))
        start = time.perf_counter()
        jax.block_until_ready(vm(model, batch[0], batch[1]))
        r["compile_vmap"] = time.perf_counter() - start
        r["vmap"] = median_us(lambda: jax.block_until_ready(vm(model, batch[0], batch[1])), repeats=30, warmup=3)
        # Pinocchio looping over the same batch
        bq, bqd = (np.asarray(x) for x in batch[:2])

        def pin_batch():
            for k in range(BATCH):
                pin.crba(pm, pdata, bq[k])
                pin.nonLinearEffects(pm, pdata, bq[k], bqd[k])
                pin.computeGeneralizedGravity(pm, pdata, bq[k])

        r["pin_vmap"] = median_us(pin_batch, repeats=5, warmup=1)
        results[name] = r
    return results


#: The design document's RigidBodyModel methods: the functional function each calls, and its arguments.
METHODS = {
    "mass_matrix": ("crba", ("q",)),
    "bias_forces": ("nonlinear_effects", ("q", "qd")),
    "gravity_forces": ("generalized_gravity", ("q",)),
    "inverse_dynamics": ("rnea", ("q", "qd", "qdd")),
    "forward_dynamics": ("aba", ("q", "qd", "qdd")),
    "regressor": ("joint_torque_regressor", ("q", "qd", "qdd")),
}


def classes(robot_names: list[str]) -> dict:
    """One child process with JAX's defaults (asynchronous dispatch, 64-bit mode off: the class
    enters it for its own calls): one call of each :data:`METHODS` method of the design
    document's ``RigidBodyModel``, NumPy in and out, beside Pinocchio's same function and the
    dispatch floor, in interleaved rounds."""
    import jax
    import pinocchio as pin

    from dense_armor.dynamics.urdf_dynamics import RigidBodyModel

    results = {}
    floor = jax.jit(lambda x: x + 1)
    for name in robot_names:
        xml = all_robots()[name]
        model = RigidBodyModel(xml)
        state = dict(zip(("q", "qd", "qdd"), (x[0] for x in _states(model.n, 1))))
        pm, pdata, pin_args = _pinocchio(xml, model.n, *state.values())
        pin_args["nonlinear_effects"] = pin_args["rnea"][:2]
        x = jax.numpy.asarray(state["q"])
        calls = {"floor": lambda: jax.block_until_ready(floor(x))}
        for method, (fn, names) in METHODS.items():
            calls[method] = lambda f=getattr(model, method), a=[state[k] for k in names]: f(*a)
            calls[f"pin_{method}"] = lambda f=getattr(pin, PIN_NAMES[fn]), a=pin_args[fn]: f(pm, pdata, *a)
        results[name] = interleaved_us(calls, rounds=15, per_round=100)
    return results


def render_classes(r: dict) -> str:
    rows = [[name, f"`{method}` (`{fn}`)", fmt(x[f"pin_{method}"], 2), fmt(x[method]), fmt(x[method] / x[f"pin_{method}"], 1),
             fmt(x[method] / x["floor"], 2)]
            for name, x in r.items() for method, (fn, _) in METHODS.items()]
    return ("The design document's `RigidBodyModel` (NumPy in, float64 NumPy out), one call from Python with JAX's "
            "defaults (asynchronous dispatch; the class enters 64-bit mode for its own calls), median us, against "
            "the dispatch floor measured the same way:\n\n" + table(
                ["robot", "method (function)", "Pinocchio", "RigidBodyModel", "x Pinocchio", "x floor"], rows))


CHAINS = (8, 16, 32, 64)
SCALED = ("rnea", "crba", "aba")


def scaling(async_dispatch: bool) -> dict:
    """One child process: one call and the compile time of ``rnea``, ``crba`` and ``aba`` on
    serial chains, beside Pinocchio's same calls."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", async_dispatch)
    import jax.numpy as jnp
    import pinocchio as pin

    from dense_armor import dynamics
    from dense_armor.urdf import parse_urdf

    results = {}
    for n in CHAINS:
        xml = serial_chain(n)
        model = jax.device_put(parse_urdf(xml))
        q, qd, x = (jnp.asarray(a[0]) for a in _states(n, 1))
        args = {"rnea": (model, q, qd, x), "crba": (model, q), "aba": (model, q, qd, x)}
        pm, pdata, pin_args = _pinocchio(xml, n, q, qd, x)
        r, calls = {}, {}
        for fn in SCALED:
            f = getattr(dynamics, fn)
            start = time.perf_counter()
            compiled = f.lower(*args[fn]).compile()
            r[f"compile_{fn}"] = time.perf_counter() - start
            calls[fn] = lambda c=compiled, a=args[fn]: jax.block_until_ready(c(*a))
            calls[f"pin_{fn}"] = lambda f=getattr(pin, fn), a=pin_args[fn]: f(pm, pdata, *a)
        results[n] = r | interleaved_us(calls, rounds=10, per_round=100)
    return results


def render_scaling(r: dict) -> str:
    """The chains' table: each call, and its ratio to the 8-joint chain's."""
    rows, first = [], r[CHAINS[0]]
    for n, x in r.items():
        rows.append([str(n), *(f"{fmt(x[fn])} ({x[fn] / first[fn]:.1f}x)" for fn in SCALED),
                     *(f"{fmt(x[f'pin_{fn}'], 2)} ({x[f'pin_{fn}'] / first[f'pin_{fn}']:.1f}x)" for fn in SCALED),
                     *(fmt(x[f"compile_{fn}"], 2) for fn in SCALED)])
    return ("Serial chains of random revolute joints, one call from Python, median us (in brackets: "
            "against the 8-joint chain), synchronous dispatch, and compile time, s:\n\n" + table(
        ["joints", *(f"`{fn}`" for fn in SCALED), *(f"Pinocchio `{fn}`" for fn in SCALED), *(f"compile `{fn}`" for fn in SCALED)], rows))


def _pinocchio(xml: str, n: int, q, qd, qdd):
    """Pinocchio's model and data for ``xml``, and the arguments of its calls at one state."""
    pm = pinocchio_model(xml)
    if pm.nq != n:  # continuous joints: (cos, sin)
        raise ValueError(f"{pm.name}: nq {pm.nq} != n {n}")
    pq, pqd, pqdd = (np.asarray(x) for x in (q, qd, qdd))
    args = {"rnea": (pq, pqd, pqdd), "crba": (pq,), "generalized_gravity": (pq,), "joint_torque_regressor": (pq, pqd, pqdd),
            "aba": (pq, pqd, pqdd)}  # aba takes the last as torques
    return pm, pm.createData(), args


def child(robot_names: list[str], async_dispatch: bool, full: bool, env: dict | None = None) -> dict:
    """:func:`measure` in a fresh process (``env``: :func:`common.source_env` for another tree)."""
    options = ["--robots", *robot_names, "--async-dispatch", "on" if async_dispatch else "off"]
    return in_child(__file__, *options, *([] if full else ["--calls-only"]), env=env)


AGAINST_ROUNDS = 2


def against(revision: str, robot_names: list[str]) -> str:
    """Every figure of :func:`measure` for this checkout and for ``revision``, in fresh processes
    alternated over :data:`AGAINST_ROUNDS` rounds (each figure the best of its rounds, so that
    both trees meet the machine at its quietest), synchronous dispatch."""
    runs = alternated(lambda env: child(robot_names, async_dispatch=False, full=True, env=env), revision, AGAINST_ROUNDS)
    for run in (*runs["head"], *runs["base"]):
        for r in run.values():  # each call against the floor of its own round
            r |= {f"x_floor_{fn}": r[f"call_{fn}"] / r["floor"] for fn in SINGLE}
    return render_against(revision, best(runs["head"]), best(runs["base"]))


def render_against(revision: str, head: dict, base: dict) -> str:
    """This checkout against ``revision``: single calls against each one's dispatch floor,
    throughput against the revision's (the targets of the architecture issue)."""
    rows = []
    for name, h in head.items():
        b = base[name]
        for fn in SINGLE:
            ours, theirs = h[f"x_floor_{fn}"], b[f"x_floor_{fn}"]
            rows.append([name, f"`{fn}` one call, x floor", fmt(theirs, 2), fmt(ours, 2), "<= 2.5x the floor",
                         "yes" if ours <= 2.5 else "no"])
        for fn in SCANNED:
            ratio = h[f"scan_{fn}"] / b[f"scan_{fn}"]
            rows.append([name, f"`{fn}` in `lax.scan`, us a state", fmt(b[f"scan_{fn}"], 2), fmt(h[f"scan_{fn}"], 2),
                         f"{ratio:.2f}x of {revision}", "yes" if ratio <= 1.25 else "no"])
        ratio = h["vmap"] / b["vmap"]
        rows.append([name, "`vmap` of 1024 states of the three, ms", fmt(b["vmap"] / 1e3, 2), fmt(h["vmap"] / 1e3, 2),
                     f"{ratio:.2f}x of {revision}", "yes" if ratio <= 1.25 else "no"])
    which = (f" (`main` when the architecture issue was filed, 2026-11-30: unrolled scalar code for every algorithm, "
             "whose cost exploded past 12 joints in a chain)") if revision == ARCHITECTURE_MAIN else ""
    return (f"This checkout against `{revision}`{which}, each in fresh processes, alternated over {AGAINST_ROUNDS} "
            "rounds (each figure the best of its rounds), synchronous dispatch, float64. Targets (the architecture "
            "issue's): one call within 2.5x the dispatch floor, throughput within 1.25x of the earlier "
            "revision's.\n\n" + table(
                ["robot", "workload", revision, "this checkout", "target", "met"], rows))


def fmt(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f}" if x < 100 else f"{x:.0f}"


def render(sync: dict, asyn: dict) -> str:
    parts = []
    rows = []
    for name, r in sync.items():
        a = asyn[name]
        rows.append([f"{name} (n={r['n']})", "dispatch floor `jit(lambda x: x + 1)`", "", fmt(r["floor"]), fmt(a["floor"]), "", "1.0"])
        rows.append(["", "floor with the model `jit(lambda m, q: q)`", "", fmt(r["model_floor"]), fmt(a["model_floor"]), "",
                     fmt(r["model_floor"] / r["floor"], 2)])
        for fn in SINGLE:
            pin_us, ours = r[f"pin_{fn}"], r[f"call_{fn}"]
            rows.append(["", f"`{fn}`", fmt(pin_us, 2), fmt(ours), fmt(a[f"call_{fn}"]), fmt(ours / pin_us, 1),
                         fmt(ours / r["floor"], 2)])
    parts.append("One call from Python, median us (dense_armor without and with asynchronous dispatch; "
                 "ratios use the synchronous figure):\n\n" + table(
        ["robot", "function", "Pinocchio", "dense_armor (sync)", "dense_armor (async)", "x Pinocchio", "x floor"], rows))
    rows = []
    for name, r in sync.items():
        for fn in SCANNED:
            rows.append([name, f"`{fn}` per state in `lax.scan` over 10^4", fmt(r[f"pin_{fn}"], 2), fmt(r[f"scan_{fn}"], 2),
                         fmt(r[f"scan_{fn}"] / r[f"pin_{fn}"], 2)])
        rows.append([name, "1024 states of `(crba, nonlinear_effects, generalized_gravity)`, one `vmap` call",
                     fmt(r["pin_vmap"] / 1e3, 2) + " ms", fmt(r["vmap"] / 1e3, 2) + " ms", fmt(r["vmap"] / r["pin_vmap"], 2)])
    parts.append("Throughput, us per state (Pinocchio: one call from Python per state), synchronous dispatch:\n\n" + table(
        ["robot", "workload", "Pinocchio", "dense_armor", "x Pinocchio"], rows))
    fns = [*SINGLE, "nonlinear_effects", "forward_kinematics"]
    rows = [[name, *(fmt(r[f"compile_{fn}"], 2) for fn in fns), *(fmt(r[f"compile_scan_{fn}"], 2) for fn in SCANNED),
             fmt(r["compile_vmap"], 2)] for name, r in sync.items()]
    parts.append("Compile time, s (fresh process; the scan and vmap figures include one run):\n\n" + table(
        ["robot", *(f"`{fn}`" for fn in fns), *(f"scan `{fn}`" for fn in SCANNED), "vmap of three"], rows))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=list(all_robots()))
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--async-dispatch", choices=("on", "off"), default="off", help=argparse.SUPPRESS)
    parser.add_argument("--scaling", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--classes", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--against", metavar="REVISION", nargs="?", const=ARCHITECTURE_MAIN,
                        help="measure this checkout side by side with a git revision instead (default: the main of the "
                             "architecture issue; its own docs section)")
    args = parser.parse_args()
    if args.child:
        if args.classes:
            measured = classes(args.robots)
        elif args.scaling:
            measured = scaling(args.async_dispatch == "on")
        else:
            measured = measure(args.robots, args.async_dispatch == "on", not args.calls_only)
        print(json.dumps(measured))
        return
    start = time.perf_counter()
    if args.against:
        body = against(args.against, args.robots)
        print(body)
        print(f"\n({time.perf_counter() - start:.0f} s)")
        if not args.no_docs:
            command = f"PYTHONPATH=src python benchmarks/dynamics.py --against {args.against}"
            write_section(AGAINST_HEADING, body, command)
        return
    methods = in_child(__file__, "--classes", "--robots", *args.robots)
    sync = child(args.robots, async_dispatch=False, full=True)
    asyn = child(args.robots, async_dispatch=True, full=False)
    chains = {int(n): x for n, x in in_child(__file__, "--scaling", "--async-dispatch", "off").items()}
    body = render(sync, asyn) + "\n\n" + render_classes(methods) + "\n\n" + render_scaling(chains)
    print(body)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    if not args.no_docs:
        command = "PYTHONPATH=src python benchmarks/dynamics.py" + ("" if args.robots == list(all_robots()) else " --robots " + " ".join(args.robots))
        write_section(HEADING, NOTES + "\n\n" + body, command)


if __name__ == "__main__":
    main()
