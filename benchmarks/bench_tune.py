"""Tuning by gradient against random search, on held-out streams (issue 23's tuning targets).

For each (learner, family): training streams (seeds 1000…), held-out streams
(seeds 2000…, never used to choose anything). `jaxstream.differentiable.tune`
runs from the defaults (Adam on the logs, `steps` × 2·`n_pairs` stream runs);
random search gets the same number of stream runs (candidates drawn
uniformly in ±1 in log space around the defaults, each on every training
stream, the one with the lowest training loss kept). Printed: the held-out
loss per stream of the defaults, the tuned values and random search's, the
paired differences with standard errors, and the tuned values on the other
families of the same learner (transfer). Beside each loss, the size of the
final summary: slpc's mean number of segments, PACBO's fraction of streams
whose final k̂ is the true number of groups (the prequential loss always
prefers a larger summary: a line through the noise, more centres).

Usage: python benchmarks/bench_tune.py [--only slpc|pacbo] [--held-out 50] [--steps 12]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp
import numpy as np
import optax

jax.config.update("jax_enable_x64", True)

import jaxstream as js  # noqa: E402
from jaxstream import datasets, differentiable as D  # noqa: E402
from jaxstream._core import _scan_stream, _trace_loss  # noqa: E402

SLPC_FAMILIES = {
    "route (5 legs, in order, T=600)": lambda s: datasets.make_route_stream(600, seed=s),
    "rounded-rectangle loop (1.5 laps, in order, T=600)":
        lambda s: datasets.make_loop_stream(600, shape="rounded_rectangle", n_laps=1.5, seed=s),
    "cubic (i.i.d., T=300)": lambda s: datasets.make_cubic_stream(300, seed=s),
    "sine arc drifting +3 in y (T=1000)": lambda s: datasets.make_drifting_curve_stream(seed=s),
}
PACBO_TRUE_K = {"ten-group ramp (T=200)": 10, "four groups drifting +20 in x (T=400)": 4, "four groups (T=200)": 4}
PACBO_FAMILIES = {
    "ten-group ramp (T=200)": lambda s: datasets.make_ramp_clusters_stream(200, seed=s),
    "four groups drifting +20 in x (T=400)": lambda s: datasets.make_drifting_clusters_stream(400, seed=s),
    "four groups (T=200)": lambda s: datasets.make_four_groups_stream(200, s),
}
SETUPS = {
    "slpc": (js.slpc, ("h_scale", "length_scale", "z_scale", "outlier_scale"), SLPC_FAMILIES,
             ["route (5 legs, in order, T=600)", "rounded-rectangle loop (1.5 laps, in order, T=600)",
              "sine arc drifting +3 in y (T=1000)"]),
    "pacbo": (js.pacbo, ("lambda_scale", "price_scale", "lambda_cap", "prior_scale"), PACBO_FAMILIES,
              ["ten-group ramp (T=200)", "four groups drifting +20 in x (T=400)"]),
}


def _paired(a, b):
    d = a - b
    return f"{d.mean():+8.2f} ± {d.std(ddof=1) / np.sqrt(len(d)):5.2f} ({100 * d.mean() / b.mean():+5.1f} %)"


def _run(learner, p, key, x, n_init=20):
    """(total prequential loss after n_init, size of the final summary) of one stream."""
    st = learner.init(key, x[:n_init], p)
    st, losses = _scan_stream(learner.update, key, x[n_init:], st, None, _trace_loss, 0, all_valid=True)
    size = st.n_clusters if hasattr(st, "n_clusters") else st.n_vertices - 1
    return jnp.sum(losses), size


def _size(name, fam, sizes):
    if name == "pacbo":
        return f"P(k̂=k) {np.mean(sizes == PACBO_TRUE_K[fam]):4.2f}"
    return f"{np.mean(sizes):5.1f} seg"


def _streams(family, seeds):
    return jnp.asarray(np.stack([np.asarray(family(s), np.float64) for s in seeds]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=sorted(SETUPS))
    ap.add_argument("--held-out", type=int, default=50)
    ap.add_argument("--train", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--n-pairs", type=int, default=16)
    a = ap.parse_args()
    print(f"devices: {jax.devices()}  float64; tune: {a.steps} steps x {2 * a.n_pairs} stream runs, Adam(0.15), "
          f"sigma 0.2; {a.train} training streams (seeds 1000+), {a.held_out} held-out (seeds 2000+)")
    for name, (factory, names, families, tuned_on) in SETUPS.items():
        if a.only and name != a.only:
            continue
        learner = factory()
        p0 = learner.params
        run = jax.jit(jax.vmap(lambda p, k, x, learner=learner: _run(learner, p, k, x), in_axes=(None, 0, 0)))
        evaluate = lambda p, keys, xs: run(p, keys, xs)[0]
        both = lambda p, keys, xs: tuple(map(np.asarray, run(p, keys, xs)))
        test_keys = jax.random.split(jax.random.key(99), a.held_out)
        train_keys = jax.random.split(jax.random.key(7), a.train)
        held = {f: _streams(families[f], range(2000, 2000 + a.held_out)) for f in families}
        base = {f: both(p0, test_keys, held[f]) for f in families}
        print(f"\n== {name}: {names}; defaults {[round(float(getattr(p0, n)), 4) for n in names]}")
        for fam in tuned_on:
            train = _streams(families[fam], range(1000, 1000 + a.train))
            t0 = time.perf_counter()
            r = D.tune(learner, jax.random.key(1), train, names, steps=a.steps, n_pairs=a.n_pairs, sigma=0.2,
                       optimizer=optax.adam(0.15))
            t_tune = time.perf_counter() - t0
            lt0 = np.log([float(getattr(p0, n)) for n in names])
            n_cand = max(1, a.steps * 2 * a.n_pairs // a.train)
            cands = lt0 + np.random.default_rng(5).uniform(-1, 1, size=(n_cand, len(names)))
            bounds = D.log_bounds(learner, names)
            cands = np.clip(cands, [b[0] for b in bounds], [b[1] for b in bounds])
            with_logs = lambda lt: p0._replace(**{n: jnp.exp(jnp.asarray(v)) for n, v in zip(names, lt)})
            t0 = time.perf_counter()
            tr = [float(evaluate(with_logs(c), train_keys, train).mean()) for c in cands]
            t_rs = time.perf_counter() - t0
            p_rs = with_logs(cands[int(np.argmin(tr))])
            print(f"-- tuned on {fam}: tune {t_tune:.0f} s, random search ({n_cand} candidates x {a.train} streams) "
                  f"{t_rs:.0f} s")
            print(f"   tuned values   {[round(float(getattr(r.params, n)), 4) for n in names]}")
            print(f"   random search  {[round(float(getattr(p_rs, n)), 4) for n in names]}")
            for f in families:
                (L0, S0), (L1, S1), (L2, S2) = base[f], both(r.params, test_keys, held[f]), both(p_rs, test_keys, held[f])
                tag = "held-out" if f == fam else "transfer"
                print(f"   {tag:8s} {f:52s} defaults {L0.mean():9.2f} [{_size(name, f, S0)}]  "
                      f"tuned−defaults {_paired(L1, L0)} [{_size(name, f, S1)}]  "
                      f"random−defaults {_paired(L2, L0)} [{_size(name, f, S2)}]  tuned−random {_paired(L1, L2)}")
                worst = int(np.argmax(L1 - L0))
                print(f"   {'':8s} {'':52s} tuned: median difference {np.median(L1 - L0):+.2f}, better on "
                      f"{np.mean(L1 < L0):.0%} of streams, worst stream {2000 + worst} {L0[worst]:.2f} -> {L1[worst]:.2f}")


if __name__ == "__main__":
    main()
