"""The command line end to end (subprocesses) and its data reader.

The three commands run at once in subprocesses on small data (one compile
each); the bad-file cases run at once too (they stop before anything is
compiled). Subprocesses share a persistent XLA cache so later runs are faster.
"""
from __future__ import annotations

import argparse
import inspect
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import jaxstream as js
from jaxstream import cli, datasets

ENV = dict(os.environ, JAX_PLATFORMS="cpu", JAXSTREAM_DEBUG="", JAXSTREAM_COMPILATION_CACHE="0")
if os.environ.get("JAXSTREAM_JAX_CACHE"):  # the tests' cache, when asked for (tests/conftest.py)
    ENV.update(JAX_COMPILATION_CACHE_DIR=os.environ["JAXSTREAM_JAX_CACHE"],
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.5")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cmd(*args):
    return [sys.executable, "-m", "jaxstream", *map(str, args)]


def _run_all(cmds, cwd):
    """Run commands concurrently; returns [(returncode, stdout, stderr)]."""
    procs = [subprocess.Popen(c, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    out = []
    for p in procs:
        so, se = p.communicate(timeout=600)
        out.append((p.returncode, so, se))
    return out


def _figure(pattern, text):
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in output:\n{text}"
    return float(m.group(1))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    xs = datasets.make_cubic_stream(60, seed=1)
    with open(d / "cubic.csv", "w") as f:
        f.write("id,label,x,y\n")
        for i, (a, b) in enumerate(xs):
            f.write(f"{i},pt{i},{float(a)!r},{float(b)!r}\n")
    groups, _ = cli.four_groups_stream(80, seed=2)
    np.save(d / "groups.npy", groups)
    return d


@pytest.fixture(scope="module")
def good_runs(data_dir):
    """curve on a CSV, cluster on a .npy, embed on its default S-curve, run at once."""
    d = data_dir
    cmds = [
        _cmd("curve", "--csv", d / "cubic.csv", "--columns", "x", "y", "--t0", 10, "--max-segments", 6,
             "--history-size", 64, "--out", d / "curve.png", "--seed", 3),
        _cmd("cluster", "--csv", d / "groups.npy", "--n-steps", 30, "--max-clusters", 8,
             "--history-size", 64, "--drift-level", 0.01, "--out", d / "cluster.png"),
        _cmd("embed", "--n", 300, "--max-landmarks", 20, "--out", d / "embed.png", "--float64",
             "--save-state", d / "embed.ckpt"),
    ]
    return dict(zip(["curve", "cluster", "embed"], _run_all(cmds, d)))


def _assert_ok(result, png):
    code, out, err = result
    assert code == 0, err
    assert "Traceback" not in err
    with open(png, "rb") as f:
        head = f.read(8)
    assert head == PNG_MAGIC and os.path.getsize(png) > 20_000  # a drawn figure, not an empty canvas
    return out


def test_curve_on_csv(good_runs, data_dir):
    out = _assert_ok(good_runs["curve"], data_dir / "curve.png")
    assert "60 points in 2-D" in out
    n_seg = _figure(r"slpc: (\d+) segments after 50 rounds", out)
    assert 1 <= n_seg <= 6
    assert ("capacity: the curve uses all 6 segments" in out) == (n_seg == 6)
    # the cubic stream is a curve: a sensible principal curve explains most of its variance
    assert _figure(r"R\^2 of the final curve on all points: (\S+)", out) > 0.7
    assert np.isfinite(_figure(r"cumulative prequential loss: (\S+)", out))


def test_cluster_on_npy(good_runs, data_dir):
    out = _assert_ok(good_runs["cluster"], data_dir / "cluster.png")
    assert "80 points in 2-D" in out
    k = _figure(r"PACBO: (\d+) clusters after 80 rounds", out)
    assert 1 <= k <= 8
    assert re.search(r"k̂ over time: t=8: \d+, .* t=80: %d" % k, out)
    assert ("capacity: PACBO uses all 8 centres" in out) == (k == 8)
    sizes = [int(m) for m in re.findall(r"centre \d+: \[.*\]  \(label \d+, (\d+) points(?: in memory)?\)", out)]
    m = re.search(r"memory: the drift test forgot (\d+) points; (\d+) of the 80 points are in memory", out)
    held = re.search(r"tracking: the (\d+) points in memory moved with their clusters", out)
    n = int(held.group(1)) if held else int(m.group(2)) if m else 80   # tracking counts the held rows
    assert len(sizes) == k and sum(sizes) == n                          # each in one printed cluster


def test_cluster_on_drifting_groups_counts_and_colours_what_it_remembers(tmp_path, capsys):
    # Four groups moving +30 in x: the drift test forgets their trails, so the nearest final centre
    # would claim a whole trail. The counts and the coloured points are the stored rows.
    xs = datasets.make_drifting_clusters_stream(240, shift=(30.0, 0.0), seed=3)
    np.save(tmp_path / "drift.npy", xs)
    args = cli.build_parser().parse_args(["cluster", "--csv", str(tmp_path / "drift.npy"), "--n-steps", "60",
                                          "--max-clusters", "8", "--history-size", "64", "--no-tracking",
                                          "--out", str(tmp_path / "drift.png")])
    fig = cli.run_cluster(args)
    out = capsys.readouterr().out
    assert fig["n_forgotten"] > 0
    assert 0 < fig["n_in_memory"] < 240 and fig["sizes"].sum() == fig["n_in_memory"]
    assert (f"memory: the drift test forgot {fig['n_forgotten']} points; {fig['n_in_memory']} of the 240 "
            "points are in memory") in out
    sizes = [int(m) for m in re.findall(r"\(label \d+, (\d+) points in memory\)", out)]
    assert sum(sizes) == fig["n_in_memory"]
    with open(tmp_path / "drift.png", "rb") as f:
        assert f.read(8) == PNG_MAGIC
    # The stationary default stream (tracking on, the default) forgets and moves nothing: every point
    # is counted where it arrived, and nothing is said about moved points.
    args = cli.build_parser().parse_args(["cluster", "--n", "60", "--n-steps", "60", "--max-clusters", "8",
                                          "--history-size", "64", "--out", ""])
    fig = cli.run_cluster(args)
    assert fig["n_forgotten"] == 0 and fig["sizes"].sum() == fig["n_in_memory"] == 60
    out = capsys.readouterr().out
    assert "memory:" not in out and "tracking:" not in out


def test_cluster_with_tracking_draws_the_points_where_it_holds_them(tmp_path, capsys):
    # With --tracking the remembered points move with their clusters: the counts are of the points
    # as held (not the stream's points of those arrivals), and the picture draws them there.
    xs = datasets.make_drifting_clusters_stream(240, shift=(30.0, 0.0), seed=3)
    np.save(tmp_path / "drift.npy", xs)
    args = cli.build_parser().parse_args(["cluster", "--csv", str(tmp_path / "drift.npy"), "--n-steps", "60",
                                          "--max-clusters", "8", "--history-size", "64", "--tracking",
                                          "--out", str(tmp_path / "track.png")])
    fig = cli.run_cluster(args)
    out = capsys.readouterr().out
    n = fig["n_in_memory"]
    assert 0 < n <= 64 and fig["sizes"].sum() == n
    assert f"tracking: the {n} points in memory moved with their clusters" in out
    sizes = [int(m) for m in re.findall(r"\(label \d+, (\d+) points in memory\)", out)]
    assert sum(sizes) == n
    with open(tmp_path / "track.png", "rb") as f:
        assert f.read(8) == PNG_MAGIC
    assert cli.build_parser().parse_args(["cluster"]).tracking is None       # the learner's default: on
    assert cli.build_parser().parse_args(["cluster", "--no-tracking"]).tracking is False


def test_cluster_shows_provisional_centres(tmp_path, capsys):
    # The four groups, then one point 5 sds below a group: too near to pay for a centre of its
    # own, too far to be explained. It is printed and drawn as a provisional centre, not a cluster.
    xs = datasets.make_four_groups_stream(60, seed=1)
    np.save(tmp_path / "far.npy", np.concatenate([xs, [[0.0, -5.0]]]))
    args = cli.build_parser().parse_args(["cluster", "--csv", str(tmp_path / "far.npy"), "--n-steps", "60",
                                          "--max-clusters", "8", "--history-size", "64",
                                          "--out", str(tmp_path / "far.png")])
    fig = cli.run_cluster(args)
    out = capsys.readouterr().out
    np.testing.assert_allclose(fig["provisional"], [[0.0, -5.0]])
    assert fig["n_clusters"] == 4 and fig["sizes"].sum() == 61
    assert "provisional centres: 1 of the last points no cluster explains yet" in out
    with open(tmp_path / "far.png", "rb") as f:
        assert f.read(8) == PNG_MAGIC


def test_cluster_passes_a_noise_scale_guess_on(tmp_path, monkeypatch):
    """--noise-scale reaches the learner as its noise_scale (the pooled guess); without it, none."""
    import jaxstream as js
    seen = []
    real = js.PACBO

    def spy(*a, **kw):
        seen.append(kw.get("noise_scale"))
        return real(*a, **kw)

    monkeypatch.setattr(js, "PACBO", spy)
    for extra, want in ((["--noise-scale", "0.5"], 0.5), ([], None)):
        args = cli.build_parser().parse_args(["cluster", "--n", "30", "--n-steps", "20", "--max-clusters", "8",
                                              "--history-size", "32", "--out", ""] + extra)
        assert cli.run_cluster(args)["n_clusters"] >= 1
    assert seen == [0.5, None]


def test_a_summary_at_its_capacity_says_so(tmp_path, capsys):
    """A curve or a clustering that ends with every segment or centre it may have says so (the
    stream asked for more than the cap), with the options that change it; below the cap, nothing."""
    route = datasets.make_route_stream(300, seed=1)  # five legs: more than 2 segments
    np.save(tmp_path / "route.npy", route)
    base = ["curve", "--csv", str(tmp_path / "route.npy"), "--history-size", "64", "--out", ""]
    fig = cli.run_curve(cli.build_parser().parse_args(base + ["--max-segments", "2"]))
    out = capsys.readouterr().out
    assert fig["n_segments"] == 2
    assert "capacity: the curve uses all 2 segments it may have" in out and "--max-segments raises the cap" in out
    fig = cli.run_curve(cli.build_parser().parse_args(base + ["--max-segments", "30"]))
    assert fig["n_segments"] < 30 and "capacity:" not in capsys.readouterr().out
    xs, _ = cli.four_groups_stream(80, seed=0)  # four groups 4σ or more apart: more than one centre
    np.save(tmp_path / "groups.npy", xs)
    base = ["cluster", "--csv", str(tmp_path / "groups.npy"), "--n-steps", "30", "--history-size", "64", "--out", ""]
    fig = cli.run_cluster(cli.build_parser().parse_args(base + ["--max-clusters", "1"]))
    out = capsys.readouterr().out
    assert fig["n_clusters"] == 1 and "capacity: PACBO uses all 1 centres it may have" in out


def test_curve_on_a_trace_draws_the_head_path(tmp_path, capsys):
    """A route in order ends in order: the command says that the loss counts the curve's head
    path, returns its segments (the lead from where the trace is now, a straight-line fit in
    time to the last 16 points, 8 fitted steps on; the join from the nearer end when the trace
    has passed it) and draws them; --end-lead 0 and a stream in random order have none."""
    route = datasets.make_route_stream(200, seed=3)
    np.save(tmp_path / "route.npy", route)
    np.save(tmp_path / "shuffled.npy", route[np.random.default_rng(0).permutation(len(route))])
    base = ["curve", "--max-segments", "12", "--history-size", "64"]
    args = cli.build_parser().parse_args(base + ["--csv", str(tmp_path / "route.npy"), "--out", str(tmp_path / "r.png")])
    fig = cli.run_curve(args)
    out = capsys.readouterr().out
    assert "counts the curve's head path, to where the trace is now and 8 fitted steps past it" in out
    v, head = fig["vertices"], fig["head_path"]
    assert head.shape[0] in (1, 2) and head.shape[1:] == (2, 2)
    t = np.arange(16.0)
    slope, icpt = np.polyfit(t, route[-16:], 1)
    here = icpt + 15 * slope
    np.testing.assert_allclose(head[-1], [here, here + 8 * slope], rtol=1e-4, atol=1e-4)
    if head.shape[0] == 2:                            # the join starts at the end nearer to `here`
        end = v[0] if np.sum((v[0] - here) ** 2) <= np.sum((v[-1] - here) ** 2) else v[-1]
        np.testing.assert_allclose(head[0], [end, here], rtol=1e-4, atol=1e-4)
    with open(tmp_path / "r.png", "rb") as f:
        assert f.read(8) == PNG_MAGIC
    for extra in (["--csv", str(tmp_path / "route.npy"), "--end-lead", "0"], ["--csv", str(tmp_path / "shuffled.npy")]):
        fig = cli.run_curve(cli.build_parser().parse_args(base + extra + ["--out", ""]))
        assert fig["head_path"].shape[0] == 0 and "head path" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["curve", "--end-lead", "-1"])


def test_curve_on_a_drifting_stream_draws_the_moved_curve(tmp_path, capsys):
    """A drifting arc with a fixed memory: the command says the loss measures points against the
    curve moved by the source's offset, returns that offset (the learner's `drift_offset`) and
    draws it; --no-drift-offset and an unlimited memory have none."""
    from jaxstream.curves.learner import drift_offset
    xs = datasets.make_drifting_curve_stream(300, shift=(0.0, 2.0), seed=1)
    np.save(tmp_path / "arc.npy", xs)
    base = ["curve", "--csv", str(tmp_path / "arc.npy"), "--max-segments", "12", "--history-size", "64"]
    args = cli.build_parser().parse_args(base + ["--memory", "40", "--out", str(tmp_path / "a.png")])
    fig = cli.run_curve(args)
    out = capsys.readouterr().out
    assert "the source drifts (memory 40 rounds): the prequential loss measures each point against" in out
    import jaxstream as js
    model = js.SLPC(max_segments=12, history_size=64, memory=40.0).partial_fit(xs.astype(np.float32))
    np.testing.assert_allclose(fig["drift_offset"], np.asarray(drift_offset(model.state_)), rtol=1e-5, atol=1e-7)
    assert fig["drift_offset"][1] > 0.02          # the arc moves up
    with open(tmp_path / "a.png", "rb") as f:
        assert f.read(8) == PNG_MAGIC
    for extra in (["--memory", "40", "--no-drift-offset"], ["--memory", "inf"]):
        fig = cli.run_curve(cli.build_parser().parse_args(base + extra + ["--out", ""]))
        assert fig["drift_offset"] is None and "the source drifts" not in capsys.readouterr().out


def test_embed_default(good_runs, data_dir):
    out = _assert_ok(good_runs["embed"], data_dir / "embed.png")
    assert "S-curve (300 points in 3-D" in out
    assert _figure(r"landmarks: (\d+) kept after 300 arrivals", out) == 20
    stress = _figure(r"normalised stress of the 2-D embedding: (\S+)", out)
    assert 0 < stress < 0.5  # a 2-D MDS of the S-curve keeps its large-scale shape
    # --save-state wrote a checkpoint that loads into an equal learner (float64: --float64)
    import jax
    import jaxstream as js
    from jaxstream import checkpoint
    with jax.enable_x64(True):
        state, meta = checkpoint.load(data_dir / "embed.ckpt", js.landmark_mds(20, n_components=2))
        assert int(np.asarray(state.is_landmark).sum()) == 20 and state.points.dtype == np.float64
    assert meta["command"] == "embed" and meta["options"]["seed"] == 0 and meta["columns"] == ["x", "y", "z"]


BAD_FILES = {
    "missing.csv": (None, "no such file"),
    "empty.csv": (b"", "is empty"),
    "header_only.csv": (b"x,y\n", "no data rows"),
    "text.csv": (b"x,y\n1,2\n3,abc\n5,6\n", "line 3, column 'y': 'abc' is not a number"),
    "nan.csv": (b"x,y\n1,2\n3,\n5,nan\n", "2 row(s) have missing, NaN or inf values (first: data row 2, column 'y')"),
    "inf.csv": (b"x,y\n1,2\n3,inf\n", "1 row(s) have missing, NaN or inf values"),
    "binary.csv": (bytes(range(128, 256)) * 4, "neither a UTF-8 CSV file nor a .npy array"),
    "short.csv": (b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(5)), "needs at least 21"),
}


def _npy_bytes(arr, **kw):
    import io
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


BAD_FILES["objects.npy"] = (_npy_bytes(np.array([{"a": 1}], dtype=object), allow_pickle=True),
                            "not a plain numeric .npy array")
BAD_FILES["strings.npy"] = (_npy_bytes(np.array([["a", "b"]])), "holds <U1 values; expected numbers")
BAD_FILES["cube.npy"] = (_npy_bytes(np.zeros((2, 2, 2))), "shape (2, 2, 2); expected (n, d)")
BAD_FILES["nan.npy"] = (_npy_bytes(np.array([[1.0, 2.0], [np.nan, 1.0]])), "1 row(s) have missing, NaN")


def _bad_cases(tmp_path):
    """(command line, expected message) for every bad-input case."""
    cases = []
    for name, (content, message) in BAD_FILES.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
        command = "cluster" if name.endswith(".npy") else "curve"
        cases.append(([command, "--csv", str(tmp_path / name), "--out", ""], message))
    (tmp_path / "ok.csv").write_text("a,b\n1,2\n3,4\n")
    cases.append((["embed", "--csv", str(tmp_path / "ok.csv"), "--columns", "a", "zz", "--out", ""],
                  "has no column 'zz'; its columns are: a, b"))
    cases.append((["embed", "--columns", "a", "--out", ""], "--columns needs --csv FILE"))
    cases.append((["curve", "--csv", str(tmp_path), "--out", ""], "is a directory"))
    cases.append((["cluster", "--drift-level", "1.5", "--out", ""], "drift_level must be in [0, 1)"))
    return cases


def _assert_one_line_error(code, out, err, message, cmd):
    assert code == 2, (cmd, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxstream "), (cmd, err)
    assert "error: " in lines[0] and message in lines[0], (cmd, err)
    assert out == ""


def test_bad_files_one_line_exit_2(tmp_path, capsys):
    """Every case through `main` in this process (nothing is compiled)."""
    for argv, message in _bad_cases(tmp_path):
        code = cli.main(argv)
        captured = capsys.readouterr()
        _assert_one_line_error(code, captured.out, captured.err, message, argv)


def test_command_end_to_end_errors_and_help(tmp_path):
    """The real command in subprocesses: help, a usage error and three bad files."""
    cases = {c[0][2].rsplit("/", 1)[-1] if len(c[0]) > 2 else "": c for c in _bad_cases(tmp_path)}
    picked = [cases[k] for k in ("missing.csv", "text.csv", "nan.csv")]
    cmds = [_cmd("--help"), _cmd("cluster", "--help"), _cmd("cluster", "--n-steps", "0")]
    cmds += [_cmd(*argv) for argv, _ in picked]
    res = _run_all(cmds, tmp_path)
    (c0, top, _), (c1, sub, _), (c2, _, usage_err) = res[:3]
    assert c0 == 0 and c1 == 0
    for word in ("curve", "cluster", "embed"):
        assert word in top
    for opt in ("--csv", "--columns", "--max-clusters", "--n-steps", "--lambda-scale", "--seed", "--out"):
        assert opt in sub
    assert "exit status 2" in sub
    assert c2 == 2 and "must be >= 1" in usage_err and "Traceback" not in usage_err
    for (code, out, err), (argv, message) in zip(res[3:], picked):
        _assert_one_line_error(code, out, err, message, argv)


# In-process checks of the reader and the dispatch (no subprocess, no compile).

def test_reader_picks_numeric_columns_and_keeps_order(tmp_path):
    p = tmp_path / "mixed.csv"
    p.write_text("time,place,lon,lat,depth\n2020-01-01,A,1.5,2,\n2020-01-02,B,3,4.25,7\n")
    xs, names = cli.read_points(str(p), drop_nonfinite=True)
    assert names == ["lon", "lat", "depth"]
    np.testing.assert_array_equal(xs, [[3.0, 4.25, 7.0]])  # the row with an empty depth is dropped
    xs, names = cli.read_points(str(p), ["lat", "lon"])
    np.testing.assert_array_equal(xs, [[2.0, 1.5], [4.25, 3.0]])
    np.save(tmp_path / "a.npy", np.arange(12.0).reshape(4, 3))
    xs, names = cli.read_points(str(tmp_path / "a.npy"), ["2", "0"])
    np.testing.assert_array_equal(xs, np.arange(12.0).reshape(4, 3)[:, [2, 0]])
    with pytest.raises(cli.InputError, match="no column 3"):
        cli.read_points(str(tmp_path / "a.npy"), ["3"])
    with pytest.raises(cli.InputError, match="column indices"):
        cli.read_points(str(tmp_path / "a.npy"), ["x"])


def test_reader_headerless_csv(tmp_path):
    p = tmp_path / "raw.csv"
    p.write_text("1.5,2,3\n4,5e-1,6\n")
    xs, names = cli.read_points(str(p))
    assert names == ["0", "1", "2"]
    np.testing.assert_array_equal(xs, [[1.5, 2.0, 3.0], [4.0, 0.5, 6.0]])
    xs, _ = cli.read_points(str(p), ["2", "0"])
    np.testing.assert_array_equal(xs, [[3.0, 1.5], [6.0, 4.0]])


def test_drop_nonfinite_reports_and_refuses_all_bad(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("x\nnan\ninf\n")
    with pytest.raises(cli.InputError, match="no row is left"):
        cli.read_points(str(p), drop_nonfinite=True)
    assert capsys.readouterr().err == ""  # the error is the one line the command prints
    p.write_text("x\nnan\n1.5\ninf\n")
    xs, _ = cli.read_points(str(p), drop_nonfinite=True)
    np.testing.assert_array_equal(xs, [[1.5]])
    assert "dropped 2 row(s)" in capsys.readouterr().err


def test_bare_command_and_aliases_dispatch(monkeypatch):
    seen = []
    for name in ("curve", "slpc", "cluster", "embed"):
        monkeypatch.setitem(cli.COMMANDS, name, lambda args: seen.append(args.command))
    assert cli.main([]) == 0 and cli.main(["--out", "x.png"]) == 0
    assert cli.main(["slpc"]) == 0 and cli.main(["cluster"]) == 0 and cli.main(["embed"]) == 0
    assert seen == ["curve", "curve", "slpc", "cluster", "embed"]


def test_curve_options_reach_the_learner():
    args = cli.build_parser().parse_args(["curve", "--init", "pca", "--penalty", "theory",
                                          "--length-scale", "0", "--eta-scale", "2"])
    assert (args.init, args.penalty, args.length_scale, args.eta_scale) == ("pca", "theory", 0.0, 2.0)
    for bad in (["--init", "kmeans"], ["--length-scale", "-1"], ["--penalty", "bic"], ["--outlier-scale", "0"],
                ["--outlier-scale", "nan"], ["--outlier-scale", "-inf"]):
        with pytest.raises(SystemExit) as e:
            cli.build_parser().parse_args(["curve", *bad])
        assert e.value.code == 2
    for text, value in (("inf", math.inf), ("250", 250.0)):
        args = cli.build_parser().parse_args(["curve", "--outlier-scale", text])
        assert args.outlier_scale == value
        assert float(js.slpc(outlier_scale=args.outlier_scale).params.outlier_scale) == value


_COUNT_COMPILES = """
import collections, sys
from jax import monitoring
ev = collections.Counter()
monitoring.register_event_listener(lambda name, **kw: ev.update([name]))
from jaxstream import cli
code = cli.main(sys.argv[1:])
print("REQUESTS", ev["/jax/compilation_cache/compile_requests_use_cache"], "HITS", ev["/jax/compilation_cache/cache_hits"])
sys.exit(code)
"""


def test_second_run_of_a_command_compiles_nothing(tmp_path, data_dir):
    """The command line keeps its compiled programs in a persistent cache
    (`cli.compilation_cache_dir`): run twice, the second run finds every
    program in the cache (each request a hit); JAXSTREAM_COMPILATION_CACHE=0
    turns it off (no hit, nothing written)."""
    env = {k: v for k, v in ENV.items() if not k.startswith("JAX_COMPILATION") and not k.startswith("JAX_PERSIST")}
    argv = ["curve", "--csv", str(data_dir / "cubic.csv"), "--columns", "x", "y", "--t0", "10", "--max-segments", "4",
            "--history-size", "32", "--out", ""]

    xdg = tmp_path / "xdg"  # where the default cache would go

    def run(cache):
        p = subprocess.run([sys.executable, "-c", _COUNT_COMPILES, *argv], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600,
                           env=dict(env, JAXSTREAM_COMPILATION_CACHE=cache, XDG_CACHE_HOME=str(xdg)))
        assert p.returncode == 0, p.stderr
        m = re.search(r"REQUESTS (\d+) HITS (\d+)", p.stdout)
        return int(m.group(1)), int(m.group(2))

    cache = str(tmp_path / "xla")
    req1, hits1 = run(cache)
    assert req1 > 0 and hits1 < req1 and os.listdir(cache)
    req2, hits2 = run(cache)
    assert req2 == req1 and hits2 == req2
    # off: nothing read from or written to any cache (JAX counts a request per
    # compile whether or not a cache is configured, so requests are not asserted)
    assert run("0")[1] == 0 and not xdg.exists()


def test_compilation_cache_location(monkeypatch, tmp_path):
    """JAX's own setting wins; then JAXSTREAM_COMPILATION_CACHE (0/off: none); then XDG_CACHE_HOME."""
    import jax
    own = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(cli.CACHE_ENV, raising=False)
    if own:
        assert cli.compilation_cache_dir() == own
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        assert cli.compilation_cache_dir() == os.path.join(str(tmp_path), "jaxstream", "xla")
        monkeypatch.setenv(cli.CACHE_ENV, "off")
        assert cli.compilation_cache_dir() is None
        monkeypatch.setenv(cli.CACHE_ENV, str(tmp_path / "mine"))
        assert cli.compilation_cache_dir() == str(tmp_path / "mine")
    finally:
        jax.config.update("jax_compilation_cache_dir", own)


def test_pictures_of_many_columns_show_the_principal_plane(tmp_path):
    """Above 2-D a picture shows the points' first two principal axes: points lying in a plane of
    6-D space keep their pairwise distances there, and the centres drawn are the projected ones.
    In 2-D the columns themselves."""
    rng = np.random.default_rng(0)
    flat = np.concatenate([rng.normal(size=(60, 2)) * [3.0, 1.0], [[8.0, 0.0]] * 3])
    q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    xs = flat @ q[:, :2].T + rng.normal(size=6)       # a plane through some point of 6-D space
    project, xl, yl = cli._plane(xs, [str(j) for j in range(6)])
    uv = project(xs)
    dist = lambda a: np.linalg.norm(a[:, None] - a[None], axis=-1)
    np.testing.assert_allclose(dist(uv), dist(flat), atol=1e-9)
    assert xl.startswith("PC 1") and "6 columns" in xl and yl.startswith("PC 2")
    two = rng.normal(size=(10, 2))
    project2, xl2, yl2 = cli._plane(two, ["lon", "lat"])
    np.testing.assert_array_equal(project2(two), two)
    assert (xl2, yl2) == ("lon", "lat")
    if cli._pyplot() is None:
        pytest.skip("matplotlib is not installed")
    import matplotlib.pyplot as plt
    centres = np.stack([xs[:60].mean(0), xs[60:].mean(0)])
    figures = dict(centers=centres, n_clusters=2, provisional=xs[-1:], k_over_time=np.full(63, 2))
    out = tmp_path / "six.png"
    pic = cli.pictures.Picture(plt, str(out), "six-D", [str(j) for j in range(6)])
    cli._plot_cluster(pic, xs, (np.arange(63) >= 60).astype(int), figures, np.ones(63), None, np.ones(63, bool))
    with open(out, "rb") as f:
        assert f.read(8) == PNG_MAGIC


def test_help_states_the_learners_defaults():
    """The help texts read the defaults from the code (they once said 400 for a cap of 36)."""
    from jaxstream.cli.parser import build_parser
    from jaxstream.clustering.types import default_params as pacbo_params
    from jaxstream.curves import objective
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {name: {a.dest: " ".join((a.help or "").split()) for a in p._actions}
             for name, p in sub.choices.items()}
    curve, cluster, embed = helps["curve"], helps["cluster"], helps["embed"]
    assert f"calibrated, {objective.DEFAULT_OUTLIER_SCALE:g})" in curve["outlier_scale"]
    assert f"calibrated, {objective.DEFAULT_H_SCALE:g})" in curve["h_scale"]
    assert f"calibrated, {objective.DEFAULT_LENGTH_SCALE:g})" in curve["length_scale"]
    assert f"default: {inspect.signature(js.slpc).parameters['end_lead'].default:g})" in curve["end_lead"]
    assert f"the learner's, {float(pacbo_params().drift_level):g})" in cluster["drift_level"]
    assert f"the learner's, {inspect.signature(js.pacbo).parameters['n_steps'].default})" in cluster["n_steps"]
    assert f"default: {inspect.signature(js.landmark_mds).parameters['max_landmarks'].default})" \
        in embed["max_landmarks"]


def test_reader_says_which_columns_it_left_out(tmp_path, capsys):
    """Columns that are not numbers (text, complex numbers) are left out, and stderr says which."""
    p = tmp_path / "mixed.csv"
    p.write_text("name,x,z,y\na,1.5,0.1+1j,2\nb,2.5,0.2+1j,3\n")
    xs, names = cli.read_points(str(p))
    assert names == ["x", "y"]
    np.testing.assert_array_equal(xs, [[1.5, 2.0], [2.5, 3.0]])
    assert "left out 'name', 'z'" in capsys.readouterr().err
    cli.read_points(str(p), ["x", "y"])
    assert capsys.readouterr().err == ""
