"""Cost of issue 26's host-side input checks on valid input, old against new in the same run.

The checks run once per call on the host, outside the scan: `run_stream` on a
valid stream pays them once per stream, `run_stream_chunked` once per chunk.
This script times

1. `jaxstream._checks.check_points` as of c9cd111 (NaN/inf only) against the
   current one (plus the magnitude and spread checks) on (T, d) float32
   streams;
2. `run_stream` of a cheap learner (the running mean, where the host checks
   weigh most) and of slpc, with the current checks and with the old
   `check_points` patched in.

    python benchmarks/bench_checks.py
"""
from __future__ import annotations

import subprocess
import time
import types

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream as js
from jaxstream import _checks, _core


def _old_check_points():
    src = subprocess.run(["git", "show", "c9cd111:jaxstream/_checks.py"], capture_output=True, text=True,
                         check=True).stdout
    mod = types.ModuleType("old_checks")
    exec(compile(src, "old_checks", "exec"), mod.__dict__)
    return mod.check_points


def best(f, n=7):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        jax.block_until_ready(f())
        ts.append(time.perf_counter() - t)
    return min(ts)


def mean_learner():
    from typing import NamedTuple

    class I(NamedTuple):
        loss: jax.Array

    def upd(k, s, x):
        n = s[1] + 1
        return (s[0] + (x - s[0]) / n, n), I(jnp.sum((x - s[0]) ** 2))

    return js.StreamLearner(lambda k, x0, p=None: (jnp.mean(x0, 0), jnp.float32(x0.shape[0])), upd,
                            None, None, None, dict(learner="mean"))


def main():
    old = _old_check_points()
    new = _checks.check_points
    rng = np.random.default_rng(0)
    print("check_points on valid float32 (T, d) streams, best of 7 (ms): old | new")
    for T, d in ((4096, 2), (65536, 3), (1_000_000, 3)):
        x = rng.normal(size=(T, d)).astype(np.float32)
        print(f"  T={T:>9,} d={d}: {1e3 * best(lambda: old(x)):8.2f} | {1e3 * best(lambda: new(x)):8.2f}")

    print("run_stream on valid input, best of 7 (ms): old checks | new checks")
    key = jax.random.key(0)
    for name, learner, T in (("running mean", mean_learner(), 1_000_000),
                             ("slpc(50, 512)", js.slpc(), 4096)):
        xs = rng.normal(size=(T + 20, 2)).astype(np.float32)
        s0 = learner.init(key, xs[:20])
        run = lambda: js.run_stream(learner, key, xs[20:], s0)[1]
        run()  # compile
        t_new = best(run)
        _core.check_points = old
        try:
            t_old = best(run)
        finally:
            _core.check_points = new
        print(f"  {name:>14} T={T:>9,}: {1e3 * t_old:9.2f} | {1e3 * t_new:9.2f}")


if __name__ == "__main__":
    main()
