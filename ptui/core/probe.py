"""Minibatch probe, installed inside the user's unmodified training script.

It registers torch's global optimizer-step post-hook; every optimizer.step() is one minibatch.
On CUDA the hook synchronises first, so the timestamp marks the end of the GPU work.  Each step is
written as one line, ``S <CLOCK_MONOTONIC seconds>``, to the pipe whose fd ptui passes in
PTUI_PROBE_FD.  The cost per step is one synchronise (GPU only) and one small write.
"""
from __future__ import annotations

import os
import time

_fd: int | None = None


def _send(line: str) -> None:
    global _fd
    if _fd is None:
        return
    try:
        os.write(_fd, line.encode())
    except OSError:                     # ptui went away: stop probing, keep training
        _fd = None


def install() -> None:
    global _fd
    _fd = int(os.environ["PTUI_PROBE_FD"])
    _send(f"H {os.getpid()} {time.monotonic():.6f}\n")
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    cuda = torch.cuda.is_available()

    def hook(optimizer, args, kwargs) -> None:
        if cuda and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        _send(f"S {time.monotonic():.6f}\n")

    register_optimizer_step_post_hook(hook)
    _send(f"D {'cuda' if cuda else 'cpu'}\n")
