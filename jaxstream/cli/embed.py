"""``jaxstream embed``: online landmarks and a landmark-MDS embedding of the stream."""
from __future__ import annotations

import time

import numpy as np

from .pictures import _picture, _plot_embed
from .readers import InputError, _load, _need_rows, working_precision
from .state import _save_state


def _embed_default(args):
    from .. import datasets
    xs, _ = datasets.make_s_curve(args.n, random_state=0, sort_by_t=True)
    return xs, f"S-curve ({args.n} points in 3-D, streamed along the curve)", ["x", "y", "z"]


def _stress_sample(n: int, cap: int, seed: int) -> np.ndarray:
    if n <= cap:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, cap, replace=False))


def run_embed(args) -> dict:
    """Run online landmark MDS as ``jaxstream embed`` does; returns its figures."""
    import jaxstream as js
    from ..embedding import landmark_stress, normalized_stress

    xs, name, names = _load(args, _embed_default)
    k = args.n_components if args.n_components is not None else min(2, xs.shape[1])
    if k > xs.shape[1]:
        raise InputError(f"--n-components={k} exceeds the data's dimension d={xs.shape[1]}")
    _need_rows(xs, 2, "the landmark embedding")
    xs = working_precision(xs)
    kw = dict(n_components=k, buffer_size=args.buffer_size, eps0=args.eps0)
    kw = {k_: v for k_, v in kw.items() if v is not None}
    start = time.perf_counter()
    model = js.LandmarkMDS(args.max_landmarks, seed=args.seed, **kw).fit(xs)
    info = model.last_info_
    Y = np.asarray(model.transform(xs))
    seconds = time.perf_counter() - start
    lm_idx = np.asarray(model.landmark_indices_)
    idx = _stress_sample(xs.shape[0], args.stress_sample, args.seed)
    X64 = xs.astype(np.float64)
    D = np.sqrt(np.maximum(((X64[idx, None, :] - X64[None, idx, :]) ** 2).sum(-1), 0.0))
    stress = float(normalized_stress(D, Y[idx].astype(np.float64)))
    D_L = np.sqrt(np.maximum(((X64[lm_idx, None, :] - X64[None, lm_idx, :]) ** 2).sum(-1), 0.0))
    l_stress = float(landmark_stress(D_L, Y[lm_idx].astype(np.float64), np.arange(len(lm_idx))))
    eps_t = np.asarray(info.eps, np.float64)
    figures = dict(data=name, n_points=int(xs.shape[0]), dim=int(xs.shape[1]), n_components=k,
                   n_landmarks=int(len(lm_idx)), landmark_indices=lm_idx, eps=float(eps_t[-1]),
                   stress=stress, landmark_stress=l_stress, n_stress_points=int(len(idx)),
                   n_replaced=int(np.asarray(info.replaced).sum()), seconds=seconds, embedding=Y)
    print(f"data: {name}: {figures['n_points']} points in {figures['dim']}-D")
    print(f"landmarks: {figures['n_landmarks']} kept after {xs.shape[0]} arrivals "
          f"({figures['n_replaced']} replacements), final eps {figures['eps']:.4g}; "
          f"{seconds:.2f} s (compile included)")
    print(f"normalised stress of the {k}-D embedding: {stress:.4f} "
          f"({'all' if len(idx) == xs.shape[0] else 'a sample of'} {len(idx)} points, all pairs)")
    print(f"normalised stress over landmark pairs: {l_stress:.4f}")
    _save_state(args, model, model.state_, name, names)
    if (pic := _picture(args.out, name, names)) is not None:
        _plot_embed(pic, xs, Y, lm_idx, eps_t, figures)
    return figures
