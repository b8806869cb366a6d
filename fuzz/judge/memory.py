"""The memory contract of checkpointing, judged by mechanism: every checkpoint dynamo captured is a region thunder
recomputes in backward, its intermediates not saved for backward, as read from thunder's own traces
(`fuzz.run.regions`; docs/oracle.md, "Memory contract"). Bytes thunder saves beyond eager's for other reasons (a
region's outputs, which thunder keeps by design; float32 copies of low-precision activations) are shown, not failed.

Shared by the harness and every repro.py: this module's source is copied verbatim into each repro (after
`fuzz.run.regions`'s). It must import nothing.
"""


def memory_failure(regions) -> str | None:
    """The memory failure in words of a `fuzz.run.regions.RegionReport` (None: every region is checkpointed,
    as its selective policy asks where it has one)."""
    lines = []
    if lost := regions.lost():
        lines.append(
            f"{lost} of the {regions.captured} checkpoints dynamo captured are no checkpoint in thunder's traces "
            "(nor a fallback's): their intermediates are saved for backward, not recomputed"
        )
    for region in regions.not_recomputed():
        saved = ", ".join(f"{name} ({nbytes} B)" for name, nbytes in region.saved_intermediates.items())
        lines.append(
            f"region {region.node} ({', '.join(region.ops)}): thunderfx's forward saves its intermediates {saved} for "
            f"backward; recomputed in backward: {', '.join(region.recomputed) or 'nothing'}"
        )
    for region in regions.policy_ignored():
        lines.append(
            f"region {region.node} ({', '.join(region.ops)}): its selective policy (context_fn) asks to save the "
            f"matmuls (MUST_SAVE); thunderfx's backward recomputes {', '.join(region.recomputed)}"
        )
    if not lines:
        return None
    what = "a checkpointed region is not recomputed in backward under thunderfx"
    if not regions.not_recomputed() and not regions.lost():
        what = "a selective checkpoint's policy is not honoured under thunderfx"
    return "\n".join([what, *lines, saved_by_reason(regions)])


def saved_by_reason(regions) -> str:
    """What thunderfx's forward saves for backward, by reason, in words."""
    reasons = ", ".join(f"{reason} {nbytes} B" for reason, nbytes in sorted(regions.saved.items())) or "nothing"
    return f"thunderfx saves for backward: {reasons}"
