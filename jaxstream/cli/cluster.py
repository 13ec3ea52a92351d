"""``jaxstream cluster``: PAC-Bayesian online clustering (PACBO) of the stream."""
from __future__ import annotations

import time

import numpy as np

from ..datasets import PACBO_MEANS, make_four_groups_stream
from .pictures import _picture, _plot_cluster
from .readers import _load, _need_rows, working_precision
from .state import _save_state

#: The four groups' means of the default data of ``jaxstream cluster`` (drawn as the truth).
FOUR_MEANS = PACBO_MEANS


def four_groups_stream(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The PACBO slides' first stream: an equal mixture of N(m_j, I) in 2-D
    with means (0,0), (-4,-1), (0,7), (5,2), i.i.d. labels
    (`datasets.make_four_groups_stream` with ``balanced=False``).
    Returns (points (n, 2), labels)."""
    xs, labels, _ = make_four_groups_stream(n, seed, balanced=False, return_truth=True)
    return xs, labels


def _cluster_default(args):
    xs, _ = four_groups_stream(args.n, seed=0)
    return xs, (f"generated four Gaussian groups (PACBO slides; {args.n} points, means (0,0) (-4,-1) "
                "(0,7) (5,2), unit variance)"), ["x1", "x2"]


def run_cluster(args) -> dict:
    """Run PACBO as ``jaxstream cluster`` does; returns the figures it prints."""
    import jaxstream as js

    xs, name, names = _load(args, _cluster_default)
    _need_rows(xs, 2, "PACBO")
    xs = working_precision(xs)
    kw = dict(max_clusters=args.max_clusters, history_size=args.history_size, n_steps=args.n_steps,
              lambda_scale=args.lambda_scale, drift_level=args.drift_level, noise_scale=args.noise_scale,
              tracking=args.tracking)
    kw = {k: v for k, v in kw.items() if v is not None}
    start = time.perf_counter()
    model = js.PACBO(radius=args.radius, seed=args.seed, **kw)
    model.partial_fit(xs)
    seconds = time.perf_counter() - start
    info = model.last_info_
    losses = np.asarray(info.loss, np.float64)
    centers = model.cluster_centers_
    # predict gives each point its cluster's label; cluster_labels_ is the label of each row of
    # centers (stable labels: a cluster keeps its label while others appear and disappear).
    ids = model.cluster_labels_
    rows = _centre_rows(model, xs, ids)
    n_forgotten = int(np.sum(np.asarray(info.n_forgotten)))
    in_memory, held = _memory(model, xs, ids, n_forgotten)
    rows_for_sizes = held[1] if held is not None else rows[in_memory]
    state = model.state_
    figures = dict(data=name, n_points=int(xs.shape[0]), dim=int(xs.shape[1]),
                   n_clusters=model.n_clusters_, centers=centers, labels=ids,
                   k_over_time=np.asarray(info.n_clusters),
                   cumulative_loss=float(losses.sum()), mean_loss=float(losses.mean()),
                   sizes=np.bincount(rows_for_sizes, minlength=centers.shape[0]), seconds=seconds,
                   n_forgotten=n_forgotten, n_in_memory=int(len(rows_for_sizes)),
                   provisional=np.asarray(state.recent)[np.asarray(state.provisional)])
    _report(figures, model.max_clusters, held)
    _save_state(args, model, model.state_, name, names)
    if (pic := _picture(args.out, name, names)) is not None:
        _plot_cluster(pic, xs, rows, figures, losses, FOUR_MEANS if not args.csv else None, in_memory, held)
    return figures


def _centre_rows(model, xs, ids) -> np.ndarray:
    """(n,) each point's row of the centres (``ids``: the label of each row)."""
    labels = np.asarray(model.predict(xs))
    rows = np.argmax(labels[:, None] == ids[None, :], axis=1)
    if not (labels[:, None] == ids[None, :]).any(axis=1).all():
        raise RuntimeError("PACBO.predict returned a label that no current centre has")
    return rows


def _memory(model, xs, ids, n_forgotten: int):
    """``(in_memory, held)``: (n,) bool, the stream's points the learner remembers, and None, or
    (points (m, d), their centre rows (m,), arrival indices (m,)) when tracking moved them."""
    # Once the drift test has forgotten points, the centres summarise what is remembered: count and
    # colour those (the stored rows; row i of the stream arrived as index i + 1), not a drifting
    # group's whole trail, which the nearest final centre would otherwise claim.
    state = model.state_
    stored = np.asarray(state.history_index)[np.asarray(state.history_mask)]
    in_memory = np.isin(np.arange(1, xs.shape[0] + 1), stored) if n_forgotten else np.ones(xs.shape[0], bool)
    held = np.asarray(state.history)[np.asarray(state.history_mask)]
    if not model.learner.config.tracking or np.array_equal(held, xs[stored - 1]):
        return in_memory, None  # the points in memory stand where they arrived
    # Tracking moved the remembered points with their clusters: count and draw them where the
    # learner holds them (its centres summarise those), the stream as it arrived in grey.
    held_rows = np.argmax(np.asarray(model.predict(held))[:, None] == ids[None, :], axis=1)
    return in_memory, (held, held_rows, stored)


def _report(figures: dict, max_clusters: int, held) -> None:
    """Print what ``jaxstream cluster`` learned (``held``: as `_memory` gives it)."""
    k_t, centers, n_forgotten = figures["k_over_time"], figures["centers"], figures["n_forgotten"]
    print(f"data: {figures['data']}: {figures['n_points']} points in {figures['dim']}-D")
    print(f"PACBO: {figures['n_clusters']} clusters after {figures['n_points']} rounds in "
          f"{figures['seconds']:.2f} s (compile included)")
    if figures["n_clusters"] >= max_clusters:
        print(f"capacity: PACBO uses all {max_clusters} centres it may have; the quasi-posterior may "
              f"want more (--max-clusters raises the cap)")
    marks = sorted({max(1, int(round(f * len(k_t)))) for f in (0.1, 0.25, 0.5, 0.75, 1.0)})
    print("k̂ over time: " + ", ".join(f"t={t}: {int(k_t[t - 1])}" for t in marks))
    print(f"cumulative prequential loss: {figures['cumulative_loss']:.4g} "
          f"(mean {figures['mean_loss']:.4g} per point)")
    if held is not None:
        print(f"tracking: the {len(held[0])} points in memory moved with their clusters; the counts below and "
              "the coloured points are where the learner holds them, the stream as it arrived is grey")
    if n_forgotten:
        print(f"memory: the drift test forgot {n_forgotten} points; {figures['n_in_memory']} of the "
              f"{figures['n_points']} points are in memory" +
              ("" if held is not None else " (the counts below, the coloured points; the rest grey)"))
    if len(figures["provisional"]):
        print(f"provisional centres: {len(figures['provisional'])} of the last points no cluster explains yet "
              "(they predict the next points; not clusters)")
    unit = "points in memory" if n_forgotten else "points"
    with np.printoptions(precision=3, suppress=True):
        for j, (c, m, i) in enumerate(zip(centers, figures["sizes"], figures["labels"])):
            if j == 10:
                print(f"  ... {centers.shape[0] - 10} more")
                break
            print(f"  centre {j}: {c}  (label {i}, {m} {unit})")
