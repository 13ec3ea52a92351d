"""slpc benchmarks: quality against the paper's figures, speed, many streams.

Prints:
  * cubic stream (T=500, seeds 0-9, t0=20, loss summed over rounds 21..500):
    slpc cumulative loss mean (sd), ground truth on the same rounds, and the
    sequential Hastie-Stuetzle baseline when --princurve is given
    (paper: slpc 20.83 (3.23), princurve 26.02, ground truth 2.48;
    R princurve 2.1.6 on such streams 18.38 (1.13));
  * seismic box stream: R² of the final curve and prequential R²
    (paper 0.990);
  * one stream, T=500 and T=5000: compile time apart from steady state
    (median of repeats), state size in bytes (set by the capacities, not T);
  * run_streams over B streams of length T: stream-updates per second.

Usage: python benchmarks/bench_slpc.py [--quick] [--princurve] [--batches 1 16 256 1024]
"""
import argparse
import platform
import time

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream as js
from _timing import timed
from jaxstream import datasets, geometry


def quality(args, learner, run):
    print("== quality: cubic stream, T=500, t0=20, rounds 21..500, seeds 0-9")
    cum, truth, segs = [], [], []
    streams = [datasets.make_cubic_stream(500, seed=s, return_truth=True) for s in range(10)]
    for seed, (xs, gt) in enumerate(streams):
        xs = xs.astype(np.float32)
        s0 = learner.init(jax.random.key(seed), xs[:20])
        s, losses = run(jax.random.key(seed), xs[20:], s0)
        cum.append(float(np.asarray(losses, np.float64).sum()))
        truth.append(float(gt[20:].sum()))
        segs.append(int(s.n_vertices) - 1)
    print(f"slpc cumulative loss: {np.mean(cum):.2f} ({np.std(cum, ddof=1):.2f})   "
          f"[paper slpc 20.83 (3.23); R princurve refitted 18.38 (1.13)]")
    print(f"  per seed: {' '.join(f'{c:.1f}' for c in cum)}; segments: {segs}")
    print(f"ground truth on the same rounds: {np.mean(truth):.2f} ({np.std(truth, ddof=1):.2f})   [paper 2.48]")
    if args.princurve:
        from jaxstream.baselines import princurve
        pcs = []
        t = time.perf_counter()
        for xs, _ in streams:
            losses = np.asarray(princurve.sequential_principal_curve_losses(xs.astype(np.float32), t0=20).losses)
            pcs.append(float(np.nansum(losses[20:])))
        print(f"sequential princurve (HS, refit every round): {np.mean(pcs):.2f} ({np.std(pcs, ddof=1):.2f}) "
              f"in {time.perf_counter() - t:.1f}s  [paper 26.02; R 18.38]")
        print(f"slpc below the baseline on {sum(c < p for c, p in zip(cum, pcs))}/10 streams")

    print("== quality: seismic box stream")
    xs = datasets.seismic_stream().astype(np.float32)
    r2, pre, ns = [], [], []
    for seed in range(5):
        s0 = learner.init(jax.random.key(seed), xs[:20])
        s, losses = run(jax.random.key(seed), xs[20:], s0)
        res = float(geometry.polyline_sq_dist(jnp.asarray(xs), s.vertices, s.n_vertices).sum())
        r2.append(1 - res / ((xs - xs.mean(0)) ** 2).sum())
        st = xs[20:]
        pre.append(1 - float(np.asarray(losses).sum()) / ((st - st.mean(0)) ** 2).sum())
        ns.append(int(s.n_vertices) - 1)
    print(f"{len(xs)} events; R² of the final curve {np.mean(r2):.4f} (min {np.min(r2):.4f}) [paper 0.990]; "
          f"prequential R² {np.mean(pre):.4f}; segments {ns}")


def speed(args, learner, run_loss):
    print("== speed: one stream (cubic), default configuration")
    for T in (500, 5000):
        xs = datasets.make_cubic_stream(T, seed=0).astype(np.float32)
        s0 = learner.init(jax.random.key(0), xs[:20])
        fn = jax.jit(lambda k, x, s: js.run_stream(learner, k, x, s))
        t = time.perf_counter()
        compiled = fn.lower(jax.random.key(0), xs[20:], s0).compile()
        compile_s = time.perf_counter() - t
        (s, _), first, steady = timed(compiled, jax.random.key(0), xs[20:], s0)
        state_bytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(s))
        print(f"T={T}: compile {compile_s:.2f}s, steady state {steady:.3f}s "
              f"({(T - 20) / steady:,.0f} updates/s, {steady / (T - 20) * 1e6:.0f} us/round), "
              f"state {state_bytes / 1024:.0f} KiB, segments {int(s.n_vertices) - 1}   "
              f"[R code: {'1.44' if T == 500 else '4.13'}s]")
    print("== speed: run_streams (stream-updates per second)")
    T = args.T_many
    fn = jax.jit(lambda k, x, s: js.run_streams(learner, k, x, s))
    for B in args.batches:
        xs = np.stack([datasets.make_cubic_stream(T, seed=s) for s in range(B)]).astype(np.float32)
        keys = jax.random.split(jax.random.key(1), B)
        states = js.init_streams(learner, keys, xs[:, :20])
        t = time.perf_counter()
        compiled = fn.lower(keys, xs[:, 20:], states).compile()
        compile_s = time.perf_counter() - t
        _, first, steady = timed(compiled, keys, xs[:, 20:], states, repeats=1 if B >= 256 else 3)
        print(f"B={B:5d} T={T}: compile {compile_s:.2f}s, steady {steady:.2f}s, "
              f"{B * (T - 20) / steady:,.0f} stream-updates/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller many-stream runs")
    ap.add_argument("--princurve", action="store_true", help="also run the sequential princurve baseline")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 16, 256, 1024])
    ap.add_argument("--T-many", type=int, default=5000)
    args = ap.parse_args()
    if args.quick:
        args.batches, args.T_many = [1, 16, 64], 1000
    dev = jax.devices()[0]
    print(f"jax {jax.__version__} on {dev.platform} ({dev.device_kind}); {platform.processor() or platform.machine()}")
    learner = js.slpc()
    run = jax.jit(lambda k, x, s: js.run_stream(learner, k, x, s))
    if not args.skip_quality:
        quality(args, learner, run)
    if not args.skip_speed:
        speed(args, learner, run)


if __name__ == "__main__":
    main()
