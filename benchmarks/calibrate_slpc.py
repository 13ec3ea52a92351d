"""Calibrate slpc's price multipliers (h_scale, length_scale) on several streams.

The default objective prices a segment at h_scale·d·log(n)·σ̂² and a unit of
(standardised) length at length_scale·n·σ̂², σ̂² being the noise level of the
current line's residuals (`jaxstream.curves.objective`). This script runs a
grid of the two multipliers on calibration streams of different shape,
dimension, noise and units — cubic (seeds 100-104), Table 2 in 6-D (seeds
100-104), a noisy straight line (which a single segment describes to the
noise level), a circle ×50 shifted by 1000, and the seismic stream — each
stream type as ONE vmapped batch (params live in the state), and prints the
mean cumulative loss (rounds t0+1..T), final-curve R² and segment counts.
The benchmark (bench_slpc.py) checks the chosen defaults on other seeds and
streams.

Usage: python benchmarks/calibrate_slpc.py [--h 1 2] [--ls 0.3 1 2 3] [--streams cubic t2 line circle seis]
"""
import argparse
import itertools
import time

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream as js
from jaxstream import datasets, geometry


def run_grid(learner, cells, names, label, streams, truth=None, t0=20):
    B = len(streams)
    combos = [(c, i) for c in cells for i in range(B)]
    xs = np.stack([streams[i] for _, i in combos]).astype(np.float32)
    prm = jax.tree_util.tree_map(lambda v: jnp.full((len(combos),), v), learner.params)
    for j, n in enumerate(names):
        prm = prm._replace(**{n: jnp.array([c[j] for c, _ in combos], jnp.float32)})
    keys = jax.random.split(jax.random.key(0), len(combos))
    t = time.perf_counter()
    st = js.init_streams(learner, keys, xs[:, :t0], prm, params_batched=True)
    fin, info = jax.jit(lambda k, x, s: js.run_streams(learner, k, x, s, trace="info"))(keys, xs[:, t0:], st)
    cum = np.asarray(info.loss, np.float64).sum(1)
    ns = np.asarray(fin.n_vertices) - 1
    res = np.asarray(jax.vmap(lambda x, s: geometry.polyline_sq_dist(x, s.vertices, s.n_vertices).sum())(
        jnp.asarray(xs), fin))
    r2 = 1 - res / ((xs - xs.mean(1, keepdims=True)) ** 2).sum((1, 2))
    gt = f"truth {np.mean([g[t0:].sum() for g in truth]):.2f}" if truth is not None else ""
    print(f"== {label} ({B} streams) {gt} [{time.perf_counter() - t:.0f}s incl. compile]")
    for ci, c in enumerate(cells):
        sl = slice(ci * B, (ci + 1) * B)
        print(f"  {dict(zip(names, c))}: cum {cum[sl].mean():.2f} ({cum[sl].std(ddof=1) if B > 1 else 0:.2f}) "
              f"R2 {r2[sl].mean():.4f} segments {ns[sl].tolist()}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--h", type=float, nargs="*", default=[1.0, 2.0])
    ap.add_argument("--ls", type=float, nargs="*", default=[0.3, 1.0, 2.0, 3.0])
    ap.add_argument("--streams", nargs="*", default=["cubic", "t2", "line", "circle", "seis"])
    args = ap.parse_args()
    learner = js.slpc()
    names = ["h_scale", "length_scale"]
    cells = list(itertools.product(args.h, args.ls))
    if "cubic" in args.streams:
        d = [datasets.make_cubic_stream(500, seed=s, return_truth=True) for s in range(100, 105)]
        run_grid(learner, cells, names, "cubic", [a for a, _ in d], [g for _, g in d])
    if "t2" in args.streams:
        d = [datasets.make_table2_stream(seed=s, return_truth=True) for s in range(100, 105)]
        run_grid(learner, cells, names, "table2 (6-D)", [a for a, _ in d], [g for _, g in d])
    if "line" in args.streams:
        r = np.random.default_rng(3)
        ss = []
        for _ in range(5):
            t = r.uniform(0, 10, 400)
            ss.append(np.stack([t, 0.5 * t], 1) + 0.1 * r.standard_normal((400, 2)))
        run_grid(learner, cells, names, "straight line, noise 0.1 (truth ≈ 3.8)", ss)
    if "circle" in args.streams:
        r = np.random.default_rng(5)
        ss = []
        for _ in range(5):
            th = r.uniform(0, 2 * np.pi, 400)
            ss.append(np.stack([np.cos(th), np.sin(th)], 1) * 50 + 1000 + r.standard_normal((400, 2)))
        run_grid(learner, cells, names, "circle radius 50 at (1000, 1000), noise 1", ss)
    if "seis" in args.streams:
        run_grid(learner, cells, names, "seismic (3 keys)", [datasets.seismic_stream()] * 3)


if __name__ == "__main__":
    main()
