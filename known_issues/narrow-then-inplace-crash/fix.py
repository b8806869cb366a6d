"""Backport of Lightning-AI/lightning-thunder#2716's update_aliases hunk: an alias of another numel is not reshaped into."""

WHY = (
    "thunder's replace_args_with_alias_map (thunder/core/update_aliases.py) rewrites every argument that shares "
    "storage with another as a reshape of the first; a narrow of a tensor shares its storage with fewer elements, "
    "so the reshape fails ('Attempting to reshape a.shape=(1, 2) to shape=(1, 1)'). Upstream skips aliases whose "
    "numel differs (PR 2716, first good version 0.2.7.dev20251123 by bisect); the fix is that hunk."
)
BACKPORT = "Lightning-AI/lightning-thunder#2716 (93aa254: thunder/core/update_aliases.py)"
EDITS = [
    Edit(
        "thunder.core.update_aliases",
        old="""            arg_to_replace = flat_args[idx]
""",
        new="""            arg_to_replace = flat_args[idx]
            # Skip aliases with different numel (e.g., complex tensor and its real view)
            # These share storage but have incompatible element counts
            if arg.numel != arg_to_replace.numel:
                continue
""",
    )
]
THUNDER_TESTS = ["thunder/tests/test_inplace_copy.py", "thunder/tests/test_update_aliases.py"]
