"""Command line: run a jaxstream learner on a stream and draw what it learned.

    jaxstream [curve]   sequential principal curve (slpc); the default command
    jaxstream cluster   PAC-Bayesian online clustering (PACBO)
    jaxstream embed     online landmarks + landmark MDS

Each command runs on embedded data by default (curve: the shipped USGS
seismic stream; cluster: the PACBO slides' four Gaussian groups; embed: an
S-curve in stream order), or on your own data with ``--csv FILE`` (a CSV with
a header row, or a ``.npy`` array of shape (n, d)) and ``--columns``. The
rows are the stream, in file order. It prints its figures and writes a PNG.

Bad input (a missing or empty file, unknown columns, text in a numeric
column, a row with more cells than the header, rows with missing/NaN/inf
values, values too large or too tiny for the working dtype, options that
contradict each other such as ``--history-size`` below ``--t0``) is reported
as one line on stderr with exit status 2; ``JAXSTREAM_DEBUG=1`` shows the
traceback instead.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from typing import Optional

import numpy as np

from .datasets import PACBO_MEANS, make_four_groups_stream

EXIT_BAD_INPUT = 2
SEISMIC_NAME = "embedded seismic stream (USGS 2020-08-21..09-21, 130E-180E, 70S-30N)"
FOUR_MEANS = PACBO_MEANS


class InputError(ValueError):
    """Bad data or options given on the command line (reported in one line, exit 2)."""


# ---------------------------------------------------------------------------
# Reading the user's data
# ---------------------------------------------------------------------------

def _parse_float(text: str):
    """float(text), NaN for an empty cell, None for text that is not a number."""
    text = text.strip()
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def read_csv_points(path: str, columns=None) -> tuple[np.ndarray, list]:
    """Read the numeric columns of a CSV file.

    Args:
      path: CSV file; the rows are the stream in file order. The first line
        is a header row unless all its cells are numbers (then the columns
        are named 0, 1, ... and the first line is data).
      columns: names of the columns to use, or None for every column whose
        first non-empty value is a number (then a later cell that is not a
        number is an error, not a reason to drop the column).

    Returns:
      ``(points (n, d) float64, column names)``; empty cells and "nan"/"inf"
      become NaN/inf (the caller decides what to do with such rows).

    Raises:
      InputError: empty file, no data rows, unknown columns, no numeric
        column, text in a numeric column, a row with too few cells for the
        columns used, or a row with more cells than the header (empty
        trailing cells, as a trailing comma gives, are allowed).
    """
    with open(path, "r", encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or not any(h.strip() for h in header):
            raise InputError(f"{path} is empty (expected a header row and data rows)")
        header = [h.strip() for h in header]
        rows, lines = [], []
        if all(h != "" and _parse_float(h) is not None for h in header):
            # No header row (every cell of the first line is a number): columns are named 0, 1, ...
            rows, lines = [header], [1]
            header = [str(j) for j in range(len(header))]
        for row in reader:
            if not row or all(c.strip() == "" for c in row):
                continue
            rows.append(row)
            lines.append(reader.line_num)
    if not rows:
        raise InputError(f"{path} has a header but no data rows")
    if columns is None:
        use = []
        for j, name in enumerate(header):
            first = next((r[j] for r in rows if j < len(r) and r[j].strip() != ""), None)
            if first is not None and _parse_float(first) is not None:
                use.append(j)
        if not use:
            raise InputError(f"{path} has no numeric column (columns: {', '.join(header)})")
    else:
        missing = [c for c in columns if c not in header]
        if missing:
            raise InputError(f"{path} has no column {', '.join(map(repr, missing))}; "
                             f"its columns are: {', '.join(header)}")
        use = [header.index(c) for c in columns]
    out = np.empty((len(rows), len(use)))
    for i, (row, line) in enumerate(zip(rows, lines)):
        if len(row) < len(header) and max(use) >= len(row):
            raise InputError(f"{path} line {line} has {len(row)} cells; the header has {len(header)}")
        extra = [c.strip() for c in row[len(header):] if c.strip() != ""]
        if extra:  # a value without a column: the row is misaligned or the header is short
            raise InputError(f"{path} line {line} has {len(row)} cells; the header has {len(header)} (extra value "
                             f"{extra[0]!r}): fix the row or add a column to the header")
        for k, j in enumerate(use):
            v = _parse_float(row[j])
            if v is None:
                raise InputError(f"{path} line {line}, column {header[j]!r}: {row[j].strip()!r} is not a number")
            out[i, k] = v
    return out, [header[j] for j in use]


def read_npy_points(path: str, columns=None) -> tuple[np.ndarray, list]:
    """Read a numeric ``.npy`` array of shape (n, d) (or (n,) as one column).

    Args:
      columns: column indices to keep (as strings or ints), or None for all.
    """
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as e:
        raise InputError(f"{path} is not a plain numeric .npy array ({str(e).splitlines()[0]})") from None
    except (OSError, EOFError) as e:
        raise InputError(f"{path} could not be read as .npy ({e})") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{path} is an .npz archive; save one array with np.save")
    if arr.dtype.kind not in "biuf":
        raise InputError(f"{path} holds {arr.dtype} values; expected numbers")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise InputError(f"{path} holds an array of shape {arr.shape}; expected (n, d)")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{path} is empty (shape {arr.shape})")
    names = [str(j) for j in range(arr.shape[1])]
    if columns is not None:
        try:
            idx = [int(c) for c in columns]
        except ValueError:
            raise InputError(f"--columns for a .npy file are column indices 0..{arr.shape[1] - 1}; "
                             f"got {' '.join(columns)}") from None
        bad = [j for j in idx if not -arr.shape[1] <= j < arr.shape[1]]
        if bad:
            raise InputError(f"{path} has {arr.shape[1]} columns; no column {bad[0]}")
        arr, names = arr[:, idx], [names[j] for j in idx]
    return arr.astype(np.float64), names


def read_points(path: str, columns=None, *, drop_nonfinite: bool = False) -> tuple[np.ndarray, list]:
    """Read a CSV or ``.npy`` file (told apart by its first bytes) as (n, d).

    Rows with NaN/inf/missing values raise `InputError` unless
    ``drop_nonfinite`` (then they are dropped and reported on stderr).
    """
    if os.path.isdir(path):
        raise InputError(f"{path} is a directory, not a data file")
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"\x93NUMPY":
        xs, names = read_npy_points(path, columns)
    elif magic == b"":
        raise InputError(f"{path} is empty")
    else:
        try:
            xs, names = read_csv_points(path, columns)
        except UnicodeDecodeError:
            raise InputError(f"{path} is neither a UTF-8 CSV file nor a .npy array") from None
    bad = ~np.isfinite(xs).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        col = names[int(np.flatnonzero(~np.isfinite(xs[first]))[0])]
        if not drop_nonfinite:
            raise InputError(f"{path}: {int(bad.sum())} row(s) have missing, NaN or inf values (first: data "
                             f"row {first + 1}, column {col!r}); fix them or pass --drop-nonfinite")
        xs = xs[~bad]
        print(f"dropped {int(bad.sum())} row(s) with missing, NaN or inf values", file=sys.stderr)
        if xs.shape[0] == 0:
            raise InputError(f"{path}: no row is left after dropping non-finite rows")
    return xs, names


def _load(args, default):
    """(points, description, column names) from --csv or the default data."""
    if args.csv:
        xs, names = read_points(args.csv, args.columns, drop_nonfinite=args.drop_nonfinite)
        return xs, args.csv, names
    if args.columns:
        raise InputError("--columns needs --csv FILE")
    return default(args)


def _need_rows(xs, n, what):
    if xs.shape[0] < n:
        raise InputError(f"the stream has {xs.shape[0]} point(s); {what} needs at least {n}")


def _save_state(args, model, state, name, names):
    """--save-state: the learned state as a checkpoint (see `jaxstream.checkpoint`)."""
    if not args.save_state:
        return
    from . import checkpoint
    from ._core import config_record
    options = {k: v for k, v in vars(args).items()
               if k not in ("save_state", "out", "csv", "columns") and isinstance(v, (int, float, str, bool))}
    checkpoint.save(args.save_state, model.learner, state,
                    metadata=dict(command=args.command, data=name, columns=list(names), options=options))
    print(f"state: {args.save_state} (jaxstream.checkpoint.load(path, learner) with a learner of "
          f"the same configuration: {config_record(model.learner.config)})")


# ---------------------------------------------------------------------------
# Pictures
# ---------------------------------------------------------------------------

def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("picture skipped: matplotlib is missing (pip install 'jaxstream[plot]')", file=sys.stderr)
        return None
    return plt


def _save(fig, plt, out):
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"picture: {out}")


def _axes(xs, names, n: int = 2):
    """The axes a picture shows: ``(project, labels, note)``, ``project(a)`` mapping (m, d) points to
    (m, n), ``labels`` the n axis names and ``note`` what the axes are ("" for the columns).

    With at most n columns, the columns. With more, the points' first n principal axes (about
    their mean): the view that shows most of their spread, where the first columns of
    well-separated groups in many dimensions often overlap. A .npy file's columns are named by
    their indices; the axes say "column 0" rather than a bare "0".
    """
    label = [f"column {c}" if str(c).isdigit() else c for c in names]
    if xs.shape[1] <= n:
        return (lambda a: np.asarray(a, np.float64)), label, ""
    mean = xs.mean(axis=0)
    _, sv, vt = np.linalg.svd(xs - mean, full_matrices=False)
    share = sv ** 2 / max(float(np.sum(sv ** 2)), np.finfo(np.float64).tiny)
    axes = vt[:n].T
    labels = [f"PC {j + 1} ({share[j]:.0%})" for j in range(n)]
    note = f"first {n} principal axes of {xs.shape[1]} columns"
    return (lambda a: (np.asarray(a, np.float64) - mean) @ axes), labels, note


def _plane(xs, names):
    """`_axes` with two axes: ``(project, x label, y label)``; principal axes say so on the x axis."""
    project, labels, note = _axes(xs, names, 2)
    return project, labels[0] + (f" ({note}; % of the variance)" if note else ""), labels[1]


def _xy(xs, names):
    """Two coordinates to draw (`_plane`), or (index, value) in 1-D: ``(u, v, x label, y label, project)``."""
    if xs.shape[1] >= 2:
        project, xl, yl = _plane(xs, names)
        uv = project(xs)
        return uv[:, 0], uv[:, 1], xl, yl, project
    return np.arange(len(xs)), xs[:, 0], "arrival", _axes(xs, names, 1)[1][0], None


# ---------------------------------------------------------------------------
# curve: slpc
# ---------------------------------------------------------------------------

FERRY_NAME = ("embedded AIS trace of the Staten Island ferry (2020-12-01..05, 3,729 reports in time order, "
              "local km)")


def _curve_default(args):
    from . import datasets
    if getattr(args, "data", "seismic") == "ferry":
        return datasets.load_trace(), FERRY_NAME, ["x (km east)", "y (km north)"]
    return datasets.seismic_stream(), SEISMIC_NAME, ["longitude (°E)", "latitude (°N)"]


def run_curve(args) -> dict:
    """Run slpc as ``jaxstream curve`` does; returns the figures it prints."""
    import jax
    import jaxstream as js

    xs, name, names = _load(args, _curve_default)
    t0 = args.t0 if args.t0 is not None else 20
    _need_rows(xs, t0 + 1, f"slpc with t0={t0}")
    kw = dict(max_segments=args.max_segments, history_size=args.history_size, t0=args.t0,
              h_scale=args.h_scale, length_scale=args.length_scale, eta_scale=args.eta_scale,
              delta=args.delta, init=args.init, penalty=args.penalty, outlier_scale=args.outlier_scale,
              memory=args.memory, end_lead=getattr(args, "end_lead", None),
              drift_offset=getattr(args, "drift_offset", None))
    kw = {k: v for k, v in kw.items() if v is not None}
    if kw.get("history_size", t0) < t0:
        raise InputError(f"--history-size {kw['history_size']} cannot hold the t0={t0} initial points: pass "
                         f"--history-size >= {t0} (or a smaller --t0)")
    dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
    xs = xs.astype(dtype)
    start = time.perf_counter()
    model = js.SLPC(seed=args.seed, **kw)
    losses = model.partial_fit(xs).last_losses_[t0:]
    vertices = model.vertices_
    seconds = time.perf_counter() - start
    stream = xs[t0:].astype(np.float64)
    figures = dict(
        data=name, n_points=int(xs.shape[0]), dim=int(xs.shape[1]),
        cumulative_loss=float(losses.sum()),
        prequential_r2=float(1 - losses.sum() / ((stream - stream.mean(0)) ** 2).sum()),
        r2=float(model.score(xs)), n_segments=model.n_segments_, seconds=seconds,
        length=float(np.linalg.norm(np.diff(np.asarray(vertices, np.float64), axis=0), axis=1).sum()),
        vertices=np.asarray(vertices), head_path=_head_path(model), drift_offset=_drift_offset(model))
    print(f"data: {name}: {figures['n_points']} points in {figures['dim']}-D")
    print(f"slpc: {figures['n_segments']} segments after {xs.shape[0] - t0} rounds "
          f"(t0={t0} initial points) in {seconds:.2f} s (compile included)")
    unit = " km" if "(km" in names[0] else "°" if "°" in names[0] else " (data units)"
    print(f"curve: {figures['n_segments']} segments, length {figures['length']:.4g}{unit} "
          f"(the data's extent: {_extent(xs):.4g}{unit} between its farthest two principal projections)")
    print(f"cumulative prequential loss: {figures['cumulative_loss']:.4g} "
          f"(mean {figures['cumulative_loss'] / max(len(losses), 1):.4g} per point)")
    print(f"prequential R^2: {figures['prequential_r2']:.4f}")
    print(f"R^2 of the final curve on all points: {figures['r2']:.4f}")
    if figures["n_segments"] >= model.max_segments:
        print(f"capacity: the curve uses all {model.max_segments} segments it may have; the stream asked "
              f"for more (--max-segments raises the cap; --length-scale or --h-scale above their defaults "
              f"give a smoother summary at a higher prequential loss)")
    if len(figures["head_path"]):
        print(f"the stream arrives in order: the prequential loss also counts the curve's head path, to where "
              f"the trace is now and {model.end_lead:g} fitted steps past it (drawn dashed; --end-lead 0: the "
              f"curve itself)")
    if figures["drift_offset"] is not None:
        from .curves.tracking import memory
        tau = float(memory(model.state_))
        print(f"the source drifts (memory {tau:.0f} rounds): the prequential loss measures each point "
              f"against the curve moved by the source's estimated offset, now "
              f"({', '.join(f'{c:.3g}' for c in figures['drift_offset'])}) (drawn dashed; --no-drift-offset: "
              f"the curve itself)")
    _save_state(args, model, model.state_, name, names)
    if args.out and (plt := _pyplot()) is not None:
        _plot_curve(plt, xs, figures, names, args.out, name, losses)
    return figures


def _extent(xs) -> float:
    """The stream's extent along its first principal axis (largest minus smallest projection)."""
    x = np.asarray(xs, np.float64)
    c = x - x.mean(0)
    axis = np.linalg.svd(c, full_matrices=False)[2][0]
    p = c @ axis
    return float(p.max() - p.min())


def _head_path(model) -> np.ndarray:
    """(k, 2, d) the segments of the curve's head path that the next point's loss counts when the
    stream ends in order (`jaxstream.curves.learner.head_path`: the join from the curve's end, where
    the trace has passed it, then the lead); (0, 2, d) otherwise."""
    from .curves.learner import head_path
    s = model.state_
    if model.end_lead == 0:
        return np.zeros((0, 2, s.vertices.shape[-1]))
    seg, ok, in_order = head_path(s, model.end_lead)
    if not bool(in_order):
        return np.zeros((0, 2, s.vertices.shape[-1]))
    return np.asarray(seg, np.float64)[np.asarray(ok)]


def _drift_offset(model):
    """(d,) the offset the next point's loss moves the curve by (`jaxstream.curves.learner.drift_offset`),
    or None when it moves it by nothing (unlimited memory, a trace in order, ``drift_offset=False``)."""
    from .curves.learner import drift_offset
    if not model.drift_offset or model.state_ is None:
        return None
    off = np.asarray(drift_offset(model.state_), np.float64)
    return off if np.any(off != 0) else None


def _plot_curve(plt, xs, figures, names, out, title, losses):
    vertices = figures["vertices"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw=dict(width_ratios=[1.3, 1]))
    u, v, xl, yl, project = _xy(xs, names)
    sc = ax.scatter(u, v, c=np.arange(len(xs)), cmap="viridis", s=12, label="stream", zorder=2)
    if project is not None:
        # Hollow vertex markers: a vertex placed on a lone point must not hide it.
        pv = project(vertices)
        ax.plot(pv[:, 0], pv[:, 1], "-o", color="crimson", ms=5, mfc="none", mew=1.2, lw=1.6,
                zorder=3, label=f"slpc curve ({figures['n_segments']} segments, length {figures['length']:.3g})")
        if figures.get("drift_offset") is not None:
            pm = project(vertices + figures["drift_offset"])
            ax.plot(pm[:, 0], pm[:, 1], "--", color="crimson", lw=1.2, alpha=0.8, zorder=3,
                    label="curve moved by the drift (the next point's loss)")
        for j, seg in enumerate(figures["head_path"]):
            seg = project(seg)
            ax.plot(seg[:, 0], seg[:, 1], "--", color="crimson", lw=1.2, alpha=0.8, zorder=3,
                    label="head path (the next point's loss)" if j == 0 else None)
    fig.colorbar(sc, ax=ax, label="arrival order", shrink=0.8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"slpc on {title.split(' (')[0]}", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    t = np.arange(1, len(losses) + 1)
    ax2.plot(t, np.cumsum(losses) / t, color="k", lw=1.2)
    ax2.set_xlabel("round t (after the initial points)")
    ax2.set_ylabel("mean prequential loss up to t")
    ax2.set_title(f"prequential R² {figures['prequential_r2']:.3f}, final R² {figures['r2']:.3f}", fontsize=10)
    ax2.grid(alpha=0.3)
    _save(fig, plt, out)


# ---------------------------------------------------------------------------
# cluster: PACBO
# ---------------------------------------------------------------------------

def four_groups_stream(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The PACBO slides' first stream: an equal mixture of N(m_j, I) in 2-D
    with means (0,0), (-4,-1), (0,7), (5,2), i.i.d. labels
    (`datasets.make_four_groups_stream` with ``balanced=False``).
    Returns (points (n, 2), labels)."""
    xs, labels, _ = make_four_groups_stream(n, seed, balanced=False, return_truth=True)
    return xs, labels


def _cluster_default(args):
    xs, _ = four_groups_stream(args.n, seed=0)
    return xs, (f"generated four Gaussian groups (PACBO slides; {args.n} points, means (0,0) (-4,-1) "
                "(0,7) (5,2), unit variance)"), ["x1", "x2"]


def run_cluster(args) -> dict:
    """Run PACBO as ``jaxstream cluster`` does; returns the figures it prints."""
    import jax
    import jaxstream as js

    xs, name, names = _load(args, _cluster_default)
    _need_rows(xs, 2, "PACBO")
    xs = xs.astype(np.float64 if jax.config.jax_enable_x64 else np.float32)
    kw = dict(max_clusters=args.max_clusters, history_size=args.history_size, n_steps=args.n_steps,
              lambda_scale=args.lambda_scale, drift_level=args.drift_level, noise_scale=args.noise_scale,
              tracking=args.tracking)
    kw = {k: v for k, v in kw.items() if v is not None}
    start = time.perf_counter()
    model = js.PACBO(radius=args.radius, seed=args.seed, **kw)
    model.partial_fit(xs)
    seconds = time.perf_counter() - start
    info = model.last_info_
    losses = np.asarray(info.loss, np.float64)
    k_t = np.asarray(info.n_clusters)
    centers = model.cluster_centers_
    # predict gives each point its cluster's label; cluster_labels_ is the label of each row of
    # centers (stable labels: a cluster keeps its label while others appear and disappear).
    ids = model.cluster_labels_
    labels = np.asarray(model.predict(xs))
    rows = np.argmax(labels[:, None] == ids[None, :], axis=1)
    if not (labels[:, None] == ids[None, :]).any(axis=1).all():
        raise RuntimeError("PACBO.predict returned a label that no current centre has")
    # Once the drift test has forgotten points, the centres summarise what is remembered: count and
    # colour those (the stored rows; row i of the stream arrived as index i + 1), not a drifting
    # group's whole trail, which the nearest final centre would otherwise claim.
    n_forgotten = int(np.sum(np.asarray(info.n_forgotten)))
    state = model.state_
    stored = np.asarray(state.history_index)[np.asarray(state.history_mask)]
    in_memory = np.isin(np.arange(1, xs.shape[0] + 1), stored) if n_forgotten else np.ones(xs.shape[0], bool)
    held = np.asarray(state.history)[np.asarray(state.history_mask)]
    if not model.learner.config.tracking or np.array_equal(held, xs[stored - 1]):
        held = None  # the points in memory stand where they arrived
    if held is not None:
        # Tracking moved the remembered points with their clusters: count and draw them where the
        # learner holds them (its centres summarise those), the stream as it arrived in grey.
        held_rows = np.argmax(np.asarray(model.predict(held))[:, None] == ids[None, :], axis=1)
        rows_for_sizes = held_rows
    else:
        rows_for_sizes = rows[in_memory]
    figures = dict(data=name, n_points=int(xs.shape[0]), dim=int(xs.shape[1]),
                   n_clusters=model.n_clusters_, centers=centers, labels=ids, k_over_time=k_t,
                   cumulative_loss=float(losses.sum()), mean_loss=float(losses.mean()),
                   sizes=np.bincount(rows_for_sizes, minlength=centers.shape[0]), seconds=seconds,
                   n_forgotten=n_forgotten, n_in_memory=int(len(rows_for_sizes)),
                   provisional=np.asarray(state.recent)[np.asarray(state.provisional)])
    print(f"data: {name}: {figures['n_points']} points in {figures['dim']}-D")
    print(f"PACBO: {figures['n_clusters']} clusters after {xs.shape[0]} rounds in {seconds:.2f} s "
          "(compile included)")
    if figures["n_clusters"] >= model.max_clusters:
        print(f"capacity: PACBO uses all {model.max_clusters} centres it may have; the quasi-posterior may "
              f"want more (--max-clusters raises the cap)")
    marks = sorted({max(1, int(round(f * len(k_t)))) for f in (0.1, 0.25, 0.5, 0.75, 1.0)})
    print("k̂ over time: " + ", ".join(f"t={t}: {int(k_t[t - 1])}" for t in marks))
    print(f"cumulative prequential loss: {figures['cumulative_loss']:.4g} "
          f"(mean {figures['mean_loss']:.4g} per point)")
    if held is not None:
        print(f"tracking: the {len(held)} points in memory moved with their clusters; the counts below and the "
              "coloured points are where the learner holds them, the stream as it arrived is grey")
    if n_forgotten:
        print(f"memory: the drift test forgot {n_forgotten} points; {figures['n_in_memory']} of the "
              f"{xs.shape[0]} points are in memory" +
              ("" if held is not None else " (the counts below, the coloured points; the rest grey)"))
    if len(figures["provisional"]):
        print(f"provisional centres: {len(figures['provisional'])} of the last points no cluster explains yet "
              "(they predict the next points; not clusters)")
    unit = "points in memory" if n_forgotten else "points"
    with np.printoptions(precision=3, suppress=True):
        for j, (c, m, i) in enumerate(zip(centers, figures["sizes"], ids)):
            if j == 10:
                print(f"  ... {centers.shape[0] - 10} more")
                break
            print(f"  centre {j}: {c}  (label {i}, {m} {unit})")
    _save_state(args, model, model.state_, name, names)
    if args.out and (plt := _pyplot()) is not None:
        _plot_cluster(plt, xs, rows, figures, names, args.out, name, losses,
                      FOUR_MEANS if not args.csv else None, in_memory,
                      None if held is None else (held, held_rows, stored))
    return figures


def _plot_cluster(plt, xs, labels, figures, names, out, title, losses, truth, in_memory, held=None):
    """held: None, or (points (m, d), their centre rows (m,), arrival indices (m,)) drawn instead of
    the stream's points in memory (tracking: the learner holds them moved)."""
    fig = plt.figure(figsize=(11, 5))
    ax = fig.add_subplot(1, 2, 1)
    u, v, xl, yl, project = _xy(xs, names)
    cmap = dict(cmap="tab10" if labels.max() < 10 else "tab20", vmin=0, vmax=9 if labels.max() < 10 else 19)
    if held is not None:
        ax.scatter(u, v, c="0.75", s=8, alpha=0.6, zorder=1, label=f"the stream as it arrived ({len(u)} points)")
        pts, rows, idx = held
        pts = project(pts) if project is not None else np.c_[idx - 1, pts[:, 0]]      # 1-D: arrival, value
        ax.scatter(pts[:, 0], pts[:, 1], c=rows, s=12, alpha=0.8, zorder=2, **cmap,
                   label=f"in memory, moved with their clusters ({len(pts)} points)")
    else:
        if not in_memory.all():
            ax.scatter(u[~in_memory], v[~in_memory], c="0.75", s=8, alpha=0.6, zorder=1,
                       label=f"not in memory ({int((~in_memory).sum())} points: forgotten or out of the sample)")
        ax.scatter(u[in_memory], v[in_memory], c=labels[in_memory], s=12, alpha=0.8, zorder=2, **cmap)
    c = figures["centers"]
    if project is not None:
        c = project(c)
        ax.scatter(c[:, 0], c[:, 1], marker="X", s=160, c="k", edgecolors="w", linewidths=1.5, zorder=3,
                   label=rf"PACBO centres ($\hat{{k}}$={figures['n_clusters']})")
        pv = project(figures["provisional"]) if len(figures["provisional"]) else []
        if len(pv):
            ax.scatter(pv[:, 0], pv[:, 1], marker="X", s=120, facecolors="none", edgecolors="k", linewidths=1.0,
                       zorder=3, label=f"provisional centres ({len(pv)}: recent points no cluster explains)")
        if truth is not None:
            truth = project(truth)
            ax.scatter(truth[:, 0], truth[:, 1], marker="o", s=160, facecolors="none", edgecolors="crimson",
                       linewidths=1.5, zorder=3, label="true means")
        ax.legend(loc="best", fontsize=8, framealpha=0.6)  # see-through: it may sit on a lone point
    else:
        for j, cj in enumerate(c[:, 0]):
            ax.axhline(cj, color="k", lw=1, ls="--", label="PACBO centres" if j == 0 else None)
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"PACBO on {title.split(' (')[0]}", fontsize=10)
    t = np.arange(1, len(losses) + 1)
    ax1 = fig.add_subplot(2, 2, 2)
    ax1.step(t, figures["k_over_time"], where="post", color="C0")
    ax1.set_ylabel(r"$\hat{k}_t$")
    ax1.set_title("number of clusters over time", fontsize=10)
    ax1.grid(alpha=0.3)
    ax2 = fig.add_subplot(2, 2, 4, sharex=ax1)
    ax2.plot(t, np.cumsum(losses) / t, color="k", lw=1.2)
    ax2.set_xlabel("round t")
    ax2.set_ylabel("mean prequential loss")
    ax2.grid(alpha=0.3)
    _save(fig, plt, out)


# ---------------------------------------------------------------------------
# embed: online landmarks + landmark MDS
# ---------------------------------------------------------------------------

def _embed_default(args):
    from . import datasets
    xs, _ = datasets.make_s_curve(args.n, random_state=0, sort_by_t=True)
    return xs, f"S-curve ({args.n} points in 3-D, streamed along the curve)", ["x", "y", "z"]


def _stress_sample(n: int, cap: int, seed: int) -> np.ndarray:
    if n <= cap:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, cap, replace=False))


def run_embed(args) -> dict:
    """Run online landmark MDS as ``jaxstream embed`` does; returns its figures."""
    import jax
    import jaxstream as js
    from .embedding import landmark_stress, normalized_stress

    xs, name, names = _load(args, _embed_default)
    k = args.n_components if args.n_components is not None else min(2, xs.shape[1])
    if k > xs.shape[1]:
        raise InputError(f"--n-components={k} exceeds the data's dimension d={xs.shape[1]}")
    _need_rows(xs, 2, "the landmark embedding")
    xs = xs.astype(np.float64 if jax.config.jax_enable_x64 else np.float32)
    kw = dict(n_components=k, buffer_size=args.buffer_size, eps0=args.eps0)
    kw = {k_: v for k_, v in kw.items() if v is not None}
    start = time.perf_counter()
    model = js.LandmarkMDS(args.max_landmarks, seed=args.seed, **kw).fit(xs)
    info = model.last_info_
    Y = np.asarray(model.transform(xs))
    seconds = time.perf_counter() - start
    lm_idx = np.asarray(model.landmark_indices_)
    idx = _stress_sample(xs.shape[0], args.stress_sample, args.seed)
    X64 = xs.astype(np.float64)
    D = np.sqrt(np.maximum(((X64[idx, None, :] - X64[None, idx, :]) ** 2).sum(-1), 0.0))
    stress = float(normalized_stress(D, Y[idx].astype(np.float64)))
    D_L = np.sqrt(np.maximum(((X64[lm_idx, None, :] - X64[None, lm_idx, :]) ** 2).sum(-1), 0.0))
    l_stress = float(landmark_stress(D_L, Y[lm_idx].astype(np.float64), np.arange(len(lm_idx))))
    eps_t = np.asarray(info.eps, np.float64)
    figures = dict(data=name, n_points=int(xs.shape[0]), dim=int(xs.shape[1]), n_components=k,
                   n_landmarks=int(len(lm_idx)), landmark_indices=lm_idx, eps=float(eps_t[-1]),
                   stress=stress, landmark_stress=l_stress, n_stress_points=int(len(idx)),
                   n_replaced=int(np.asarray(info.replaced).sum()), seconds=seconds, embedding=Y)
    print(f"data: {name}: {figures['n_points']} points in {figures['dim']}-D")
    print(f"landmarks: {figures['n_landmarks']} kept after {xs.shape[0]} arrivals "
          f"({figures['n_replaced']} replacements), final eps {figures['eps']:.4g}; "
          f"{seconds:.2f} s (compile included)")
    print(f"normalised stress of the {k}-D embedding: {stress:.4f} "
          f"({'all' if len(idx) == xs.shape[0] else 'a sample of'} {len(idx)} points, all pairs)")
    print(f"normalised stress over landmark pairs: {l_stress:.4f}")
    _save_state(args, model, model.state_, name, names)
    if args.out and (plt := _pyplot()) is not None:
        _plot_embed(plt, xs, Y, lm_idx, eps_t, figures, names, args.out, name)
    return figures


def _plot_embed(plt, xs, Y, lm_idx, eps_t, figures, names, out, title):
    fig = plt.figure(figsize=(12, 5))
    order = np.arange(len(xs))
    if xs.shape[1] >= 3:
        project, labels, note = _axes(xs, names, 3)
        p3 = project(xs)
        ax0 = fig.add_subplot(1, 3, 1, projection="3d")
        ax0.scatter(p3[:, 0], p3[:, 1], p3[:, 2], c=order, cmap="viridis", s=5)
        ax0.scatter(p3[lm_idx, 0], p3[lm_idx, 1], p3[lm_idx, 2], s=30, facecolors="none",
                    edgecolors="crimson", linewidths=1.0)
        ax0.set_xlabel(labels[0])
        ax0.set_ylabel(labels[1])
        ax0.set_zlabel(labels[2])
    else:
        ax0 = fig.add_subplot(1, 3, 1)
        u, v, xl, yl, _ = _xy(xs, names)
        ax0.scatter(u, v, c=order, cmap="viridis", s=5)
        ax0.scatter(u[lm_idx], v[lm_idx], s=30, facecolors="none", edgecolors="crimson", linewidths=1.0)
        ax0.set_xlabel(xl)
        ax0.set_ylabel(yl)
    ax0.set_title("data (landmarks circled)" + (f"\non its {note}" if xs.shape[1] > 3 else ""), fontsize=10)
    ax = fig.add_subplot(1, 3, 2)
    if Y.shape[1] >= 2:
        u, v, xl, yl = Y[:, 0], Y[:, 1], "MDS 1", "MDS 2"
    else:
        u, v, xl, yl = order, Y[:, 0], "arrival", "MDS 1"
    sc = ax.scatter(u, v, c=order, cmap="viridis", s=6)
    ax.scatter(u[lm_idx], v[lm_idx], s=40, facecolors="none", edgecolors="crimson", linewidths=1.2,
               label=f"{len(lm_idx)} landmarks")
    fig.colorbar(sc, ax=ax, label="arrival order", shrink=0.8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"landmark MDS of {title.split(' (')[0]}\nstress {figures['stress']:.3f}", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    ax2 = fig.add_subplot(1, 3, 3)
    ax2.plot(np.arange(1, len(eps_t) + 1), eps_t, color="k", lw=1.2)
    ax2.set_xlabel("arrival")
    ax2.set_ylabel("covering threshold ε")
    ax2.set_title("ε over time", fontsize=10)
    ax2.grid(alpha=0.3)
    _save(fig, plt, out)


# ---------------------------------------------------------------------------
# Argument parsing
# ---------------------------------------------------------------------------

def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {v}")
    return v


def _finite_float(text, *, strict: bool):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and (v > 0 if strict else v >= 0)):
        raise argparse.ArgumentTypeError(f"must be a finite number {'>' if strict else '>='} 0; got {text}")
    return v


def _positive_float(text):
    return _finite_float(text, strict=True)


def _nonneg_float(text):
    return _finite_float(text, strict=False)


def _positive_or_inf(text):
    return math.inf if text.strip().lower() in ("inf", "+inf", "infinity") else _positive_float(text)


def _common(p, out):
    g = p.add_argument_group("data and output")
    g.add_argument("--csv", metavar="FILE",
                   help="your stream: a CSV file (header row optional), or a .npy array of shape (n, d) "
                        "(recognised by its content); rows are learned in file order")
    g.add_argument("--columns", nargs="+", metavar="COL",
                   help="CSV column names (or .npy column indices) to use; default: every numeric column")
    g.add_argument("--drop-nonfinite", action="store_true",
                   help="drop rows with missing, NaN or inf values instead of stopping with an error")
    g.add_argument("--out", default=out, metavar="PNG", help=f"picture to write (default: {out}; '' for none)")
    g.add_argument("--seed", type=int, default=0, help="seed of the learner's PRNG key (default: 0)")
    g.add_argument("--float64", action="store_true", help="compute in float64 (jax_enable_x64)")
    g.add_argument("--save-state", metavar="FILE",
                   help="also save the learned state as a checkpoint (jaxstream.checkpoint.load reads it)")


HELP_EPILOG = ("Data with more columns than a picture's axes (two; three for the embed command's data) are "
               "drawn on their first principal axes. Bad data files give one error line on stderr and exit status 2 "
               "(set JAXSTREAM_DEBUG=1 to see the traceback instead).")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxstream", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Online summaries of data streams in JAX: run a learner on a stream, print its "
                    "figures and write a picture.\nWith no command, runs `curve` on the shipped seismic "
                    "stream.", epilog="`jaxstream COMMAND --help` explains a command's options.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "curve", aliases=["slpc"], epilog=HELP_EPILOG,
        help="sequential principal curve (slpc) through the stream (default command)",
        description="Sequential principal curve (slpc, Li & Guedj 2021): a polygonal line through the "
                    "middle of the stream, learned one point at a time. Default data: the shipped USGS "
                    "epicentres (longitude, latitude) in 130E-180E, 70S-30N, in time order. Prints the "
                    "prequential loss and R^2; draws the points, the curve and the running loss.")
    p.add_argument("--max-segments", type=_positive_int, metavar="P",
                   help="largest number of segments of the curve (capacity; default: the learner's, 50)")
    p.add_argument("--history-size", type=_positive_int, metavar="H",
                   help="past points kept to evaluate candidate curves (capacity; default: the learner's)")
    p.add_argument("--t0", type=_positive_int, metavar="N",
                   help="initial points that build the first curve (default: 20)")
    p.add_argument("--init", choices=("fit", "pca"),
                   help="first curve: 'fit' (default) fits the penalised objective offline on the t0 "
                        "initial points; 'pca' is the paper's first-principal-component segment")
    p.add_argument("--penalty", choices=("noise", "theory"),
                   help="'noise' (default): a segment is priced in units of the residual noise "
                        "variance (equivariant); 'theory': the paper's h(f)/eta_t")
    p.add_argument("--h-scale", type=_positive_float, metavar="A",
                   help="multiplier of the price of a segment (larger: fewer segments; default: "
                        "calibrated, 0.5)")
    p.add_argument("--outlier-scale", type=_positive_or_inf, metavar="K",
                   help="with --penalty noise, one point's loss in the objective is capped at K noise "
                        "variances (times d-1), so isolated points do not pull the curve; 'inf' for "
                        "the plain squared loss (default: calibrated, 400)")
    p.add_argument("--length-scale", type=_nonneg_float, metavar="A",
                   help="multiplier of the price of the curve's length with --penalty noise (larger: "
                        "shorter curves, fewer folds; default: calibrated)")
    p.add_argument("--eta-scale", type=_positive_float, metavar="A",
                   help="multiplier of the learning rate eta_t; used only with --penalty theory")
    p.add_argument("--data", choices=("seismic", "ferry"), default="seismic",
                   help="embedded stream when --csv is not given: 'seismic' (USGS epicentres, default) or "
                        "'ferry' (a real AIS trace arriving in time order: the curve follows the route)")
    p.add_argument("--memory", type=_positive_or_inf, metavar="TAU",
                   help="forgetting time scale in rounds ('inf': never forget; default: automatic, "
                        "unlimited until the stream drifts)")
    p.add_argument("--delta", type=_positive_float, metavar="D",
                   help="lattice spacing of the vertices, relative to the spread of the initial points "
                        "(see jaxstream.slpc; default: the learner's)")
    p.add_argument("--end-lead", type=_nonneg_float, metavar="S",
                   help="on a stream arriving in order, the prequential loss also counts the curve's "
                        "head path: from its end to where the trace is now, and S fitted steps of the "
                        "trace past it (drawn dashed; 0: the curve itself, the paper's loss; default: 8)")
    p.add_argument("--no-drift-offset", dest="drift_offset", action="store_false",
                   help="on a drifting stream in random order, measure the prequential loss against the "
                        "curve itself, not the curve moved by the source's estimated offset (the default)")
    _common(p, "curve.png")

    p = sub.add_parser(
        "cluster", aliases=["pacbo"], epilog=HELP_EPILOG,
        help="online clustering with a varying number of clusters (PACBO)",
        description="PAC-Bayesian online clustering (PACBO, Li, Guedj & Loustau 2018): cluster centres "
                    "whose number k̂ changes over time, drawn by reversible-jump MCMC from a Gibbs "
                    "quasi-posterior each round. Default data: the slides' four Gaussian groups in 2-D. "
                    "Prints k̂ over time, the prequential loss and the centres; draws the clusters, "
                    "k̂_t and the running loss.")
    p.add_argument("--n", type=_positive_int, default=200, help="points of the generated default stream "
                   "(default: 200; ignored with --csv)")
    p.add_argument("--max-clusters", type=_positive_int, metavar="P",
                   help="largest number of clusters (capacity; default: the learner's, 50)")
    p.add_argument("--history-size", type=_positive_int, metavar="H",
                   help="past points kept for the quasi-posterior (capacity; default: the learner's)")
    p.add_argument("--n-steps", type=_positive_int, metavar="N",
                   help="MCMC steps per round (default: the learner's, 500)")
    p.add_argument("--lambda-scale", type=_positive_float, metavar="A",
                   help="multiplier of the inverse temperature λ (larger: more clusters; default: the "
                        "learner's)")
    p.add_argument("--drift-level", type=float, metavar="A",
                   help="level of the per-cluster drift test in [0, 1): a cluster whose points move forgets "
                        "its old ones (0: never forget; default: the learner's, 3e-3)")
    p.add_argument("--tracking", action=argparse.BooleanOptionalAction, default=None,
                   help="a cluster whose points move keeps them and moves them with it, at its estimated "
                        "velocity (default: on); the picture then draws the points in memory where the "
                        "learner holds them. --no-tracking: it keeps only its newest points")
    p.add_argument("--radius", type=_positive_float, metavar="R",
                   help="bound on the norm of the points, a ball centred at the origin (default: none; the "
                        "prior ball is learned from the stream, so results do not depend on units or origin)")
    p.add_argument("--noise-scale", type=_positive_float, metavar="SD",
                   help="a guess of the groups' noise standard deviation per column, in the data's units "
                        "(default: none, learned from the data alone); it settles the first rounds, where few "
                        "points cannot tell one group's spread from two groups; when unsure, guess low")
    _common(p, "cluster.png")

    p = sub.add_parser(
        "embed", aliases=["landmarks"], epilog=HELP_EPILOG,
        help="online landmarks and a landmark-MDS embedding of the stream",
        description="Online landmark replacement and landmark MDS (Thongprayoon & Masuda 2024): a "
                    "bounded set of landmarks that covers the stream, and a low-dimensional embedding "
                    "of every point from its distances to them. Default data: an S-curve in 3-D, "
                    "streamed along the curve. Prints the number of landmarks, ε and the normalised "
                    "stress; draws the data with the landmarks and the embedding coloured by arrival.")
    p.add_argument("--n", type=_positive_int, default=1000, help="points of the generated default stream "
                   "(default: 1000; ignored with --csv)")
    p.add_argument("--max-landmarks", type=_positive_int, default=100, metavar="L",
                   help="most landmarks kept (capacity; default: 100)")
    p.add_argument("--n-components", type=_positive_int, metavar="K",
                   help="dimension of the embedding (default: 2, or d for 1-D data)")
    p.add_argument("--buffer-size", type=_positive_int, metavar="N",
                   help="recent points forming the neighbourhood graph (capacity; default: the learner's, "
                        "max(1024, 10 x max-landmarks))")
    p.add_argument("--eps0", type=_nonneg_float, metavar="E", help="initial covering threshold ε (default: 0)")
    p.add_argument("--stress-sample", type=_positive_int, default=2000, metavar="M",
                   help="points used to compute the stress (all pairs; default: 2000)")
    _common(p, "embed.png")
    return parser


COMMANDS = {"curve": run_curve, "slpc": run_curve, "cluster": run_cluster, "pacbo": run_cluster,
            "embed": run_embed, "landmarks": run_embed}


CACHE_ENV = "JAXSTREAM_COMPILATION_CACHE"


def compilation_cache_dir() -> Optional[str]:
    """Where the command line keeps compiled programs between runs, or None when off.

    JAX's own setting wins (``jax_compilation_cache_dir``, e.g. from the
    ``JAX_COMPILATION_CACHE_DIR`` environment variable); otherwise
    ``$JAXSTREAM_COMPILATION_CACHE`` if set, else ``$XDG_CACHE_HOME/jaxstream/xla``
    (``~/.cache/jaxstream/xla``). ``JAXSTREAM_COMPILATION_CACHE=0`` (or
    ``off``, or an empty value) turns it off.
    """
    import jax
    own = jax.config.jax_compilation_cache_dir
    if own:
        return own
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "0", "off", "false", "no") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxstream", "xla")


def _enable_compilation_cache() -> None:
    """A second run of the same command compiles nothing: every program, however quick to
    compile, goes to JAX's persistent compilation cache (`compilation_cache_dir`)."""
    import jax
    path = compilation_cache_dir()
    if path is None:
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return  # a read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def main(argv=None) -> int:
    """Entry point of the ``jaxstream`` command; returns the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["curve"] + argv
    args = parser.parse_args(argv)
    _enable_compilation_cache()
    if args.float64:
        import jax
        jax.config.update("jax_enable_x64", True)
    try:
        COMMANDS[args.command](args)
    except (InputError, ValueError, OSError, FloatingPointError) as e:
        if os.environ.get("JAXSTREAM_DEBUG"):
            raise
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"jaxstream {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main())
