"""Principal curves: slpc (sequential learning of principal curves) and its baseline.

Modules, one concern each:

- `types`: the static `Config` and the pytrees `State`, `Info`, `Proposal`.
- `objective`: numeric `Params`, the paper's constants, the noise price, the loss cap.
- `history`: the reservoir of past points and the noise level σ̂² it holds.
- `cache`: every stored point's distance to every segment, and how a move rewrites it.
- `candidates`: a round's window and the local candidate lines, scored densely.
- `global_moves`: deletions, end reversals, swaps (2-opt) and relocations (or-opt) anywhere on the line.
- `shape`: how well a line summarises a curve (fidelity, coverage, length ratio).
- `tracking`: what lets the line follow a stream that moves (the data's current extent,
  the ring of recent points, forgetting with an automatic memory).
- `learner`: `init`, `update` (the round as a pipeline of those stages), the `slpc` factory.
- `ftpl`: Algorithms 1/2 by brute force on tiny lattices.
- `refine`: differentiable polishing of a learned line with optax.
- `princurve`: the Hastie–Stuetzle batch principal curve and its sequential refits (baseline).
- `wrapper`: the NumPy `SLPC`.
"""
from . import (cache, candidates, ftpl, global_moves, history, learner, objective, princurve, shape,  # noqa: F401
               tracking, types, wrapper)
from .candidates import (MOVE_DELETE, MOVE_INSERT, MOVE_KEEP, MOVE_NAMES, MOVE_RELOCATE, MOVE_REVERSE, MOVE_SHIFT, MOVE_SWAP,
                         n_candidates)
from .ftpl import ExhaustiveResult, enumerate_lines, exhaustive_ftpl
from .learner import init, loss, predict, propose, slpc, update
from .objective import (Constants, Params, default_params, learning_rate, loss_cap, noise_price, penalty,
                        theoretical_constants, theory_price)
from .refine import RefineResult, refine
from .types import STATE_LAYOUT, Config, Info, Proposal, State
from .wrapper import SLPC

__all__ = [
    "slpc", "SLPC", "Params", "default_params", "State", "Info", "Config", "Proposal", "init", "update",
    "propose", "loss", "predict", "Constants", "theoretical_constants", "penalty", "learning_rate",
    "noise_price", "theory_price", "loss_cap", "n_candidates", "MOVE_NAMES", "MOVE_KEEP", "MOVE_SHIFT",
    "MOVE_INSERT", "MOVE_DELETE", "MOVE_REVERSE", "MOVE_SWAP", "MOVE_RELOCATE", "STATE_LAYOUT", "enumerate_lines", "exhaustive_ftpl",
    "ExhaustiveResult", "refine", "RefineResult", "princurve", "shape", "tracking",
]
