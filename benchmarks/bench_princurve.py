"""Hastie–Stuetzle principal curve baseline (R princurve 2.1.6): quality and speed.

Prints:

1. Cubic stream (``make_cubic_stream(500, seed=s)``, s = 0..9, t0 = 20):
   the sequential princurve's cumulative loss over rounds 21..500, mean
   (sd), next to the ground truth on the same rounds. Reference: R's
   princurve 2.1.6 refitted every round gave 18.38 (sd 1.13) on such
   streams; the slpc paper printed 26.02.
2. How the figure moves with choices R leaves open: the curve a new point
   is scored against (our stretched smoothed curve; R's ``fit$s[fit$ord, ]``
   polyline through the projections, as ``lines(fit)`` draws it, with and
   without ``project_to_curve``'s default stretch = 2), more knots (closer
   to ``smooth.spline``'s 50–118), and float64.
3. Speed on CPU: one batch fit (n = 500) and one whole sequential stream
   (480 refits), compile time apart from steady state (median of repeats).
4. Seismic stream (``seismic_stream()``, 194 events): R² of the batch fit,
   R² = 1 − Σ squared distances / Σ ||x − mean||² (paper: 0.990 on 218
   Centennial-catalogue events).

Usage: python benchmarks/bench_princurve.py [--quick] [--no-variants]
       [--batch-sizes 4 8 16]
Timings are wall-clock on whatever machine runs it; nothing is asserted.
"""
from __future__ import annotations

import os

# jaxlib's CPU eigh/cholesky call into OpenBLAS/LAPACK, whose worker threads
# spin on a loaded machine. Must be set before numpy/scipy load.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import platform
import statistics
import time

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from jaxstream import datasets
from jaxstream.curves import princurve as pc
from jaxstream.geometry import polyline_sq_dist

T, T0 = 500, 20


def timed(fn, *args, repeats=3):
    """(output, compile seconds, median steady-state seconds) of jit(fn)(*args)."""
    t = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t
    out = jax.block_until_ready(compiled(*args))
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - t)
    return out, compile_s, statistics.median(runs)


def mean_sd(v):
    v = np.asarray(v, float)
    return f"{v.mean():.2f} ({v.std(ddof=1):.2f})"


def stretched(verts, m, stretch):
    first = verts[0] + stretch * (verts[0] - verts[1])
    last = verts[m - 1] + stretch * (verts[m - 1] - verts[m - 2])
    return verts.at[m - 1].set(last).at[0].set(first)


def make_variant_losses(n_knots, batch_size=8):
    """Losses of rounds t0+1..T under three scoring conventions, one pass.

    Uses the public `principal_curve` under vmap (inside `lax.map`), so it
    also checks that the public function composes with transformations.
    """

    @jax.jit
    def run(xs):
        data = xs[:-1]
        cap = data.shape[0]

        def one(t):
            mask = jnp.arange(cap) < t
            fit = pc.principal_curve(jnp.where(mask[:, None], data, 0.0), mask, n_knots=n_knots)
            x = xs[t][None, :]
            ours = polyline_sq_dist(x, fit.vertices, fit.n_vertices)[0]
            # princurve's fit$s[fit$ord, ]: the projections in λ order
            proj = fit.projections[fit.order]
            proj = jnp.where((jnp.arange(cap) < fit.n_vertices)[:, None], proj, proj[fit.n_vertices - 1])
            lines = polyline_sq_dist(x, proj, fit.n_vertices)[0]
            lines2 = polyline_sq_dist(x, stretched(proj, fit.n_vertices, 2.0), fit.n_vertices)[0]
            return jnp.stack([ours, lines, lines2])

        return lax.map(one, jnp.arange(T0, xs.shape[0]), batch_size=batch_size)

    return run


def cubic(seeds, variants, batch_sizes):
    print("== cubic stream: T=500, t0=20, loss summed over rounds 21..500, seeds", list(seeds))
    streams, truth = [], []
    for s in seeds:
        xs, sq = datasets.make_cubic_stream(T, seed=s, return_truth=True)
        streams.append(xs)
        truth.append(sq[T0:].sum())
    print(f"ground truth (squared distance to the true curve): {mean_sd(truth)}  [paper 2.48 over 500 points]")

    totals, iters, conv = [], [], []
    t = time.perf_counter()
    for xs in streams:
        res = pc.sequential_principal_curve_losses(xs.astype(np.float32), t0=T0)
        totals.append(float(res.total))
        iters.append(np.asarray(res.n_iter[T0:]))
        conv.append(np.asarray(res.converged[T0:]))
    wall = time.perf_counter() - t
    iters, conv = np.concatenate(iters), np.concatenate(conv)
    print(f"sequential princurve (float32, 40 knots): {mean_sd(totals)}  "
          f"[R princurve 2.1.6: 18.38 (1.13); paper 26.02]")
    print(f"  per seed: {np.round(totals, 2).tolist()}")
    print(f"  iterations per refit: mean {iters.mean():.2f}, max {iters.max()}; "
          f"converged {100 * conv.mean():.1f} % of refits; {wall:.1f} s for {len(seeds)} streams incl. compile")

    if variants:
        print("-- variants (same streams)")
        rows = {}
        for label, n_knots, x64 in (("float32, 40 knots", 40, False), ("float32, 100 knots", 100, False),
                                    ("float64, 40 knots", 40, True)):
            with jax.enable_x64(x64):
                run = make_variant_losses(n_knots)
                dt = np.float64 if x64 else np.float32
                t = time.perf_counter()
                rows[label] = np.array([np.asarray(run(jnp.asarray(xs, dt))).sum(0) for xs in streams])
                wall = time.perf_counter() - t
            r = rows[label]
            print(f"{label:>20}: scored on our stretched smoothed curve {mean_sd(r[:, 0])} | "
                  f"on R's fit$s[fit$ord,] polyline {mean_sd(r[:, 1])} | "
                  f"same, stretched by 2 {mean_sd(r[:, 2])}   ({wall:.0f} s)")
        diff = np.abs(rows["float32, 40 knots"][:, 0] - np.asarray(totals))
        print(f"  (public principal_curve under vmap vs sequential_principal_curve_losses: "
              f"max |Δ total| = {diff.max():.2e})")

    print("-- speed, one stream (480 refits at capacity 499), float32, CPU")
    xs = jnp.asarray(streams[0], jnp.float32)
    for bs in batch_sizes:
        f = lambda x, bs=bs: pc.sequential_principal_curve_losses(x, t0=T0, batch_size=bs).total
        _, compile_s, steady = timed(f, xs)
        print(f"  batch_size={bs:>3}: compile {compile_s:.1f} s, steady {steady:.1f} s "
              f"= {1e3 * steady / (T - T0):.1f} ms per refit")


def batch_fit_speed():
    print("-- speed, one batch fit (n=500), float32, CPU")
    xs = jnp.asarray(datasets.make_cubic_stream(T, seed=0), jnp.float32)
    fit, compile_s, steady = timed(lambda x: pc.principal_curve(x), xs, repeats=5)
    print(f"  compile {compile_s:.2f} s, steady {1e3 * steady:.1f} ms; {int(fit.n_iter)} iterations, "
          f"total squared distance {float(fit.dist):.3f}")


def seismic():
    print("== seismic stream (USGS month, 130E-180E, 70S-30N)")
    xs = datasets.seismic_stream()
    ss = float(((xs - xs.mean(0)) ** 2).sum())
    for label, x64 in (("float32", False), ("float64", True)):
        with jax.enable_x64(x64):
            fit = pc.principal_curve(xs.astype(np.float64 if x64 else np.float32))
            print(f"  {label}: n={len(xs)}, R² = {1 - float(fit.dist) / ss:.4f} after {int(fit.n_iter)} iterations "
                  f"(converged: {bool(fit.converged)})  [paper 0.990 on 218 Centennial events]")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 seeds instead of 10")
    ap.add_argument("--no-variants", action="store_true", help="skip the scoring/knots/float64 variants")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[4, 8, 16])
    args = ap.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs")
    seeds = range(3) if args.quick else range(10)
    cubic(seeds, not args.no_variants, args.batch_sizes)
    batch_fit_speed()
    seismic()


if __name__ == "__main__":
    main()
