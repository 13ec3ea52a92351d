"""The learner protocol's natural loop against `update` alone (issue 55, item 3).

A research loop that follows the `StreamLearner` protocol scores each point with
``loss(state, x)`` and then learns it with ``update``; ``update``'s own ``info.loss`` is the
same number (the prequential loss: the summary's loss before the update). This script
times, per learner (default factory, its default stream, float32), one `lax.scan` over the
stream whose body is

  A. ``state, info = update(key, state, x)``, keeping ``info.loss``;
  B. ``l = loss(state, x)`` then ``state, info = update(key, state, x)``, keeping ``l``;

checks that B's losses equal A's, and prints compile seconds apart from steady-state
microseconds per round (best of `--repeats`).

    python benchmarks/protocol_loop.py [--T 400] [--repeats 5]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
import jax.numpy as jnp
import numpy as np

import jaxstream as js  # noqa: E402
from _timing import default_stream, timed  # noqa: E402


def loops(learner):
    """Jitted (state, keys, xs) -> losses for the two loop bodies."""
    def update_alone(carry, kx):
        k, x = kx
        carry, info = learner.update(k, carry, x)
        return carry, info.loss

    def loss_then_update(carry, kx):
        k, x = kx
        l = learner.loss(carry, x)
        carry, _ = learner.update(k, carry, x)
        return carry, l

    return {name: jax.jit(lambda s, ks, xs, body=body: jax.lax.scan(body, s, (ks, xs))[1])
            for name, body in (("update alone", update_alone), ("loss then update", loss_then_update))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, float32, T = {a.T} rounds after 20 initial points")
    for name, learner in (("slpc", js.slpc()), ("pacbo", js.pacbo()), ("landmark_mds", js.landmark_mds())):
        xs = jnp.asarray(default_stream(name, a.T + 20))
        key = jax.random.key(0)
        state = learner.init(key, xs[:20])
        keys = jax.random.split(jax.random.key(1), a.T)
        res = {}
        for label, fn in loops(learner).items():
            res[label] = timed(fn, state, keys, xs[20:], repeats=a.repeats, reduce=min)
        (la, ca, sa), (lb, cb, sb) = res["update alone"], res["loss then update"]
        same = bool(np.allclose(np.asarray(la), np.asarray(lb), rtol=1e-5, atol=1e-6))
        print(f"{name:13s} update alone {sa / a.T * 1e6:9.1f} µs/round (compile {ca:5.1f} s)   "
              f"loss then update {sb / a.T * 1e6:9.1f} µs/round (compile {cb:5.1f} s)   "
              f"ratio {sb / sa:5.2f}   losses equal: {same}", flush=True)


if __name__ == "__main__":
    main()
