"""Small module classes that generated networks use beyond `torch.nn`.

Their source is copied verbatim into every generated network and repro, so each class must
depend on nothing but `torch` and `nn`.
"""

from torch import nn


class Residual(nn.Module):
    """``x + body(x)``, the body being the given modules in sequence."""

    def __init__(self, *body: nn.Module) -> None:
        super().__init__()
        self.body = nn.Sequential(*body)

    def forward(self, x):
        return x + self.body(x)
