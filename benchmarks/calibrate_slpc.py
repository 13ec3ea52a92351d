"""Calibrate slpc's practical multipliers on the cubic stream.

With the theory's constants h(f)/η_t dwarfs the cumulative loss and the curve
never grows, so the defaults multiply h by ``h_scale`` and η by
``eta_scale``. This script runs the whole grid × seeds as ONE vmapped batch
(params live in the state, so `init_streams(..., params_batched=True)`),
on calibration seeds disjoint from the benchmark's (0..9), and prints the
mean cumulative loss (rounds t0+1..T) and final number of segments.

Usage: python benchmarks/calibrate_slpc.py [--seeds 5] [--T 500]
"""
import argparse
import itertools
import time

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream as js
from jaxstream import datasets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--T", type=int, default=500)
    ap.add_argument("--h", type=float, nargs="*", default=[1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1])
    ap.add_argument("--eta", type=float, nargs="*", default=[1.0, 3.0, 10.0, 30.0, 100.0])
    args = ap.parse_args()
    L = js.slpc()
    grid = list(itertools.product(args.h, args.eta))
    seeds = list(range(100, 100 + args.seeds))
    combos = [(h, e, s) for (h, e) in grid for s in seeds]
    xs = np.stack([datasets.make_cubic_stream(args.T, seed=s) for _, _, s in combos]).astype(np.float32)
    params = js.principal_curves.default_params()
    params = jax.tree_util.tree_map(lambda v: jnp.full((len(combos),), v), params)
    params = params._replace(h_scale=jnp.array([c[0] for c in combos], jnp.float32),
                             eta_scale=jnp.array([c[1] for c in combos], jnp.float32))
    keys = jax.vmap(jax.random.key)(jnp.array([c[2] for c in combos]))
    states = js.init_streams(L, keys, xs[:, :20], params, params_batched=True)
    t = time.perf_counter()
    fin, losses = jax.jit(lambda k, x, s: js.run_streams(L, k, x, s))(keys, xs[:, 20:], states)
    losses = np.asarray(losses).sum(1)
    nseg = np.asarray(fin.n_vertices) - 1
    print(f"{len(combos)} streams of T={args.T} in {time.perf_counter() - t:.1f}s (compile included)")
    print(f"{'h_scale':>8} {'eta_scale':>9} {'cum loss':>9} {'sd':>6} {'segments':>8}")
    rows = []
    for i, (h, e) in enumerate(grid):
        sl = slice(i * len(seeds), (i + 1) * len(seeds))
        rows.append((losses[sl].mean(), h, e))
        print(f"{h:8.0e} {e:9.0f} {losses[sl].mean():9.2f} {losses[sl].std(ddof=1):6.2f} {nseg[sl].mean():8.1f}")
    best = min(rows)
    print(f"best: h_scale={best[1]:g} eta_scale={best[2]:g} (mean cumulative loss {best[0]:.2f})")


if __name__ == "__main__":
    main()
