"""Clocks for the instrument: where a duration starts and ends, and when it is known.

``WallClock`` reads the host's monotonic clock: right on CPU, where the host does the
work. On a GPU the host only queues kernels, so ``obsgen.instrument.torch_hooks.CudaClock``
records CUDA events on the current stream instead and resolves their elapsed time later,
once the GPU has passed them (no synchronisation in the training loop).

A clock measures *sums of intervals*: ``measure(pairs, observe)`` calls ``observe(seconds)``
with the sum of ``end - start`` over ``pairs`` of marks, now or on a later ``poll()``.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

Observe = Callable[[float], None]


def union_within(lo: float, hi: float, intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``intervals`` clipped to [lo, hi]: time covered at least once
    (a send and a receive in flight together count once)."""
    total, reach = 0.0, lo
    for start, end in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if end <= max(start, reach):  # outside the window, or covered already
            continue
        total += end - max(start, reach)
        reach = end
    return total


class WallClock:
    """Host wall time (``time.perf_counter``); every measurement is known at once."""

    name = "wall"

    def mark(self) -> float:
        return time.perf_counter()

    def measure(self, pairs: Iterable[tuple[float, float]], observe: Observe) -> None:
        observe(sum(max(end - start, 0.0) for start, end in pairs))

    def measure_within(self, windows, observe: Observe) -> None:
        """``observe`` the sum over ``windows`` ((start, end, intervals) of marks) of the
        union of each window's intervals clipped to the window."""
        observe(sum(union_within(lo, hi, iv) for lo, hi, iv in windows))

    def poll(self) -> None:
        """Nothing is ever pending on the host clock."""
