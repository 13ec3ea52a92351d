"""Timing helper shared by the benchmark scripts."""
import statistics
import time

import jax


def timed(fn, *args, repeats=3):
    """Run ``fn(*args)`` once, then `repeats` more times.

    Returns:
      ``(output, first call seconds, median seconds of the further calls)``;
      the first call includes compilation unless `fn` is already compiled.
    """
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - t)
    return out, first, statistics.median(runs)
