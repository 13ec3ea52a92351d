"""Command line: ``jaxstream [slpc] [--csv FILE] [--out PNG]``.

With no argument it runs sequential principal curves on the embedded seismic
stream (USGS epicentres in the slpc paper's box), prints the prequential
cumulative loss and R², and writes a picture of the points and the curve.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _slpc_args(sub):
    p = sub.add_parser("slpc", help="sequential principal curve of a stream (default command)")
    p.add_argument("--csv", help="CSV file with a header row; default: the embedded seismic stream")
    p.add_argument("--columns", nargs="+", help="CSV columns to use (default: all numeric columns)")
    p.add_argument("--out", default="slpc.png", help="PNG to write (default: slpc.png; '' for none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--t0", type=int, default=20, help="initial points (first-PC segment)")
    p.add_argument("--max-segments", type=int, default=50)
    p.add_argument("--history-size", type=int, default=1024)
    p.add_argument("--h-scale", type=float, default=None, help="penalty multiplier (default: calibrated)")
    p.add_argument("--eta-scale", type=float, default=None, help="learning-rate multiplier (default: calibrated)")
    p.add_argument("--delta", type=float, default=0.0, help="lattice spacing (0: from the data's scale)")
    return p


def run_slpc(args) -> dict:
    """Run slpc as the command line does; returns the figures it prints."""
    import jax
    import jax.numpy as jnp

    from . import datasets, geometry
    from ._core import run_stream
    from .principal_curves import slpc

    if args.csv:
        xs = datasets.load_csv_points(args.csv, args.columns)
        name = args.csv
    else:
        xs = datasets.seismic_stream()
        name = "embedded seismic stream (USGS 2020-08-21..09-21, 130E-180E, 70S-30N)"
    if xs.shape[0] <= args.t0:
        raise SystemExit(f"error: the stream has {xs.shape[0]} points; slpc needs more than t0={args.t0}")
    kw = {k: v for k, v in dict(h_scale=args.h_scale, eta_scale=args.eta_scale).items() if v is not None}
    learner = slpc(args.max_segments, max(args.history_size, args.t0), t0=args.t0, delta=args.delta, **kw)
    key = jax.random.key(args.seed)
    xs = xs.astype(np.float32)
    state0 = learner.init(key, xs[: args.t0])
    start = time.perf_counter()
    state, losses = jax.block_until_ready(jax.jit(
        lambda k, x, s: run_stream(learner, k, x, s))(key, xs[args.t0:], state0))
    seconds = time.perf_counter() - start
    losses = np.asarray(losses, np.float64)
    stream = xs[args.t0:].astype(np.float64)
    residual = float(geometry.polyline_sq_dist(jnp.asarray(xs), state.vertices, state.n_vertices).sum())
    figures = dict(
        data=name, n_points=int(xs.shape[0]), dim=int(xs.shape[1]),
        cumulative_loss=float(losses.sum()),
        prequential_r2=float(1 - losses.sum() / ((stream - stream.mean(0)) ** 2).sum()),
        r2=float(1 - residual / ((xs - xs.mean(0)) ** 2).sum()),
        n_segments=int(state.n_vertices) - 1, seconds=seconds,
        vertices=np.asarray(state.vertices[: int(state.n_vertices)]))
    print(f"data: {name}: {figures['n_points']} points in {figures['dim']}-D")
    print(f"slpc: {figures['n_segments']} segments after {xs.shape[0] - args.t0} rounds "
          f"(t0={args.t0}) in {seconds:.2f} s (compile included)")
    print(f"cumulative prequential loss: {figures['cumulative_loss']:.4g}")
    print(f"prequential R^2: {figures['prequential_r2']:.4f}")
    print(f"R^2 of the final curve on all points: {figures['r2']:.4f}")
    if args.out:
        _plot(xs, figures["vertices"], args.out, name, args.csv is None)
    return figures


def _plot(xs, vertices, out, title, geographic):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("picture skipped: matplotlib is missing (pip install 'jaxstream[plot]')", file=sys.stderr)
        return
    if xs.shape[1] < 2:
        print("picture skipped: the data are 1-D", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6, 6))
    sc = ax.scatter(xs[:, 0], xs[:, 1], c=np.arange(len(xs)), cmap="viridis", s=12, label="stream")
    ax.plot(vertices[:, 0], vertices[:, 1], "-o", color="crimson", ms=3, lw=1.5, label="slpc curve")
    fig.colorbar(sc, ax=ax, label="arrival order", shrink=0.8)
    if geographic:
        ax.set_xlabel("longitude (°E)")
        ax.set_ylabel("latitude (°N)")
    ax.set_title(f"slpc on {title.split(' (')[0]}", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"picture: {out}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="jaxstream", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    _slpc_args(sub)
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["slpc"] + argv
    args = parser.parse_args(argv)
    if args.command == "slpc":
        run_slpc(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
