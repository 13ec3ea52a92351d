"""Is a wrong slpc curve the criterion's choice or the search's failure?

For streams of a curve family (`jaxstream.datasets.curve_family`), learned with the default
`slpc()`, this prints the final objective of the learned line and of the true curve (its
corners), both scored the same way: every point of the stream, unweighted, in the learner's
standardised units, with the final round's noise level σ̂² (`Info.sigma2`), its loss cap and
its price (`jaxstream.curves.objective`). The learner itself scores its weighted history, so
the figures approximate its criterion. True curve lower: the search missed a better line; true
curve higher: the criterion prefers the learned one. Only for families whose true curve is a
polyline (routes, commutes): a smooth curve's dense sampling would be priced per vertex.

    python benchmarks/slpc_criterion.py --families long_route_shuffled commute --seeds 300 308
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jaxstream as js  # noqa: E402
from jaxstream import datasets  # noqa: E402
from jaxstream.curves import objective  # noqa: E402
from bench_slpc import run_batch  # noqa: E402


def sq_dist_to_polyline(points, vertices):
    """(n,) squared distance of each point to the polyline (NumPy, exact)."""
    a, b = vertices[:-1], vertices[1:]
    ab = b - a
    t = np.clip(((points[:, None] - a[None]) * ab[None]).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-12), 0.0, 1.0)
    return ((points[:, None] - (a[None] + t[..., None] * ab[None])) ** 2).sum(-1).min(1)


def corners(curve, tol=1e-3):
    """The vertices of a densely sampled polyline where its direction changes."""
    u = np.diff(curve, axis=0)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    turn = np.linalg.norm(np.diff(u, axis=0), axis=1) > tol
    return curve[np.concatenate([[True], turn, [True]])]


def scores(state, sigma2, points, curve):
    """((fit, price) of the learned line, (fit, price) of the true curve's corners)."""
    sc, ce = float(state.scale), np.asarray(state.centre, np.float64)
    p = (points - ce) / sc
    s2 = jnp.float32(sigma2 / sc ** 2)
    d = p.shape[1]
    cap = float(objective.loss_cap(s2, d, state.params, "noise"))
    spread = np.sqrt(((p - p.mean(0)) ** 2).sum(1).mean())

    def score(v):
        length = np.linalg.norm(np.diff(v, axis=0), axis=1).sum()
        fit = np.minimum(sq_dist_to_polyline(p, v), cap).sum()
        price = objective.noise_price(jnp.float32(len(v) - 1), jnp.float32(length / spread), 0.0, s2, len(p), d,
                                      state.params)
        return fit, float(price)

    learned = (np.asarray(state.vertices[: int(state.n_vertices)], np.float64) - ce) / sc
    return score(learned), score((corners(curve) - ce) / sc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", nargs="*", default=["long_route_shuffled", "commute", "commute_shuffled",
                                                       "route_shuffled", "long_route"])
    ap.add_argument("--seeds", type=int, nargs=2, default=[300, 308], help="seeds [a, b)")
    ap.add_argument("--T", type=int, default=1000)
    args = ap.parse_args()
    learner = js.slpc()
    seeds = list(range(*args.seeds))
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}; seeds {seeds[0]}-{seeds[-1]}, T={args.T}; "
          "objective = fit + price (standardised units, all points, final σ̂²)")
    for name in args.families:
        data = [datasets.curve_family(name, s, args.T) for s in seeds]
        if len(corners(data[0].curve)) > 100:
            print(f"== {name}: skipped (a smooth true curve, not a polyline)")
            continue
        fin, info = run_batch(learner, [c.points for c in data])
        rel, sig = [], []
        print(f"== {name}")
        for i, (s, c) in enumerate(zip(seeds, data)):
            state = jax.tree_util.tree_map(lambda a, i=i: a[i], fin)
            s2 = float(np.asarray(info.sigma2)[i, -1])
            (f1, p1), (f2, p2) = scores(state, s2, c.points, c.curve)
            rel.append((f1 + p1) / (f2 + p2))
            sig.append(np.sqrt(s2) / c.noise)
            print(f"  seed {s}: learned {int(state.n_vertices) - 1} segments, fit {f1:.2f} + price {p1:.2f} = "
                  f"{f1 + p1:.2f}; true curve {len(corners(c.curve)) - 1} segments, {f2:.2f} + {p2:.2f} = "
                  f"{f2 + p2:.2f}; σ̂/σ {sig[-1]:.2f}")
        rel = np.asarray(rel)
        half = 1.96 * rel.std(ddof=1) / np.sqrt(len(rel)) if len(rel) > 1 else float("nan")
        print(f"  learned / true objective: mean {rel.mean():.3f} ± {half:.3f}, min {rel.min():.3f}, max {rel.max():.3f}; "
              f"true curve lower on {np.mean(rel > 1):.0%}; σ̂/σ mean {np.mean(sig):.2f}")


if __name__ == "__main__":
    main()
