"""The verdict the `compare_*_torch.py` scripts share: memctl's first-step loss and gradient
norms (from `memctl bench … --dump`) against PyTorch's for the same weights and batch."""
import sys


def report(dump, loss, params):
    """Prints both losses and every parameter's gradient norms (`params`: memctl's parameter
    name → the PyTorch tensor, after `loss.backward()`); exits 1 on a mismatch."""
    print(f"loss: memctl {dump['loss']:.7f}  torch {loss.item():.7f}  "
          f"rel.diff {abs(dump['loss'] - loss.item()) / abs(loss.item()):.2e}")
    worst = 0.0
    for name, p in sorted(params.items()):
        g = 0.0 if p.grad is None else p.grad.norm().item()
        m = dump["grad_norms"][name]
        rel = abs(m - g) / max(g, 1e-12)
        worst = max(worst, rel if g > 1e-9 else abs(m - g))
        print(f"  |grad| {name:32s} memctl {m:.6e}  torch {g:.6e}  rel.diff {rel:.1e}")
    print(f"worst gradient-norm relative difference: {worst:.2e}")
    sys.exit(0 if worst < 1e-3 and abs(dump['loss'] - loss.item()) < 1e-5 * abs(loss.item()) + 1e-6 else 1)
