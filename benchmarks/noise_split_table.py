"""The table behind PACBO's split guard (`jaxstream.clustering.quasi_posterior.NOISE_SPLIT_RATIO`).

n points drawn from one standard Gaussian in d dimensions; σ̂²_1 = W_1/(d·(n − 1)) is their
variance about their mean, σ̂²_2 = W_2/(d·(n − 2)) about the two centres of their best 2-means
split (the best split along the principal axis and 40 random directions, then Lloyd's
iterations). Prints the 95 % quantile of σ̂²_1/σ̂²_2 for each (d, n): how much larger the k̂ row's
noise level can be than the k̂ + 1 row's when the extra centre splits pure noise.

    python benchmarks/noise_split_table.py [--draws 2000] [--seed 0]
"""
import argparse

import numpy as np

DIMS = (1, 2, 3, 5, 10, 30, 100)
SIZES = (3, 4, 5, 6, 8, 10, 15, 20, 30, 40, 80, 160)


def best_two_means(x, rng, n_dirs=40, lloyd=10):
    """W_2: the within sum of squares of the best 2-means split found for the points x (n, d)."""
    n, d = x.shape
    xc = x - x.mean(0)
    dirs = np.vstack([np.linalg.svd(xc, full_matrices=False)[2][:1], rng.normal(size=(n_dirs, d))])
    best, best_lab = np.inf, None
    for u in dirs:
        o = np.argsort(x @ u)
        cs = np.cumsum(x[o], 0)[:-1]                     # (n − 1, d): sums of the first m points
        cs2 = np.cumsum(np.sum(x[o] ** 2, 1))[:-1]
        m = np.arange(1, n)
        tot, tot2 = cs[-1] + x[o[-1]], cs2[-1] + np.sum(x[o[-1]] ** 2)
        w = cs2 - np.sum(cs ** 2, 1) / m + (tot2 - cs2) - np.sum((tot - cs) ** 2, 1) / (n - m)
        j = int(np.argmin(w))
        if w[j] < best:
            best = w[j]
            best_lab = np.zeros(n, bool)
            best_lab[o[j + 1:]] = True
    lab = best_lab
    for _ in range(lloyd):
        a, b = x[~lab].mean(0), x[lab].mean(0)
        new = np.sum((x - b) ** 2, 1) < np.sum((x - a) ** 2, 1)
        if new.all() or (~new).all() or (new == lab).all():
            break
        lab = new
    w = np.sum((x[~lab] - x[~lab].mean(0)) ** 2) + np.sum((x[lab] - x[lab].mean(0)) ** 2)
    return min(best, w)


def ratio_quantile(d, n, draws, rng, q=0.95):
    r = np.empty(draws)
    for i in range(draws):
        x = rng.normal(size=(n, d))
        w1 = np.sum((x - x.mean(0)) ** 2)
        r[i] = (w1 / (n - 1)) / (best_two_means(x, rng) / (n - 2))
    return float(np.quantile(r, q))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"# 95 % quantile of σ̂²_1/σ̂²_2, {args.draws} draws per cell; n = {SIZES}")
    for d in DIMS:
        row = [ratio_quantile(d, n, args.draws, rng) for n in SIZES]
        print(f"    {d}: ({', '.join(f'{v:.3g}' for v in row)}),", flush=True)


if __name__ == "__main__":
    main()
