"""Training a 3-layer MLP with every matrix product emulated, backward pass included.

The model, the loss and the SGD step are plain JAX. The gradient is
`jax.grad(jaxemu.emulate(loss, scheme=s))`: the forward products and the
products of the backward pass (x^T @ delta, delta @ W^T) all run through the
scheme. Each scheme trains from the same initial weights on the same data and
batches as an FP32 run, so the loss curves can be compared step by step.

What it shows: per scheme, the final training loss, its relative difference
from the FP32 run's final loss, the largest relative difference along the
curve, and the median time of one training step.

Deep-learning training is the second application family of the emulation
papers: MixPert (LCTES 2024) evaluates its INT8-tensor-core FP32 emulation on
"real-world scientific computing and deep learning applications", and APE
(Ma et al., ICS 2022) on applications beyond GEMM and convolution.

    python examples/mlp.py --steps 300 --schemes fp32,bf16,bf16x3,bf16x6,fp16x3
    python examples/mlp.py --task classification --optimizer adam   # adam needs optax
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxemu
from jaxemu.testing import median_time

DEFAULT_SCHEMES = "fp32,bf16,bf16x3,bf16x6,fp16x3"


# -- the model: plain JAX -----------------------------------------------------

def init_params(key, sizes):
    params = []
    for k, (m, n) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((jax.random.normal(k, (m, n), jnp.float32) * np.sqrt(1.0 / m).astype(np.float32),
                       jnp.zeros((n,), jnp.float32)))
    return params


def mlp(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, y, task="regression"):
    out = mlp(params, x)
    if task == "regression":
        return jnp.mean((out - y) ** 2)
    logp = jax.nn.log_softmax(out)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def make_train_step(scheme, task, lr, optimizer="sgd"):
    """One training step, jitted: (params, opt_state, x, y) -> (params, opt_state, loss).
    The loss and its gradient go through jaxemu.emulate."""
    value_and_grad = jax.value_and_grad(jaxemu.emulate(loss, scheme=scheme))
    if optimizer == "sgd":  # hand-written SGD
        def train_step(params, opt_state, x, y):
            l, g = value_and_grad(params, x, y, task)
            params = jax.tree_util.tree_map(lambda p, gp: p - lr * gp, params, g)
            return params, opt_state, l
        return jax.jit(train_step), lambda params: ()
    import optax  # optional: pip install optax
    opt = getattr(optax, optimizer)(lr)

    def train_step(params, opt_state, x, y):
        l, g = value_and_grad(params, x, y, task)
        updates, opt_state = opt.update(g, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, l
    return jax.jit(train_step), opt.init


def make_fit(task, lr, optimizer="adam"):
    """The whole training run as one function, fit(params, xs, ys) ->
    (params, losses): a lax.scan of optax steps over the batches xs[i], ys[i].
    One jitted call trains, so it can be timed as a unit and emulated as a
    unit (`jax.jit(jaxemu.emulate(fit, scheme=s))`)."""
    import optax  # optional: pip install optax
    opt = getattr(optax, optimizer)(lr)

    def fit(params, xs, ys):
        def one(carry, batch):
            params, state = carry
            l, g = jax.value_and_grad(loss)(params, *batch, task)
            updates, state = opt.update(g, state, params)
            return (optax.apply_updates(params, updates), state), l
        (params, _), losses = jax.lax.scan(one, (params, opt.init(params)), (xs, ys))
        return params, losses
    return fit


# -- data and metrics ---------------------------------------------------------

def make_data(n, d_in, task, seed=0, classes=8):
    """Inputs x ~ N(0, 1) and targets from a fixed random 'teacher' MLP:
    its outputs plus noise (regression) or its argmax (classification)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_in)).astype(np.float32)
    d_out = 1 if task == "regression" else classes
    w1 = rng.standard_normal((d_in, 32)) / np.sqrt(d_in)
    w2 = rng.standard_normal((32, d_out)) * 2.0 / np.sqrt(32)
    t = np.tanh(x @ w1 * 2.0) @ w2
    if task == "regression":
        y = (t + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)
    else:
        y = np.argmax(t, axis=1).astype(np.int32)
    return x, y, d_out


def train(scheme, x, y, d_out, task, steps, batch, lr, hidden, optimizer, seed):
    """Train from a fixed initialization with a fixed batch order.
    Returns (loss curve as a numpy array, the jitted step, its last arguments)."""
    train_step, opt_init = make_train_step(scheme, task, lr, optimizer)
    params = init_params(jax.random.PRNGKey(seed), [x.shape[1], hidden, hidden, d_out])
    opt_state = opt_init(params)
    idx = np.random.default_rng(seed + 1).integers(0, x.shape[0], (steps, batch))
    xs, ys = x[idx], y[idx]  # every batch, gathered up front on the host
    curve = []
    for xb, yb in zip(xs, ys):
        params, opt_state, l = train_step(params, opt_state, xb, yb)
        curve.append(l)
    return np.asarray(jax.device_get(curve), np.float64), train_step, (params, opt_state, xb, yb)


def run(scheme="bf16x6", task="regression", n=4096, d_in=16, hidden=128, steps=200, batch=256,
        lr=None, optimizer="sgd", seed=0, reference=None):
    """Train with `scheme` and with "fp32" (same seed). Returns a dict:
    final_loss, final_loss_fp32, final_rel (|final - final_fp32| / final_fp32),
    curve_max_rel (largest relative difference along the two curves), initial_loss,
    step_time_s, curve, and "_ref" (the FP32 curve; pass back as reference=)."""
    if lr is None:
        lr = 0.1 if optimizer == "sgd" else 3e-3
    x, y, d_out = make_data(n, d_in, task, seed)
    cfg = (x, y, d_out, task, steps, batch, lr, hidden, optimizer, seed)
    if reference is None:
        reference = train("fp32", *cfg)[0]
    curve, train_step, last = train(scheme, *cfg)
    rel = np.abs(curve - reference) / np.abs(reference)
    return dict(scheme=str(scheme), final_loss=float(curve[-1]), final_loss_fp32=float(reference[-1]),
                final_rel=float(rel[-1]), curve_max_rel=float(np.max(rel)),
                initial_loss=float(curve[0]), step_time_s=median_time(lambda: train_step(*last), 20),
                curve=curve, _ref=reference)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=["regression", "classification"], default="regression")
    p.add_argument("--n", type=int, default=4096, help="training examples (default 4096)")
    p.add_argument("--d-in", type=int, default=16, help="input features (default 16)")
    p.add_argument("--hidden", type=int, default=128, help="width of the two hidden layers (default 128)")
    p.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default 256)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 0.1 sgd, 3e-3 optax)")
    p.add_argument("--optimizer", default="sgd",
                   help="'sgd' (hand-written) or an optax optimizer name such as adam (needs optax)")
    p.add_argument("--schemes", default=DEFAULT_SCHEMES, help=f"comma list (default {DEFAULT_SCHEMES})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default=None, help="PNG path: loss curves and their distance from FP32's")
    args = p.parse_args(argv)
    if args.optimizer != "sgd":
        try:
            import optax  # noqa: F401
        except ImportError:
            p.error(f"--optimizer {args.optimizer} needs optax (pip install optax); or use --optimizer sgd")

    print(f"MLP {args.d_in}-{args.hidden}-{args.hidden}-out, {args.task}, {args.optimizer}, "
          f"{args.steps} steps of batch {args.batch}, on {jax.devices()[0].platform}")
    marks = sorted({0, args.steps // 10, args.steps // 2, args.steps - 1})
    print(f"{'scheme':<14}" + "".join(f"{f'loss@{i + 1}':>12}" for i in marks)
          + f"{'final vs FP32':>15}{'max along curve':>17}{'step time':>12}")
    ref, rows = None, []
    for s in args.schemes.split(","):
        r = run(scheme=s.strip(), task=args.task, n=args.n, d_in=args.d_in, hidden=args.hidden,
                steps=args.steps, batch=args.batch, lr=args.lr, optimizer=args.optimizer,
                seed=args.seed, reference=ref)
        ref = r["_ref"]
        rows.append(r)
        print(f"{r['scheme']:<14}" + "".join(f"{r['curve'][i]:>12.5f}" for i in marks)
              + f"{r['final_rel']:>15.2e}{r['curve_max_rel']:>17.2e}{r['step_time_s'] * 1e3:>10.2f}ms")
    if args.plot:
        plot_curves(rows, args.plot, f"MLP {args.d_in}-{args.hidden}-{args.hidden}-out, {args.task}")
    return rows


def plot_curves(rows, path, title):
    """Loss per step, and |loss - FP32's loss| / FP32's loss per step, one line per scheme."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in rows:
        steps = np.arange(1, len(r["curve"]) + 1)
        ax1.semilogy(steps, r["curve"], lw=1, label=r["scheme"])
        rel = np.abs(r["curve"] - r["_ref"]) / np.abs(r["_ref"])
        ax2.semilogy(steps, np.maximum(rel, 1e-10), ".", ms=2.5, label=r["scheme"])  # 0 (identical) drawn at 1e-10
    ax1.set_title(f"{title}: training loss")
    ax2.set_title("relative distance from the FP32 run's loss (floor 1e-10)")
    for ax in (ax1, ax2):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
