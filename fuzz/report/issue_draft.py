"""A draft of a thunder bug report (issue.md) for a failure, following thunder's bug template: title, what happens and
what should, the upstream.py code, the numbers measured, versions, environment, related upstream items."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

from fuzz.judge.failures import ParityFailure

_EXPECTED = {
    "thunder-crash": "thunderfx runs the network, as eager PyTorch does.",
    "timeout": "thunderfx compiles and runs the network in about the time eager's compile of a like network takes.",
    "forward-divergence": "thunderfx's output equals eager's within `torch.testing.assert_close` tolerances.",
    "gradient-divergence": "thunderfx's gradients equal eager's within `torch.testing.assert_close` tolerances.",
    "state-divergence": "thunderfx updates the module's buffers as eager does.",
    "accuracy": "thunderfx's error against a float64 run is about eager's own.",
    "memory": "thunderfx recomputes each checkpointed region in backward: its intermediates are not saved for it.",
}


@dataclass
class Draft:
    """What an issue draft says; ``versions``: thunder version -> upstream.py's exit status there."""

    title: str
    description: str
    failure: ParityFailure
    upstream_source: str
    versions: dict[str, int] = field(default_factory=dict)
    first_bad: str | None = None
    fixed_in: str | None = None
    matches: list[str] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    origin: str = ""  # where the finding lives (a registry entry, a run's cluster)
    fix: tuple[str, str] | None = None  # a candidate fix: why, and its unified diff against the installed thunder


def issue_markdown(draft: Draft) -> str:
    """The draft's issue.md text."""
    import thunder
    import torch

    failure = draft.failure
    measured = "\n".join(str(failure).splitlines()[:6])
    exits = {0: "runs clean (exit 0)", 1: "**shows the bug** (exit 1)", 2: "could not run (exit 2)"}
    versions = "\n".join(
        f"- lightning-thunder {v}: {exits.get(code, f'exit {code}')}" for v, code in draft.versions.items()
    )
    bisected = []
    if draft.first_bad:
        bisected.append(f"first version showing it: {draft.first_bad}")
    if draft.fixed_in:
        bisected.append(f"first version without it: {draft.fixed_in}")
    references = [f"- same bug: {m}" for m in draft.matches] + [f"- related: {r}" for r in draft.related]
    checkpoint_specific = failure.triage == "checkpoint-specific"
    return f"""# [thunderfx] {draft.title}

## 🐛 Bug

{draft.description}

{
        "Only with `torch.utils.checkpoint`: the same network without checkpoints runs right."
        if checkpoint_specific
        else "Not specific to activation checkpointing (triage: " + failure.triage + ")."
    }

### To Reproduce

```python
{draft.upstream_source.rstrip()}
```

`python upstream.py` exits 1 while the bug shows, 0 once it is gone, 2 if it cannot run.

### Expected behavior

{_EXPECTED.get(failure.failure_class, "thunderfx computes what eager PyTorch computes.")}

### Measured

```
{measured}
```

### Environment

{versions or "- not run yet"}
{("- bisected over thunder nightlies: " + ", ".join(bisected)) if bisected else ""}
- torch {torch.__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}; device: CPU
  (lightning-thunder {thunder.__version__} installed when this draft was written)

### Additional context

Found by a property-based fuzz harness of activation-checkpointed networks under ThunderFX ({draft.origin}).
{chr(10).join(references) if references else "No upstream issue or pull request found."}
{_candidate_fix(draft.fix)}"""


def _candidate_fix(fix: tuple[str, str] | None) -> str:
    if fix is None:
        return ""
    why, diff = fix
    hunks = diff.rstrip("\n")  # (not rstrip(): a trailing blank context line is a lone space, the hunk counts it)
    return f"""
### Candidate fix

{why}

```diff
{hunks}
```
"""
