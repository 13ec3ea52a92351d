"""Cost of gradients through streams (CPU figures in the issue-23 closing note).

Prints, for slpc (max_segments=8, history 32, T=100 after 20 initial points):
  1. pathwise ``jax.grad`` of the total prequential loss w.r.t. the data
     (reverse mode): compile (first call) and steady-state seconds, against
     one forward run of the same stream;
  2. one step of the smoothed-gradient estimator `jaxstream.differentiable.smoothed_grad`
     (2·n_pairs stream runs, one vmapped call) for n_pairs = 8, 32: compile and
     steady-state seconds, seconds per stream run;
  3. PACBO (max_clusters=9, three blocks of slots) and landmark MDS
     (max_landmarks=8) on the same stream: a forward run with the fast
     (dynamic trip count) loops, the same run in the static form that reverse
     mode needs (`jaxstream.static_trip_counts`), forward mode (``jax.jvp``,
     one direction) and ``jax.grad`` w.r.t. the data.

Usage: python benchmarks/bench_grad.py [--T 100] [--skip-pacbo-landmarks]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxstream as js  # noqa: E402
from jaxstream import differentiable as D  # noqa: E402
from _timing import timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--skip-pacbo-landmarks", action="store_true")
    a = ap.parse_args()
    key = jax.random.key(0)
    n = a.T + 20
    xs = jnp.asarray(js.datasets.make_cubic_stream(n, seed=0))
    learner = js.slpc(max_segments=8, history_size=32)
    print(f"devices: {jax.devices()}  float64, slpc(max_segments=8, history_size=32), T={a.T}")

    fwd = jax.jit(lambda xs: D.stream_loss(learner, key, xs))
    _, c0, s0 = timed(fwd, xs)
    grad = jax.jit(jax.grad(lambda xs: D.stream_loss(learner, key, xs)))
    _, c1, s1 = timed(grad, xs)
    print(f"1. forward run:            first {c0:7.2f} s  steady {s0 * 1e3:8.2f} ms")
    print(f"   jax.grad w.r.t. data:   first {c1:7.2f} s  steady {s1 * 1e3:8.2f} ms  ({s1 / s0:.1f}x a forward run)")

    streams = jnp.asarray(np.stack([js.datasets.make_cubic_stream(n, seed=s) for s in range(8)]))
    names = ("h_scale", "length_scale", "z_scale", "epsilon")
    lt = jnp.log(jnp.array([0.5, 0.3, 1.0, 0.05]))
    for n_pairs in (8, 32):
        f = lambda lt: D.smoothed_grad(learner, key, streams, learner.params, names, lt, n_pairs=n_pairs)
        _, c, s = timed(f, lt)
        print(f"2. smoothed_grad n_pairs={n_pairs:3d} ({2 * n_pairs} stream runs): first {c:7.2f} s  "
              f"steady {s:7.3f} s  ({s / (2 * n_pairs) * 1e3:.2f} ms per stream run, "
              f"{s / (2 * n_pairs) / s0:.2f}x one forward run)")

    if a.skip_pacbo_landmarks:
        return
    v = jnp.asarray(np.random.default_rng(1).normal(size=xs.shape))
    for name, lr in [("pacbo(max_clusters=9)", js.pacbo(max_clusters=9)),
                     ("landmark_mds(max_landmarks=8)", js.landmark_mds(max_landmarks=8, n_components=2))]:
        f = jax.jit(lambda xs, lr=lr: D.stream_loss(lr, key, xs, reverse_mode=False))
        fs = jax.jit(lambda xs, lr=lr: D.stream_loss(lr, key, xs))
        j = jax.jit(lambda xs, v, lr=lr: jax.jvp(lambda x: D.stream_loss(lr, key, x, reverse_mode=False),
                                                 (xs,), (v,))[1])
        g = jax.jit(jax.grad(lambda xs, lr=lr: D.stream_loss(lr, key, xs)))
        _, cf, sf = timed(f, xs)
        _, cs, ss = timed(fs, xs)
        _, cj, sj = timed(j, xs, v)
        _, cg, sg = timed(g, xs)
        print(f"3. {name}:")
        print(f"   forward (dynamic loops): first {cf:6.2f} s  steady {sf * 1e3:8.2f} ms")
        print(f"   forward (static form):   first {cs:6.2f} s  steady {ss * 1e3:8.2f} ms ({ss / sf:.2f}x)")
        print(f"   jax.jvp:                 first {cj:6.2f} s  steady {sj * 1e3:8.2f} ms ({sj / sf:.2f}x)")
        print(f"   jax.grad:                first {cg:6.2f} s  steady {sg * 1e3:8.2f} ms ({sg / sf:.2f}x)")


if __name__ == "__main__":
    main()
