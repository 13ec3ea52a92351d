"""The pictures of the commands (matplotlib, optional): the data, what was learned, the loss.

Data with more columns than a picture's axes are drawn on their first principal axes (`_axes`).
"""
from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional

import numpy as np


class Picture(NamedTuple):
    """What a command's picture needs besides its figures: pyplot, the PNG to write, the data's
    description (the title) and the column names (the axes)."""
    plt: Any
    out: str
    title: str
    names: list


def _picture(out, title, names) -> Optional[Picture]:
    """The `Picture` to draw, or None when there is none: ``--out ''``, or no matplotlib (said on stderr)."""
    if not out or (plt := _pyplot()) is None:
        return None
    return Picture(plt, out, title, names)


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("picture skipped: matplotlib is missing (pip install 'jaxstream[plot]')", file=sys.stderr)
        return None
    return plt


def _save(fig, plt, out):
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"picture: {out}")


def _axes(xs, names, n: int = 2):
    """The axes a picture shows: ``(project, labels, note)``, ``project(a)`` mapping (m, d) points to
    (m, n), ``labels`` the n axis names and ``note`` what the axes are ("" for the columns).

    With at most n columns, the columns. With more, the points' first n principal axes (about
    their mean): the view that shows most of their spread, where the first columns of
    well-separated groups in many dimensions often overlap. A .npy file's columns are named by
    their indices; the axes say "column 0" rather than a bare "0".
    """
    label = [f"column {c}" if str(c).isdigit() else c for c in names]
    if xs.shape[1] <= n:
        return (lambda a: np.asarray(a, np.float64)), label, ""
    mean = xs.mean(axis=0)
    _, sv, vt = np.linalg.svd(xs - mean, full_matrices=False)
    share = sv ** 2 / max(float(np.sum(sv ** 2)), np.finfo(np.float64).tiny)
    axes = vt[:n].T
    labels = [f"PC {j + 1} ({share[j]:.0%})" for j in range(n)]
    note = f"first {n} principal axes of {xs.shape[1]} columns"
    return (lambda a: (np.asarray(a, np.float64) - mean) @ axes), labels, note


def _plane(xs, names):
    """`_axes` with two axes: ``(project, x label, y label)``; principal axes say so on the x axis."""
    project, labels, note = _axes(xs, names, 2)
    return project, labels[0] + (f" ({note}; % of the variance)" if note else ""), labels[1]


def _xy(xs, names):
    """Two coordinates to draw (`_plane`), or (index, value) in 1-D: ``(u, v, x label, y label, project)``."""
    if xs.shape[1] >= 2:
        project, xl, yl = _plane(xs, names)
        uv = project(xs)
        return uv[:, 0], uv[:, 1], xl, yl, project
    return np.arange(len(xs)), xs[:, 0], "arrival", _axes(xs, names, 1)[1][0], None


def _plot_curve(pic: Picture, xs, figures, losses):
    """The stream coloured by arrival with the curve (and its head path or drift), and the running loss."""
    plt, out, title, names = pic
    vertices = figures["vertices"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw=dict(width_ratios=[1.3, 1]))
    u, v, xl, yl, project = _xy(xs, names)
    sc = ax.scatter(u, v, c=np.arange(len(xs)), cmap="viridis", s=12, label="stream", zorder=2)
    if project is not None:
        # Hollow vertex markers: a vertex placed on a lone point must not hide it.
        pv = project(vertices)
        ax.plot(pv[:, 0], pv[:, 1], "-o", color="crimson", ms=5, mfc="none", mew=1.2, lw=1.6,
                zorder=3, label=f"slpc curve ({figures['n_segments']} segments, length {figures['length']:.3g})")
        if figures.get("drift_offset") is not None:
            pm = project(vertices + figures["drift_offset"])
            ax.plot(pm[:, 0], pm[:, 1], "--", color="crimson", lw=1.2, alpha=0.8, zorder=3,
                    label="curve moved by the drift (the next point's loss)")
        for j, seg in enumerate(figures["head_path"]):
            seg = project(seg)
            ax.plot(seg[:, 0], seg[:, 1], "--", color="crimson", lw=1.2, alpha=0.8, zorder=3,
                    label="head path (the next point's loss)" if j == 0 else None)
    fig.colorbar(sc, ax=ax, label="arrival order", shrink=0.8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"slpc on {title.split(' (')[0]}", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    t = np.arange(1, len(losses) + 1)
    ax2.plot(t, np.cumsum(losses) / t, color="k", lw=1.2)
    ax2.set_xlabel("round t (after the initial points)")
    ax2.set_ylabel("mean prequential loss up to t")
    ax2.set_title(f"prequential R² {figures['prequential_r2']:.3f}, final R² {figures['r2']:.3f}", fontsize=10)
    ax2.grid(alpha=0.3)
    _save(fig, plt, out)


def _plot_cluster(pic: Picture, xs, labels, figures, losses, truth, in_memory, held=None):
    """The points coloured by centre with the centres (and the true means, ``truth``), k̂_t and the
    running loss. ``labels``: each point's centre row; ``in_memory``: (n,) bool, the points the
    learner remembers (the rest grey); ``held``: None, or (points (m, d), their centre rows (m,),
    arrival indices (m,)) drawn instead of the stream's points in memory (tracking: the learner
    holds them moved)."""
    plt, out, title, names = pic
    fig = plt.figure(figsize=(11, 5))
    ax = fig.add_subplot(1, 2, 1)
    u, v, xl, yl, project = _xy(xs, names)
    cmap = dict(cmap="tab10" if labels.max() < 10 else "tab20", vmin=0, vmax=9 if labels.max() < 10 else 19)
    if held is not None:
        ax.scatter(u, v, c="0.75", s=8, alpha=0.6, zorder=1, label=f"the stream as it arrived ({len(u)} points)")
        pts, rows, idx = held
        pts = project(pts) if project is not None else np.c_[idx - 1, pts[:, 0]]      # 1-D: arrival, value
        ax.scatter(pts[:, 0], pts[:, 1], c=rows, s=12, alpha=0.8, zorder=2, **cmap,
                   label=f"in memory, moved with their clusters ({len(pts)} points)")
    else:
        if not in_memory.all():
            ax.scatter(u[~in_memory], v[~in_memory], c="0.75", s=8, alpha=0.6, zorder=1,
                       label=f"not in memory ({int((~in_memory).sum())} points: forgotten or out of the sample)")
        ax.scatter(u[in_memory], v[in_memory], c=labels[in_memory], s=12, alpha=0.8, zorder=2, **cmap)
    c = figures["centers"]
    if project is not None:
        c = project(c)
        ax.scatter(c[:, 0], c[:, 1], marker="X", s=160, c="k", edgecolors="w", linewidths=1.5, zorder=3,
                   label=rf"PACBO centres ($\hat{{k}}$={figures['n_clusters']})")
        pv = project(figures["provisional"]) if len(figures["provisional"]) else []
        if len(pv):
            ax.scatter(pv[:, 0], pv[:, 1], marker="X", s=120, facecolors="none", edgecolors="k", linewidths=1.0,
                       zorder=3, label=f"provisional centres ({len(pv)}: recent points no cluster explains)")
        if truth is not None:
            truth = project(truth)
            ax.scatter(truth[:, 0], truth[:, 1], marker="o", s=160, facecolors="none", edgecolors="crimson",
                       linewidths=1.5, zorder=3, label="true means")
        ax.legend(loc="best", fontsize=8, framealpha=0.6)  # see-through: it may sit on a lone point
    else:
        for j, cj in enumerate(c[:, 0]):
            ax.axhline(cj, color="k", lw=1, ls="--", label="PACBO centres" if j == 0 else None)
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"PACBO on {title.split(' (')[0]}", fontsize=10)
    t = np.arange(1, len(losses) + 1)
    ax1 = fig.add_subplot(2, 2, 2)
    ax1.step(t, figures["k_over_time"], where="post", color="C0")
    ax1.set_ylabel(r"$\hat{k}_t$")
    ax1.set_title("number of clusters over time", fontsize=10)
    ax1.grid(alpha=0.3)
    ax2 = fig.add_subplot(2, 2, 4, sharex=ax1)
    ax2.plot(t, np.cumsum(losses) / t, color="k", lw=1.2)
    ax2.set_xlabel("round t")
    ax2.set_ylabel("mean prequential loss")
    ax2.grid(alpha=0.3)
    _save(fig, plt, out)


def _plot_embed(pic: Picture, xs, Y, lm_idx, eps_t, figures):
    """The data with its landmarks circled, the embedding coloured by arrival, and ε over time."""
    plt, out, title, names = pic
    fig = plt.figure(figsize=(12, 5))
    order = np.arange(len(xs))
    if xs.shape[1] >= 3:
        project, labels, note = _axes(xs, names, 3)
        p3 = project(xs)
        ax0 = fig.add_subplot(1, 3, 1, projection="3d")
        ax0.scatter(p3[:, 0], p3[:, 1], p3[:, 2], c=order, cmap="viridis", s=5)
        ax0.scatter(p3[lm_idx, 0], p3[lm_idx, 1], p3[lm_idx, 2], s=30, facecolors="none",
                    edgecolors="crimson", linewidths=1.0)
        ax0.set_xlabel(labels[0])
        ax0.set_ylabel(labels[1])
        ax0.set_zlabel(labels[2])
    else:
        ax0 = fig.add_subplot(1, 3, 1)
        u, v, xl, yl, _ = _xy(xs, names)
        ax0.scatter(u, v, c=order, cmap="viridis", s=5)
        ax0.scatter(u[lm_idx], v[lm_idx], s=30, facecolors="none", edgecolors="crimson", linewidths=1.0)
        ax0.set_xlabel(xl)
        ax0.set_ylabel(yl)
    ax0.set_title("data (landmarks circled)" + (f"\non its {note}" if xs.shape[1] > 3 else ""), fontsize=10)
    ax = fig.add_subplot(1, 3, 2)
    if Y.shape[1] >= 2:
        u, v, xl, yl = Y[:, 0], Y[:, 1], "MDS 1", "MDS 2"
    else:
        u, v, xl, yl = order, Y[:, 0], "arrival", "MDS 1"
    sc = ax.scatter(u, v, c=order, cmap="viridis", s=6)
    ax.scatter(u[lm_idx], v[lm_idx], s=40, facecolors="none", edgecolors="crimson", linewidths=1.2,
               label=f"{len(lm_idx)} landmarks")
    fig.colorbar(sc, ax=ax, label="arrival order", shrink=0.8)
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"landmark MDS of {title.split(' (')[0]}\nstress {figures['stress']:.3f}", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    ax2 = fig.add_subplot(1, 3, 3)
    ax2.plot(np.arange(1, len(eps_t) + 1), eps_t, color="k", lw=1.2)
    ax2.set_xlabel("arrival")
    ax2.set_ylabel("covering threshold ε")
    ax2.set_title("ε over time", fontsize=10)
    ax2.grid(alpha=0.3)
    _save(fig, plt, out)
