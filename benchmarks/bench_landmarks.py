"""Online landmark replacement + landmark MDS: quality and speed figures.

Prints:

1. S-curve (scikit-learn's make_s_curve, n=1000, noise=0, random_state=1,
   ordered by the curve parameter), n_L = 100, k = 1, 2, 3: normalised
   stress σ (all pairs) and σ_L (landmark pairs) for the online learner
   (unbounded buffer, as in the paper, and a bounded one), the initial
   landmarks, random landmarks (mean ± sd over 20 draws), random-online
   (reservoir sample, 20 draws) and farthest-point landmarks. The authors'
   code gives, for k = 2: online ≈ 0.17, initial ≈ 0.23, random ≈ 0.15.
2. Speed: n = 1000, 2000, 4000 S-curve points with n_L = 100; compile
   time apart from steady-state time (median of repeats); state memory.
3. `run_streams` throughput over many streams (stream-updates per second).
4. A temporal-network example: synthetic ward contacts -> tie-decay
   networks -> Laplacian spectra -> online landmark MDS with alignment; the
   embedding trajectory is saved as a PNG.

Usage: python benchmarks/bench_landmarks.py [--quick] [--skip-speed]
       [--png benchmarks/out/landmarks_temporal.png]
Timings are wall-clock on whatever machine runs it; nothing is asserted.
"""
from __future__ import annotations

import os

# jaxlib's CPU eigh/svd call scipy's OpenBLAS, whose worker threads spin; on a
# loaded machine that made a 100 x 100 eigh ~100x slower. Must be set before
# numpy/scipy load.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream
from jaxstream import datasets, networks
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


def plot_trajectory(res, png=None):
    import matplotlib.pyplot as plt
    times, Y, Yf = res["times"], res["online"], res["final"]
    warm = np.asarray(res["info"].n_landmarks) >= 3  # fewer landmarks cannot give 2 dimensions
    t_on, Y = times[1:][warm], Y[warm]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    ax = axes[0]
    ax.plot(Y[:, 0], Y[:, 1], "-", color="0.85", lw=0.6, zorder=1)
    sc = ax.scatter(Y[:, 0], Y[:, 1], c=t_on % 24.0, cmap="twilight", s=8, zorder=2)
    fig.colorbar(sc, ax=ax, label="hour of day")
    ax.set(title="online embedding (prequential, aligned)", xlabel="dimension 1", ylabel="dimension 2")
    ax = axes[1]
    n_days = int(round(times[-1] / 24.0))
    day = np.minimum((times // 24.0).astype(int), n_days - 1)
    for d in range(n_days):
        m = day == d
        ax.plot(Yf[m, 0], Yf[m, 1], "-o", ms=2, lw=0.7, label=f"day {d + 1}")
    ax.legend(fontsize=8)
    ax.set(title="all snapshots, final landmarks", xlabel="dimension 1", ylabel="dimension 2")
    ax = axes[2]
    ax.plot(t_on, Y[:, 0], lw=0.9, label="dimension 1 (online)")
    ax.plot(t_on, Y[:, 1], lw=0.9, label="dimension 2 (online)")
    ax.plot(times, Yf[:, 0], "k:", lw=0.7, label="dimension 1 (final landmarks)")
    for d in range(1, n_days):
        ax.axvline(24.0 * d, color="0.6", lw=0.5)
    ax.legend(fontsize=8)
    ax.set(title="coordinates over time", xlabel="time (hours)")
    fig.tight_layout()
    if png:
        os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
        fig.savefig(png, dpi=110)
    return fig


def temporal_network(png):
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
    try:
        import matplotlib
        matplotlib.use("Agg")
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    plot_trajectory(res, png)
    print(f"trajectory plot written to {png}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer draws and sizes")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--png", default=os.path.join(os.path.dirname(__file__), "out", "landmarks_temporal.png"))
    args = ap.parse_args()
    print(f"jax {jax.__version__}, devices {jax.devices()}")
    if not args.skip_quality:
        quality(5 if args.quick else 20)
    if not args.skip_speed:
        speed(args.quick)
        many_streams(args.quick)
    temporal_network(args.png)


if __name__ == "__main__":
    main()
