"""Memory mappings held by compiled programs, over many slpc configurations in one process.

    python benchmarks/probe_map_limit.py [--configs 50] [--no-guard]

XLA:CPU maps each compiled kernel's code and data on their own (a few mappings per kernel), and
Linux kills nothing but refuses mappings past ``vm.max_map_count``: XLA then aborts ("LLVM ERROR:
Unable to allocate section memory!"). The script builds ``--configs`` slpc configurations
(``max_segments`` 10, 11, …), runs 100 points through each, and prints the process's mappings
before each. With the package's guard (`jaxstream._caches`, default) the count stays below
half the limit; ``--no-guard`` turns it off (and JAX's caches are never emptied), so the count
grows by ~1,000 per configuration until the limit. To see the abort quickly, lower the limit
for the run (root): ``sysctl -w vm.max_map_count=6000``, and restore it afterwards.
"""
from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import jaxstream as js
from jaxstream import _caches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=50)
    ap.add_argument("--no-guard", action="store_true", help="never empty JAX's caches")
    args = ap.parse_args()
    if args.no_guard:
        _caches.MAP_SHARE = float("inf")
        js.set_cache_size(10 ** 6, clear_jax=False)
    limit = _caches._map_limit()
    print(f"# jax {jax.__version__}, backend {jax.default_backend()}, vm.max_map_count {limit}, "
          f"guard {'off' if args.no_guard else f'at {_caches.MAP_SHARE:.0%} of it'}")
    print(f"{'config':>6} {'max_segments':>12} {'mappings':>9} {'seconds':>8}")
    xs = js.datasets.make_cubic_stream(120, seed=0).astype(np.float32)
    peak = 0
    for i in range(args.configs):
        used = _caches._maps_in_use() or 0
        peak = max(peak, used)
        t = time.perf_counter()
        learner = js.slpc(max_segments=10 + i, init="pca")
        state = learner.init(jax.random.key(0), xs[:20])
        _, loss = js.run_stream(learner, jax.random.key(1), xs[20:], state)
        jax.block_until_ready(loss)
        print(f"{i:6d} {10 + i:12d} {used:9,d} {time.perf_counter() - t:8.1f}", flush=True)
    print(f"# peak mappings before a configuration: {peak:,} of {limit}")


if __name__ == "__main__":
    main()
