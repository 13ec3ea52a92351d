"""Build and execute notebooks/slpc.ipynb (python notebooks/make_slpc_notebook.py)."""
import pathlib

import nbformat
from nbclient import NotebookClient

cells = [
    ("md", """# Sequential principal curves (slpc)

Reproduces the experiments of Li & Guedj, *Sequential Learning of Principal
Curves: Summarizing Data Streams on the Fly* (Entropy 2021) with
`jaxstream.slpc`: the cubic stream (cumulative loss against the ground truth,
the sequential Hastie–Stuetzle curve and the nearest-past-point baseline),
the 6-D stream of Table 2, the seismic stream on its map box (R², Figure 6),
and the locality of an update (Figure 8).

jaxstream's slpc works in standardised units (centre and scale from the
initial points) and prices a segment in units of the residual noise level
along the line (BIC-like, `jaxstream.curves.objective`; each stretch of line
counts by its length, not by how many points lie on it), so the same
defaults serve every stream: in other units, other dimensions, other noise.
In the objective one point's loss is capped at `outlier_scale` (36) noise
variances: an isolated point does not pay for a spike or a chord to reach it
(the reported prequential loss is the plain squared distance). The curve is
the product: `jaxstream.curves.shape` measures it against a reference
(fidelity, coverage, length ratio)."""),
    ("code", """import time
import numpy as np, jax, jax.numpy as jnp
import matplotlib.pyplot as plt
import jaxstream as js
from jaxstream import datasets, geometry
from jaxstream.curves import princurve
print(jax.__version__, jax.devices())"""),
    ("md", """## The cubic stream

500 points with x ~ U[0, 10] in arrival order and y = 0.05 (x − 5)³ + N(0, 0.094²).
The loss is summed over rounds 21…500 (t0 = 20 initial points). Paper:
slpc 20.83 (3.23), princurve 26.02, ground truth 2.48; R's princurve refitted
every round gives 18.38 on such streams."""),
    ("code", """learner = js.slpc()
run = jax.jit(lambda k, x, s: js.run_stream(learner, k, x, s, trace="info"))
seeds = range(3)
rows = []
for seed in seeds:
    xs, truth = datasets.make_cubic_stream(500, seed=seed, return_truth=True)
    xs = xs.astype(np.float32)
    state, info = run(jax.random.key(seed), xs[20:], learner.init(jax.random.key(seed), xs[:20]))
    hs = np.asarray(princurve.sequential_principal_curve_losses(xs, t0=20).losses)
    nn = sum(((xs[:t] - xs[t]) ** 2).sum(1).min() for t in range(20, len(xs)))
    rows.append((float(info.loss.sum()), float(np.nansum(hs[20:])), nn, truth[20:].sum(), int(state.n_vertices) - 1))
rows = np.array(rows)
print("seed  slpc  seq.princurve  nearest-past-point  truth  segments")
for s, r in zip(seeds, rows):
    print(f"{s:4d} {r[0]:6.2f} {r[1]:13.2f} {r[2]:18.2f} {r[3]:6.2f} {int(r[4]):8d}")
print(f"mean {rows[:, 0].mean():6.2f} {rows[:, 1].mean():13.2f} {rows[:, 2].mean():18.2f} {rows[:, 3].mean():6.2f}")"""),
    ("md", """## The 6-D stream of Table 2

200 points along (0.5t cos t, 0.5t sin t, 0.5t, −t, t, 2 ln(t+1)), t ∈ [0, 2π],
noise sd 0.0575 on every coordinate, random arrival order. Paper: slpc 6.797
(0.409), princurve 14.204, ground truth 3.29. Most of the loss comes from the
first rounds: the initial line is fitted offline on the first 20 points with
the same penalised objective (`init="fit"`; `init="pca"` is the paper's
first-principal-component segment)."""),
    ("code", """rows = []
for init in ("fit", "pca"):
    L6 = js.slpc(init=init)
    for seed in range(5):
        xs, truth = datasets.make_table2_stream(seed=seed, return_truth=True)
        xs = xs.astype(np.float32)
        state, loss = js.run_stream(L6, jax.random.key(seed), xs[20:], L6.init(jax.random.key(seed), xs[:20]))
        rows.append((init, float(loss.sum()), truth[20:].sum(), int(state.n_vertices) - 1))
for init in ("fit", "pca"):
    r = np.array([x[1:] for x in rows if x[0] == init])
    print(f"init={init}: cumulative loss {r[:, 0].mean():.2f} (sd {r[:, 0].std(ddof=1):.2f}), truth {r[:, 1].mean():.2f}, "
          f"segments {r[:, 2].astype(int).tolist()}")"""),
    ("code", """xs = datasets.make_cubic_stream(500, seed=0).astype(np.float32)
state, info = run(jax.random.key(0), xs[20:], learner.init(jax.random.key(0), xs[:20]))
hs_curve = princurve.principal_curve(xs)
gx = np.linspace(0, 10, 200)
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
ax = axes[0]
ax.scatter(xs[:, 0], xs[:, 1], s=5, c="0.6", label="stream")
ax.plot(gx, datasets.cubic_curve(gx), "k--", lw=1, label="true curve")
v = np.asarray(state.vertices[: int(state.n_vertices)])
ax.plot(v[:, 0], v[:, 1], "-o", color="crimson", ms=3, label=f"slpc ({len(v) - 1} segments)")
hv = np.asarray(hs_curve.vertices[: int(hs_curve.n_vertices)])
ax.plot(hv[:, 0], hv[:, 1], color="tab:blue", lw=1, label="princurve (batch)")
ax.legend(fontsize=8); ax.set_title("cubic stream, T = 500")
ax = axes[1]
ax.plot(np.cumsum(np.asarray(info.loss)), color="crimson", label="slpc")
seq = np.asarray(princurve.sequential_principal_curve_losses(xs, t0=20).losses)
ax.plot(np.cumsum(seq[20:]), color="tab:blue", label="sequential princurve")
ax.plot(np.cumsum(datasets.make_cubic_stream(500, seed=0, return_truth=True)[1][20:]), "k--", label="ground truth")
ax.set_xlabel("round"); ax.set_ylabel("cumulative loss"); ax.legend(fontsize=8)
plt.tight_layout()"""),
    ("md", """## The seismic stream (Figure 6)

The 194 USGS events of 2020-08-21…09-21 inside the paper's box (the paper used
218 events of the Centennial catalogue). R² uses the squared distances to the
curve as residuals; the paper reports 0.990. A single curve through these
arcs must jump somewhere (from the Marianas to New Guinea; to the isolated
events in the south); the figure below measures how much of the curve lies
more than 3° from every event (a plate-boundary curve drawn by hand,
`HAND_DRAWN` in `benchmarks/bench_slpc.py`: 39°, R² 0.990)."""),
    ("code", """quakes = datasets.seismic_stream().astype(np.float32)
state, info = run(jax.random.key(0), quakes[20:], learner.init(jax.random.key(0), quakes[:20]))
res = float(geometry.polyline_sq_dist(jnp.asarray(quakes), state.vertices, state.n_vertices).sum())
r2 = 1 - res / ((quakes - quakes.mean(0)) ** 2).sum()
hs_q = princurve.principal_curve(quakes)
r2_hs = 1 - float(hs_q.dist) / ((quakes - quakes.mean(0)) ** 2).sum()
v = np.asarray(state.vertices[: int(state.n_vertices)])
# curve sampled every 0.1°; the length of the samples more than 3° from every event
pts = np.concatenate([a + np.linspace(0, 1, max(int(np.linalg.norm(b - a) / 0.1), 1), endpoint=False)[:, None] * (b - a)
                      for a, b in zip(v[:-1], v[1:])])
step = np.linalg.norm(np.diff(v, axis=0), axis=1).sum() / len(pts)
far = np.sqrt(((pts[:, None] - quakes[None]) ** 2).sum(-1)).min(1) > 3.0
print(f"slpc R² = {r2:.4f} with {int(state.n_vertices) - 1} segments, {far.sum() * step:.0f}° of curve more than "
      f"3° from every event; batch princurve R² = {r2_hs:.4f}")
box = datasets.SEISMIC_BOX
fig, ax = plt.subplots(figsize=(5, 8))
ax.add_patch(plt.Rectangle((box["lon_min"], box["lat_min"]), box["lon_max"] - box["lon_min"],
                           box["lat_max"] - box["lat_min"], fill=False, ls=":", color="0.3"))
sc = ax.scatter(quakes[:, 0], quakes[:, 1], s=8, c=np.arange(len(quakes)), cmap="viridis")
ax.plot(v[:, 0], v[:, 1], "-o", ms=3, color="crimson", label=f"slpc ({len(v) - 1} segments, R² {r2:.3f})")
hv = np.asarray(hs_q.vertices[: int(hs_q.n_vertices)])
ax.plot(hv[:, 0], hv[:, 1], color="tab:blue", label=f"princurve (batch, R² {r2_hs:.3f})")
ax.set_xlim(box["lon_min"] - 2, box["lon_max"] + 2); ax.set_ylim(box["lat_min"] - 2, box["lat_max"] + 2)
ax.set_aspect("equal"); fig.colorbar(sc, ax=ax, label="arrival order", shrink=0.5)
ax.set_xlabel("longitude (°E)"); ax.set_ylabel("latitude (°N)"); ax.legend(fontsize=8, loc="lower left")"""),
    ("md", """## Streams that move

Every stream above arrives in random order from a fixed curve. Two other kinds
of stream, with the same defaults:

* **a trace arriving in order**: the shipped AIS track of the Staten Island
  ferry (3,729 reports over five days, in km; `datasets.load_trace`). The line
  grows at its ends as the trace advances, and while the stream arrives in
  order the prequential loss also counts the line's head path: from its end
  to where the trace is now (a straight-line fit in time to its last 16
  points) and `end_lead` fitted steps past it (dashed below, from
  `jaxstream.curves.learner.head_path`).
  The crossings scatter over a band a few hundred metres wide; the summary
  a user wants is one line from pier to pier (the straight line between the
  terminals, `datasets.ferry_lane`, dashed grey below, is the reference:
  `jaxstream.curves.shape.fidelity` is the curve's RMS distance to it);
* **a drifting source**: a sine arc whose whole curve moves 3 units up over
  1,000 points (noise sd 0.1). The automatic memory (`memory=None`, the
  default) shortens when old points lie away from where the stream is now;
  `memory=inf` is the paper's objective, which never forgets. With a finite
  memory the line lags the source by about one memory span, so the
  prequential loss measures each point against the line moved by the
  source's estimated offset (dashed below,
  `jaxstream.curves.learner.drift_offset`; `drift_offset=False` scores the
  line itself). The reference is the noise energy Σ‖x_t − c_t‖², c_t the
  noise-free point of round t."""),
    ("code", """from jaxstream.curves.learner import head_path
ferry = datasets.load_trace().astype(np.float32)
t0 = time.perf_counter()
state, info = run(jax.random.key(0), ferry[20:], learner.init(jax.random.key(0), ferry[:20]))
npp = datasets.nearest_past_point_loss(ferry, 20).sum()
v = np.asarray(state.vertices[: int(state.n_vertices)])
res = float(geometry.polyline_sq_dist(jnp.asarray(ferry), state.vertices, state.n_vertices).sum())
r2 = 1 - res / ((ferry - ferry.mean(0)) ** 2).sum()
from jaxstream.curves import shape
lane = datasets.ferry_lane()
m = shape.shape_measures(state.vertices, state.n_vertices, jnp.asarray(lane, jnp.float32))
print(f"ferry: {time.perf_counter() - t0:.1f}s (compile included); {len(v) - 1} segments, "
      f"{float(m.length):.1f} km of line (the lane: {np.linalg.norm(lane[1] - lane[0]):.1f} km), "
      f"RMS {1000 * float(m.fidelity):.0f} m off the pier-to-pier line; final R² {r2:.4f}; "
      f"loss {float(info.loss.sum()):.1f} ({float(info.loss.sum()) / npp:.2f}x the nearest past point)")
seg, ok, in_order = head_path(state)
seg = np.asarray(seg)[np.asarray(ok)]
fig, ax = plt.subplots(figsize=(6, 6))
sc = ax.scatter(ferry[:, 0], ferry[:, 1], s=3, c=np.arange(len(ferry)), cmap="viridis")
ax.plot(lane[:, 0], lane[:, 1], "--", color="0.4", lw=1, label="pier to pier")
ax.plot(v[:, 0], v[:, 1], "-o", color="crimson", ms=2, lw=1.2, label=f"slpc ({len(v) - 1} segments, R² {r2:.4f})")
if bool(in_order):
    for j, (a, b) in enumerate(seg):
        ax.plot([a[0], b[0]], [a[1], b[1]], "--", color="crimson", lw=1.2,
                label="head path (the next point's loss)" if j == 0 else None)
ax.set_aspect("equal"); ax.set_xlabel("km east"); ax.set_ylabel("km north")
fig.colorbar(sc, ax=ax, label="arrival order", shrink=0.6); ax.legend(fontsize=8, loc="upper left")"""),
    ("code", """xs, truth_pts = datasets.make_drifting_curve_stream(seed=0), datasets.make_drifting_curve_stream(seed=0, noise=0.0)
energy = ((xs - truth_pts)[20:] ** 2).sum()
xs32 = xs.astype(np.float32)
from jaxstream.curves.learner import drift_offset
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
for ax, (name, L) in zip(axes, [("automatic memory (default)", learner), ("memory=inf (never forget)", js.slpc(memory=float("inf")))]):
    st, inf_ = jax.jit(lambda k, x, s, L=L: js.run_stream(L, k, x, s, trace="info"))(
        jax.random.key(0), xs32[20:], L.init(jax.random.key(0), xs32[:20]))
    tau = float(st.memory) if np.isnan(float(st.params.memory)) else float(st.params.memory)  # automatic: the state's
    v = np.asarray(st.vertices[: int(st.n_vertices)])
    ax.scatter(xs[:, 0], xs[:, 1], s=4, c=np.arange(len(xs)), cmap="viridis")
    ax.plot(v[:, 0], v[:, 1], "-o", color="crimson", ms=3, label="the line")
    off = np.asarray(drift_offset(st))
    if np.any(off != 0):
        ax.plot(v[:, 0] + off[0], v[:, 1] + off[1], "--", color="crimson", lw=1.2,
                label="moved by the drift (the next point's loss)")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"{name}\\nloss {float(inf_.loss.sum()) / energy:.2f}x the noise energy; memory at the end {tau:.0f}",
                 fontsize=9)
    ax.set_xlabel("x")
axes[0].set_ylabel("y")
fig.tight_layout()"""),
    ("md", """The ferry's curve is one line from pier to pier, following the lane's
S-bend through the band of crossings. Half the reports are the ferry
docked at a pier; the noise level that prices a vertex is read along the
line, each stretch by its length, so their metre-scale jitter does not
price the whole lane (before 0.4.6 it did, and the line folded back and
forth through the band: 50 segments, 135–150 km). The prequential loss is
higher than a folded line's: a line that summarises the band cannot predict
each crossing's own track. The dashed head path reaches from the line's end
to where the trace is now and 8 fitted steps on; docked after a crossing,
the last points' fitted velocity is still the approach's, so it points past
the pier. On the drifting arc the automatic memory keeps the line on the
newest points, with a lag of about one memory span, and the moved line
(dashed) is where it predicts the arc now; the line that never forgets
smears across the band the arc has swept (its memory is unlimited, so
nothing moves it). `benchmarks/bench_slpc.py` prints the shape of every
curve family over 50 held-out seeds."""),
    ("md", """## A new point changes the curve only locally (Figure 8)

`jaxstream.curves.propose` returns the whole candidate set of a round; every
local candidate differs from the current line in a window of at most `window`
vertices around the new point (global moves also compete, all scored at once:
deleting any one vertex, reversing the line's prefix or suffix at any
segment, and swapping pairs of segments, which reverses the stretch between
them and puts a line that visits the data out of order back in order)."""),
    ("code", """from jaxstream import curves as pc
xs = datasets.make_cubic_stream(300, seed=3).astype(np.float32)
state, _ = js.run_stream(learner, jax.random.key(0), xs[20:299], learner.init(jax.random.key(0), xs[:20]))
x_new = jnp.array([3.0, -0.15], jnp.float32)  # a point ~2.5 noise sd above the curve
new, info, prop = pc.propose(jax.random.key(1), state, x_new)
fig, ax = plt.subplots(figsize=(6, 4))
ax.scatter(xs[:, 0], xs[:, 1], s=4, c="0.7")
for c in np.flatnonzero(np.asarray(prop.feasible)):
    v = np.asarray(prop.vertices[c][: int(prop.n_vertices[c])])
    ax.plot(v[:, 0], v[:, 1], color="tab:orange", lw=0.5, alpha=0.6)
v0 = np.asarray(state.vertices[: int(state.n_vertices)]); v1 = np.asarray(new.vertices[: int(new.n_vertices)])
ax.plot(v0[:, 0], v0[:, 1], "k-o", ms=2, lw=1, label="before")
ax.plot(v1[:, 0], v1[:, 1], "-o", color="crimson", ms=2, lw=1, label=f"after ({pc.MOVE_NAMES[int(info.move)]})")
ax.scatter(*x_new, marker="*", s=150, c="crimson", zorder=5)
ax.set_xlim(1, 5); ax.set_ylim(-2.5, 1.5); ax.legend(fontsize=8)
print(f"{int(np.sum(prop.feasible))} feasible candidates, window = vertices {int(prop.window[0])}..{int(prop.window[1]) - 1}")"""),
]
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src) for kind, src in cells]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
path = pathlib.Path(__file__).with_name("slpc.ipynb")
NotebookClient(nb, timeout=900, kernel_name="python3").execute(cwd=str(path.parent))
nbformat.write(nb, path)
print("wrote", path)
