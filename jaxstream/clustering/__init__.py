"""Online clustering: PACBO (PAC-Bayesian online clustering) and its baselines.

Modules (one concern each):

- `jaxstream.clustering.lloyd`: masked distances, Lloyd k-means on centre
  slots, the round's k-means rows (k̂ − 1, k̂, k̂ + 1).
- `jaxstream.clustering.quasi_posterior`: the Gibbs quasi-posterior (energy
  batched over partitions, prior with a price per centre, λ schedules).
- `jaxstream.clustering.kernel`: the reversible-jump independence MH kernel
  whose proposals are scored as one batch.
- `jaxstream.clustering.pacbo`: the PACBO learner (`State`, `Info`, `init`,
  `update`, …). The factory is ``jaxstream.pacbo``; this package does not
  re-export it, so that a module and a function never share a name here.
- `jaxstream.clustering.wrapper`: `PACBO`, the stateful NumPy wrapper.
- `jaxstream.clustering.baselines`: online (MacQueen) k-means, batch k-means
  with k-means++ seeding, the Gap statistic.
"""
from . import baselines, kernel, lloyd, pacbo, quasi_posterior, wrapper
from .wrapper import PACBO

__all__ = ["lloyd", "quasi_posterior", "kernel", "pacbo", "wrapper", "baselines", "PACBO"]
