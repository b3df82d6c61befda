"""Notebook 06 (why divide by sqrt(d_k)): the computations behind its demos and widget, and
the figures that draw them.

Every compute function is pure and seeded: the same arguments give the same numbers. Queries
and keys have independent standard-normal entries, the assumption of the variance argument.
Gradients are taken with autograd, so nothing here is an exercise's answer.
"""
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from course_utils.training import one_thread

__all__ = [
    "MODES", "entropy", "measure_score_variance", "saturation_curve",
    "projection_gradient_stats", "saturation_panel", "draw_score_variance",
    "draw_saturation_curve", "draw_projection_gradients", "draw_saturation_panel",
]

# The two ways of turning raw scores q.k into logits that the demos compare.
MODES = ("unscaled", "scaled")


def _divisor(mode, d_k, temperature=1.0):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return (math.sqrt(d_k) if mode == "scaled" else 1.0) * temperature


def entropy(weights, dim=-1):
    """Entropy in nats of probability distributions along `dim` (0 * log 0 counts as 0).

    It is log(n) for n equal weights and 0 when one weight is 1: a measure of how spread out
    the attention is.
    """
    w = torch.as_tensor(weights, dtype=torch.float64)
    return -(w * torch.log(w.clamp_min(1e-300))).sum(dim=dim)


@one_thread()
def measure_score_variance(d_ks, n_pairs=4000, seed=0):
    """Measured variance of q.k and of q.k / sqrt(d_k) for each d_k.

    For every d_k, draws n_pairs independent pairs (q, k) with standard-normal entries.
    Returns a dict of float64 NumPy arrays of shape (len(d_ks),): "d_k", "raw", "scaled".
    """
    generator = torch.Generator().manual_seed(seed)
    raw, scaled = [], []
    for d_k in d_ks:
        q = torch.randn(n_pairs, d_k, generator=generator, dtype=torch.float64)
        k = torch.randn(n_pairs, d_k, generator=generator, dtype=torch.float64)
        scores = torch.einsum("nd,nd->n", q, k)
        raw.append(float(torch.var(scores)))
        scaled.append(float(torch.var(scores / math.sqrt(d_k))))
    return {"d_k": np.asarray(d_ks, dtype=np.float64), "raw": np.array(raw), "scaled": np.array(scaled)}


@one_thread()
def saturation_curve(scales, n=8, seed=0):
    """What happens to one softmax as its logits are multiplied by a growing factor.

    Draws one standard-normal logit vector z of length n and, for each factor c in `scales`,
    computes s = softmax(c z): its largest weight, its entropy (nats) and the Frobenius norm of
    the Jacobian d s / d(c z) (taken by autograd). Returns a dict of NumPy arrays "scale",
    "max_weight", "entropy", "jacobian_norm", each of shape (len(scales),), plus "n".
    """
    generator = torch.Generator().manual_seed(seed)
    z = torch.randn(n, generator=generator, dtype=torch.float64)
    max_weight, ent, norm = [], [], []
    for c in scales:
        logits = c * z
        s = torch.softmax(logits, dim=-1)
        jac = torch.autograd.functional.jacobian(lambda t: torch.softmax(t, dim=-1), logits)
        max_weight.append(float(s.max()))
        ent.append(float(entropy(s)))
        norm.append(float(torch.linalg.matrix_norm(jac)))
    return {"scale": np.asarray(scales, dtype=np.float64), "max_weight": np.array(max_weight),
            "entropy": np.array(ent), "jacobian_norm": np.array(norm), "n": n}


@one_thread()
def projection_gradient_stats(d_ks, n_tokens=16, n_trials=6, seed=0, dead_below=1e-3):
    """How much gradient each token sends to W_Q and W_K, with and without dividing by sqrt(d_k).

    One self-attention layer of width d = d_k: X (n_tokens, d) standard normal; W_Q, W_K, W_V
    with N(0, 1/d) entries, so q and k have unit-variance entries; logits = Q K^T / divisor;
    loss = sum(softmax(logits) V * G) for a standard-normal G. The gradient of W_Q is a sum over
    tokens, dL/dW_Q = sum_i x_i (dL/dq_i)^T; token i contributes a matrix of norm
    ||x_i|| ||dL/dq_i|| (likewise for W_K with dL/dk_i).
    Returns a dict with "d_k" and, for each mode and W in ("W_Q", "W_K"), NumPy arrays of shape
    (len(d_ks),): "<mode>_<W>_median", the median contribution over all tokens and trials, and
    "<mode>_<W>_dead", the share of contributions below `dead_below` (tokens that teach W nothing).
    """
    generator = torch.Generator().manual_seed(seed)
    keys = [f"{mode}_{w}" for mode in MODES for w in ("W_Q", "W_K")]
    out = {"d_k": np.asarray(d_ks, dtype=np.float64)}
    out.update({f"{key}_{stat}": [] for key in keys for stat in ("median", "dead")})
    for d in d_ks:
        contributions = {key: [] for key in keys}
        for _ in range(n_trials):
            x = torch.randn(n_tokens, d, generator=generator, dtype=torch.float64)
            w_q, w_k, w_v = (torch.randn(d, d, generator=generator, dtype=torch.float64) / math.sqrt(d)
                             for _ in range(3))
            target = torch.randn(n_tokens, d, generator=generator, dtype=torch.float64)
            for mode in MODES:
                q = (x @ w_q).requires_grad_(True)
                k = (x @ w_k).requires_grad_(True)
                loss = (torch.softmax(q @ k.T / _divisor(mode, d), dim=-1) @ (x @ w_v) * target).sum()
                loss.backward()
                x_norm = x.norm(dim=-1)
                contributions[f"{mode}_W_Q"] += (x_norm * q.grad.norm(dim=-1)).tolist()
                contributions[f"{mode}_W_K"] += (x_norm * k.grad.norm(dim=-1)).tolist()
        for key in keys:
            values = np.array(contributions[key])
            out[f"{key}_median"].append(float(np.median(values)))
            out[f"{key}_dead"].append(float(np.mean(values < dead_below)))
    return {key: np.asarray(value) for key, value in out.items()}


@one_thread()
def saturation_panel(d_k, temperature=1.0, n_keys=10, n_hist=3000, seed=0):
    """Everything the widget draws for one d_k and temperature, for both modes.

    One query q and n_keys keys with standard-normal entries (seeded, so moving a slider
    changes the size of the vectors and the temperature, not the luck of the draw), plus
    n_hist independent (q, k) pairs for the histogram of logits.
    For each mode in MODES, logits = q.k / divisor with divisor = temperature (unscaled) or
    sqrt(d_k) * temperature (scaled). Returns {mode: {"logits_hist" (n_hist,), "logits"
    (n_keys,), "weights" (n_keys,), "entropy", "grad_norm", "divisor"}} with NumPy arrays and
    floats; "grad_norm" is ||d weights / d q||_F, how strongly the weights react to the query
    (and so the size of the gradient that can reach W_Q). Also "d_k", "temperature",
    "max_entropy" = log(n_keys).
    """
    if d_k < 1 or temperature <= 0:
        raise ValueError("d_k must be >= 1 and temperature > 0")
    generator = torch.Generator().manual_seed(seed)
    big = 1024  # draw at the largest size once and slice, so d_k changes only the size
    q = torch.randn(big, generator=generator, dtype=torch.float64)[:d_k]
    keys = torch.randn(n_keys, big, generator=generator, dtype=torch.float64)[:, :d_k]
    hist_q = torch.randn(n_hist, d_k, generator=generator, dtype=torch.float64)
    hist_k = torch.randn(n_hist, d_k, generator=generator, dtype=torch.float64)
    raw_hist = (hist_q * hist_k).sum(dim=-1)
    panel = {"d_k": d_k, "temperature": temperature, "max_entropy": math.log(n_keys)}
    for mode in MODES:
        divisor = _divisor(mode, d_k, temperature)

        def weights_of(query):
            return torch.softmax(keys @ query / divisor, dim=-1)

        w = weights_of(q)
        jac = torch.autograd.functional.jacobian(weights_of, q)
        panel[mode] = {
            "divisor": divisor,
            "logits_hist": (raw_hist / divisor).numpy(),
            "logits": (keys @ q / divisor).numpy(),
            "weights": w.numpy(),
            "entropy": float(entropy(w)),
            "grad_norm": float(torch.linalg.matrix_norm(jac)),
        }
    return panel


# ----------------------------------------------------------------------------------------
# Figures

def draw_score_variance(measured, ax=None):
    """Measured var(q.k) and var(q.k / sqrt(d_k)) against d_k, log-log, with the line y = d_k."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    d_k = measured["d_k"]
    ax.loglog(d_k, measured["raw"], "o", label="var(q.k), measured")
    ax.loglog(d_k, d_k, "--", color="gray", label="theory: d_k")
    ax.loglog(d_k, measured["scaled"], "s", label="var(q.k / sqrt(d_k)), measured")
    ax.axhline(1.0, linestyle=":", color="gray", label="theory: 1")
    ax.set_xscale("log", base=2)
    ax.set_title("Variance of the attention score")
    ax.set_xlabel("d_k (features per query and key)")
    ax.set_ylabel("variance")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def draw_saturation_curve(curve, axes=None):
    """Entropy and Jacobian norm of softmax(c z) against the logit scale c (two panels)."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(9, 3.3), layout="constrained")
    c = curve["scale"]
    axes[0].semilogx(c, curve["entropy"], "o-", label="entropy of the weights")
    axes[0].axhline(math.log(curve["n"]), linestyle="--", color="gray", label=f"log {curve['n']} (uniform)")
    axes[0].semilogx(c, curve["max_weight"], "s-", label="largest weight")
    axes[0].set_title("The softmax saturates")
    axes[0].set_xlabel("logit scale c (logits = c z)")
    axes[0].set_ylabel("entropy (nats) / weight")
    axes[0].legend(fontsize=8)
    axes[1].loglog(c, curve["jacobian_norm"], "o-", color="tab:red")
    axes[1].set_title("... and its gradient vanishes")
    axes[1].set_xlabel("logit scale c (logits = c z)")
    axes[1].set_ylabel("||d softmax / d logits||_F")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    return axes


def draw_projection_gradients(stats, axes=None):
    """Median per-token gradient contribution to W_Q and W_K, and the share of tokens that
    contribute (almost) nothing, against d_k, scaled vs unscaled (two panels)."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    d_k = stats["d_k"]
    colors = {"scaled": "tab:blue", "unscaled": "tab:red"}
    for mode in MODES:
        for name, marker, style in (("W_Q", "o", "-"), ("W_K", "s", "--")):
            key = f"{mode}_{name}"
            axes[0].loglog(d_k, stats[f"{key}_median"], marker=marker, linestyle=style,
                           color=colors[mode], label=f"{mode}, {name}")
            axes[1].plot(d_k, 100 * stats[f"{key}_dead"], marker=marker, linestyle=style,
                         color=colors[mode], label=f"{mode}, {name}")
    axes[0].set_title("Typical gradient a token sends to W_Q, W_K")
    axes[0].set_ylabel("median ||x_i|| ||dL/dq_i|| (or dk_i)")
    axes[1].set_title("Tokens that send (almost) no gradient")
    axes[1].set_ylabel("% of tokens with contribution < 1e-3")
    axes[1].set_xscale("log", base=2)
    axes[1].set_ylim(-5, 105)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return axes


def draw_saturation_panel(panel, fig=None):
    """The widget's figure: for each mode a histogram of logits and one query's weights."""
    if fig is None:
        fig = plt.figure(figsize=(10, 5.6), layout="constrained")
    axes = fig.subplots(2, 2)
    for column, mode in enumerate(MODES):
        data = panel[mode]
        hist_ax, bar_ax = axes[0, column], axes[1, column]
        logits = data["logits_hist"]
        hist_ax.hist(logits, bins=60, color="tab:blue" if mode == "scaled" else "tab:red", alpha=0.8)
        label = "q.k" if mode == "unscaled" else "q.k / sqrt(d_k)"
        if panel["temperature"] != 1.0:
            label += " / T"
        hist_ax.set_title(f"{mode}: logits {label}, std {logits.std():.2f}")
        hist_ax.set_xlabel("logit")
        hist_ax.set_ylabel("count")
        weights = data["weights"]
        bar_ax.bar(range(len(weights)), weights, color="tab:blue" if mode == "scaled" else "tab:red")
        bar_ax.set_ylim(0, 1.05)
        bar_ax.set_title(
            f"one query: entropy {data['entropy']:.2f} of {panel['max_entropy']:.2f} nats, "
            f"||dw/dq|| {data['grad_norm']:.2g}", fontsize=9)
        bar_ax.set_xlabel("key")
        bar_ax.set_ylabel("attention weight")
    fig.suptitle(f"d_k = {panel['d_k']}, temperature T = {panel['temperature']:g}")
    return fig
