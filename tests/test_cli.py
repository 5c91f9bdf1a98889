"""The ``dense-armor`` command line: every command in-process through ``main([...])``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dense_armor
from dense_armor import attach_payload, parse_urdf
from dense_armor.cli import main
from dense_armor.dynamics import rnea
from dense_armor.robots import minimal_urdf, write_minimal_urdf

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"
T = 300  # samples in the test logs (one chunk shape for every replay: one compile)


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    """The two-link arm's URDF and a logged run of the same arm carrying 0.5 kg (noise-free)."""
    folder = tmp_path_factory.mktemp("logs")
    urdf = write_minimal_urdf(folder / "arm.urdf")
    model = parse_urdf(minimal_urdf())
    real = attach_payload(model, "link2", 0.5, com=(0.5, 0.0, 0.0))
    dt = 0.01
    t = np.arange(T) * dt
    w = np.array([[1.1, 1.7], [2.3, 0.9]])  # rad/s per (component, joint)
    q = 0.8 * np.sin(w[0] * t[:, None]) + 0.4 * np.cos(w[1] * t[:, None])
    qd = 0.8 * w[0] * np.cos(w[0] * t[:, None]) - 0.4 * w[1] * np.sin(w[1] * t[:, None])
    qdd = -0.8 * w[0] ** 2 * np.sin(w[0] * t[:, None]) - 0.4 * w[1] ** 2 * np.cos(w[1] * t[:, None])
    tau = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(real, q, qd, qdd))
    return {"folder": folder, "urdf": urdf, "model": model, "t": t, "q": q, "qd": qd, "qdd": qdd, "tau": tau}


def _write_csv(path, columns):
    names = list(columns)
    np.savetxt(path, np.column_stack([columns[k] for k in names]), delimiter=",", header=",".join(names), comments="")
    return path


def _columns(arm, acc=True, named=True, time=True):
    cols = {"t": arm["t"]} if time else {}
    for j, name in enumerate(arm["model"].joint_names):
        key = (lambda qty: f"{qty}_{name}") if named else (lambda qty: f"{qty}{j}")
        cols[key("q")] = arm["q"][:, j]
        cols[key("qd")] = arm["qd"][:, j]
        if acc:
            cols[key("qdd")] = arm["qdd"][:, j]
        cols[key("tau")] = arm["tau"][:, j]
    return cols


def _rmse_rows(out):
    """The replay table's 'all' column for the nominal model and the learner."""
    nominal = float(re.search(r"^nominal URDF\s+([\d.]+)", out, re.M).group(1))
    learner = float(re.search(r"^learner \(prequential\)\s+([\d.]+)", out, re.M).group(1))
    return nominal, learner


# ----------------------------------------------------------------------------- version and help


def test_version_from_a_subprocess():
    done = subprocess.run(
        [sys.executable, "-m", "dense_armor", "--version"], capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""}, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dense-armor {dense_armor.__version__}"


@pytest.mark.slow
def test_the_command_keeps_compiled_programs_in_the_user_cache(tmp_path):
    """A second run finds the first run's programs in $XDG_CACHE_HOME/dense_armor/jax; an empty
    JAX_COMPILATION_CACHE_DIR switches the cache off; ``main`` (the API) leaves JAX's config alone."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT / "src"), XDG_CACHE_HOME=str(tmp_path / "cache"), MPLBACKEND="Agg")
    argv = [sys.executable, "-m", "dense_armor", "demo", "--duration", "12", "--plot", str(tmp_path / "d.png")]
    first = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert first.returncode == 0, first.stderr
    cached = sorted((tmp_path / "cache" / "dense_armor" / "jax").iterdir())
    assert cached
    off = subprocess.run(argv, capture_output=True, text=True, env={**env, "XDG_CACHE_HOME": str(tmp_path / "other"),
                                                                      "JAX_COMPILATION_CACHE_DIR": ""}, cwd=tmp_path, timeout=600)
    untimed = lambda out: re.sub(r"\([\d.]+ s\)", "", out)  # noqa: E731
    assert off.returncode == 0 and untimed(off.stdout) == untimed(first.stdout), off.stderr
    assert not (tmp_path / "other" / "dense_armor").exists()  # (matplotlib keeps its font cache there)
    assert jax.config.jax_compilation_cache_dir is None or "dense_armor" not in jax.config.jax_compilation_cache_dir



@pytest.mark.parametrize("command", [[], ["demo"], ["control"], ["replay"], ["info"]])
def test_help_on_every_command(capsys, command):
    code, out, _ = _run(capsys, *command, "--help")
    assert code == 0
    assert out.startswith(f"usage: {' '.join(['dense-armor', *command])}")


# ----------------------------------------------------------------------------- info


def test_info_lists_joints_bodies_and_merged_frames(capsys, tmp_path):
    tip = '<link name="tool"/><joint name="tool_joint" type="fixed"><parent link="link2"/><child link="tool"/>' \
          '<origin xyz="1 0 0"/></joint></robot>'
    urdf = tmp_path / "arm_tool.urdf"
    dynamics = '<limit lower="-3.14" upper="3.14" velocity="10.0"/>\n    <dynamics damping="0.5" friction="0.25"/>'
    urdf.write_text(minimal_urdf(payload_mass=0.25).replace("</robot>", tip).replace('<limit lower="-3.14" upper="3.14" velocity="10.0"/>', dynamics, 1))
    code, out, _ = _run(capsys, "info", urdf)
    assert code == 0
    assert "2 movable joints, 4 links, fixed base 'base'" in out
    assert re.search(r"^  joint1: damping 0\.5 N m s/rad, friction 0\.25 N m$", out, re.M) and "joint2: damping" not in out
    assert re.search(r"^0\s+joint1\s+revolute\s+base\s+link1\s+\(0, 0, 1\)", out, re.M)
    assert re.search(r"^1\s+link2\s+0\.75\s+\(0\.5, 0, 0\).*link2, tool$", out, re.M)  # the tool merged into link2
    assert re.search(r"^3\s+tool\s+link2\s+\(1, 0, 0\)\s+\(2, 0, 0\)$", out, re.M)  # 2 m out at q = 0


# ----------------------------------------------------------------------------- demo and control


@pytest.mark.slow
def test_demo_prints_the_table_and_draws_the_plot(capsys, tmp_path):
    plot = tmp_path / "demo.png"
    code, out, _ = _run(capsys, "demo", "--rate", 50, "--plot", plot)
    assert code == 0
    assert "picks up a 0.5 kg payload" in out
    rows = {line.split("  ")[0]: line.split("  ")[1:] for line in out.splitlines()}
    cells = lambda name: [c.strip() for c in rows[name] if c.strip()]
    rmse = lambda name: [float(x) for x in cells(name)[:5]]
    nominal = rmse("nominal URDF")
    assert nominal[0] == 0.0 and min(nominal[1:]) > 0.5  # right before the payload, wrong after
    assert rmse("five-feature, lam 0.99")[-1] < nominal[-1]
    assert rmse("drift-aware five-feature, innovation")[-1] < nominal[-1]
    assert rmse("payload, lam 1")[0] < 0.01
    aware = cells("drift-aware payload, innovation")
    assert max(rmse("drift-aware payload, innovation")[2::2]) < 0.01  # exact once it has re-learned
    assert aware[5] == "10, 20"  # alarms exactly at the two changes, none elsewhere
    mass, std = (float(v) for v in aware[6].split(" +- "))
    assert abs(mass - 0.5) < 3 * std + 1e-3
    assert plot.read_bytes().startswith(PNG)


@pytest.mark.slow
def test_control_learner_removes_the_miss(capsys, tmp_path):
    plot = tmp_path / "control.png"
    code, out, _ = _run(capsys, "control", "--rate", 250, "--laps", 1, "--plot", plot)
    assert code == 0
    urdf_only = re.search(r"^URDF only\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    learned = re.search(r"^URDF \+ payload learner \(lam 1\)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert urdf_only and learned, out
    assert float(urdf_only.group(3)) > 5.0  # the payload makes the arm miss its targets by millimetres
    assert float(learned.group(3)) < 0.01  # the learned payload removes the miss
    assert float(learned.group(1)) < 0.05 * float(urdf_only.group(1))
    mass = float(re.search(r"^learned payload: ([\d.]+) \+- ", out, re.M).group(1))
    assert mass == pytest.approx(0.5, abs=1e-3)
    assert plot.read_bytes().startswith(PNG)


# ----------------------------------------------------------------------------- replay


def test_replay_csv_with_accelerations(capsys, arm):
    log = _write_csv(arm["folder"] / "full.csv", _columns(arm))
    out_file = arm["folder"] / "pred.csv"
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--out", out_file, "--chunk", 100)
    assert code == 0
    nominal, learner = _rmse_rows(out)
    assert learner < 0.5 * nominal
    header = out_file.read_text().splitlines()[0].split(",")
    assert header[:5] == ["t", "tau_joint1", "nominal_joint1", "pred_joint1", "err_joint1"]
    assert header[-2:] == ["alarm", "accepted"]
    table = np.loadtxt(out_file, delimiter=",", skiprows=1)
    col = {name: table[:, k] for k, name in enumerate(header)}
    assert table.shape == (T, len(header))
    np.testing.assert_allclose(col["err_joint2"], col["tau_joint2"] - col["pred_joint2"], atol=1e-7)
    nominal_tau = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(arm["model"], arm["q"], arm["qd"], arm["qdd"]))
    np.testing.assert_allclose(col["nominal_joint1"], nominal_tau[:, 0], rtol=1e-7, atol=1e-7)
    assert np.all(col["accepted"] == 1)


def test_a_reader_that_goes_away_loses_no_file_and_files_get_the_umasks_mode(monkeypatch, arm):
    """``dense-armor replay ... --report r.json | head -1``: the pipe closes after the first line;
    the command still writes its files and exits 0. A new file is 0666 less the umask of the
    moment (``tempfile``'s files are 0600), here one set after the command's import."""

    class Gone:
        def write(self, text):
            raise BrokenPipeError

        def flush(self):
            raise BrokenPipeError

    log = _write_csv(arm["folder"] / "piped.csv", _columns(arm))
    report, state = arm["folder"] / "piped.json", arm["folder"] / "piped.npz"
    monkeypatch.setattr(sys, "stdout", Gone())
    mask = os.umask(0o027)
    try:
        assert main(["replay", str(arm["urdf"]), str(log), "--report", str(report), "--state-out", str(state)]) == 0
    finally:
        os.umask(mask)
    data = json.loads(report.read_text(), parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert data["samples"] == T and state.is_file()
    assert data["rmse_after_5s"] == {"nominal": None, "learner": None}  # a 3 s log: no sample after 5 s
    assert report.stat().st_mode & 0o777 == state.stat().st_mode & 0o777 == 0o640


def test_sigterm_stops_the_command_and_leaves_no_partial_file(capsys, arm):
    """SIGTERM (a timeout, a cancelled job) mid-replay: status 143, the output not written, no
    temporary file left beside it."""
    import signal

    log = _write_csv(arm["folder"] / "term.csv", _columns(arm))
    folder = arm["folder"] / "term"
    folder.mkdir()
    calls = []

    def progress(*args, **kwargs):  # the replay's first block: as if the job were cancelled then
        calls.append(1)
        os.kill(os.getpid(), signal.SIGTERM)

    import dense_armor.cli.replay as cli_replay

    original = cli_replay.replay_log
    cli_replay.replay_log = lambda *a, **k: original(*a, **{**k, "progress": progress})
    try:
        code, _, err = _run(capsys, "replay", arm["urdf"], log, "--out", folder / "p.csv", "--chunk", 100)
    finally:
        cli_replay.replay_log = original
    assert calls and code == 143 and "terminated" in err
    assert list(folder.iterdir()) == []


def test_replay_csv_without_accelerations_estimates_them(capsys, arm):
    cols = _columns(arm, acc=False, named=False, time=False)
    log = _write_csv(arm["folder"] / "noacc.csv", cols)
    code, _, err = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100)
    assert code == 2 and "--dt" in err  # no t column and no --dt: the period is unknown
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--dt", 0.01, "--chunk", 100, "--out", arm["folder"] / "p.npz")
    assert code == 0
    assert "qdd estimated (zero-phase, 20 Hz low-pass)" in out
    nominal, learner = _rmse_rows(out)
    assert learner < 0.5 * nominal
    with np.load(arm["folder"] / "p.npz") as pred:
        np.testing.assert_allclose(pred["t"], arm["t"])  # sample times from --dt
        assert np.all(np.isfinite(pred["pred_joint1"]))


def test_replay_drops_a_repeated_stamp_when_asked(capsys, arm, tmp_path):
    cols = _columns(arm)
    rows = np.insert(np.arange(T), 120, 119)[: T]  # row 119 published twice (T rows: one compile)
    log = _write_csv(tmp_path / "twice.csv", {k: v[rows] for k, v in cols.items()})
    code, _, err = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100)
    assert code == 2 and "repeats" in err and "sample 120" in err and "--drop-repeated" in err
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100, "--drop-repeated", "--report", tmp_path / "r.json")
    assert code == 0 and "1 rows repeating a stamp dropped (the first at sample 120, 1.19 s)" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["repeated_rows"], report["samples"]) == (1, T - 1)


def test_replay_unwraps_an_angle_logged_modulo_two_pi(capsys, arm, tmp_path):
    """A joint's position logged as an angle modulo 2 pi (a driver's) replays as its unwrapped
    position, derivatives and all: the same scores, the wraps counted."""
    cols = {k: v for k, v in _columns(arm, acc=False).items() if not k.startswith("qd")}
    q = cols["q_joint1"]
    above = q > np.median(q)  # logged a turn lower there
    turned = _write_csv(tmp_path / "turned.csv", cols | {"q_joint1": np.where(above, q - 2 * np.pi, q)})
    wraps = int(np.count_nonzero(np.diff(above)))
    code, out, _ = _run(capsys, "replay", arm["urdf"], _write_csv(tmp_path / "plain.csv", cols), "--chunk", 100)
    code_turned, out_turned, _ = _run(capsys, "replay", arm["urdf"], turned, "--chunk", 100, "--report", tmp_path / "r.json")
    assert code == code_turned == 0 and wraps > 0
    assert f"positions unwrapped (an angle logged in (-pi, pi]): joint1 {wraps} times" in out_turned
    assert json.loads((tmp_path / "r.json").read_text())["unwrapped"] == {"joint1": wraps}
    assert _rmse_rows(out_turned) == _rmse_rows(out)


def test_replay_stamps_in_nanoseconds_with_their_unit(capsys, arm, tmp_path):
    """Epoch nanoseconds, as ROS tools write them: an error naming --time-unit (read as seconds
    they were a log at a millionth of a hertz), and with it the replay of the same log in s."""
    cols = _columns(arm)
    seconds = _write_csv(tmp_path / "s.csv", cols | {"t": cols["t"] + 1.7e9})
    nanoseconds = _write_csv(tmp_path / "ns.csv", cols | {"t": (cols["t"] + 1.7e9) * 1e9})
    code, out, err = _run(capsys, "replay", arm["urdf"], nanoseconds, "--chunk", 100)
    assert code == 2 and out == "" and "--time-unit" in err
    code, out, _ = _run(capsys, "replay", arm["urdf"], seconds, "--chunk", 100)
    code_ns, out_ns, _ = _run(capsys, "replay", arm["urdf"], nanoseconds, "--chunk", 100, "--time-unit", "ns")
    assert code == code_ns == 0 and "at 100 Hz" in out_ns
    np.testing.assert_allclose(_rmse_rows(out_ns), _rmse_rows(out), rtol=1e-3)


def test_replay_npz_with_arrays_and_progress_bar(capsys, arm):
    log = arm["folder"] / "log.npz"
    np.savez(log, t=arm["t"], q=arm["q"], qd=arm["qd"], qdd=arm["qdd"], tau=arm["tau"])
    code, out, err = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100, "--progress", "--out", arm["folder"] / "o.NPZ")
    assert code == 0
    assert "replay" in err and f"{T}/{T}" in err  # tqdm's bar
    assert "written to " + str(arm["folder"] / "o.NPZ") in out and "err_joint1" in np.load(arm["folder"] / "o.NPZ")  # the name given
    nominal, learner = _rmse_rows(out)
    assert learner < 0.5 * nominal


def test_replay_plot(capsys, arm, tmp_path):
    log = _write_csv(arm["folder"] / "plot.csv", _columns(arm))
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100, "--plot", tmp_path / "r.png")
    assert code == 0
    assert (tmp_path / "r.png").read_bytes().startswith(PNG)


@pytest.mark.parametrize("learner", ["drift-aware", pytest.param("payload", marks=pytest.mark.slow)])
def test_replay_other_learners(capsys, arm, learner):
    log = _write_csv(arm["folder"] / "other.csv", _columns(arm))
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--learner", learner, "--chunk", 100)
    assert code == 0, out
    if learner == "payload":
        mass = float(re.search(r"learned payload on link2: ([\d.]+) \+- ", out).group(1))
        assert mass == pytest.approx(0.5, abs=1e-3)
    else:
        assert "drift alarms" in out


# ----------------------------------------------------------------------------- user errors


def _bad_files(folder: Path, arm) -> dict[str, Path]:
    (folder / "bad.urdf").write_text("<robot><link name='a'/>")
    floating = minimal_urdf().replace('type="revolute"', 'type="floating"', 1)
    (folder / "floating.urdf").write_text(floating)
    _write_csv(folder / "wrong_joint.csv", {"q_joint1": [0.0], "q_elbow": [0.0], "tau_joint1": [0.0], "tau_joint2": [0.0]})
    _write_csv(folder / "no_tau.csv", {"q0": [0.0], "q1": [0.0], "qd0": [0.0], "qd1": [0.0]})
    _write_csv(folder / "half.csv", {"q0": [0.0], "q1": [0.0], "qd0": [0.0], "tau0": [0.0], "tau1": [0.0]})
    (folder / "text.csv").write_text("q0,q1,tau0,tau1\n0,1,2,abc\n")
    t = np.array([0.0, 0.01, 0.02, 0.02, 0.04, 0.05])
    _write_csv(folder / "repeated.csv", {"t": t, "q0": t, "q1": t, "tau0": t, "tau1": t})
    _write_csv(folder / "milliseconds.csv", {"t": 10 * np.arange(6), "q0": t, "q1": t, "tau0": t, "tau1": t})  # 100 Hz in ms
    _write_csv(folder / "timed.csv", {"t": 0.01 * np.arange(6), "q0": t, "q1": t, "tau0": t, "tau1": t})  # 100 Hz
    one = np.ones(5)
    _write_csv(folder / "no_t_full.csv", {f"{k}{j}": one for k in ("q", "qd", "qdd", "tau") for j in range(2)})
    np.savez(folder / "wrong_shape.npz", q=np.zeros((5, 3)), tau=np.zeros((5, 3)))
    import gzip

    (folder / "zipped.csv").write_bytes(gzip.compress((folder / "text.csv").read_bytes()))
    np.savez(folder / "arrays.npz", q=np.zeros((5, 2)), tau=np.zeros((5, 2)))
    (folder / "arrays.csv").write_bytes((folder / "arrays.npz").read_bytes())
    np.save(folder / "plain.npy", np.zeros(3))
    return {p.name: p for p in folder.iterdir()}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["info", "{missing}"], "no such URDF file"),
        (["info", "bad.urdf"], "malformed XML"),
        (["info", "floating.urdf"], "floating joints are not supported"),
        (["replay", "{urdf}", "{missing}"], "no such log file"),
        (["replay", "{urdf}", "wrong_joint.csv"], "not for joint2 (expected columns q_<joint> or q0..q1); to replay without a "
         "joint, lock it: --lock joint2=VALUE (columns naming no joint of the robot, ignored: q_elbow)"),
        (["replay", "{urdf}", "no_tau.csv"], "no tau columns"),
        (["replay", "{urdf}", "half.csv", "--dt", "0.01"], "qd is logged for some joints but not for joint2"),
        (["replay", "{urdf}", "text.csv"], "not a numeric CSV table"),
        (["replay", "{urdf}", "repeated.csv"], "the clock repeats 0.020000 s at sample 3"),
        (["replay", "{urdf}", "wrong_shape.npz"], "expected (T, 2)"),
        (["replay", "{urdf}", "no_tau.csv", "--lam", "1.5"], "argument --lam"),
        (["replay", "{urdf}", "no_tau.csv", "--chunk", "0.5"], "argument --chunk: '0.5' is not a whole number of samples"),
        (["replay", "{urdf}", "no_tau.csv", "--chunk", "1000000000"], "argument --chunk"),
        (["replay", "{urdf}", "text.csv", "--learner", "robot", "--delta", "1e-3"], "--delta does not apply to --learner robot"),
        (["replay", "{urdf}", "text.csv", "--learner", "payload", "--reopen", "5"], "--reopen does not apply to --learner payload"),
        (["replay", "{urdf}", "text.csv", "--min-mass", "1"], "--min-mass does not apply to --learner five-feature"),
        (["replay", "{urdf}", "text.csv", "--learner", "drift-aware", "--hampel-radius", "5"],
         "--hampel-radius does not apply to --learner drift-aware --trigger innovation"),
        (["identify", "{urdf}", "text.csv", "-o", "{folder}/id.urdf", "--sidecar", "text.csv"], "--sidecar"),  # no .partial left
        (["replay", "{urdf}", "no_tau.csv", "--out", "/no/such/folder/x.csv"], "does not exist"),
        (["replay", "{urdf}", "text.csv", "--out", "text.csv"], "that is an input"),
        (["replay", "{urdf}", "text.csv", "--out", "{urdf}"], "that is an input"),
        (["replay", "{urdf}", "text.csv", "--out", "{folder}"], "not a regular file"),
        (["replay", "{urdf}", "text.csv", "--out", "/dev/full"], "not a regular file"),
        (["replay", "{urdf}", "text.csv", "--report", "r.txt"], "expected a file ending in .json"),
        (["replay", "{urdf}", "text.csv", "--out", "same.csv", "--report", "same.csv"], "--report same.csv: expected"),
        (["replay", "{urdf}", "text.csv", "--lock", "joint3"], "is not JOINT=POSITION"),
        (["replay", "{urdf}", "no_tau.csv", "--lock", "joint3=0"], "error: --lock: 'joint3' is not a movable joint"),
        (["replay", "{urdf}", "milliseconds.csv"], "(0.1 Hz), too slow for a robot's log: are they in seconds?"),
        (["replay", "{urdf}", "timed.csv", "--cutoff", "1e-9"], "cut-off must be at least 0.01 Hz (0.0001 of the sampling rate"),
        (["replay", "{urdf}", "timed.csv", "--torque-scale", "-1,-1,-1"], "one finite, non-zero gain per joint (2), got [-1.0, -1.0, -1.0]"),
        (["replay", "{urdf}", "text.csv", "--time-unit", "h"], "argument --time-unit"),
        (["replay", "{urdf}", "text.csv", "--topic", "/joint_states"], "--topic is for ROS bags"),
        (["replay", "{urdf}", "no_t_full.csv", "--learner", "robot"], "needs the sampling rate"),
        (["replay", "{urdf}", "no_tau.csv", "--state-in", "{missing}"], "no such file"),
        (["replay", "{urdf}", "no_t_full.csv", "--dt", "0.01", "--state-in", "plain.npy"], "plain.npy: not a learner state file"),
        (["replay", "{urdf}", "zipped.csv"], "zipped.csv: not a text CSV file"),
        (["replay", "{urdf}", "arrays.csv"], "arrays.csv: not a text CSV file"),
        (["replay", "{urdf}", "text.csv", "--plot", "x.foo"], "expected a file ending in .png"),
        (["replay", "{urdf}", "text.csv", "--hampel-n-sigmas", "-1"], "argument --hampel-n-sigmas"),
        (["replay", "{urdf}", "text.csv", "--warmup-steps", "-1"], "argument --warmup-steps"),
        (["replay", "{urdf}", "text.csv", "--mimic", "--lock", "joint2=0", "--lock", "joint1=0"], "every joint would be locked"),
        (["demo", "--rate", "-5"], "argument --rate"),
        (["demo", "--duration", "0.001"], "too few"),
        (["demo", "--write-log", "{folder}/run.bag"], "or a ROS 2 bag (a new folder) ending in .mcap or .db3"),
        (["replay", "{urdf}", "timed.csv", "--state-in", "text.csv"], "text.csv: not a learner state file (an NPZ written by save)"),
        (["demo", "--duration", "1e9", "--rate", "1e6"], "too many to simulate"),
        (["control", "--laps", "100000000"], "too many to simulate"),
        (["control", "--laps", "1250"], "too many to simulate"),
        (["control", "--rate", "1"], "too slow for kp 400"),
        (["control", "--kp", "abc"], "argument --kp"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_user_errors_exit_2_with_one_line(capsys, tmp_path, arm, argv, message):
    files = _bad_files(tmp_path, arm)
    names = {"missing": str(tmp_path / "missing.file"), "urdf": str(arm["urdf"]), "folder": str(tmp_path)}
    argv = [a.format(**names) if "{" in a else str(files.get(a, a)) for a in argv]
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dense-armor: error: ") and message in lines[0], lines[0]
    after = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before  # nothing written, nothing overwritten



# ----------------------------------------------------------------------------- the robot learner on a log


@pytest.fixture(scope="module")
def wall(tmp_path_factory):
    """The two-link arm on a wall (its base turned so that gravity acts in the plane of
    motion), carrying 0.5 kg and with joint friction, at 200 Hz on a jittered clock with noise:
    its URDF (without the payload and friction) and a CSV with t, q, qd, tau (no qdd)."""
    folder = tmp_path_factory.mktemp("wall")
    mount = '<link name="wall"/><joint name="mount" type="fixed"><parent link="wall"/><child link="base"/>' \
            '<origin rpy="1.5707963267948966 0 0"/></joint></robot>'
    text = minimal_urdf().replace("</robot>", mount)
    urdf = folder / "wall.urdf"
    urdf.write_text(text)
    model = parse_urdf(text)
    rng = np.random.default_rng(0)
    rate, T = 200.0, 2400
    t = np.arange(T) / rate + rng.uniform(-0.3, 0.3, T) / rate
    t[0] = 0.0
    q = np.stack([0.9 * np.sin(1.3 * t) + 0.3 * np.sin(3.1 * t), 0.7 * np.cos(1.7 * t) + 0.2 * np.sin(2.3 * t)], 1)
    qd = np.stack([1.17 * np.cos(1.3 * t) + 0.93 * np.cos(3.1 * t), -1.19 * np.sin(1.7 * t) + 0.46 * np.cos(2.3 * t)], 1)
    qdd = np.stack([-1.521 * np.sin(1.3 * t) - 2.883 * np.sin(3.1 * t), -2.023 * np.cos(1.7 * t) - 1.058 * np.sin(2.3 * t)], 1)
    real = attach_payload(model, "link2", 0.5, com=(0.5, 0.0, 0.0))
    tau = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(real, q, qd, qdd)) + 0.3 * qd + 0.2 * np.tanh(qd / 0.02)
    tau += 0.01 * rng.standard_normal(tau.shape)
    cols = {"t": t}
    for j, name in enumerate(model.joint_names):
        cols[f"q_{name}"], cols[f"qd_{name}"], cols[f"tau_{name}"] = q[:, j], qd[:, j], tau[:, j]
    log = _write_csv(folder / "wall.csv", cols)
    return {"folder": folder, "urdf": urdf, "log": log, "model": model, "q": q, "qd": qd, "qdd": qdd, "tau": tau,
            "t": t, "cols": cols}


@pytest.mark.slow
def test_replay_with_the_robot_learner_reports_json(capsys, wall):
    import json

    report = wall["folder"] / "r.json"
    code, out, _ = _run(capsys, "replay", wall["urdf"], wall["log"], "--learner", "robot", "--report", report,
                        "--out", wall["folder"] / "o.csv", "--plot", wall["folder"] / "p.png")
    assert code == 0, out
    data = json.loads(report.read_text())
    for key in ("alarms_s", "rmse_nominal", "rmse_learner", "payload_changes", "physical", "harmful_windows_s"):
        assert key in data
    assert data["rmse_learner"] < 0.1 * data["rmse_nominal"]
    assert data["alarms_s"] == [] and data["harmful_windows_s"] == []
    joints = data["physical"]["joints"]
    assert joints["joint1"]["viscous"] == pytest.approx(0.3, abs=0.05)
    # link2 and its 0.5 kg payload at 0.5 m: first moment 0.5 kg m
    assert data["physical"]["bodies"]["link2"]["parameters"][1] == pytest.approx(0.5, abs=0.05)
    header = (wall["folder"] / "o.csv").read_text().splitlines()[0].split(",")
    assert header[:5] == ["t", "tau_joint1", "nominal_joint1", "pred_joint1", "err_joint1"]
    assert "one-second windows with the learner over 10 % worse than the URDF: 0 of 12" in out


@pytest.mark.slow
def test_state_out_then_in_continues_bit_exactly(capsys, wall):
    cols = dict(wall["cols"])
    for j, name in enumerate(wall["model"].joint_names):
        cols[f"qdd_{name}"] = wall["qdd"][:, j]  # logged accelerations: nothing estimated at the cut
    half = len(wall["t"]) // 2
    first = _write_csv(wall["folder"] / "first.csv", {k: v[:half] for k, v in cols.items()})
    second = _write_csv(wall["folder"] / "second.csv", {k: v[half:] for k, v in cols.items()})
    whole = _write_csv(wall["folder"] / "whole.csv", cols)
    f = wall["folder"]
    common = ["--learner", "robot", "--chunk", 500]
    assert _run(capsys, "replay", wall["urdf"], whole, *common, "--state-out", f / "whole.npz")[0] == 0
    assert _run(capsys, "replay", wall["urdf"], first, *common, "--state-out", f / "a.npz")[0] == 0
    assert _run(capsys, "replay", wall["urdf"], second, *common, "--state-in", f / "a.npz", "--state-out", f / "b.npz")[0] == 0
    with np.load(f / "whole.npz") as a, np.load(f / "b.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
    # the next log of the robot drops packets (a 2 % rate's worth): the state goes on at its rate
    kept = np.arange(half, len(wall["t"])) % 25 != 7
    lossy = _write_csv(f / "lossy.csv", {k: v[half:][kept] for k, v in cols.items()})
    code, out, _ = _run(capsys, "replay", wall["urdf"], lossy, *common, "--state-in", f / "a.npz")
    assert code == 0 and "at 196.1 Hz" in out and "rate 200 Hz" in out
    # a log at another rate is another configuration of the learner
    slow = _write_csv(f / "slow.csv", {k: v[half::2] for k, v in cols.items()})
    code, _, err = _run(capsys, "replay", wall["urdf"], slow, *common, "--state-in", f / "a.npz")
    assert code == 2 and "rate = 200.0 in the file, 100.0 here" in err
    # another robot's state is refused before anything is written
    code, _, err = _run(capsys, "replay", ROOT / "tests" / "missing.urdf", first, *common, "--state-in", f / "a.npz")
    assert code == 2
    other = f / "other.urdf"
    other.write_text(wall["urdf"].read_text().replace('mass value="0.5"', 'mass value="0.6"'))
    code, _, err = _run(capsys, "replay", other, first, *common, "--state-in", f / "a.npz", "--out", f / "x.csv")
    assert code == 2 and "a state of another robot" in err and not (f / "x.csv").exists()


def test_identify_writes_a_urdf_that_pinocchio_and_the_sidecar_reproduce(capsys, wall, monkeypatch):
    import json
    import threading

    import pinocchio as pin
    from oracle import pin_compatible

    from dense_armor import inertial, learners, robot_learner
    from dense_armor.robot_learner import JOINT_TERMS, RobotLearner, estimate

    calls = []  # (on the main thread, compiled by the call)

    def recorded(*args):
        before = estimate._cache_size()
        result = jax.block_until_ready(estimate(*args))
        calls.append((threading.current_thread() is threading.main_thread(), estimate._cache_size() > before))
        return result

    monkeypatch.setattr(robot_learner, "estimate", recorded)
    out = wall["folder"] / "identified.urdf"
    code, printed, _ = _run(capsys, "identify", wall["urdf"], wall["log"], "-o", out)
    assert code == 0, printed
    # the estimate was called (compiled, unless an earlier test had) on a second thread while the
    # replay ran; read at the end, it was ready
    assert [main for main, _ in calls] == [False, True] and calls[1] == (True, False)
    monkeypatch.undo()
    side = json.loads(out.with_suffix(".json").read_text())
    identified = parse_urdf(out)
    assert identified.joint_names == wall["model"].joint_names
    # the learner's own features with its estimate (the consistent parameters), from the same replay
    state_file = wall["folder"] / "identify_state.npz"
    assert _run(capsys, "replay", wall["urdf"], wall["log"], "--learner", "robot", "--state-out", state_file)[0] == 0
    learner = RobotLearner(wall["model"], rate=200.0)
    with jax.enable_x64(True):
        state = learners.load_state(state_file, learner.init(jnp.float64))
        est = estimate(learner, state)
        deviation = jnp.concatenate([(est.parameters - wall["model"].inertia).reshape(-1), est.armature - wall["model"].armature,
                                     est.viscous, est.coulomb, est.stribeck, est.offset])
        X, nominal = jax.vmap(lambda a, b, c: learner.features(a, b, c, jnp.float64))(wall["q"], wall["qd"], wall["qdd"])
        learned = np.asarray(nominal + X @ deviation[np.asarray(learner.learned)])  # the features of w's parameters
    pm = pin.buildModelFromXML(pin_compatible(out.read_text()))
    data = pm.createData()
    width = side["coulomb_width"]
    terms = {t: np.array([side["joints"][j][t] for j in identified.joint_names]) for t in JOINT_TERMS}
    for k in range(0, len(wall["q"]), 97):
        q, qd, qdd = wall["q"][k], wall["qd"][k], wall["qdd"][k]
        theirs = pin.rnea(pm, data, q, qd, qdd) + terms["armature"] * qdd + terms["viscous"] * qd \
            + terms["coulomb"] * np.tanh(qd / width) + terms["stribeck"] * (np.tanh(qd / width) - np.tanh(qd / (4 * width))) \
            + terms["offset"]
        np.testing.assert_allclose(theirs, learned[k], atol=1e-8)
    urdf = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(wall["model"], wall["q"], wall["qd"], wall["qdd"]))
    rms = lambda e: np.sqrt(np.mean(e**2))  # noqa: E731
    assert rms(learned - wall["tau"]) < 0.1 * rms(urdf - wall["tau"])  # and it is close to the real arm
    # what a simulator reads: the joints' identified friction, inertias it accepts
    import mujoco

    sim = mujoco.MjModel.from_xml_string(out.read_text())
    np.testing.assert_allclose(sim.dof_damping, terms["viscous"], rtol=1e-9)
    np.testing.assert_allclose(sim.dof_frictionloss, terms["coulomb"], rtol=1e-9)
    assert terms["viscous"] == pytest.approx([0.3, 0.3], abs=0.05)
    for name, body in side["bodies"].items():
        assert not body["mass_unexcited"] or name == "link1"
    moments = np.linalg.eigvalsh(np.asarray(jax.vmap(lambda p: inertial.to_com(p)[2])(identified.inertia)))
    assert np.all(moments[:, 0] >= 0.99e-6 * moments[:, -1])
    # a log too short to identify anything writes nothing
    short = _write_csv(wall["folder"] / "short.csv", {k: v[:5] for k, v in wall["cols"].items()})
    code, _, err = _run(capsys, "identify", wall["urdf"], short, "-o", wall["folder"] / "short.urdf")
    assert code == 2 and "the log identifies nothing" in err and not (wall["folder"] / "short.urdf").exists()


def _planar_log(model, real, path, seed=1):
    """A 60 s, 100 Hz CSV log of the wall arm moving in its plane, torques from ``real`` plus
    armature, friction, an offset and noise; returns the log's path and its arrays."""
    rng = np.random.default_rng(seed)
    t = np.arange(6000) / 100.0
    q, qd, qdd = (np.zeros((len(t), 2)) for _ in range(3))
    for j in range(2):
        for _ in range(4):
            w, a, p = 2 * np.pi * rng.uniform(0.05, 0.5), rng.uniform(0.1, 0.35), rng.uniform(0, 6.28)
            q[:, j] += a * np.sin(w * t + p)
            qd[:, j] += a * w * np.cos(w * t + p)
            qdd[:, j] -= a * w * w * np.sin(w * t + p)
    tau = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(real, q, qd, qdd))
    tau = tau + 0.05 * qdd + 0.3 * qd + 0.5 * np.tanh(qd / 0.02) + 0.1 + rng.normal(0, 0.02, tau.shape)
    cols = {"t": t} | {f"{k}_{name}": x[:, j] for j, name in enumerate(model.joint_names)
                       for k, x in (("q", q), ("qd", qd), ("qdd", qdd), ("tau", tau))}
    return _write_csv(path, cols), (q, qd, qdd, tau)


def _written_prediction(out, q, qd, qdd):
    """What identify wrote: the URDF's rnea plus the sidecar's joint terms, over the log."""
    from dense_armor.robot_learner import JOINT_TERMS

    side = json.loads(out.with_suffix(".json").read_text())
    written = parse_urdf(out)
    terms = {k: np.array([side["joints"][j][k] for j in written.joint_names]) for k in JOINT_TERMS}
    width = side["coulomb_width"]
    return np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(written, q, qd, qdd)) + terms["armature"] * qdd \
        + terms["viscous"] * qd + terms["coulomb"] * np.tanh(qd / width) \
        + terms["stribeck"] * (np.tanh(qd / width) - np.tanh(qd / (4 * width))) + terms["offset"], side


def test_identify_moves_what_the_log_left_free_and_reports_the_written_urdfs_fit(capsys, wall, tmp_path):
    """A planar arm leaves most of each body's parameters unexcited (at the prior), and the
    learned bodies are not rigid bodies. identify writes the most probable consistent robot:
    the projection moves what the log left free, so the written files fit the log as the
    learner did at its end (the sensor's noise, 0.02 N m), where moving each body alone to its
    nearest rigid body fits about 40 times worse. identify measures what it writes."""
    from dense_armor import inertial, learners
    from dense_armor.robot_learner import RobotLearner, estimate

    model = wall["model"]
    log, (q, qd, qdd, tau) = _planar_log(model, attach_payload(model, "link2", 1.0, com=(0.5, 0.0, 0.0)), tmp_path / "planar.csv")
    out = tmp_path / "planar.urdf"
    code, printed, err = _run(capsys, "identify", wall["urdf"], log, "-o", out)
    assert code == 0, err
    mine, side = _written_prediction(out, q, qd, qdd)
    rms = lambda e: float(np.sqrt(np.mean(e**2)))  # noqa: E731
    np.testing.assert_allclose(side["source"]["rmse_written"], rms(tau - mine), rtol=1e-6)
    assert f"the written URDF with its sidecar {side['source']['rmse_written']:.4g}" in printed
    assert rms(tau - mine) < 0.025 and side["source"]["rmse_written"] < side["source"]["rmse_learner"] and "warning" not in err
    assert side["source"]["rmse_written"] <= side["source"]["rmse_unconstrained"] * 1.01  # consistency costs no fit here
    # each body moved alone to its nearest rigid body, the joint terms kept: far worse
    assert _run(capsys, "replay", wall["urdf"], log, "--learner", "robot", "--state-out", tmp_path / "s.npz")[0] == 0
    learner = RobotLearner(model, rate=100.0)
    with jax.enable_x64(True):
        est = estimate(learner, learners.load_state(tmp_path / "s.npz", learner.init(jnp.float64)))
    assert np.all(np.asarray(est.projected))  # neither learned body was a rigid body
    alone = model.replace(inertia=jnp.asarray(inertial.nearest_consistent(np.asarray(est.learned))))
    terms = mine - np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(parse_urdf(out), q, qd, qdd))
    assert rms(tau - np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(alone, q, qd, qdd)) - terms) > 20 * rms(tau - mine)


def test_identify_warns_when_no_rigid_robot_fits_the_log(capsys, wall, tmp_path):
    """Torques that no rigid body makes (link2 with a negative mass, well excited): the
    consistent robot fits the log far worse than the learned parameters, and identify says so."""
    model = wall["model"]
    inertia = np.asarray(model.inertia).copy()
    inertia[1] = -inertia[1]  # link2 pulling up: a negative mass, first moment and inertia
    log, (q, qd, qdd, tau) = _planar_log(model, model.replace(inertia=jnp.asarray(inertia)), tmp_path / "wrong.csv")
    out = tmp_path / "wrong.urdf"
    code, printed, err = _run(capsys, "identify", wall["urdf"], log, "-o", out, "--no-payload")
    assert code == 0, err
    mine, side = _written_prediction(out, q, qd, qdd)
    source = side["source"]
    assert source["rmse_written"] > 5 * source["rmse_unconstrained"] and "warning: making the bodies physically consistent costs fit" in err
    assert float(parse_urdf(out).inertia[1][0]) >= 0  # what was written is a rigid body


def test_replay_a_ros2_bag_with_locked_joints_and_currents(capsys, wall, tmp_path):
    from test_logs import write_joint_state_bag

    names = [*wall["model"].joint_names, "gripper"]
    gains = np.array([2.0, -4.0])
    q = np.column_stack([wall["q"], 0.02 * (1 - np.cos(wall["t"]))])  # the fingers open and close
    qd = np.column_stack([wall["qd"], np.zeros(len(wall["t"]))])
    current = np.column_stack([wall["tau"] / gains, np.zeros(len(wall["t"]))])
    write_joint_state_bag(tmp_path / "bag", wall["t"] + 1.7e9, names, q, qd, current, "mcap")
    gripped = tmp_path / "gripped.urdf"
    gripped.write_text(wall["urdf"].read_text().replace("</robot>", '<link name="finger"/><joint name="gripper" '
                       'type="prismatic"><parent link="link2"/><child link="finger"/><axis xyz="1 0 0"/>'
                       '<limit lower="0" upper="0.1" effort="10" velocity="1"/></joint></robot>'))
    code, out, err = _run(capsys, "replay", gripped, tmp_path / "bag", "--learner", "robot", "--lock", "gripper=0.0",
                          "--torque-scale", "2,-4")
    assert code == 0 and "warning: --lock holds gripper at 0, but the log has it moving over [0, 0.04]" in err, err
    nominal, learner = _rmse_rows(out)
    assert learner < 0.1 * nominal and "locked gripper=0" in out
    (tmp_path / "gains.json").write_text('{"joint2": -4, "joint1": 2, "gripper": 1}')  # the locked joint's unused
    code, out2, _ = _run(capsys, "replay", gripped, tmp_path / "bag", "--learner", "robot", "--lock", "gripper=0",
                         "--torque-scale", tmp_path / "gains.json")
    assert code == 0 and _rmse_rows(out2) == (nominal, learner)
    code, out3, err = _run(capsys, "replay", gripped, tmp_path / "bag", "--learner", "robot", "--lock", "gripper=20",
                           "--torque-scale", "2,-4")  # 20 mm typed as m
    assert code == 0 and "warning: --lock gripper=20 is outside the joint's limits [0, 0.1]" in err
    write_joint_state_bag(tmp_path / "arm_only", wall["t"], names[:2], q[:, :2], qd[:, :2], current[:, :2], "sqlite3")
    code, _, err = _run(capsys, "replay", gripped, tmp_path / "arm_only", "--learner", "robot")
    assert code == 2 and "--lock gripper=VALUE" in err


@pytest.mark.parametrize("kind, chosen", [
    ("five-feature", {}), ("drift-aware", {"trigger": "innovation"}), ("payload", {}),
    ("drift-aware-payload", {"trigger": "innovation"}), ("robot", {"rate": 100.0}),
])
def test_the_command_line_builds_each_learner_with_its_class_defaults(arm, kind, chosen):
    """Defaults live in the documented classes: a learner option left out is the class's
    default (the command line chooses only the innovation trigger, and the log's rate)."""
    from dense_armor import learners
    from dense_armor.cli import build_parser
    from dense_armor.cli.learners import build_learner, learner_class

    args = build_parser().parse_args(["replay", str(arm["urdf"]), "log.csv", "--learner", kind])
    args.rate = 100.0  # what replay reads from the log
    built = build_learner(kind, arm["model"], args)
    expected = learner_class(kind)(arm["model"], **chosen).learner
    assert learners.identity(built) == learners.identity(expected)
    args = build_parser().parse_args(["replay", str(arm["urdf"]), "log.csv", "--learner", kind, "--lam", "0.9"])
    args.rate = 100.0
    assert learners.identity(build_learner(kind, arm["model"], args)) == learners.identity(
        learner_class(kind)(arm["model"], **chosen, lam=0.9).learner)


def test_predictions_that_are_not_finite_are_counted_warned_and_scored_as_the_urdf(capsys, arm, tmp_path):
    """A learner whose weights overflow its predictions (a state loaded as it was saved): the
    summary says so, and scores those samples with the URDF's torque, never drops them."""
    import json

    from dense_armor import learners
    from dense_armor.learners import ResidualLearner

    learner = ResidualLearner(arm["model"], delta=1e6)  # the documented class's, which the command builds
    state = learner.init(jnp.float64)
    w = np.zeros((2, 5))
    w[:, 1] = w[:, 4] = 1e308  # qd and bias: finite weights, an infinite torque wherever qd > 0.8
    with jax.enable_x64(True):
        learners.save_state(tmp_path / "huge.npz", state._replace(rls=state.rls._replace(w=jnp.asarray(w))), learner)
    log = _write_csv(tmp_path / "log.csv", _columns(arm))
    code, out, err = _run(capsys, "replay", arm["urdf"], log, "--state-in", tmp_path / "huge.npz", "--report", tmp_path / "r.json")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    fast = int(np.sum(np.any(arm["qd"] > 0.8, axis=1)))
    assert fast > 10 and report["nonfinite_predictions"] >= fast
    assert "predictions were not finite" in err and f"{report['nonfinite_predictions']} non-finite predictions" in out
    assert np.isfinite(report["rmse_nominal"])
