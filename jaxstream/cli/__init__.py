"""Command line: run a jaxstream learner on a stream and draw what it learned.

    jaxstream [curve]   sequential principal curve (slpc); the default command
    jaxstream cluster   PAC-Bayesian online clustering (PACBO)
    jaxstream embed     online landmarks + landmark MDS

Each command runs on embedded data by default, or on your own data with ``--csv FILE``
(a CSV file or a ``.npy`` array; the rows are the stream, in file order); it prints its
figures and writes a PNG. Bad input is one line on stderr with exit status 2
(``JAXSTREAM_DEBUG=1`` shows the traceback instead).

Modules: ``parser`` (the options), ``readers`` (the data), ``curve``, ``cluster`` and
``embed`` (a command's run each), ``pictures``, ``state`` (``--save-state``) and
``cache`` (the persistent compilation cache).
"""
from __future__ import annotations

import os
import sys

from .cache import CACHE_ENV, _enable_compilation_cache, compilation_cache_dir
from .cluster import FOUR_MEANS, four_groups_stream, run_cluster
from .curve import FERRY_NAME, SEISMIC_NAME, run_curve
from .embed import run_embed
from .parser import HELP_EPILOG, build_parser
from .pictures import _plane, _plot_cluster, _pyplot  # noqa: F401  (tests draw with them)
from .readers import EXIT_BAD_INPUT, InputError, read_csv_points, read_npy_points, read_points

__all__ = [
    "main", "build_parser", "COMMANDS", "run_curve", "run_cluster", "run_embed",
    "InputError", "EXIT_BAD_INPUT", "read_points", "read_csv_points", "read_npy_points",
    "four_groups_stream", "FOUR_MEANS", "SEISMIC_NAME", "FERRY_NAME", "HELP_EPILOG",
    "CACHE_ENV", "compilation_cache_dir",
]

#: Each command name and alias, and the function that runs it on the parsed arguments.
COMMANDS = {"curve": run_curve, "slpc": run_curve, "cluster": run_cluster, "pacbo": run_cluster,
            "embed": run_embed, "landmarks": run_embed}


def main(argv=None) -> int:
    """Entry point of the ``jaxstream`` command; returns the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["curve"] + argv
    args = parser.parse_args(argv)
    _enable_compilation_cache()
    if args.float64:
        import jax
        jax.config.update("jax_enable_x64", True)
    try:
        COMMANDS[args.command](args)
    except (InputError, ValueError, OSError, FloatingPointError) as e:
        if os.environ.get("JAXSTREAM_DEBUG"):
            raise
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"jaxstream {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
