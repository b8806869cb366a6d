"""The memory contract of checkpointing: thunderfx's checkpointed network must not save for backward much more than
eager's, where its checkpoints free less than eager's do (docs/oracle.md, "Memory contract").

Shared by the harness and every repro.py: this module's source is copied verbatim into each repro (after
`fuzz.judge.parity`'s). It must import nothing.
"""

# A failure saves more than MEMORY_RATIO x what eager's checkpointed network saves, and more than the floor beyond it.
# The floor is 64 KiB (the figure for networks of real sizes) or, in the campaign's small networks, the
# largest single tensor eager saves without checkpoints, whichever is smaller: thunder may keep a tensor or two that
# eager does not (docs/oracle.md, "Memory contract", has the measurements).
MEMORY_RATIO = 1.5
MEMORY_FLOOR_BYTES = 64 * 1024
# ... where eager's checkpoints free more than the floor (bytes saved without minus with checkpoints) and thunderfx's
# free less than this share of that: a region that stopped being checkpointed frees nothing, while thunder saving
# more than eager everywhere (float32 copies of float16 activations outside the regions) is not the checkpoints' doing.
MEMORY_FREED_SHARE = 0.5


def saves_too_much(thunder, eager, eager_plain, largest_activation):
    """The tests that need no thunderfx run without checkpoints: thunderfx's checkpointed network (``thunder`` bytes
    saved for backward) over the ratio and the floor beyond eager's (``eager``), where eager's checkpoints free more
    than the floor (``eager_plain``: eager's bytes without checkpoints)."""
    floor = min(MEMORY_FLOOR_BYTES, largest_activation)
    return thunder > MEMORY_RATIO * eager and thunder - eager > floor and eager_plain - eager > floor


def memory_failure(thunder, eager, thunder_plain, eager_plain, largest_activation):
    """The memory failure in words (None: the contract holds), from the bytes thunderfx and eager save for backward
    with checkpoints (``thunder``, ``eager``) and without (``thunder_plain``, ``eager_plain``)."""
    if not saves_too_much(thunder, eager, eager_plain, largest_activation):
        return None
    freed, eager_freed = thunder_plain - thunder, eager_plain - eager
    if freed >= MEMORY_FREED_SHARE * eager_freed:
        return None
    return (
        f"thunderfx's checkpoints free less than {MEMORY_FREED_SHARE:.0%} of what eager's free, and its checkpointed "
        f"network saves more than {MEMORY_RATIO:g}x eager's for backward\n"
        f"thunderfx's checkpointed network saves {thunder} B for backward where eager's saves {eager} B "
        f"({thunder / eager if eager else float('inf'):.3g}x); its checkpoints free {freed} B where eager's free "
        f"{eager_freed} B (without checkpoints thunderfx saves {thunder_plain} B, eager {eager_plain} B)"
    )
