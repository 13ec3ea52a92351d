"""Build and execute notebooks/landmarks.ipynb (python notebooks/make_landmarks_notebook.py)."""
import os

import nbformat as nbf

nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
cells = []
cells.append(md("""# Online landmark replacement for landmark MDS in JAX

Reproduces the S-curve experiment of C. Thongprayoon and N. Masuda, *Online
landmark replacement for out-of-sample dimensionality reduction methods*
(Proc. R. Soc. A, 2024) with `jaxstream.landmark_mds`, and embeds a
temporal network (synthetic ward contacts → tie-decay networks →
Laplacian spectral distance) as a trajectory, as in their temporal-network
example (the hospital data cannot be shipped).

The learner keeps at most n_L landmarks that dominate the geometric graph
G_ε of the points seen (ε only grows); an uncovered arrival with a full
landmark set triggers the degree rule and the growth of ε until some
landmark is redundant, which is removed. Every point is embedded by
landmark MDS (de Silva & Tenenbaum). Full figures and timings:
`benchmarks/bench_landmarks.py`."""))
cells.append(code("""import os, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # jaxlib's CPU eigh uses OpenBLAS; its spinning threads hurt on busy machines
sys.path.insert(0, os.path.abspath(".."))              # run from notebooks/ without installing
import numpy as np
import jax, jax.numpy as jnp
import matplotlib.pyplot as plt
plt.rcParams["figure.dpi"] = 72
import jaxstream as js
from jaxstream import embedding as LM
from jaxstream.embedding import baselines as BL


def run_info(lrn, Z, trace="info"):
    \"\"\"The final state and the trace of `lrn` over the stream Z (the first point starts it).\"\"\"
    run = jax.jit(lambda s, xs: js.run_stream(lrn, jax.random.key(0), xs, s, trace=trace))
    return run(lrn.init(jax.random.key(0), Z[:1]), Z[1:])


print("jax", jax.__version__, jax.devices())"""))
cells.append(md("""## S-curve, ordered by the curve parameter

`make_s_curve(1000, noise=0, random_state=1)` draws the same points as
scikit-learn's generator; the stream visits them in the order of the curve
parameter t, so new regions keep appearing. n_L = 100 landmarks; the buffer
holds all 1000 points (the paper's unbounded graph)."""))
cells.append(code("""X, t = js.datasets.make_s_curve(1000, noise=0.0, random_state=1, sort_by_t=True)
X = X.astype(np.float32)
learner = js.landmark_mds(100, n_components=2, buffer_size=1000)
state = learner.init(jax.random.key(0), X[:1])
state, info = jax.jit(lambda s, xs: js.run_stream(learner, jax.random.key(0), xs, s, trace="info"))(state, X[1:])
case = np.asarray(info.case)
print("arrivals: covered", (case == 1).sum(), "| added", (case == 2).sum() + 1, "| case 3", (case == 3).sum(),
      "| swaps", int(np.asarray(info.replaced).sum()), "| full O(N^2) degree counts", int(np.asarray(info.full_degrees).sum()))
print("final eps", float(state.eps))
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
axes[0].plot(np.arange(1, 1000), np.asarray(info.eps))
axes[0].set(xlabel="arrival", ylabel="ε", title="threshold ε (non-decreasing)")
axes[1].plot(np.arange(1, 1000), np.cumsum(np.asarray(info.replaced)))
axes[1].set(xlabel="arrival", ylabel="landmark swaps", title="cumulative replacements")
fig.tight_layout()"""))
cells.append(md("""Normalised stress σ of the landmark MDS of all 1000 points with the final
online landmarks, against the paper's scenarios: the first 100 points
("initial"), 100 points drawn at random after the fact ("random", 20 draws,
`baselines.random_stress`), a reservoir sample kept online
("random-online", 20 draws), and greedy farthest-point landmarks. With the
authors' code the paper's setting gives, for k = 2: online ≈ 0.17,
initial ≈ 0.23, random ≈ 0.15. `benchmarks/bench_landmarks.py` adds the
landmark pairs' stress σ_L and a graph bounded to 300 points."""))
cells.append(code("""D = np.asarray(LM.pairwise_distances(X))
fixed = {"online": LM.landmarks(state)[1], "initial": BL.initial_landmarks(1000, 100),
         "farthest-point": BL.farthest_point_landmarks(100, distances=D)}
reservoirs = [BL.reservoir_landmarks(k, 1000, 100) for k in jax.random.split(jax.random.key(2), 20)]
stress_with = lambda idx, k: float(LM.normalized_stress(D, BL.embed_with_landmarks(idx, k, distances=D)))
for k in (1, 2, 3):
    rnd = np.asarray(BL.random_stress(jax.random.key(1), D, 100, 20, n_components=k))
    res = np.array([stress_with(idx, k) for idx in reservoirs])
    print(f"k={k}: " + "  ".join(f"{name} {stress_with(idx, k):.3f}" for name, idx in fixed.items())
          + f"  random {rnd.mean():.3f} ± {rnd.std(ddof=1):.3f}  random-online {res.mean():.3f} ± {res.std(ddof=1):.3f}")"""))
cells.append(code("""online_idx = LM.landmarks(state)[1]
scen = {"online": online_idx, "initial": BL.initial_landmarks(1000, 100),
        "random (one draw)": np.asarray(BL.random_landmarks(jax.random.key(1), 1000, 100))}
fig, axes = plt.subplots(2, 3, figsize=(14, 8))
for j, (name, idx) in enumerate(scen.items()):
    ax = axes[0, j]
    ax.scatter(X[:, 0], X[:, 2], c=t, s=4, cmap="viridis")
    ax.scatter(X[idx, 0], X[idx, 2], s=14, facecolors="none", edgecolors="r", lw=0.8)
    ax.set(title=f"{name}: landmarks (red) on the S (x, z)", xticks=[], yticks=[])
    Y = np.asarray(BL.embed_with_landmarks(idx, 2, distances=D))
    sigma = float(LM.normalized_stress(D, Y))
    ax = axes[1, j]
    ax.scatter(Y[:, 0], Y[:, 1], c=t, s=4, cmap="viridis")
    ax.set(title=f"{name}: landmark MDS, k = 2, σ = {sigma:.3f}", xticks=[], yticks=[])
fig.tight_layout()"""))
cells.append(md("""With k = 3 the embedding of a point cloud of R³ is exact (σ = 0) whatever
the landmarks, as long as they span the three dimensions; k = 1 and 2 show
the differences between landmark choices: the initial landmarks, all at
one end of the S, embed the rest badly, while the online landmarks spread
over the whole S as the stream explores it."""))
cells.append(md("""## Quality as an online user sees it

The σ above uses the *final* landmarks after the fact. An online user sees
each point embedded when it arrived, by the landmarks of that moment
(`embed_arrivals=True` or `align=True` put those coordinates in `Info.y`).
Without alignment every swap may flip or rotate the frame; with alignment
(orthogonal Procrustes on the shared landmarks) frames stay consistent but
early points are still placed by landmarks that have not seen the rest of
the S. Below: σ of the at-arrival coordinates, unaligned and aligned,
against the final landmarks'. `benchmarks/bench_landmarks.py --only
arrival` also times the policies in between: emitting x_t's coordinates Δ
arrivals later, or re-embedding every K arrivals what the user holds."""))
cells.append(code("""from jaxstream.embedding.datasets import make_swiss_roll
Xsw = make_swiss_roll(1200, seed=0)[0].astype(np.float32)

def arrival_sigmas(Z, n_L):
    Dz = np.asarray(LM.pairwise_distances(Z))
    out = {}
    for align in (False, True):
        lrn = js.landmark_mds(n_L, n_components=2, buffer_size=len(Z), align=align, embed_arrivals=True)
        fin, info = run_info(lrn, Z)
        Y = np.concatenate([np.zeros((1, 2), np.float32), np.asarray(info.y)])  # the first point starts at 0
        out["at arrival, " + ("aligned" if align else "unaligned")] = float(LM.normalized_stress(Dz, Y))
    out["final landmarks"] = float(LM.normalized_stress(Dz, lrn.predict(fin, Z)))
    return out

rows = {f"S-curve n_L={n_L}": arrival_sigmas(X, n_L) for n_L in (20, 100)}
rows["Swiss roll n_L=20"] = arrival_sigmas(Xsw, 20)
for name, r in rows.items():
    print(f"{name}  " + "  ".join(f"{k}: {v:.3f}" for k, v in r.items()))"""))
cells.append(md("""The wrapper implements the revising policy: `LandmarkMDS(reembed_every=K)`
keeps the points it has seen and re-embeds all of them after every K-th
arrival; `held_` is what the user holds (re-embedded points up to the last
re-embedding, at-arrival coordinates after it). σ of `held_` after the
whole S-curve (n_L = 20, aligned):"""))
cells.append(code("""for K in (200, 50, 10):
    m = js.LandmarkMDS(20, n_components=2, buffer_size=1000, align=True, reembed_every=K).fit(X)
    print(f"reembed_every={K:3d}: sigma of held_ {float(LM.normalized_stress(D, m.held_)):.3f}")"""))
cells.append(md("""## A noise-robust option (beyond the paper)

A dominating set has to cover every point, so an isolated noise point
becomes a landmark and stays one until ε grows to reach it.
`min_support=m` drops, at each swap, the landmark with the fewest
neighbours within the new ε when it has fewer than m and fewer than a
quarter of a typical landmark's. Below: σ with the final landmarks on a
noisy S-curve (noise 0.3) for several m, against random landmarks'
10th / 50th / 90th percentiles (20 draws here; 50 in the benchmark, which
also has the S-curve, a Swiss roll and very uneven clusters).

`density_shift=c` moves a newly admitted landmark that is kept to the
densest buffered point within c·ε of it (from the thin edge of a noisy
region toward its middle). Both are numeric params: every rule below runs
the same compiled update. A third option changes the embedding, not the
landmarks: `embedding(state, weighted=True)` weights each landmark by the
number of buffered points it stands for (`landmark_weights`) in a weighted
landmark MDS, so an outlier landmark or one on a small cluster weighs what
its points weigh ("W" below)."""))
cells.append(code("""from jaxstream.embedding.datasets import make_uneven_clusters
Xn, _ = js.datasets.make_s_curve(1000, noise=0.3, random_state=1, sort_by_t=True)
Xu, lab_u = make_uneven_clusters(1000, seed=0)
finals = {}

def embed_with(e, s, Z):
    # points Z embedded by an `Embedding` e of state s: squared distances to its landmarks @ weights + offset
    P = np.asarray(s.points)[np.asarray(e.slots)]
    sq = ((Z[:, None].astype(np.float64) - P[None]) ** 2).sum(-1) * np.asarray(e.mask)
    return sq @ np.asarray(e.weights) + np.asarray(e.offset)

for name, Z in (("noisy S-curve 0.3", Xn.astype(np.float32)), ("uneven clusters", Xu.astype(np.float32))):
    Dz = np.asarray(LM.pairwise_distances(Z))
    for n_L in (10, 20):
        p10, p50, p90 = np.percentile(np.asarray(BL.random_stress(jax.random.key(1), Dz, n_L, 20)), [10, 50, 90])
        out = []
        for m, c in ((0, 0.0), (4, 0.0), (0, 0.5), (4, 0.5)):
            lrn = js.landmark_mds(n_L, buffer_size=1000, min_support=m, density_shift=c)
            s, _ = run_info(lrn, Z, None)
            sig = float(LM.normalized_stress(Dz, lrn.predict(s, Z)))
            e = LM.embedding(s, n_components=2, weighted=True)
            sig_w = float(LM.normalized_stress(Dz, embed_with(e, s, Z)))
            out.append(f"m={m},c={c}: {sig:.4f} W {sig_w:.4f}")
            finals[(name, n_L, m, c)] = (s, lrn)
        print(f"{name} n_L={n_L}: random p10/50/90 {p10:.4f}/{p50:.4f}/{p90:.4f}")
        print("   " + "  ".join(out))"""))
cells.append(md("""In this realization the weighted embedding of the paper's landmarks on
the uneven clusters (n_L = 20) is below random's median but not below its
10th percentile (20 draws here). Over 8 realizations with 100 draws
(`bench_landmarks.robust_weighted`) its mean rank among random's draws
is 0.16 (the paper's plain embedding: 0.36), below the 10th percentile in 3
of 8: random's 10th percentile lies near the stress of the classical MDS of
all points, which the weighted landmarks approximate, so going below it
needs a lucky landmark set. Weighted, the paper's landmarks sit at or below
random's median in 11 of 12 cells by mean rank over 6 realizations (Swiss
roll at n_L = 10: 0.59)."""))
cells.append(md("""On the uneven clusters (weights 0.80 … 0.01) a dominating set puts a
landmark on every cluster, however small, and spreads many over the big
one; the plain landmark MDS then weighs every landmark alike, so the small
clusters pull the axes as much as the big one. Weighted by what they stand
for, the same landmarks give the big cluster its weight back. Below: the
paper's landmarks (n_L = 20), plain and weighted, coloured by cluster
(landmarks black)."""))
cells.append(code("""s, lrn = finals[("uneven clusters", 20, 0, 0.0)]
Zu = Xu.astype(np.float32)
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
for ax, w in zip(axes, (False, True)):
    e = LM.embedding(s, n_components=2, weighted=w)
    Y = embed_with(e, s, Zu)
    ax.scatter(Y[:, 0], Y[:, 1], c=lab_u, s=6, cmap="tab10")
    L = np.asarray(e.coords)[np.asarray(e.mask)]
    ax.scatter(L[:, 0], L[:, 1], c="k", s=25, marker="x")
    ax.set_title(f"{'weighted' if w else 'plain'} landmark MDS: sigma {float(LM.normalized_stress(LM.pairwise_distances(Zu), Y)):.3f}")
    ax.set_aspect("equal")
plt.tight_layout()"""))
cells.append(md("""## The paper's real-data pipelines (on generated fixtures)

The paper embeds a hospital ward's contact network (SocioPatterns,
`t i j Si Sj` lines on 20-second bins) through tie-decay networks at the
event times and the Laplacian spectral distance (n_L = 20, a buffer holding
every snapshot), and ten stocks' daily closing prices, min–max scaled
(n_L = 10, buffer ≥ n). Neither data set can ship here (the hospital data
is CC BY-NC-SA; prices come from a market-data provider):
`jaxstream.embedding.datasets.load_contacts` / `load_prices` read the real
files, and small generated fixtures in the same formats ship with the
package. The plots are the paper's: the share of landmarks per year and the
hour of day of the landmark snapshots. On the fixtures they show the
generators' structure (a regime change in 2015; day-time contact peaks),
not the paper's findings."""))
cells.append(code("""from jaxstream.embedding import datasets as ED

def ever_chosen(info):
    # every point that was a landmark at some time (the first point starts as one)
    a = np.asarray(info.added)
    return np.unique(np.concatenate([[0], a[a >= 0]]))

c = ED.load_contacts(ED.fixture_path("contacts"))
times, S = ED.tie_decay_spectra(c, 1.0 / 3600.0)   # decay 1/h, times in seconds
S = S.astype(np.float32)
fin, info = run_info(js.landmark_mds(20, n_components=2, buffer_size=len(S), align=True), S)
ever, final = ever_chosen(info), LM.landmarks(fin)[1]
hours = (times / 3600.0) % 24.0   # the fixture starts at midnight
print(f"contacts: {len(c.t)} contacts, {c.n_nodes} nodes, {len(S)} snapshots; landmarks ever {len(ever)}, "
      f"swaps {int(np.asarray(info.replaced).sum())}")
pt = ED.load_prices(ED.fixture_path("prices"))
V = ED.minmax_scale(pt.prices).astype(np.float32)
fin2, info2 = run_info(js.landmark_mds(10, n_components=2, buffer_size=max(len(V), 11)), V)
ever2, final2 = ever_chosen(info2), LM.landmarks(fin2)[1]
years = pt.dates.astype("datetime64[Y]").astype(int) + 1970
uy = np.unique(years)
print(f"prices: {len(V)} days x {V.shape[1]} tickers, landmarks ever {len(ever2)}")
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
axes[0].bar(uy, [np.isin(np.flatnonzero(years == y), final2).sum() / 10.0 for y in uy], color="C0",
            label="final landmarks")
axes[0].plot(uy, [np.isin(np.flatnonzero(years == y), ever2).sum() / len(ever2) for y in uy], "ko-",
             label="every landmark ever chosen")
axes[0].set(xlabel="year", ylabel="share of landmarks", title="prices: landmark share per year (n_L = 10)")
axes[0].legend(fontsize=8)
axes[1].hist(hours[ever], bins=np.arange(25), color="C1", alpha=0.8, label="every landmark ever chosen")
axes[1].hist(hours[final], bins=np.arange(25), color="C3", label="final landmarks")
axes[1].set(xlabel="hour of day", ylabel="landmark snapshots", title="contacts: hour of day of landmark times",
            xlim=(0, 24))
axes[1].legend(fontsize=8)
fig.tight_layout()"""))
cells.append(md("""## A temporal network as a trajectory

Synthetic ward contacts among 20 nodes over 3 days (6 staff, 14 patients;
shift handovers, a midday meeting, a morning round; half of the patients
are replaced on day 3), tie-decay networks every 10 minutes with decay
rate 0.5/h, compared by the unnormalised-Laplacian spectral distance (the
Euclidean distance between sorted Laplacian spectra, so the stream is the
spectra and the metric Euclidean). n_L = 20, k = 2, with alignment
(orthogonal Procrustes on shared landmarks) so that the trajectory does
not flip when landmarks are swapped. Left: each snapshot embedded on
arrival under the landmarks of that moment; middle: all snapshots under
the final landmarks; right: the coordinates over time."""))
cells.append(code("""from jaxstream.embedding import networks
c = networks.make_contact_stream(20, 3.0, seed=0)
times = np.arange(1.0, 72.0 + 1e-9, 1.0 / 6.0)   # every 10 minutes from the first hour on
spec = np.asarray(networks.laplacian_spectrum(networks.tie_decay_networks(c.i, c.j, c.t, c.n_nodes, times,
                                                                        decay=0.5)))
lrn = js.landmark_mds(20, n_components=2, buffer_size=len(times), align=True)
# the trace: x_t embedded by the landmarks before x_t is learned
fin, (Y, info) = run_info(lrn, spec, lambda st, x, i: (lrn.predict(st, x), i))
Yf = np.asarray(lrn.predict(fin, spec))
Dn = np.asarray(LM.pairwise_distances(spec))
print(f"{len(c.t)} contacts, {len(times)} snapshots, swaps {int(np.asarray(info.replaced).sum())}, "
      f"final eps {float(fin.eps):.3f}")
print(f"stress with the final landmarks: sigma = {float(LM.normalized_stress(Dn, Yf)):.3f}, "
      f"sigma_L = {float(LM.landmark_stress(Dn, Yf, LM.landmarks(fin)[1])):.3f}")
warm = np.asarray(info.n_landmarks) >= 3   # fewer landmarks cannot give 2 dimensions
t_on, Y = times[1:][warm], np.asarray(Y)[warm]
fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
axes[0].plot(Y[:, 0], Y[:, 1], "-", color="0.85", lw=0.6, zorder=1)
sc = axes[0].scatter(Y[:, 0], Y[:, 1], c=t_on % 24.0, cmap="twilight", s=8, zorder=2)
fig.colorbar(sc, ax=axes[0], label="hour of day")
axes[0].set(title="online embedding (prequential, aligned)", xlabel="dimension 1", ylabel="dimension 2")
day = np.minimum((times // 24.0).astype(int), 2)
for d in range(3):
    axes[1].plot(Yf[day == d, 0], Yf[day == d, 1], "-o", ms=2, lw=0.7, label=f"day {d + 1}")
axes[1].legend(fontsize=8)
axes[1].set(title="all snapshots, final landmarks", xlabel="dimension 1", ylabel="dimension 2")
axes[2].plot(t_on, Y[:, 0], lw=0.9, label="dimension 1 (online)")
axes[2].plot(t_on, Y[:, 1], lw=0.9, label="dimension 2 (online)")
axes[2].plot(times, Yf[:, 0], "k:", lw=0.7, label="dimension 1 (final landmarks)")
for d in (1, 2):
    axes[2].axvline(24.0 * d, color="0.6", lw=0.5)
axes[2].legend(fontsize=8)
axes[2].set(title="coordinates over time", xlabel="time (hours)")
fig.tight_layout()"""))
cells.append(md("""The trajectory is a daily loop: quiet nights near the origin, the morning
round and the midday meeting far out, the evening on the way back. The
online coordinates (prequential: each snapshot embedded before it is
learned) follow those under the final landmarks closely after the first
hours, because alignment removes the sign flips and rotations that a fresh
eigendecomposition would introduce at every swap."""))
nb["cells"] = cells
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
from nbclient import NotebookClient  # noqa: E402  (executed, like the other notebooks)
here = os.path.dirname(os.path.abspath(__file__))
NotebookClient(nb, timeout=900, kernel_name="python3").execute(cwd=here)
nbf.write(nb, os.path.join(here, "landmarks.ipynb"))
print("written")
