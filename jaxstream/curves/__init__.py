"""Principal curves: slpc (sequential learning of principal curves) and its baseline.

Modules: `learner` (the online learner: state, init, the round in named
stages, the `slpc` factory), `objective` (parameters, the paper's constants,
the noise price), `candidates` (the window and candidate set of a round),
`ftpl` (Algorithms 1/2 by brute force on tiny lattices), `refine`
(differentiable polishing with optax), `princurve` (Hastie–Stuetzle batch
principal curve and its sequential refits), `wrapper` (the NumPy `SLPC`).
"""
from . import candidates, ftpl, learner, objective, princurve, refine, wrapper
from .candidates import MOVE_NAMES, n_candidates
from .ftpl import ExhaustiveResult, enumerate_lines, exhaustive_ftpl
from .learner import Config, Info, Proposal, State, init, loss, predict, propose, slpc, update
from .objective import (Constants, Params, default_params, learning_rate, noise_price, penalty,
                        theoretical_constants, theory_price)
from .refine import RefineResult, refine
from .wrapper import SLPC

__all__ = [
    "slpc", "SLPC", "Params", "default_params", "State", "Info", "Config", "Proposal", "init", "update",
    "propose", "loss", "predict", "Constants", "theoretical_constants", "penalty", "learning_rate",
    "noise_price", "theory_price", "n_candidates", "MOVE_NAMES", "enumerate_lines", "exhaustive_ftpl",
    "ExhaustiveResult", "refine", "RefineResult", "princurve",
]
