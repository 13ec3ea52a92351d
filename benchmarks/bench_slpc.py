"""slpc benchmarks: quality against the paper and baselines, the curve's shape, equivariance, speed.

* Paper streams (prequential loss over rounds t0+1..T, t0 = 20, mean (sd) over seeds, beside
  the ground truth, the nearest-past-point baseline and, with --princurve, the sequential
  Hastie–Stuetzle baseline): the cubic stream (T=500), Table 2 (6-D, T=200), a 3-D helix
  (T=400); the seismic box on 50 keys (final-curve R², segments, curve length farther than 3°
  from every event, beside a hand-drawn plate-boundary curve; the share of keys meeting the
  targets); a scale sweep (equivariance).
* Curve families (`datasets.CURVE_FAMILIES`, held-out seeds, mean ± 95 % half-width): the
  prequential loss over the noise energy and the final curve's shape (`jaxstream.curves.shape`:
  fidelity, coverage, length ratio, segments) with the share of streams meeting the targets;
  the ferry's length, segments and distance off its pier-to-pier line.
* Speed: one stream T=500/5000 (compile apart from steady state), the round's FLOPs and bytes
  from XLA's cost analysis, run_streams for B=1 and B=128 in the same run.
* --noise: the two noise statistics against the noise's true sd on streams that move.

Figures, their machine and date: benchmarks/README.md.

Usage: python benchmarks/bench_slpc.py [--princurve] [--skip-quality] [--skip-families] [--skip-speed]
       [--family-seeds A B] [--families NAME ...] [--plot seismic.png] [--seismic-keys N] [--noise]
"""
import argparse
import platform
import time

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream as js
from _timing import timed
from jaxstream import datasets, geometry
from jaxstream._stats import chi2_lower_wh


def nearest_past_point(xs, t0=20):
    return float(sum(((xs[:t] - xs[t]) ** 2).sum(1).min() for t in range(t0, len(xs))))


def run_batch(learner, streams, t0=20, seed=0):
    xs = np.stack(streams).astype(np.float32)
    keys = jax.random.split(jax.random.key(seed), len(streams))
    st = js.init_streams(learner, keys, xs[:, :t0])
    fin, info = js.run_streams(learner, keys, xs[:, t0:], st, trace="info")
    return fin, info


def quality_stream(learner, name, gen, seeds, paper, args, princurve_ok=True):
    data = [gen(s) for s in seeds]
    xs = [a for a, _ in data]
    t = time.perf_counter()
    fin, info = run_batch(learner, xs)
    cum = np.asarray(info.loss, np.float64).sum(1)
    el = time.perf_counter() - t
    truth = np.array([g[20:].sum() for _, g in data])
    nn = np.array([nearest_past_point(x) for x in xs])
    segs = (np.asarray(fin.n_vertices) - 1).tolist()
    print(f"== {name}: seeds {seeds[0]}-{seeds[-1]} ({el:.0f}s incl. compile)")
    print(f"  slpc {cum.mean():.2f} ({cum.std(ddof=1):.2f}); per seed {' '.join(f'{c:.1f}' for c in cum)}; "
          f"segments {segs}")
    print(f"  ground truth {truth.mean():.2f} ({truth.std(ddof=1):.2f}); slpc/truth {cum.mean() / truth.mean():.2f}; "
          f"nearest past point {nn.mean():.2f} ({nn.std(ddof=1):.2f}); {paper}")
    first20 = np.asarray(info.loss, np.float64)[:, :20].sum(1)
    print(f"  share of the loss in rounds 21-40: {first20.sum() / cum.sum():.0%}")
    if args.princurve and princurve_ok:
        from jaxstream.curves import princurve
        t = time.perf_counter()
        pcs = [float(np.nansum(np.asarray(princurve.sequential_principal_curve_losses(
            x.astype(np.float32), t0=20).losses)[20:])) for x in xs]
        print(f"  sequential princurve (refit every round) {np.mean(pcs):.2f} ({np.std(pcs, ddof=1):.2f}) "
              f"[{time.perf_counter() - t:.0f}s]; slpc below it on {sum(c < p for c, p in zip(cum, pcs))}/{len(pcs)}")


def empty_stretches(v, xs, radius=3.0, step=0.1):
    """Curve length farther than `radius` degrees from every event: (total, longest run).

    The polyline is sampled every `step` degrees; a chord across an empty
    region shows as a long run, whatever events project onto its ends.
    """
    pts, lens = [], []
    for a, b in zip(v[:-1], v[1:]):
        n = max(int(np.ceil(np.linalg.norm(b - a) / step)), 1)
        s = (np.arange(n) + 0.5) / n
        pts.append(a + s[:, None] * (b - a))
        lens.append(np.full(n, np.linalg.norm(b - a) / n))
    pts, lens = np.concatenate(pts), np.concatenate(lens)
    far = np.sqrt(((pts[:, None] - xs[None]) ** 2).sum(-1)).min(1) > radius
    run = best = 0.0
    for f, l in zip(far, lens):
        run = run + l if f else 0.0
        best = max(best, run)
    return float(lens[far].sum()), best


# A plate-boundary curve drawn by hand through the seismic box (18 segments):
# Izu-Bonin and Mariana arcs, Yap to the west end of New Guinea, New Guinea,
# Solomon and Vanuatu arcs, Fiji, Tonga-Kermadec, New Zealand, Macquarie
# Ridge to 160°E 53°S and on to 141°E 53°S. The reference for the curve
# length far from every event (a single curve through these arcs cannot
# avoid some: the jump from the Marianas to New Guinea, the isolated events
# in the south).
HAND_DRAWN = np.array([(139.5, 29.0), (143.0, 21.7), (145.6, 18.6), (147.2, 17.0), (143.0, 12.2), (140.2, 10.0),
                       (130.5, -4.0), (140.3, -3.4), (147.5, -6.0), (154.0, -6.0), (161.0, -9.5), (167.5, -14.5),
                       (168.0, -17.2), (171.0, -22.2), (179.8, -24.3), (177.2, -36.9), (172.7, -43.5),
                       (160.3, -52.8), (140.6, -52.8)])


def _share(ok):
    """A share with its 95 % Wilson interval, as text."""
    n, k, z = len(ok), float(np.sum(ok)), 1.96
    c, h = (k + z * z / 2) / (n + z * z), z * np.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return f"{k / n:.0%} [{max(c - h, 0):.0%}, {min(c + h, 1):.0%}]"


def seismic(learner, args):
    """The README's stream on many keys: the final curve's R², segments, and length farther than 3°
    from every event (targets R² ≥ 0.98, ≤ 20 segments, ≤ 40°), with the share of keys meeting them."""
    xs = datasets.seismic_stream().astype(np.float32)
    n_keys = max(getattr(args, "seismic_keys", 50), 5)
    fin, info = run_batch(learner, [xs] * n_keys)
    tss = ((xs - xs.mean(0)) ** 2).sum()
    r2, segs, chord, empty = [], [], [], []
    for i in range(n_keys):
        s = jax.tree_util.tree_map(lambda a: a[i], fin)
        pr = geometry.polyline_projection(jnp.asarray(xs), s.vertices, s.n_vertices)
        r2.append(1 - float(pr["sqdist"].sum()) / tss)
        k = int(s.n_vertices) - 1
        segs.append(k)
        # the longest segment with no event projecting onto it (a chord across an empty region), in degrees
        v = np.asarray(s.vertices[: k + 1])
        used = np.bincount(np.asarray(pr["segment"]), minlength=k)
        lens = np.linalg.norm(np.diff(v, axis=0), axis=1)
        chord.append(float(lens[used[:k] == 0].max()) if np.any(used[:k] == 0) else 0.0)
        empty.append(empty_stretches(v, xs))
    pre = 1 - np.asarray(info.loss, np.float64)[:, :].sum(1) / ((xs[20:] - xs[20:].mean(0)) ** 2).sum()
    r2, segs, far = np.asarray(r2), np.asarray(segs), np.asarray([a for a, _ in empty])
    print(f"== seismic box: {len(xs)} events, {n_keys} keys (the first five drawn)")
    print(f"  first five keys: final-curve R² {' '.join(f'{a:.4f}' for a in r2[:5])} [paper 0.990]; segments "
          f"{segs[:5].tolist()}; longest segment with no event on it (deg) {[round(c, 1) for c in chord[:5]]}; "
          f"curve length > 3° from every event (deg; total / longest run) "
          f"{' '.join(f'{a:.0f}/{b:.0f}' for a, b in empty[:5])}")
    hand = geometry.polyline_projection(jnp.asarray(xs), jnp.asarray(HAND_DRAWN, jnp.float32), len(HAND_DRAWN))
    hand_r2 = 1 - float(hand["sqdist"].sum()) / tss
    h_tot, h_run = empty_stretches(HAND_DRAWN, xs)
    print(f"  all keys: R² {_ci(r2)[0]:.4f} ± {_ci(r2)[1]:.4f} (min {r2.min():.4f}); prequential R² {pre.mean():.3f}; "
          f"segments {segs.mean():.1f} (max {segs.max()}); far from every event {_ci(far)[0]:.0f} ± {_ci(far)[1]:.0f}° "
          f"(max {far.max():.0f}°) [a plate-boundary curve drawn by hand ({len(HAND_DRAWN) - 1} segments, R² "
          f"{hand_r2:.3f}): {h_tot:.0f}/{h_run:.0f}]")
    print(f"  keys meeting R² ≥ 0.98 {_share(r2 >= 0.98)}; far ≤ 40° {_share(far <= 40)}; ≤ 20 segments "
          f"{_share(segs <= 20)}; all three {_share((r2 >= 0.98) & (far <= 40) & (segs <= 20))}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 5, figsize=(18, 6), sharey=True)
        for i, ax in enumerate(axes):
            s = jax.tree_util.tree_map(lambda a: a[i], fin)
            v = np.asarray(s.vertices[: int(s.n_vertices)])
            ax.scatter(xs[:, 0], xs[:, 1], s=6, c="0.4")
            ax.plot(HAND_DRAWN[:, 0], HAND_DRAWN[:, 1], "-", color="tab:blue", lw=1, alpha=0.5,
                    label="hand-drawn plate boundaries")
            ax.plot(v[:, 0], v[:, 1], "r-o", ms=3, label="slpc")
            ax.set(xlim=(128, 182), ylim=(-70, 32), title=f"key {i}: {segs[i]} segments, R² {r2[i]:.3f}")
        fig.savefig(args.plot, dpi=70)
        print(f"  picture: {args.plot}")


def scale_sweep(learner):
    print("== scale sweep: cubic seeds 0-4, x → a·x + (1000·a, −500·a)")
    base = [datasets.make_cubic_stream(500, seed=s) for s in range(5)]
    for a in (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0):
        fin, info = run_batch(learner, [a * x + np.array([1000.0 * a, -500.0 * a]) for x in base])
        cum = np.asarray(info.loss, np.float64).sum(1) / a ** 2
        print(f"  a={a:<7g} loss/a² {cum.mean():.2f} per seed {' '.join(f'{c:.2f}' for c in cum)}; "
              f"segments {(np.asarray(fin.n_vertices) - 1).tolist()}")


def _ci(v):
    """mean and 95 % half-width (1.96·se) of a sample."""
    v = np.asarray(v, np.float64)
    return v.mean(), 1.96 * v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")


DRIFTING = ("drift", "drift_rotating")


def shape_targets(r, drifting=False):
    """(n,) bool: the streams meeting issue 52's shape targets (len in [0.9, 1.15], fid and cov
    ≤ 1σ; drifting sources: len in [0.85, 1.2], fid ≤ 1.5σ)."""
    if drifting:
        return (r["len"] >= 0.85) & (r["len"] <= 1.2) & (r["fid"] <= 1.5)
    return (r["len"] >= 0.9) & (r["len"] <= 1.15) & (r["fid"] <= 1.0) & (r["cov"] <= 1.0)


def family_figures(learner, name, seeds, n=1000, t0=20):
    """One family over seeds (batched): per stream the prequential loss over the noise energy, and
    the final curve's fidelity and coverage in σ, length ratio and segments (`curves.shape`); for
    a drifting source the curve judged is the line moved by `drift_offset` (where it predicts the
    source to be now) against the last round's curve."""
    from jaxstream.curves import shape
    from jaxstream.curves.learner import drift_offset
    data = [datasets.curve_family(name, s, n) for s in seeds]
    fin, info = run_batch(learner, [d.points for d in data], t0)
    loss = np.asarray(info.loss, np.float64).sum(1)
    energy = np.array([((d.points - d.clean)[t0:] ** 2).sum() for d in data])
    moved = jax.vmap(drift_offset)(fin) if name in DRIFTING else jnp.zeros_like(fin.centre)
    m = jax.vmap(lambda v, k, ref: shape.shape_measures(v, k, ref))(
        fin.vertices + moved[:, None], fin.n_vertices, jnp.asarray(np.stack([d.curve for d in data]), jnp.float32))
    sig = np.array([d.noise for d in data])
    return dict(ratio=loss / energy, fid=np.asarray(m.fidelity) / sig, cov=np.asarray(m.coverage) / sig,
                len=np.asarray(m.length_ratio), seg=np.asarray(m.n_segments))


def families(learner, args):
    """Every curve family (`datasets.CURVE_FAMILIES`) on seeds the defaults were not chosen on:
    the prequential loss against the noise energy, and the final curve's shape (mean ± 95 %
    half-width; the share of streams meeting the shape targets)."""
    seeds = list(range(args.family_seeds[0], args.family_seeds[1]))
    print(f"== curve families: seeds {seeds[0]}-{seeds[-1]}, T={args.family_T} (mean ± 95% half-width; "
          f"fid, cov in σ; targets: len in [0.9, 1.15], fid, cov ≤ 1σ; drifting: len in [0.85, 1.2], fid ≤ 1.5σ; "
          f"loss ≤ 2× the noise energy on moving families)")
    for name in args.families or datasets.CURVE_FAMILIES:
        t = time.perf_counter()
        r = family_figures(learner, name, seeds, args.family_T)
        ok = shape_targets(r, name in DRIFTING)
        c = {k: _ci(v) for k, v in r.items()}
        print(f"  {name:20s} loss/noise energy {c['ratio'][0]:.2f} ± {c['ratio'][1]:.2f} (max {r['ratio'].max():.2f}); "
              f"fid {c['fid'][0]:.2f} ± {c['fid'][1]:.2f} (max {r['fid'].max():.2f}); cov {c['cov'][0]:.2f} ± "
              f"{c['cov'][1]:.2f}; len {c['len'][0]:.2f} ± {c['len'][1]:.2f} [{r['len'].min():.2f}, "
              f"{r['len'].max():.2f}]; segments {r['seg'].mean():.1f}; targets met {ok.mean():.0%} "
              f"[{time.perf_counter() - t:.0f}s]", flush=True)


def ferry(learner, keys=5):
    """The ferry's trace: the curve's length, segments and RMS distance off the straight
    pier-to-pier line (`datasets.ferry_lane`; targets ≤ 10 km, ≤ 20 segments, ≤ 300 m)."""
    from jaxstream.curves import shape
    x = datasets.load_trace()
    fin, info = run_batch(learner, [x] * keys)
    lane = jnp.asarray(datasets.ferry_lane(), jnp.float32)
    m = jax.vmap(lambda v, k: shape.shape_measures(v, k, lane))(fin.vertices, fin.n_vertices)
    loss = np.asarray(info.loss, np.float64).sum(1)
    fmt = lambda v, f: " ".join(format(float(a), f) for a in np.asarray(v))  # noqa: E731
    print(f"== ferry (AIS, {len(x)} points, km; {keys} keys): length {fmt(m.length, '.1f')} km; segments "
          f"{fmt(m.n_segments, '.0f')}; RMS off the pier-to-pier line {fmt(1000 * m.fidelity, '.0f')} m; "
          f"prequential loss {fmt(loss, '.1f')}")


NOISE = [
    # name, generator(seed), the noise's per-coordinate sd
    ("cubic (i.i.d. along the curve)", lambda s: datasets.make_cubic_stream(500, seed=s), 0.094),
    ("route, 8 legs in order, Gaussian", lambda s: datasets.make_route_stream(900, n_legs=8, heavy_tailed=False, seed=s),
     0.1),
    ("route, 5 legs in order, t3 (sd 0.1)", lambda s: datasets.make_route_stream(600, seed=s), 0.1),
    ("rounded-rectangle loop in order", lambda s: datasets.make_loop_stream(600, shape="rounded_rectangle", n_laps=1.5,
                                                                            seed=s), 0.05),
    ("sine arc drifting +3 in y", lambda s: datasets.make_drifting_curve_stream(seed=s), 0.1),
]


def noise_estimates(learner, seeds=range(5)):
    """The two noise statistics σ̂ is the smaller of (`jaxstream.curves.history.noise_level`), against the
    noise's true sd: the prequential residuals' (distance to the line before it learned the point) and the
    curve-free one's (distance to the chord of the two nearest recent points), early and at the end."""
    from jaxstream.curves import history
    q = chi2_lower_wh(1, history.NOISE_QUANTILE)
    no = jnp.asarray(False)

    def trace(s, x, info):
        e = history.sorted_quantile(s.sorted_e, s.n_stored, 0.0, no, history.NOISE_QUANTILE)
        r = history.sorted_quantile(s.sorted_r, s.n_stored, 0.0, no, history.NOISE_QUANTILE)
        return jnp.sqrt(e / q) * s.scale, jnp.sqrt(r / history.NN_INFLATION / q) * s.scale

    print(f"== noise level (2-D streams, seeds {seeds[0]}-{seeds[-1]}): sd estimates / true sd, "
          "prequential | curve-free (σ̂ is the smaller)")
    for name, gen, sd in NOISE:
        xs = np.stack([gen(s) for s in seeds]).astype(np.float32)
        keys = jax.random.split(jax.random.key(0), len(xs))
        st = js.init_streams(learner, keys, xs[:, :20])
        _, (e, r) = js.run_streams(learner, keys, xs[:, 20:], st, trace=trace)
        e, r = np.asarray(e) / sd, np.asarray(r) / sd
        at = [t for t in (20, 80, 300) if t < e.shape[1]] + [e.shape[1] - 1]
        print(f"  {name}: " + ", ".join(f"t={t + 20} {e[:, t].mean():.2f} | {r[:, t].mean():.2f}" for t in at))


def machine_limits():
    """This machine's f32 arithmetic and memory limits as XLA reaches them:
    a 2048² matrix product (GFLOP/s) and a 64 MB array scaled and summed
    (GB/s read), best of 5."""
    a = jnp.ones((2048, 2048), jnp.float32)
    big = jnp.ones((16 * 2 ** 20,), jnp.float32)
    mm, stream = jax.jit(lambda a: a @ a), jax.jit(lambda x: jnp.sum(x * 1.5))
    best = [float("inf")] * 2
    for _ in range(5):
        for i, (f, x) in enumerate(((mm, a), (stream, big))):
            jax.block_until_ready(f(x))
            t = time.perf_counter()
            jax.block_until_ready(f(x))
            best[i] = min(best[i], time.perf_counter() - t)
    return 2 * 2048 ** 3 / best[0] / 1e9, big.nbytes / best[1] / 1e9


def speed(learner, args):
    peak_flops, peak_bw = machine_limits()
    print(f"== machine: {peak_flops:.0f} GFLOP/s (f32 matrix product), {peak_bw:.1f} GB/s (64 MB read)")
    print("== speed: one stream (cubic), default configuration")
    for T in (500, 5000):
        xs = datasets.make_cubic_stream(T, seed=0).astype(np.float32)
        s0 = learner.init(jax.random.key(0), xs[:20])
        fn = jax.jit(lambda k, x, s: js.run_stream(learner, k, x, s))
        t = time.perf_counter()
        compiled = fn.lower(jax.random.key(0), xs[20:], s0).compile()
        compile_s = time.perf_counter() - t
        (s, _), first, steady = timed(compiled, jax.random.key(0), xs[20:], s0)
        state_bytes = sum(x.nbytes for x in jax.tree_util.tree_leaves(s))
        print(f"  T={T}: compile {compile_s:.2f}s, steady {steady:.3f}s ({steady / (T - 20) * 1e6:.0f} us/round), "
              f"state {state_bytes / 1024:.0f} KiB, segments {int(s.n_vertices) - 1}   "
              f"[R code: {'1.44' if T == 500 else '4.13'}s]")
    # The same stream with every deletion and end reversal scored each round
    # (global_moves=None), interleaved with the default for a fair ratio.
    full = js.slpc(global_moves=None)
    s0f = full.init(jax.random.key(0), xs[:20])
    runs = {}
    for name, L, st in (("default (global_moves=8)", learner, s0), ("global_moves=None", full, s0f)):
        f = jax.jit(lambda k, x, s, L=L: js.run_stream(L, k, x, s)).lower(jax.random.key(0), xs[20:], st).compile()
        runs[name] = (f, st)
    best = {name: float("inf") for name in runs}
    for _ in range(3):
        for name, (f, st) in runs.items():
            t = time.perf_counter()
            jax.block_until_ready(f(jax.random.key(0), xs[20:], st))
            best[name] = min(best[name], time.perf_counter() - t)
    print("  T=5000, interleaved, best of 3: " + ", ".join(f"{n} {b:.3f}s" for n, b in best.items()))
    cost = jax.jit(learner.update).lower(jax.random.key(0), s0, jnp.asarray(xs[0])).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops, nbytes = cost.get("flops", float("nan")), cost.get("bytes accessed", float("nan"))
    us = steady / (T - 20) * 1e6
    print(f"  one round (XLA cost analysis): {flops / 1e6:.2f} MFLOP, {nbytes / 1e6:.2f} MB accessed; "
          f"at {us:.0f} us/round that is {flops / us / 1e3:.2f} GFLOP/s ({flops / us / 1e3 / peak_flops:.0%} of "
          f"the machine's) and {nbytes / us / 1e3:.2f} GB/s")
    print(f"  bounds: the arithmetic at the matrix-product rate {flops / peak_flops / 1e3:.0f} us/round; the bytes "
          f"read from memory at the measured rate {nbytes / peak_bw / 1e3:.0f} us/round (one stream's state, "
          f"{state_bytes / 1024:.0f} KiB, stays in cache; a batch's does not: the bound of a large batch)")
    print("== speed: run_streams, same run (stream-updates per second)")
    T = args.T_many
    for B in args.batches:
        xs = np.stack([datasets.make_cubic_stream(T, seed=s) for s in range(B)]).astype(np.float32)
        keys = jax.random.split(jax.random.key(1), B)
        states = js.init_streams(learner, keys, xs[:, :20])
        f = lambda: js.run_streams(learner, keys, xs[:, 20:], states)
        _, first, steady = timed(f, repeats=2)
        print(f"  B={B:4d} T={T}: first call {first:.2f}s (compile), steady {steady:.2f}s, "
              f"{B * (T - 20) / steady:,.0f} stream-updates/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--princurve", action="store_true", help="also run the sequential princurve baseline")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--plot", default=None, help="write the seismic curves of the first five keys to this PNG")
    ap.add_argument("--seismic-keys", type=int, default=50, help="keys the seismic stream is learned with (≥ 5)")
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 128])
    ap.add_argument("--T-many", type=int, default=1000)
    ap.add_argument("--skip-families", action="store_true")
    ap.add_argument("--family-seeds", type=int, nargs=2, default=[0, 50], help="seeds [a, b) of every family")
    ap.add_argument("--family-T", type=int, default=1000)
    ap.add_argument("--families", nargs="*", default=None, help="only these families (default: all)")
    ap.add_argument("--quality-seeds", type=int, default=10, help="seeds of the paper streams (0..n-1)")
    ap.add_argument("--noise", action="store_true", help="only the noise-level diagnostic (moving streams)")
    args = ap.parse_args()
    dev = jax.devices()[0]
    print(f"jax {jax.__version__} on {dev.platform} ({dev.device_kind}); {platform.processor() or platform.machine()}")
    learner = js.slpc()
    if args.noise:
        noise_estimates(learner)
        return
    if not args.skip_quality:
        quality_stream(learner, "cubic, T=500", lambda s: datasets.make_cubic_stream(500, seed=s, return_truth=True),
                       list(range(args.quality_seeds)),
                       "[paper: slpc 20.83 (3.23), princurve 26.02, truth 2.48; R princurve 18.38]",
                       args)
        quality_stream(learner, "Table 2 (6-D), T=200", lambda s: datasets.make_table2_stream(seed=s, return_truth=True),
                       list(range(args.quality_seeds)),
                       "[paper: slpc 6.797 (0.409), princurve 14.204 (R 15.10), truth 3.29]", args)
        quality_stream(learner, "helix (3-D, 1.5 turns), T=400",
                       lambda s: datasets.make_helix_stream(seed=s, return_truth=True), list(range(args.quality_seeds)),
                       "[target ≤ 3× truth]", args)
        seismic(learner, args)
        scale_sweep(learner)
    if not args.skip_families:
        families(learner, args)
        ferry(learner)
    if not args.skip_speed:
        speed(learner, args)


if __name__ == "__main__":
    main()
