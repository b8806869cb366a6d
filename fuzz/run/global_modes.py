"""The process's global grad, inference and autocast modes, kept across a run of a network (`global_modes_kept`)."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

import torch


class ModesLeft(RuntimeError):
    """A run left the global modes changed, and setting them back failed."""


def _clear_frames(error: BaseException | None) -> None:
    """Clear the locals of every frame of ``error``'s traceback and of the exceptions it was raised from or in,
    the innermost frame of the innermost exception first."""
    frames, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        tb, chain = error.__traceback__, []
        while tb is not None:
            chain.append(tb.tb_frame)
            tb = tb.tb_next
        frames += chain  # (the exception it came from: its frames are the deeper ones)
        error = error.__cause__ or error.__context__
    for frame in reversed(frames):
        with contextlib.suppress(RuntimeError):  # (a frame still running)
            frame.clear()


def _dispatch_keys() -> tuple[torch._C.DispatchKeySet, torch._C.DispatchKeySet]:
    """The thread's locally included and excluded dispatch keys."""
    return torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set()


def _set_dispatch_keys(keys: tuple[torch._C.DispatchKeySet, torch._C.DispatchKeySet]) -> None:
    included, excluded = keys
    for key in torch._C.DispatchKey.__members__.values():
        with contextlib.suppress(RuntimeError):  # (a key that is no functionality key of its own)
            torch._C._dispatch_tls_set_dispatch_key_included(key, included.has(key))
            torch._C._dispatch_tls_set_dispatch_key_excluded(key, excluded.has(key))


def _global_modes() -> tuple[bool, bool, bool]:
    return torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu")


@contextlib.contextmanager
def global_modes_kept() -> Iterator[None]:
    """The block's run may leave a grad-mode region of the network entered: an exception raised inside a network's
    ``with torch.inference_mode()`` (thunder failing as it traces one) keeps the mode's guard alive in its
    traceback's frames, which a failure keeps (`fuzz.judge.failures.ThunderCrash`), and the next example would run in
    inference mode. Those frames' locals are cleared, innermost first (the guards then exit in the order they were
    entered backwards), and grad and autocast modes set back."""
    before, keys = _global_modes(), _dispatch_keys()
    try:
        yield
    finally:
        if _global_modes() != before:
            _clear_frames(sys.exc_info()[1])
            gc.collect()
            # Each guard, exiting, puts back the dispatch keys of when it was entered (inside dynamo's tracing, with
            # its Python dispatcher on): the thread's keys are set back to what they were before the block.
            _set_dispatch_keys(keys)
            torch.set_grad_enabled(before[0])
            torch.set_autocast_enabled("cpu", before[2])
            if _global_modes() != before:
                raise ModesLeft(
                    f"the global grad modes (grad, inference, autocast) {before} were left as {_global_modes()}"
                )
