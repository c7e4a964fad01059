"""CudaClock's arithmetic without a GPU: the events of a CUDA stream are given as objects
with their time in milliseconds, answering ``elapsed_time`` and ``query`` as
torch.cuda.Event does. The compute block's wait is read once every event completed, as
the union of the collectives inside the block, clipped to it."""
from __future__ import annotations

import importlib.util
import os

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true",
    reason="torch not installed: `make e2e` installs obsgen[torch]")]


class Event:
    """A recorded event at ``ms`` on the stream, complete once ``done``."""

    def __init__(self, ms: float, done: bool = True):
        self.ms, self.done = ms, done

    def elapsed_time(self, end: "Event") -> float:
        return end.ms - self.ms

    def query(self) -> bool:
        return self.done


def _clock():
    from obsgen.instrument.torch_hooks import CudaClock
    return CudaClock()


def test_the_wait_inside_a_block_is_the_union_of_its_collectives_clipped_to_it():
    clock, seen = _clock(), []
    block = (Event(100.0), Event(180.0))
    # two overlapping collectives (20 ms together), one running past the block's end (5 ms
    # of it inside) and one before it (none)
    collectives = ((Event(110.0), Event(125.0)), (Event(120.0), Event(130.0)),
                   (Event(175.0), Event(190.0)), (Event(50.0), Event(90.0)))
    clock.measure_within([(*block, collectives)], seen.append)
    clock.poll()
    assert seen == [pytest.approx(0.025)]


def test_the_wait_is_read_only_once_every_event_completed_and_in_order():
    clock, seen = _clock(), []
    late = Event(140.0, done=False)
    clock.measure_within([(Event(100.0), Event(200.0), ((Event(120.0), late),))], seen.append)
    clock.measure_within([(Event(200.0), Event(300.0), ((Event(210.0), Event(220.0)),))],
                         seen.append)
    clock.poll()
    assert seen == []  # the first waits for its collective; the second waits behind it
    late.done = True
    clock.poll()
    assert seen == [pytest.approx(0.020), pytest.approx(0.010)]


def test_several_windows_add_up_and_a_block_without_collectives_waits_nothing():
    clock, seen = _clock(), []
    clock.measure_within([(Event(0.0), Event(50.0), ((Event(10.0), Event(20.0)),)),
                          (Event(60.0), Event(100.0), ((Event(90.0), Event(95.0)),))], seen.append)
    clock.measure_within([(Event(0.0), Event(40.0), ())], seen.append)
    clock.poll()
    assert seen == [pytest.approx(0.015), 0.0]
