"""``jaxstream curve``: a sequential principal curve (slpc) through the stream."""
from __future__ import annotations

import time

import numpy as np

from .pictures import _picture, _plot_curve
from .readers import InputError, _load, _need_rows, working_precision
from .state import _save_state

#: The description of the default data of ``jaxstream curve``.
SEISMIC_NAME = "embedded seismic stream (USGS 2020-08-21..09-21, 130E-180E, 70S-30N)"
#: The description of the data of ``jaxstream curve --data ferry``.
FERRY_NAME = ("embedded AIS trace of the Staten Island ferry (2020-12-01..05, 3,729 reports in time order, "
              "local km)")


def _curve_default(args):
    from .. import datasets
    if getattr(args, "data", "seismic") == "ferry":
        return datasets.load_trace(), FERRY_NAME, ["x (km east)", "y (km north)"]
    return datasets.seismic_stream(), SEISMIC_NAME, ["longitude (°E)", "latitude (°N)"]


def run_curve(args) -> dict:
    """Run slpc as ``jaxstream curve`` does; returns the figures it prints."""
    import jaxstream as js

    xs, name, names = _load(args, _curve_default)
    t0 = args.t0 if args.t0 is not None else 20
    _need_rows(xs, t0 + 1, f"slpc with t0={t0}")
    kw = dict(max_segments=args.max_segments, history_size=args.history_size, t0=args.t0,
              h_scale=args.h_scale, length_scale=args.length_scale, eta_scale=args.eta_scale,
              delta=args.delta, init=args.init, penalty=args.penalty, outlier_scale=args.outlier_scale,
              memory=args.memory, end_lead=getattr(args, "end_lead", None),
              drift_offset=getattr(args, "drift_offset", None))
    kw = {k: v for k, v in kw.items() if v is not None}
    if kw.get("history_size", t0) < t0:
        raise InputError(f"--history-size {kw['history_size']} cannot hold the t0={t0} initial points: pass "
                         f"--history-size >= {t0} (or a smaller --t0)")
    xs = working_precision(xs)
    start = time.perf_counter()
    model = js.SLPC(seed=args.seed, **kw)
    losses = model.partial_fit(xs).last_losses_[t0:]
    vertices = model.vertices_
    seconds = time.perf_counter() - start
    stream = xs[t0:].astype(np.float64)
    figures = dict(
        data=name, n_points=int(xs.shape[0]), dim=int(xs.shape[1]),
        cumulative_loss=float(losses.sum()),
        prequential_r2=float(1 - losses.sum() / ((stream - stream.mean(0)) ** 2).sum()),
        r2=float(model.score(xs)), n_segments=model.n_segments_, seconds=seconds,
        length=float(np.linalg.norm(np.diff(np.asarray(vertices, np.float64), axis=0), axis=1).sum()),
        vertices=np.asarray(vertices), head_path=_head_path(model), drift_offset=_drift_offset(model))
    print(f"data: {name}: {figures['n_points']} points in {figures['dim']}-D")
    print(f"slpc: {figures['n_segments']} segments after {xs.shape[0] - t0} rounds "
          f"(t0={t0} initial points) in {seconds:.2f} s (compile included)")
    unit = " km" if "(km" in names[0] else "°" if "°" in names[0] else " (data units)"
    print(f"curve: {figures['n_segments']} segments, length {figures['length']:.4g}{unit} "
          f"(the data's extent: {_extent(xs):.4g}{unit} between its farthest two principal projections)")
    print(f"cumulative prequential loss: {figures['cumulative_loss']:.4g} "
          f"(mean {figures['cumulative_loss'] / max(len(losses), 1):.4g} per point)")
    print(f"prequential R^2: {figures['prequential_r2']:.4f}")
    print(f"R^2 of the final curve on all points: {figures['r2']:.4f}")
    if figures["n_segments"] >= model.max_segments:
        print(f"capacity: the curve uses all {model.max_segments} segments it may have; the stream asked "
              f"for more (--max-segments raises the cap; --length-scale or --h-scale above their defaults "
              f"give a smoother summary at a higher prequential loss)")
    if len(figures["head_path"]):
        print(f"the stream arrives in order: the prequential loss also counts the curve's head path, to where "
              f"the trace is now and {model.end_lead:g} fitted steps past it (drawn dashed; --end-lead 0: the "
              f"curve itself)")
    if figures["drift_offset"] is not None:
        from ..curves.tracking import memory
        tau = float(memory(model.state_))
        print(f"the source drifts (memory {tau:.0f} rounds): the prequential loss measures each point "
              f"against the curve moved by the source's estimated offset, now "
              f"({', '.join(f'{c:.3g}' for c in figures['drift_offset'])}) (drawn dashed; --no-drift-offset: "
              f"the curve itself)")
    _save_state(args, model, model.state_, name, names)
    if (pic := _picture(args.out, name, names)) is not None:
        _plot_curve(pic, xs, figures, losses)
    return figures


def _extent(xs) -> float:
    """The stream's extent along its first principal axis (largest minus smallest projection)."""
    x = np.asarray(xs, np.float64)
    c = x - x.mean(0)
    axis = np.linalg.svd(c, full_matrices=False)[2][0]
    p = c @ axis
    return float(p.max() - p.min())


def _head_path(model) -> np.ndarray:
    """(k, 2, d) the segments of the curve's head path that the next point's loss counts when the
    stream ends in order (`jaxstream.curves.learner.head_path`: the join from the curve's end, where
    the trace has passed it, then the lead); (0, 2, d) otherwise."""
    from ..curves.learner import head_path
    s = model.state_
    if model.end_lead == 0:
        return np.zeros((0, 2, s.vertices.shape[-1]))
    seg, ok, in_order = head_path(s, model.end_lead)
    if not bool(in_order):
        return np.zeros((0, 2, s.vertices.shape[-1]))
    return np.asarray(seg, np.float64)[np.asarray(ok)]


def _drift_offset(model):
    """(d,) the offset the next point's loss moves the curve by (`jaxstream.curves.learner.drift_offset`),
    or None when it moves it by nothing (unlimited memory, a trace in order, ``drift_offset=False``)."""
    from ..curves.learner import drift_offset
    if not model.drift_offset or model.state_ is None:
        return None
    off = np.asarray(drift_offset(model.state_), np.float64)
    return off if np.any(off != 0) else None
