"""Speed regression guard: this checkout against an older one, in the same run.

CPU speed is not a goal (the users run GPUs), but a change must not make a
learner slower by accident. Timings on a shared machine drift by 1.5x
between runs, so the only fair comparison is old and new compiled in one
process and timed interleaved, best of N.

Usage::

    mkdir -p /tmp/ab/old && git archive OLD_COMMIT jaxstream | tar -x -C /tmp/ab/old
    mv /tmp/ab/old/jaxstream /tmp/ab/old/jaxstream_old
    PYTHONPATH=/tmp/ab/old python benchmarks/ab_speed.py --reps 5

Prints, per learner, compile time and steady-state time per round for old
and new, and new/old.
"""
import argparse
import importlib
import platform
import time

import jax
import numpy as np

import jaxstream as new
from jaxstream import datasets


def cases(T_curve, T_cluster, T_embed):
    return [
        ("slpc (cubic)", lambda js: js.slpc(), datasets.make_cubic_stream(T_curve, seed=0), 20),
        # A drifting source: the memory turns finite and the drift offset is fitted on most rounds.
        ("slpc (drifting arc)", lambda js: js.slpc(), datasets.make_drifting_curve_stream(1000, seed=0), 20),
        ("pacbo (four groups)", lambda js: js.pacbo(), datasets.make_four_groups_stream(T_cluster, seed=0), 1),
        # Drifting groups: the drift test fires. Before 0.4.5 the default dropped a moving cluster's
        # old points; tracking (the default since) moves them (a hinge fit of 4 lines and a velocity
        # per point on top): "pacbo (drifting groups)" against an older commit measures the switch.
        ("pacbo (drifting groups)", lambda js: js.pacbo(), datasets.make_drifting_clusters_stream(T_cluster, seed=0), 1),
        ("pacbo tracking (drifting groups)", lambda js: js.pacbo(tracking=True),
         datasets.make_drifting_clusters_stream(T_cluster, seed=0), 1),
        ("landmark_mds (S-curve)", lambda js: js.landmark_mds(50, n_components=2),
         datasets.make_s_curve(T_embed, random_state=0)[0], 1),
    ]


def compiled_run(js, factory, xs, t0):
    learner = factory(js)
    key = jax.random.key(0)
    xs = np.asarray(xs, np.float32)
    s0 = learner.init(key, xs[:t0])
    fn = jax.jit(lambda k, x, s: js.run_stream(learner, k, x, s))
    t = time.perf_counter()
    c = fn.lower(key, xs[t0:], s0).compile()
    return c, (key, xs[t0:], s0), time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default="jaxstream_old", help="module name of the old package on PYTHONPATH")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this string")
    ap.add_argument("--T", type=int, nargs=3, default=[2000, 400, 1000], metavar=("CURVE", "CLUSTER", "EMBED"))
    args = ap.parse_args()
    old = importlib.import_module(args.old)
    dev = jax.devices()[0]
    print(f"jax {jax.__version__} on {dev.platform} ({dev.device_kind}); {platform.machine()}; best of {args.reps}, "
          "old and new interleaved")
    for name, factory, xs, t0 in cases(*args.T):
        if args.only and args.only not in name:
            continue
        runs = {}
        for label, js in (("old", old), ("new", new)):
            runs[label] = compiled_run(js, factory, xs, t0)
        best = {label: float("inf") for label in runs}
        for _ in range(args.reps):
            for label, (c, a, _) in runs.items():
                t = time.perf_counter()
                jax.block_until_ready(c(*a))
                best[label] = min(best[label], time.perf_counter() - t)
        n = len(xs) - t0
        print(f"  {name}, T={len(xs)}: old compile {runs['old'][2]:.1f}s, {best['old'] / n * 1e6:.0f} us/round; "
              f"new compile {runs['new'][2]:.1f}s, {best['new'] / n * 1e6:.0f} us/round; "
              f"new/old {best['new'] / best['old']:.2f}")


if __name__ == "__main__":
    main()
