"""The learner protocol's natural loop against `update` alone (issue 55, item 3).

A research loop that follows the `StreamLearner` protocol scores each point with
``loss(state, x)`` and then learns it with ``update``; ``update``'s own ``info.loss`` is the
same number (the prequential loss: the summary's loss before the update). This script
times, per learner (default factory, its default stream, float32), one `lax.scan` over the
stream whose body is

  A. ``state, info = update(key, state, x)``, keeping ``info.loss``;
  B. ``l = loss(state, x)`` then ``state, info = update(key, state, x)``, keeping ``l``;

checks that B's losses equal A's, and prints compile seconds apart from steady-state
microseconds per round (best of `--repeats`). Also slpc on a drifting sine arc, where the
memory turns finite and the loss moves the line by the drift offset, and each case vmapped
over ``--batch`` streams (µs per stream-round).

    python benchmarks/protocol_loop.py [--T 400] [--repeats 5] [--batch 64] [--only slpc]
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
    ap.add_argument("--batch", type=int, default=64, help="streams vmapped in the batched cases (1: none)")
    ap.add_argument("--only", default="", help="run the cases whose name starts with this (e.g. slpc)")
    a = ap.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, float32, T = {a.T} rounds after 20 initial points")
    from jaxstream import datasets
    drifting = np.asarray(datasets.make_drifting_curve_stream(a.T + 20, seed=0), np.float32)
    cases = (("slpc", js.slpc(), default_stream("slpc", a.T + 20)),
             ("slpc drifting", js.slpc(), drifting),
             ("pacbo", js.pacbo(), default_stream("pacbo", a.T + 20)),
             ("landmark_mds", js.landmark_mds(), default_stream("landmark_mds", a.T + 20)))
    for name, learner, stream in cases:
        if not name.startswith(a.only):
            continue
        xs = jnp.asarray(stream)
        key = jax.random.key(0)
        state = learner.init(key, xs[:20])
        keys = jax.random.split(jax.random.key(1), a.T)
        report(name, loops(learner), (state, keys, xs[20:]), a.T, a.repeats)
        if a.batch > 1:  # the same stream in every lane, a different key each (every lane's own choices)
            states = jax.vmap(learner.init, (0, None))(jax.random.split(key, a.batch), xs[:20])
            bkeys = jax.random.split(jax.random.key(2), (a.batch, a.T))
            bxs = jnp.broadcast_to(xs[20:], (a.batch,) + xs[20:].shape)
            batched = {k: jax.jit(jax.vmap(f)) for k, f in loops(learner).items()}
            report(f"{name} B={a.batch}", batched, (states, bkeys, bxs), a.T * a.batch, a.repeats)


def report(name, fns, args, rounds, repeats):
    """Time both loops on ``args``, check their losses agree, print µs per (stream-)round."""
    res = {label: timed(fn, *args, repeats=repeats, reduce=min) for label, fn in fns.items()}
    (la, ca, sa), (lb, cb, sb) = res["update alone"], res["loss then update"]
    same = bool(np.allclose(np.asarray(la), np.asarray(lb), rtol=1e-5, atol=1e-6))
    print(f"{name:20s} update alone {sa / rounds * 1e6:9.1f} µs/round (compile {ca:5.1f} s)   "
          f"loss then update {sb / rounds * 1e6:9.1f} µs/round (compile {cb:5.1f} s)   "
          f"ratio {sb / sa:5.2f}   losses equal: {same}", flush=True)


if __name__ == "__main__":
    main()
