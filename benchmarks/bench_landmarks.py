"""Online landmark replacement + landmark MDS: quality and speed figures.

Prints:

1. S-curve (scikit-learn's make_s_curve, n=1000, noise=0, random_state=1,
   ordered by the curve parameter), n_L = 100, k = 1, 2, 3: normalised
   stress σ (all pairs) and σ_L (landmark pairs) for the online learner
   (unbounded buffer, as in the paper, and a bounded one), the initial
   landmarks, random landmarks (mean ± sd over 20 draws), random-online
   (reservoir sample, 20 draws) and farthest-point landmarks. The authors'
   code gives, for k = 2: online ≈ 0.17, initial ≈ 0.23, random ≈ 0.15.
2. Online quality as a user sees it (``--arrival``): σ of each point embedded
   at its arrival (unaligned, aligned), with a lag of Δ arrivals (the
   re-embedding policy: emit x_t's coordinates at t + Δ), and with the final
   landmarks; then ``LandmarkMDS(reembed_every=K)``: time per arrival of ``fit`` and σ of the
   coordinates held at the end, K = never / 200 / 50 / 10.
3. Noise-robust option (``--robust``): σ of the final landmarks for
   min_support m = 0 (the paper) .. 8 against random landmarks' 10th / 50th /
   90th percentiles over 50 draws, on the S-curve, a noisy S-curve (0.3),
   a Swiss roll and very uneven clusters, n_L = 10, 20, 100; then, for m = 0 and 4, the rank of online
   among random's draws averaged over 8 realizations of each stream (one realization decides a cell near
   random's median by chance).
4. Overhead of the driver (``--overhead``): run_stream against a bare
   ``lax.scan`` of ``update`` for every metric path (uncached and cached
   Euclidean, callable, precomputed).
5. Speed: n = 1000, 2000, 4000 S-curve points with n_L = 100; compile
   time apart from steady-state time (median of repeats); state memory;
   batches (``--batches``): 64 streams against one, per stream-update.
6. Real-data formats (``--real``) on the shipped fixtures (or your files:
   ``--contacts FILE --prices FILE``): landmark share per year (prices) and
   hour of day of the landmark times (contacts), as PNGs.
7. A temporal-network example: synthetic ward contacts -> tie-decay
   networks -> Laplacian spectra -> online landmark MDS with alignment; the
   embedding trajectory is saved as a PNG.

Usage: python benchmarks/bench_landmarks.py [--quick] [--skip-speed] [--only arrival,robust,...]
Timings are wall-clock on whatever machine runs it; nothing is asserted.
"""
from __future__ import annotations

import os

# jaxlib's CPU eigh/svd call scipy's OpenBLAS, whose worker threads spin; on a
# loaded machine that made a 100 x 100 eigh ~100x slower. Must be set before
# numpy/scipy load.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import functools
import statistics
import time

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream
from jaxstream import datasets
from jaxstream.embedding import networks
from jaxstream import embedding as LM

from jaxstream.embedding import baselines as BL


def euclid(X):
    X = np.asarray(X, np.float64)
    sq = (X * X).sum(1)
    return np.sqrt(np.maximum(sq[:, None] + sq[None] - 2 * X @ X.T, 0.0))


def s_curve(n):
    X, t = datasets.make_s_curve(n, noise=0.0, random_state=1, sort_by_t=True)
    return X.astype(np.float32), t


def run_online(X, n_L, buffer_size, align=False):
    lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=buffer_size, align=align)
    s0 = lrn.init(jax.random.key(0), X[:1])
    run = jax.jit(lambda s, xs: jaxstream.run_stream(lrn, jax.random.key(0), xs, s, trace="info"))
    return run, s0, X[1:]


def stress_pair(D, Y, idx):
    return float(LM.normalized_stress(D, Y)), float(LM.landmark_stress(D, Y, idx))


def quality(n_draws=20):
    X, _ = s_curve(1000)
    D = euclid(X)
    Dj = jnp.asarray(D, jnp.float32)
    n_L = 100
    scen = {}
    for label, N in (("online", 1000), ("online (buffer 300)", 300)):
        run, s0, xs = run_online(X, n_L, N)
        s, info = run(s0, xs)
        _, ids, _ = LM.landmarks(s)
        case = np.bincount(np.asarray(info.case), minlength=4)
        print(f"{label}: cases covered/added/replaced = {case[1] + 0}/{case[2] + 1}/{case[3]} "
              f"(first point included in 'added'), swaps = {int(np.asarray(info.replaced).sum())}, "
              f"final eps = {float(s.eps):.4f}")
        scen[label] = [ids]
    scen["initial"] = [BL.initial_landmarks(1000, n_L)]
    keys = jax.random.split(jax.random.key(1), n_draws)
    scen["random"] = [np.asarray(BL.random_landmarks(k, 1000, n_L)) for k in keys]
    keys = jax.random.split(jax.random.key(2), n_draws)
    scen["random-online"] = [np.asarray(BL.reservoir_landmarks(k, 1000, n_L)) for k in keys]
    scen["farthest-point"] = [np.asarray(BL.farthest_point_landmarks(n_L, distances=Dj))]
    print()
    print(f"S-curve n=1000 ordered by t, n_L={n_L}: normalised stress sigma (all pairs) / sigma_L (landmarks)")
    print(f"{'scenario':22s} " + "  ".join(f"{'k=' + str(k):>23s}" for k in (1, 2, 3)))
    for name, draws in scen.items():
        cells = []
        for k in (1, 2, 3):
            vals = np.array([stress_pair(Dj, BL.embed_with_landmarks(idx, k, distances=Dj), idx) for idx in draws])
            if len(draws) > 1:
                m, sd = vals.mean(0), vals.std(0, ddof=1)
                cells.append(f"{m[0]:.3f}±{sd[0]:.3f}/{m[1]:.3f}±{sd[1]:.3f}")
            else:
                cells.append(f"{vals[0, 0]:.3f} / {vals[0, 1]:.3f}")
        print(f"{name:22s} " + "  ".join(f"{c:>23s}" for c in cells))
    print("(authors' code, k=2: online ~0.17, initial ~0.23, random ~0.15)")


def tree_bytes(tree):
    return sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(tree))


def time_call(fn, *args, repeats=3):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    steady = statistics.median(times)
    return first - steady, steady, min(times)


def speed(quick=False):
    print()
    print(f"Speed on {jax.devices()[0].platform.upper()} ({os.cpu_count()} cores visible), n_L = 100, "
          "S-curve ordered by t, whole stream in one jitted run_stream:")
    print(f"{'n':>6s} {'buffer':>7s} {'align':>6s} {'compile s':>10s} {'steady s':>9s} {'min s':>7s} "
          f"{'points/s':>9s} {'state MB':>9s} {'case3':>6s}")
    configs = [(1000, 1000, False), (1000, 1000, True), (2000, 2000, False), (4000, 4000, False),
               (4000, 1000, False)]
    if quick:
        configs = configs[:2]
    for n, N, align in configs:
        X, _ = s_curve(n)
        run, s0, xs = run_online(X, 100, N, align)
        comp, steady, best = time_call(run, s0, xs)
        _, info = run(s0, xs)
        n3 = int((np.asarray(info.case) == 3).sum())
        print(f"{n:6d} {N:7d} {str(align):>6s} {comp:10.2f} {steady:9.3f} {best:7.3f} {n / steady:9.0f} "
              f"{tree_bytes(s0) / 1e6:9.2f} {n3:6d}")


def many_streams(quick=False):
    print()
    print("run_streams: B S-curves (different random_state, each ordered by t), n=1000 points each")
    print(f"{'B':>4s} {'n_L':>4s} {'buffer':>7s} {'compile s':>10s} {'steady s':>9s} {'stream-updates/s':>17s}")
    for B, n_L, N in ((16, 20, 100), (64, 20, 100), (8, 100, 1000))[: 2 if quick else 3]:
        Xs = np.stack([datasets.make_s_curve(1000, random_state=r, sort_by_t=True)[0] for r in range(B)])
        Xs = Xs.astype(np.float32)
        lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=N)
        keys = jax.random.split(jax.random.key(0), B)
        states = jaxstream.init_streams(lrn, keys, Xs[:, :1])
        run = jax.jit(lambda k, x, s: jaxstream.run_streams(lrn, k, x, s, trace=None))
        comp, steady, _ = time_call(run, keys, Xs[:, 1:], states, repeats=2)
        print(f"{B:4d} {n_L:4d} {N:7d} {comp:10.2f} {steady:9.3f} {B * 999 / steady:17.0f}")


def temporal_trajectory(n_days=3.0, decay=0.5, step_h=1.0 / 6.0, n_landmarks=20, seed=0):
    """Synthetic ward contacts -> tie-decay snapshots -> spectra -> online landmark MDS.

    Returns a dict with the snapshot times, the prequential (aligned)
    embedding of each snapshot on arrival, the embedding of all snapshots
    under the final landmarks, the spectra and the final state.
    """
    c = networks.make_contact_stream(20, n_days, seed=seed)
    times = np.arange(1.0, 24.0 * n_days + 1e-9, step_h)  # from the first hour on
    B = networks.tie_decay_networks(c.i, c.j, c.t, c.n_nodes, times, decay=decay)
    spec = np.asarray(networks.laplacian_spectrum(B))
    lrn = LM.landmark_mds(n_landmarks, n_components=2, buffer_size=len(times), align=True)
    s0 = lrn.init(jax.random.key(0), spec[:1])
    # trace: the embedding of x_t under the landmarks before x_t is learned
    fin, (Y, info) = jax.jit(lambda s, xs: jaxstream.run_stream(
        lrn, jax.random.key(0), xs, s, trace=lambda st, x, i: (lrn.predict(st, x), i)))(s0, spec[1:])
    return dict(contacts=c, times=times, spec=spec, online=np.asarray(Y), info=info, state=fin,
                final=np.asarray(lrn.predict(fin, spec)), learner=lrn)


def temporal_network():
    """The temporal-network trajectory's stress (notebooks/landmarks.ipynb draws it)."""
    print()
    res = temporal_trajectory()
    c, spec, fin = res["contacts"], res["spec"], res["state"]
    D = euclid(spec)
    _, ids, _ = LM.landmarks(fin)
    print(f"temporal network: {len(c.t)} contacts among {c.n_nodes} nodes over 3 days, {len(res['times'])} "
          f"tie-decay snapshots every 10 min (decay 0.5/h), Laplacian spectral distance, n_L=20, k=2: "
          f"sigma = {float(LM.normalized_stress(D, res['final'])):.3f}, "
          f"sigma_L = {float(LM.landmark_stress(D, res['final'], ids)):.3f}, "
          f"swaps = {int(np.asarray(res['info'].replaced).sum())}")


def _sigma_fn(D, k=2):
    """sigma(idx): normalised stress of the LMDS of all points with landmarks idx (jitted)."""
    D = jnp.asarray(D, jnp.float32)
    sq = D ** 2

    @jax.jit
    def sigma(i):
        model = LM.lmds_fit(sq[i][:, i], k)
        return LM.normalized_stress(D, LM.lmds_transform(model, sq[:, i]))

    return sigma


def random_percentiles(D, n_L, n_draws=50, seed=1):
    """10th / 50th / 90th percentiles of σ over `n_draws` random landmark sets."""
    return np.percentile(np.asarray(BL.random_stress(jax.random.key(seed), D, n_L, n_draws)), [10, 50, 90])


def robust_streams(seed=None):
    """The four streams of the noise-robustness comparison (float32, stream order).

    ``seed=None``: the fixed realizations of the table (S-curves random_state=1, the others seed 0);
    an int s: realization s of each (random_state=s / seed=s).
    """
    from jaxstream.embedding import datasets as ED
    a, b = (1, 0) if seed is None else (seed, seed)
    X, _ = datasets.make_s_curve(1000, noise=0.0, random_state=a, sort_by_t=True)
    yield "S-curve", X.astype(np.float32)
    X, _ = datasets.make_s_curve(1000, noise=0.3, random_state=a, sort_by_t=True)
    yield "noisy S-curve 0.3", X.astype(np.float32)
    X, _ = ED.make_swiss_roll(1200, seed=b)
    yield "Swiss roll", X.astype(np.float32)
    X, _ = ED.make_uneven_clusters(1000, seed=b)
    yield "uneven clusters", X.astype(np.float32)


@functools.lru_cache(maxsize=None)
def _robust_runner(n_L, n):
    lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=n)
    return lrn, jax.jit(lambda k, x, s: jaxstream.run_streams(lrn, k, x, s, trace=None))


def _run_rules(X, n_L, rules):
    """Final states (leading axis: rule) of one vmapped run of X per rule (min_support m, density_shift c),
    buffer = n."""
    lrn, run = _robust_runner(n_L, len(X))
    B = len(rules)
    grid = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + a.shape), lrn.params)
    grid = grid._replace(min_support=jnp.array([m for m, _ in rules], jnp.int32),
                         density_shift=jnp.array([c for _, c in rules], grid.density_shift.dtype))
    keys = jax.random.split(jax.random.key(0), B)
    st = jaxstream.init_streams(lrn, keys, X[:1], grid, params_batched=True, x_init_batched=False)
    return run(keys, np.broadcast_to(X[1:], (B,) + X[1:].shape), st)[0]


def _final_sigmas(X, n_L, rules, sigma):
    """σ of the final landmarks of one vmapped run per rule (min_support m, density_shift c) (buffer = n)."""
    fin = _run_rules(X, n_L, rules)
    B = len(rules)
    return [float(sigma(jnp.asarray(LM.landmarks(jax.tree_util.tree_map(lambda a: a[b], fin))[1])))
            for b in range(B)]


def robust_seeds(rules=((0, 0.0), (4, 0.0), (4, 0.5)), n_Ls=(10, 20, 100), n_seeds=8, n_draws=50):
    """Where online σ falls in random's distribution, over `n_seeds` realizations of each stream.

    One realization decides a cell by chance when a rule lands near random's median (the rank of online
    among the draws moves by ±0.2–0.3 between realizations of the same stream), so this prints, per cell and
    rule, the mean rank (fraction of random draws below online; 0.5 = the median) ± its standard error and
    in how many realizations online is at or below the median / below the 10th percentile.
    """
    print()
    print(f"Noise-robust option over {n_seeds} realizations of each stream: mean rank of online among "
          f"{n_draws} random draws ± s.e. [realizations <= median, < p10]")
    res = {}
    for seed in range(n_seeds):
        for name, X in robust_streams(seed):
            D = euclid(X)
            sigma = _sigma_fn(D)
            n = len(X)
            for n_L in n_Ls:
                idx = jax.vmap(lambda k: BL.random_landmarks(k, n, n_L))(
                    jax.random.split(jax.random.key(100 + seed), n_draws))
                r = np.asarray(jax.lax.map(sigma, idx))
                on = _final_sigmas(X, n_L, rules, sigma)
                res.setdefault((name, n_L), []).append([(float((r < v).mean()), v <= np.median(r),
                                                         v < np.percentile(r, 10)) for v in on])
    for (name, n_L), rows in res.items():
        rows = np.array(rows, float)  # (seeds, rules, 3)
        cells = [f"m={m},c={c}: {rows[:, j, 0].mean():.2f}±{rows[:, j, 0].std(ddof=1) / np.sqrt(len(rows)):.2f} "
                 f"[{int(rows[:, j, 1].sum())}/{len(rows)}, {int(rows[:, j, 2].sum())}]"
                 for j, (m, c) in enumerate(rules)]
        print(f"{name:18s} n_L={n_L:3d} " + " | ".join(cells), flush=True)
    return res


def robust_weighted(rules=((0, 0.0), (4, 0.5)), n_Ls=(10, 20, 100), n_seeds=8, n_draws=50, streams=None):
    """Weighted landmark MDS (each landmark weighs the points it stands for, `LM.landmark_weights`) of the
    final landmarks against random landmarks with the plain landmark MDS, over `n_seeds` realizations.

    Prints per cell the mean rank of online σ among random's draws (0.5 = median) for each rule, plain and
    weighted, with [realizations <= median, < p10], and the mean rank of the median of random landmarks
    weighted the same way (their cells among all points): whether the weighting or the landmark choice wins.

    Measured (paper's rule, 4 realizations, 50 draws; 2-core CPU), mean rank plain -> weighted: S-curve
    0.14 -> 0.03 / 0.46 -> 0.04 / 0.22 -> 0.15 (n_L = 10 / 20 / 100); noisy S-curve 0.43 -> 0.37 / 0.44 -> 0.24
    / 0.49 -> 0.02; Swiss roll 0.54 -> 0.52 / 0.42 -> 0.19 / 0.45 -> 0.09; uneven clusters 0.34 -> 0.20 /
    0.44 -> 0.11 (below p10 in 2 of 4) / 0.54 -> 0.23. Random landmarks weighted the same way: median rank
    0.21-0.47, so part of the gain is the weighting itself. Random's 10th percentile on uneven clusters lies
    near the σ of the classical MDS of all points (0.112 vs 0.119, 0.108 vs 0.107, 0.202 vs 0.187, 0.165 vs 0.167
    in realizations 0-3), which the weighted landmarks approximate: below it needs a lucky landmark set.

    Uneven clusters only, 8 realizations, 100 draws (``robust_weighted(rules=((0, 0.0), (4, 0.0), (4, 0.5)),
    n_draws=100, streams=["uneven clusters"])``, 2-core CPU shared with other jobs, 442 s), mean rank ± s.e.
    [realizations <= median, < p10] at n_L = 10 / 20 / 100: paper 0.26 [6/8, 3] / 0.36 [5/8, 2] / 0.56 [4/8, 0];
    paper W 0.15 [8/8, 4] / 0.16 [8/8, 3] / 0.26 [8/8, 2]; m=4 W 0.09 [8/8, 6] / 0.18 [8/8, 4] / 0.47 [4/8, 1];
    m=4,c=0.5 W 0.16 [8/8, 1] / 0.22 [8/8, 3] / 0.46 [4/8, 1]; random landmarks weighted: median rank
    0.45 / 0.43 / 0.34. No option is below random's 10th percentile reliably (the best, m=4 W at n_L = 10,
    in 6 of 8 realizations); the paper's landmarks weighted are at or below random's median in 8 of 8 at
    every n_L. The other streams, 6 realizations, 50 draws (``robust_weighted(rules=((0, 0.0),), n_seeds=6,
    streams=[...])``, 883 s), paper -> paper W at n_L = 10 / 20 / 100: S-curve 0.28 -> 0.04 [6/6, 6] / 0.35 ->
    0.04 [6/6, 6] / 0.18 -> 0.14 [6/6, 1]; noisy S-curve 0.40 -> 0.47 [3/6, 0] / 0.53 -> 0.17 [6/6, 3] / 0.48 ->
    0.02 [6/6, 6]; Swiss roll 0.64 -> 0.59 [2/6, 0] / 0.55 -> 0.31 [5/6, 2] / 0.32 -> 0.06 [6/6, 5]; random W
    median 0.39 / 0.20 / 0.18, 0.36 / 0.21 / 0.05, 0.44 / 0.32 / 0.07.
    """
    print()
    print(f"Weighted LMDS over {n_seeds} realizations: mean rank of online among {n_draws} random draws (plain "
          f"LMDS) ± s.e. [<= median, < p10]; 'W' = weighted by landmark_weights")
    res = {}
    for seed in range(n_seeds):
        for name, X in robust_streams(seed):
            if streams and name not in streams:
                continue
            D = euclid(X)
            Dj = jnp.asarray(D, jnp.float32)
            sq = Dj ** 2
            n = len(X)

            @jax.jit
            def sigma_w(i, w):
                model = LM.lmds_fit(sq[i][:, i], 2, weights=w)
                return LM.normalized_stress(Dj, LM.lmds_transform(model, sq[:, i]))

            @jax.jit
            def cells(i):
                return jnp.sum(jax.nn.one_hot(jnp.argmin(Dj[:, i], axis=1), i.shape[0]), axis=0)

            for n_L in n_Ls:
                idx = jax.vmap(lambda k: BL.random_landmarks(k, n, n_L))(
                    jax.random.split(jax.random.key(100 + seed), n_draws))
                r = np.asarray(jax.lax.map(lambda i: sigma_w(i, jnp.ones(n_L)), idx))
                rw = np.asarray(jax.lax.map(lambda i: sigma_w(i, cells(i)), idx))
                fin = _run_rules(X, n_L, rules)
                B = len(rules)
                row = []
                for b in range(B):
                    sb = jax.tree_util.tree_map(lambda a: a[b], fin)
                    ids = jnp.asarray(np.asarray(sb.arrival)[np.asarray(sb.landmark_slots)])  # buffer = n: arrival = row
                    w = LM.landmark_weights(sb)
                    for v in (float(sigma_w(ids, jnp.ones(n_L))), float(sigma_w(ids, w))):
                        row.append(((r < v).mean(), v <= np.median(r), v < np.percentile(r, 10)))
                row.append(((r < np.median(rw)).mean(), True, False))
                res.setdefault((name, n_L), []).append(row)
        print(f"  realization {seed} done (load {os.getloadavg()[0]:.1f})", flush=True)
        if seed < n_seeds - 1:
            _print_weighted(res, rules)
    _print_weighted(res, rules)
    return res


def _print_weighted(res, rules):
    labels = [f"m={m},c={c}{w}" for m, c in rules for w in ("", " W")]
    for (name, n_L), rows in res.items():
        rows = np.array(rows, float)  # (seeds, 2·rules + 1, 3)
        cells_ = [f"{lab}: {rows[:, j, 0].mean():.2f}±{rows[:, j, 0].std(ddof=1) / np.sqrt(len(rows)):.2f} "
                  f"[{int(rows[:, j, 1].sum())}/{len(rows)}, {int(rows[:, j, 2].sum())}]" for j, lab in enumerate(labels)]
        print(f"{name:18s} n_L={n_L:3d} " + " | ".join(cells_) + f" | random W median: {rows[:, -1, 0].mean():.2f}",
              flush=True)


def robust(rules=((0, 0.0), (2, 0.0), (4, 0.0), (0, 0.5), (4, 0.5)), n_Ls=(10, 20, 100), n_draws=50):
    """σ of the final landmarks for several rules (min_support m, density_shift c; one vmapped run per n_L)
    against random landmarks' percentiles."""
    print()
    print(f"Noise-robust options: sigma (k=2, final landmarks, buffer = n) per rule against random "
          f"landmarks' p10/p50/p90 over {n_draws} draws")
    rows = []
    for name, X in robust_streams():
        D = euclid(X)
        sigma = _sigma_fn(D)
        for n_L in n_Ls:
            on = _final_sigmas(X, n_L, rules, sigma)
            p10, p50, p90 = random_percentiles(D, n_L, n_draws)
            ini = float(sigma(jnp.arange(n_L)))
            rows.append((name, n_L, p10, p50, p90, ini, on))
            print(f"{name:18s} n_L={n_L:3d} random {p10:.4f}/{p50:.4f}/{p90:.4f} initial {ini:.4f} | "
                  + " ".join(f"m={m},c={c}:{v:.4f}{'**' if v < p10 else ('*' if v <= p50 else ' ')}" for (m, c), v in zip(rules, on)), flush=True)
    print("(* = at or below random's median, ** = below its 10th percentile; m = min_support, c = density_shift)")
    return rows


def _arrival_sigmas(X, n_L, lags=(0, 10, 50), buffer_size=None):
    """σ of the at-arrival embeddings (unaligned / aligned, lagged) and of the final landmarks."""
    D = euclid(X)
    n = len(X)
    out = {}
    for align in (False, True):
        lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=buffer_size or n, align=align, embed_arrivals=True)
        # trace each step's state *before* the update: its embedding is the one after the previous arrival
        run = jax.jit(lambda s, xs: jaxstream.run_stream(
            lrn, jax.random.key(0), xs, s, trace=lambda st, x, info: (info.y, st.embedding)))
        s0 = lrn.init(jax.random.key(0), X[:1])
        fin, (Y, embs) = run(s0, X[1:])
        Y = np.concatenate([np.zeros((1, 2), np.float32), np.asarray(Y)])
        label = "aligned" if align else "unaligned"
        out[f"at arrival, {label}"] = float(LM.normalized_stress(D, Y))
        if align:
            # lag Δ: x_t's coordinates are emitted at t + Δ with the embedding of that moment
            # embedding after arrival u: embs[u] (the state before step u, which learns X[u + 1]) for
            # u <= n - 2, the final one for u = n - 1
            cat = lambda a, f: np.concatenate([np.asarray(a), np.asarray(f)[None]])
            W, off = cat(embs.weights, fin.embedding.weights), cat(embs.offset, fin.embedding.offset)
            slots, msk = cat(embs.slots, fin.embedding.slots), cat(embs.mask, fin.embedding.mask)
            # slots index the final buffer: nothing is evicted with buffer >= n, so a slot keeps its point
            P = np.asarray(fin.points, np.float64)
            for lag in lags[1:]:
                Yl = np.empty((n, 2))
                for t in range(n):
                    e = min(t + lag, n - 1)  # x_t's coordinates are emitted after arrival t + lag
                    sq = ((X[t][None].astype(np.float64) - P[slots[e]]) ** 2).sum(-1) * msk[e]
                    Yl[t] = sq @ W[e] + off[e]
                out[f"lag {lag}, aligned"] = float(LM.normalized_stress(D, Yl))
            # periodic re-embedding: every K arrivals all buffered points are re-embedded with the landmarks of
            # that moment (revising what the user holds). sigma_tau is the stress, among the points seen by
            # time tau, of the coordinates the user holds at tau; averaged over 10 times tau in (n/10 .. n].
            Xd = X.astype(np.float64)

            def embed_at(e, idx):
                sq = ((Xd[idx][:, None] - P[slots[e]][None]) ** 2).sum(-1) * msk[e]
                return sq @ W[e] + off[e]

            taus = np.linspace(n / 10, n, 10).astype(int) - 1
            for K in (1, 50, 200, None):
                sig = []
                for tau in taus:
                    if K is None:  # no revision: at-arrival coordinates
                        Yh = Y[:tau + 1]
                    else:
                        c = (tau // K) * K  # the last re-embedding at or before tau
                        Yh = np.concatenate([embed_at(c, np.arange(c + 1)), Y[c + 1:tau + 1]])
                    sig.append(float(LM.normalized_stress(D[:tau + 1, :tau + 1], Yh)))
                out[f"held, re-embed every {K or 'never'}"] = float(np.mean(sig))
        out["final landmarks"] = float(LM.normalized_stress(D, lrn.predict(fin, X)))
        if align:
            # the cost of the "revise everything" policy: re-embed all buffered points at a landmark change
            pred = jax.jit(lrn.predict)
            out["re-embed buffer (us)"] = time_call(pred, fin, X, repeats=5)[2] * 1e6
            out["one arrival (us)"] = time_call(run, s0, X[1:], repeats=3)[2] / (n - 1) * 1e6
            out["landmark changes"] = int((np.asarray(jax.jit(lambda s, xs: jaxstream.run_stream(
                lrn, jax.random.key(0), xs, s, trace=lambda st, x, i: i.replaced | (i.case == 2)))(s0, X[1:])[1])).sum())
    return out


def arrival(lags=(0, 10, 50, 200)):
    print()
    print("Online quality as a user sees it: sigma of each point's coordinates at its arrival (after its update),")
    print("unaligned / aligned (Procrustes), emitted with a lag of D arrivals (re-embedding policy), and with the "
          "final landmarks; buffer = n, k = 2")
    from jaxstream.embedding import datasets as ED
    Xs = {"S-curve n=1000": s_curve(1000)[0], "Swiss roll n=1200": ED.make_swiss_roll(1200, seed=0)[0].astype(np.float32)}
    for name, X in Xs.items():
        for n_L in (20, 100):
            r = _arrival_sigmas(X, n_L, lags)
            print(f"{name:18s} n_L={n_L:3d} " + "  ".join(f"{k}: {v:.3f}" if isinstance(v, float) and v < 10
                                                         else f"{k}: {v:.0f}" for k, v in r.items()), flush=True)


def ordering(n_real=50, n=600, n_Ls=(20, 50)):
    """Ordered arrival (points along the manifold, by its intrinsic coordinate) against
    random arrival of the same points: σ of the coordinates each point gets at its arrival
    (aligned, what a streaming user holds), σ of the final landmarks' embedding of all
    points, and the wrapper's held coordinates with ``reembed_every=50`` (the fix for early
    points placed by landmarks that had not seen the rest), over `n_real` realisations
    (random_state / seed r) of each manifold; mean ± 95 % half-width."""
    from jaxstream.embedding import datasets as ED
    print()
    print(f"Ordered vs random arrival, n={n}, buffer = n, k = 2, {n_real} realisations each: normalised stress "
          "(mean ± 95% half-width)")
    makers = {"S-curve": lambda r: datasets.make_s_curve(n, random_state=r, sort_by_t=True)[0],
              "Swiss roll": lambda r: ED.make_swiss_roll(n, seed=r)[0]}
    for name, make in makers.items():
        for n_L in n_Ls:
            lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=n, align=True, embed_arrivals=True)
            cells = {}
            for order in ("ordered", "random"):
                Xs = []
                for r in range(n_real):
                    X = np.asarray(make(r), np.float32)
                    if order == "random":
                        X = X[np.random.default_rng(r).permutation(n)]
                    Xs.append(X)
                Xs = np.stack(Xs)
                keys = jax.random.split(jax.random.key(0), n_real)
                s0 = jaxstream.init_streams(lrn, keys, Xs[:, :1])
                fin, Y = jaxstream.run_streams(lrn, keys, Xs[:, 1:], s0, trace=lambda st, x, info: info.y)
                Y = np.concatenate([np.zeros((n_real, 1, 2), np.float32), np.asarray(Y)], 1)
                arr, final, held = [], [], []
                for r in range(n_real):
                    D = euclid(Xs[r])
                    s = jax.tree_util.tree_map(lambda a: a[r], fin)
                    arr.append(float(LM.normalized_stress(D, Y[r])))
                    final.append(float(LM.normalized_stress(D, lrn.predict(s, Xs[r]))))
                    if r < 10:  # the wrapper runs one stream at a time: 10 realisations
                        m = LM.LandmarkMDS(n_L, n_components=2, buffer_size=n, reembed_every=50, embed_arrivals=True)
                        held.append(float(LM.normalized_stress(D, m.fit(Xs[r]).held_)))
                ci = lambda v: f"{np.mean(v):.3f} ± {1.96 * np.std(v, ddof=1) / np.sqrt(len(v)):.3f}"
                cells[order] = (f"at arrival {ci(arr)}, final landmarks {ci(final)}, "
                                f"held with reembed_every=50 {ci(held)} (10 real.)")
            for order, txt in cells.items():
                print(f"  {name:10s} n_L={n_L:3d} {order:8s}: {txt}", flush=True)


def reembed(Ks=(None, 200, 50, 10), n_L=20, repeats=3):
    """The wrapper's ``reembed_every=K``: time per arrival of ``fit`` (steady state: the best of `repeats`
    after a compiling run) and σ of the coordinates held at the end of the stream."""
    print()
    print(f"LandmarkMDS(reembed_every=K), n_L={n_L}, buffer = n, k = 2: microseconds per arrival of fit() "
          "(best of 3 after a compiling run) and sigma of the held coordinates at the end")
    from jaxstream.embedding import datasets as ED
    Xs = {"S-curve n=1000": s_curve(1000)[0], "Swiss roll n=1200": ED.make_swiss_roll(1200, seed=0)[0].astype(np.float32)}
    for name, X in Xs.items():
        D = jnp.asarray(euclid(X), jnp.float32)
        cells = []
        for K in Ks:
            m = LM.LandmarkMDS(n_L, n_components=2, buffer_size=len(X), reembed_every=K, embed_arrivals=True)
            m.fit(X)
            ts = []
            for _ in range(repeats):
                m.reset()
                t0 = time.perf_counter()
                info = m.partial_fit(X).last_info_
                ts.append(time.perf_counter() - t0)
            # without re-embedding a user holds the at-arrival coordinates Info.y
            Y = m.held_ if K is not None else np.asarray(info.y)
            cells.append(f"K={K or 'never'}: {min(ts) / len(X) * 1e6:.0f} us, held sigma "
                         f"{float(LM.normalized_stress(D, Y)):.3f}")
        print(f"{name:18s} " + "  ".join(cells), flush=True)


def overhead(N=1500, repeats=5):
    """run_stream vs a bare lax.scan of update, per metric path (the issue's N = 1500, n_L = 100)."""
    from jax import lax
    print()
    print(f"Driver overhead: run_stream (jitted, trace=None) vs bare lax.scan of update, S-curve n=N={N}, n_L=100; "
          f"best of {repeats} interleaved calls, us per point")
    X, _ = s_curve(N)
    Dm = euclid(X).astype(np.float32)
    metric = lambda a, b: jnp.sqrt(jnp.sum((a - b) ** 2))
    paths = {"euclidean (uncached)": (dict(), X), "euclidean cached": (dict(cache_distances=True), X),
             "callable (cached)": (dict(metric=metric), X),
             "precomputed": (dict(metric="precomputed", distances=Dm), LM.index_stream(N).astype(np.float32)),
             "euclidean + align": (dict(align=True), X)}
    for name, (kw, items) in paths.items():
        lrn = LM.landmark_mds(100, n_components=2, buffer_size=N, **kw)
        s0 = lrn.init(jax.random.key(0), items[:1])
        xs = jnp.asarray(items[1:])
        rs = jax.jit(lambda s, xs: jaxstream.run_stream(lrn, jax.random.key(0), xs, s, trace=None)[0])

        def bare(s, xs):
            def f(s, inp):
                x, t = inp
                return lrn.update(jax.random.fold_in(jax.random.key(0), t), s, x)[0], None
            return lax.scan(f, s, (xs, jnp.arange(xs.shape[0])))[0]

        bare = jax.jit(bare)
        jax.block_until_ready(rs(s0, xs))
        jax.block_until_ready(bare(s0, xs))
        a = b = np.inf
        for _ in range(repeats):  # interleaved, best of: other jobs on the CPU inflate both alike
            t0 = time.perf_counter()
            jax.block_until_ready(rs(s0, xs))
            a = min(a, time.perf_counter() - t0)
            t0 = time.perf_counter()
            jax.block_until_ready(bare(s0, xs))
            b = min(b, time.perf_counter() - t0)
        print(f"  {name:22s} run_stream {a / (N - 1) * 1e6:7.1f}  bare scan {b / (N - 1) * 1e6:7.1f}  "
              f"ratio {a / b:5.2f}", flush=True)


def _time_one_and_batch(one, one_args, many, many_args, repeats: int, inner: int):
    """Best-of times (s) of one stream and of the batch, interleaved so that both see the same load.

    Each repeat times `one` `inner` times and `many` once; both are compiled
    (called once) first.
    """
    jax.block_until_ready(one(*one_args))
    jax.block_until_ready(many(*many_args))
    t1 = tb = np.inf
    for _ in range(repeats):
        for _ in range(inner):
            t0 = time.perf_counter()
            jax.block_until_ready(one(*one_args))
            t1 = min(t1, time.perf_counter() - t0)
        t0 = time.perf_counter()
        jax.block_until_ready(many(*many_args))
        tb = min(tb, time.perf_counter() - t0)
    return t1, tb


def batches(B=64, T=400, n_L=20, N=200, repeats=7):
    """B streams against one, per stream-update, with case 3, eigh and alignment on every stream.

    The one-stream and batched calls are interleaved and each timed as the best of `repeats` (the
    one-stream run, a few ms, is called 8 times per round), so that other jobs sharing the CPU
    inflate both alike and a single slow call does not decide the ratio.
    """
    print()
    print(f"Batches: run_streams of B={B} S-curves (random_state r, ordered) vs one, T={T}, n_L={n_L}, buffer={N}; "
          f"us per stream-update (best of {repeats} interleaved rounds)")
    Xs = np.stack([datasets.make_s_curve(T + 1, random_state=r, sort_by_t=True)[0] for r in range(B)])
    Xs = Xs.astype(np.float32)
    for align in (False, True):
        lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=N, align=align)
        one = jax.jit(lambda k, x, s: jaxstream.run_stream(lrn, k, x, s, trace="info")[1].case)
        # run_streams is this vmap (written out so that the timing does not depend on its host-side checks)
        many = jax.jit(jax.vmap(lambda k, x, s: jaxstream.run_stream(lrn, k, x, s, trace="info")[1].case))
        keys = jax.random.split(jax.random.key(0), B)
        st = jaxstream.init_streams(lrn, keys, Xs[:, :1])
        s1 = lrn.init(keys[0], Xs[0, :1])
        t1, tb = _time_one_and_batch(one, (keys[0], Xs[0, 1:], s1), many, (keys, Xs[:, 1:], st), repeats, 8)
        info = jax.jit(jax.vmap(lambda k, x, s: jaxstream.run_stream(lrn, k, x, s, trace="info")[1]))(
            keys, Xs[:, 1:], st)
        cases = np.asarray(info.case)
        changed = (cases == 2) | np.asarray(info.replaced)  # the landmark set changed: an eigh with align
        print(f"  align={str(align):5s} one stream {t1 / T * 1e6:7.1f}   B={B}: {tb / (B * T) * 1e6:7.1f} per "
              f"stream-update  ratio {tb / B / t1:5.2f}   case 3 on {(cases == 3).mean():.0%} of a stream's steps, "
              f"on {(cases == 3).any(0).mean():.0%} of steps for some stream; landmark set changed on "
              f"{changed.mean():.0%} / {changed.any(0).mean():.0%} (load {os.getloadavg()[0]:.1f})", flush=True)
    # what one refresh of the aligned embedding is made of on this backend: an (n_L, n_L) eigh, alone and batched
    A = np.random.default_rng(0).standard_normal((B, n_L, n_L)).astype(np.float32)
    A = A + A.transpose(0, 2, 1)
    R = 50  # eighs per call, chained so that none is skipped
    e1 = jax.jit(lambda a: jax.lax.scan(lambda c, _: (c + jnp.linalg.eigh(a + c)[1][0, 0] * 1e-12, None), 0.0,
                                        None, length=R)[0])
    eb = jax.jit(jax.vmap(e1))
    te1 = time_call(e1, A[0], repeats=7)[2] / R
    teb = time_call(eb, A, repeats=7)[2] / R / B
    print(f"  eigh of {n_L}x{n_L} on {jax.devices()[0].platform}: one {te1 * 1e6:.1f} us, batched ({B}) "
          f"{teb * 1e6:.1f} us per matrix", flush=True)


def options_batches(B=128, T=400, n_L=20, rules=((0, 0.0), (4, 0.0), (0, 0.5), (4, 0.5)), repeats=5):
    """The robust options under vmap: B noisy S-curves (noise 0.3) against one, per stream-update.

    Each rule (min_support m, density_shift c) runs with the same compiled `update` (the options are
    params); their rare branches run, under vmap, only for the streams that take them (`jaxstream._batching.rare`). The
    buffer holds the whole stream (T + 1 points), as in the robust tables. Interleaved best-of timing as
    in `batches`. Measured (2-core CPU, load ~5 from other jobs), one stream / B=128 per stream-update:
    m=0,c=0 12.6 / 13.7 µs (ratio 1.09); m=4 20.6 / 28.4 (1.38); c=0.5 20.2 / 27.2 (1.35); m=4,c=0.5
    28.3 / 44.3 (1.56).
    """
    print()
    print(f"Robust options under vmap: B={B} noisy S-curves (noise 0.3, random_state r, ordered) vs one, T={T}, "
          f"n_L={n_L}, buffer={T + 1}; us per stream-update (best of {repeats} interleaved rounds)")
    Xs = np.stack([datasets.make_s_curve(T + 1, noise=0.3, random_state=r, sort_by_t=True)[0] for r in range(B)])
    Xs = Xs.astype(np.float32)
    lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=T + 1)
    one = jax.jit(lambda k, x, s: jaxstream.run_stream(lrn, k, x, s, trace="info")[1].case)
    many = jax.jit(jax.vmap(lambda k, x, s: jaxstream.run_stream(lrn, k, x, s, trace="info")[1].case))
    keys = jax.random.split(jax.random.key(0), B)
    for m, c in rules:
        params = LM.default_params(min_support=m, density_shift=c)
        st = jax.vmap(lambda k, x: lrn.init(k, x, params))(keys, Xs[:, :1])
        s1 = lrn.init(keys[0], Xs[0, :1], params)
        cases = np.asarray(many(keys, Xs[:, 1:], st))
        t1, tb = _time_one_and_batch(one, (keys[0], Xs[0, 1:], s1), many, (keys, Xs[:, 1:], st), repeats, 4)
        print(f"  m={m} c={c:.1f}: one stream {t1 / T * 1e6:7.1f}   B={B}: {tb / (B * T) * 1e6:7.1f} per "
              f"stream-update  ratio {tb / B / t1:5.2f}   case 3 on {(cases == 3).mean():.0%} of a stream's steps, "
              f"{(cases == 3).any(0).mean():.0%} of steps for some stream (load {os.getloadavg()[0]:.1f})",
              flush=True)


def real_data(contacts=None, prices=None, start_hour=0.0):
    """The paper's two real-data pipelines on the shipped fixtures (or the user's files); notebooks/landmarks.ipynb
    draws the paper's plots."""
    from jaxstream.embedding import datasets as ED
    print()
    c = ED.load_contacts(contacts or ED.fixture_path("contacts"))
    times, S = ED.tie_decay_spectra(c, 1.0 / 3600.0)
    S = S.astype(np.float32)
    lrn = LM.landmark_mds(20, n_components=2, buffer_size=len(S), align=True)
    fin, info = jax.jit(lambda s, xs: jaxstream.run_stream(lrn, jax.random.key(0), xs, s, trace="info"))(
        lrn.init(jax.random.key(0), S[:1]), S[1:])
    added = np.asarray(info.added)
    ever = np.unique(np.concatenate([[0], added[added >= 0]]))
    final = LM.landmarks(fin)[1]
    D = euclid(S)
    sig = float(LM.normalized_stress(D, lrn.predict(fin, S)))
    hours = (times / 3600.0 + start_hour) % 24.0  # start_hour: clock time of t = 0 (fixture: midnight)
    print(f"contacts ({'fixture' if contacts is None else contacts}): {len(c.t)} contacts, {c.n_nodes} nodes, "
          f"{len(times)} snapshots at event times (decay 1/h), n_L=20, buffer={len(S)}: sigma={sig:.4f}, "
          f"landmarks ever {len(ever)}, swaps {int(np.asarray(info.replaced).sum())}; snapshots between 7 and 19 h: "
          f"{np.mean((hours >= 7) & (hours < 19)):.0%} of all, {np.mean((hours[ever] >= 7) & (hours[ever] < 19)):.0%} "
          f"of those ever chosen, {np.mean((hours[final] >= 7) & (hours[final] < 19)):.0%} of the final landmarks")
    pt = ED.load_prices(prices or ED.fixture_path("prices"))
    V = ED.minmax_scale(pt.prices).astype(np.float32)
    lrn2 = LM.landmark_mds(10, n_components=2, buffer_size=max(len(V), 11))
    fin2, info2 = jax.jit(lambda s, xs: jaxstream.run_stream(lrn2, jax.random.key(0), xs, s, trace="info"))(
        lrn2.init(jax.random.key(0), V[:1]), V[1:])
    years = pt.dates.astype("datetime64[Y]").astype(int) + 1970
    a2 = np.asarray(info2.added)
    ever2 = np.unique(np.concatenate([[0], a2[a2 >= 0]]))
    final2 = LM.landmarks(fin2)[1]
    sig2 = float(LM.normalized_stress(euclid(V), lrn2.predict(fin2, V)))
    uy = np.unique(years)
    share = [np.isin(np.flatnonzero(years == y), final2).sum() / 10.0 for y in uy]
    print(f"prices ({'fixture' if prices is None else prices}): {len(V)} days x {V.shape[1]} tickers, n_L=10, "
          f"buffer={len(V)}: sigma={sig2:.4f}; landmarks ever {len(ever2)}; final landmarks per year "
          + ", ".join(f"{y}: {s:.0%}" for y, s in zip(uy, share)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer draws and sizes")
    ap.add_argument("--only", default="", help="comma-separated parts: quality,arrival,robust,overhead,speed,"
                    "batches,options,weighted,real,temporal,ordering (default: all)")
    ap.add_argument("--batch", type=int, default=64, help="B for the batch figures (default 64)")
    ap.add_argument("--contacts", default=None, help="a SocioPatterns contact list (t i j Si Sj)")
    ap.add_argument("--prices", default=None, help="a CSV of daily closing prices (Date, one column per ticker)")
    args = ap.parse_args()
    parts = set(args.only.split(",")) if args.only else {"quality", "arrival", "robust", "overhead", "speed",
                                                         "batches", "options", "weighted", "real", "temporal",
                                                         "ordering"}
    print(f"jax {jax.__version__}, devices {jax.devices()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    if "quality" in parts:
        quality(5 if args.quick else 20)
    if "arrival" in parts:
        arrival()
        reembed()
    if "ordering" in parts:
        ordering(20 if args.quick else 50)
    if "robust" in parts:
        robust(n_draws=20 if args.quick else 50)
        robust_seeds(n_seeds=2 if args.quick else 8, n_draws=20 if args.quick else 50)
    if "overhead" in parts:
        overhead(600 if args.quick else 1500)
    if "speed" in parts:
        speed(args.quick)
        many_streams(args.quick)
    if "batches" in parts:
        batches(B=args.batch, T=100 if args.quick else 400)
    if "weighted" in parts:
        robust_weighted(n_seeds=2 if args.quick else 8, n_draws=20 if args.quick else 50)
    if "options" in parts:
        options_batches(T=100 if args.quick else 400)
    if "real" in parts:
        real_data(args.contacts, args.prices)
    if "temporal" in parts:
        temporal_network()


if __name__ == "__main__":
    main()
