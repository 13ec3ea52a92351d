"""The options of the ``jaxstream`` command and its sub-commands (argparse)."""
from __future__ import annotations

import argparse
import inspect
import math

from ..clustering.pacbo import pacbo
from ..curves.learner import slpc
from ..embedding import landmark_mds


def _default(factory, name: str):
    """The default of `factory`'s keyword `name`, or of its numeric parameter `name` (a keyword of
    its module's ``default_params``), for the help texts: read from the signatures, so that they
    cannot drift from the code and nothing is computed (no JAX program) to print them."""
    from ..clustering import types as pacbo_types
    from ..curves import objective
    for fn in (factory, {"slpc": objective.default_params, "pacbo": pacbo_types.default_params}.get(factory.__name__)):
        keywords = inspect.signature(fn).parameters if fn is not None else {}
        if name in keywords and keywords[name].default is not inspect.Parameter.empty:
            value = keywords[name].default
            return f"{value:g}" if isinstance(value, float) else value
    raise KeyError(f"{factory.__name__} has no default for {name!r}")


def _positive_int(text):
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {v}")
    return v


def _finite_float(text, *, strict: bool):
    """A finite number > 0 (``strict``) or >= 0; anything else is argparse's usage error."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and (v > 0 if strict else v >= 0)):
        raise argparse.ArgumentTypeError(f"must be a finite number {'>' if strict else '>='} 0; got {text}")
    return v


def _positive_float(text):
    return _finite_float(text, strict=True)


def _nonneg_float(text):
    return _finite_float(text, strict=False)


def _positive_or_inf(text):
    return math.inf if text.strip().lower() in ("inf", "+inf", "infinity") else _positive_float(text)


def _common(p, out):
    """The options every sub-command has (data and output); ``out``: its default picture."""
    g = p.add_argument_group("data and output")
    g.add_argument("--csv", metavar="FILE",
                   help="your stream: a CSV file (header row optional), or a .npy array of shape (n, d) "
                        "(recognised by its content); rows are learned in file order")
    g.add_argument("--columns", nargs="+", metavar="COL",
                   help="CSV column names (or .npy column indices) to use; default: every numeric column")
    g.add_argument("--drop-nonfinite", action="store_true",
                   help="drop rows with missing, NaN or inf values instead of stopping with an error")
    g.add_argument("--out", default=out, metavar="PNG", help=f"picture to write (default: {out}; '' for none)")
    g.add_argument("--seed", type=int, default=0, help="seed of the learner's PRNG key (default: 0)")
    g.add_argument("--float64", action="store_true", help="compute in float64 (jax_enable_x64)")
    g.add_argument("--save-state", metavar="FILE",
                   help="also save the learned state as a checkpoint (jaxstream.checkpoint.load reads it)")


#: The closing paragraph of every sub-command's ``--help``.
HELP_EPILOG = ("Data with more columns than a picture's axes (two; three for the embed command's data) are "
               "drawn on their first principal axes. Bad data files give one error line on stderr and exit status 2 "
               "(set JAXSTREAM_DEBUG=1 to see the traceback instead).")


def build_parser() -> argparse.ArgumentParser:
    """The ``jaxstream`` argument parser: a sub-command per learner (``args.command``, aliases kept)."""
    parser = argparse.ArgumentParser(
        prog="jaxstream", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Online summaries of data streams in JAX: run a learner on a stream, print its "
                    "figures and write a picture.\nWith no command, runs `curve` on the shipped seismic "
                    "stream.", epilog="`jaxstream COMMAND --help` explains a command's options.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_curve(sub)
    _add_cluster(sub)
    _add_embed(sub)
    return parser


def _add_curve(sub) -> None:
    """``jaxstream curve`` (alias ``slpc``)."""
    p = sub.add_parser(
        "curve", aliases=["slpc"], epilog=HELP_EPILOG,
        help="sequential principal curve (slpc) through the stream (default command)",
        description="Sequential principal curve (slpc, Li & Guedj 2021): a polygonal line through the "
                    "middle of the stream, learned one point at a time. Default data: the shipped USGS "
                    "epicentres (longitude, latitude) in 130E-180E, 70S-30N, in time order. Prints the "
                    "prequential loss and R^2; draws the points, the curve and the running loss.")
    p.add_argument("--max-segments", type=_positive_int, metavar="P",
                   help=f"largest number of segments of the curve (capacity; default: the learner's, {_default(slpc, 'max_segments')})")
    p.add_argument("--history-size", type=_positive_int, metavar="H",
                   help="past points kept to evaluate candidate curves (capacity; default: the learner's)")
    p.add_argument("--t0", type=_positive_int, metavar="N",
                   help=f"initial points that build the first curve (default: {_default(slpc, 't0')})")
    p.add_argument("--init", choices=("fit", "pca"),
                   help="first curve: 'fit' (default) fits the penalised objective offline on the t0 "
                        "initial points; 'pca' is the paper's first-principal-component segment")
    p.add_argument("--penalty", choices=("noise", "theory"),
                   help="'noise' (default): a segment is priced in units of the residual noise "
                        "variance (equivariant); 'theory': the paper's h(f)/eta_t")
    p.add_argument("--h-scale", type=_positive_float, metavar="A",
                   help="multiplier of the price of a segment (larger: fewer segments; default: "
                        f"calibrated, {_default(slpc, 'h_scale')})")
    p.add_argument("--outlier-scale", type=_positive_or_inf, metavar="K",
                   help="with --penalty noise, one point's loss in the objective is capped at K noise "
                        "variances (times d-1), so isolated points do not pull the curve; 'inf' for "
                        f"the plain squared loss (default: calibrated, {_default(slpc, 'outlier_scale')})")
    p.add_argument("--length-scale", type=_nonneg_float, metavar="A",
                   help="multiplier of the price of the curve's length with --penalty noise (larger: "
                        f"shorter curves, fewer folds; default: calibrated, {_default(slpc, 'length_scale')})")
    p.add_argument("--eta-scale", type=_positive_float, metavar="A",
                   help="multiplier of the learning rate eta_t; used only with --penalty theory")
    p.add_argument("--data", choices=("seismic", "ferry"), default="seismic",
                   help="embedded stream when --csv is not given: 'seismic' (USGS epicentres, default) or "
                        "'ferry' (a real AIS trace arriving in time order: the curve follows the route)")
    p.add_argument("--memory", type=_positive_or_inf, metavar="TAU",
                   help="forgetting time scale in rounds ('inf': never forget; default: automatic, "
                        "unlimited until the stream drifts)")
    p.add_argument("--delta", type=_positive_float, metavar="D",
                   help="lattice spacing of the vertices, relative to the spread of the initial points "
                        "(see jaxstream.slpc; default: the learner's)")
    p.add_argument("--end-lead", type=_nonneg_float, metavar="S",
                   help="on a stream arriving in order, the prequential loss also counts the curve's "
                        "head path: from its end to where the trace is now, and S fitted steps of the "
                        f"trace past it (drawn dashed; 0: the curve itself, the paper's loss; default: {_default(slpc, 'end_lead')})")
    p.add_argument("--no-drift-offset", dest="drift_offset", action="store_false",
                   help="on a drifting stream in random order, measure the prequential loss against the "
                        "curve itself, not the curve moved by the source's estimated offset (the default)")
    _common(p, "curve.png")


def _add_cluster(sub) -> None:
    """``jaxstream cluster`` (alias ``pacbo``)."""
    p = sub.add_parser(
        "cluster", aliases=["pacbo"], epilog=HELP_EPILOG,
        help="online clustering with a varying number of clusters (PACBO)",
        description="PAC-Bayesian online clustering (PACBO, Li, Guedj & Loustau 2018): cluster centres "
                    "whose number k̂ changes over time, drawn by reversible-jump MCMC from a Gibbs "
                    "quasi-posterior each round. Default data: the slides' four Gaussian groups in 2-D. "
                    "Prints k̂ over time, the prequential loss and the centres; draws the clusters, "
                    "k̂_t and the running loss.")
    p.add_argument("--n", type=_positive_int, default=200, help="points of the generated default stream "
                   "(default: 200; ignored with --csv)")
    p.add_argument("--max-clusters", type=_positive_int, metavar="P",
                   help=f"largest number of clusters (capacity; default: the learner's, {_default(pacbo, 'max_clusters')})")
    p.add_argument("--history-size", type=_positive_int, metavar="H",
                   help="past points kept for the quasi-posterior (capacity; default: the learner's)")
    p.add_argument("--n-steps", type=_positive_int, metavar="N",
                   help=f"MCMC steps per round (default: the learner's, {_default(pacbo, 'n_steps')})")
    p.add_argument("--lambda-scale", type=_positive_float, metavar="A",
                   help="multiplier of the inverse temperature λ (larger: more clusters; default: the "
                        f"learner's, {_default(pacbo, 'lambda_scale')})")
    p.add_argument("--drift-level", type=float, metavar="A",
                   help="level of the per-cluster drift test in [0, 1): a cluster whose points move forgets "
                        f"its old ones (0: never forget; default: the learner's, {_default(pacbo, 'drift_level')})")
    p.add_argument("--tracking", action=argparse.BooleanOptionalAction, default=None,
                   help="a cluster whose points move keeps them and moves them with it, at its estimated "
                        "velocity (default: on); the picture then draws the points in memory where the "
                        "learner holds them. --no-tracking: it keeps only its newest points")
    p.add_argument("--radius", type=_positive_float, metavar="R",
                   help="bound on the norm of the points, a ball centred at the origin (default: none; the "
                        "prior ball is learned from the stream, so results do not depend on units or origin)")
    p.add_argument("--noise-scale", type=_positive_float, metavar="SD",
                   help="a guess of the groups' noise standard deviation per column, in the data's units "
                        "(default: none, learned from the data alone); it settles the first rounds, where few "
                        "points cannot tell one group's spread from two groups; when unsure, guess low")
    _common(p, "cluster.png")


def _add_embed(sub) -> None:
    """``jaxstream embed`` (alias ``landmarks``)."""
    p = sub.add_parser(
        "embed", aliases=["landmarks"], epilog=HELP_EPILOG,
        help="online landmarks and a landmark-MDS embedding of the stream",
        description="Online landmark replacement and landmark MDS (Thongprayoon & Masuda 2024): a "
                    "bounded set of landmarks that covers the stream, and a low-dimensional embedding "
                    "of every point from its distances to them. Default data: an S-curve in 3-D, "
                    "streamed along the curve. Prints the number of landmarks, ε and the normalised "
                    "stress; draws the data with the landmarks and the embedding coloured by arrival.")
    p.add_argument("--n", type=_positive_int, default=1000, help="points of the generated default stream "
                   "(default: 1000; ignored with --csv)")
    p.add_argument("--max-landmarks", type=_positive_int, default=_default(landmark_mds, "max_landmarks"), metavar="L",
                   help=f"most landmarks kept (capacity; default: {_default(landmark_mds, 'max_landmarks')})")
    p.add_argument("--n-components", type=_positive_int, metavar="K",
                   help=f"dimension of the embedding (default: {_default(landmark_mds, 'n_components')}, or d for 1-D data)")
    p.add_argument("--buffer-size", type=_positive_int, metavar="N",
                   help="recent points forming the neighbourhood graph (capacity; default: the learner's, "
                        "max(1024, 10 x max-landmarks))")
    p.add_argument("--eps0", type=_nonneg_float, metavar="E", help=f"initial covering threshold ε (default: {_default(landmark_mds, 'eps0')})")
    p.add_argument("--stress-sample", type=_positive_int, default=2000, metavar="M",
                   help="points used to compute the stress (all pairs; default: 2000)")
    _common(p, "embed.png")
