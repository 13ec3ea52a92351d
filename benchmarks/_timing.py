"""Helpers shared by the benchmark scripts: timing, and a default stream per learner."""
import statistics
import time

import jax


def timed(fn, *args, repeats=3, reduce=statistics.median):
    """Run ``fn(*args)`` once, then `repeats` more times.

    Returns:
      ``(output, first call seconds, reduce(seconds of the further calls))`` (median by default);
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
    return out, first, reduce(runs)


def default_stream(name: str, n: int):
    """(n, d) float32 points of the stream each learner is shown on by default.

    slpc: the paper's cubic stream; pacbo: the four groups of the slides; landmark_mds: an S-curve.
    """
    import numpy as np
    from jaxstream import datasets

    if name == "slpc":
        xs = datasets.make_cubic_stream(n, seed=0)
    elif name == "pacbo":
        xs = datasets.make_four_groups_stream(n, seed=0)
    elif name == "landmark_mds":
        xs = datasets.make_s_curve(n, random_state=0)[0]
    else:
        raise ValueError(f"no default stream for {name!r}")
    return np.asarray(xs, np.float32)
