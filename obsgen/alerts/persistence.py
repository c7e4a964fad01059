"""How the straggler alerts tell a fault from a spell: judged after warm-up, paged once a
flag holds without a break for longer than a spell, held through quiet spells.

The straggler family (busy time) and the NCCL family (last arrivals) judge a rank on a
short window, so that a spell's end is seen within that window, and page only on what
persists:

* ``settled``: a stage (or a kind of NCCL group) is judged once its baseline has been
  recorded at every evaluation of the warm-up window but one. After a start or a restart
  gap nothing is judged until warm-up and compilation are over, and a gap is never read
  as ranks that recovered.
* ``unbroken``: a rank flagged at every evaluation of its settled stage for longer than a
  spell and the window together. A slowdown shorter than a spell is flagged for less than
  that, whatever its size (the window remembers it for one window).
* ``held``: a page stays for the hold window after its condition last held, while the
  rank is still exported or its job is down for a restart: one alert through a recurring
  fault's quiet spells, a missed scrape and a restart on the same hosts, and a fixed GPU
  resolves a hold window after its last slow evaluation.

Windows are counted in evaluations of the family's interval: a range of ``n`` intervals
and a half holds the evaluations at ``t - n * interval`` .. ``t`` on Prometheus 2 (ranges
closed on the left) and 3 (open on the left) alike.
"""
from __future__ import annotations

import math

from ..config import duration
from ..model import expr
from ..promql import Ctx


def settled(series: str, warmup: str, every: float) -> str:
    """1 where ``series`` (one per stage) was recorded at every evaluation of ``warmup`` but
    one; no series elsewhere."""
    from ..config import seconds
    n = max(1, math.floor(seconds(warmup) / every))
    return f"clamp_max(count_over_time({series}[{duration(seconds(warmup) + every / 2)}]) >= {n}, 1)"


def unbroken(c: Ctx, flag: str, settled_: str, rank: tuple, stage: tuple, span: float,
             every: float) -> str:
    """``flag`` where it was recorded at every evaluation of its settled ``stage`` over
    ``span`` seconds, rounded up to whole evaluations (the stage settled since)."""
    span = math.ceil(span / every - 1e-9) * every
    window = duration(span + every / 2)
    return expr(f"""
        {flag}
        and {c.on(*rank)} (
          count_over_time({flag}[{window}])
          >= {c.join(stage)}
          count_over_time({settled_}[{window}])
        )
        and {c.on(*stage)} {settled_} offset {duration(span)}
    """)


def held(c: Ctx, page: str, hold: str, live: str, running: str) -> str:
    """The newest ``page`` of the hold window, for the ranks still exported (``live``, the
    right side of an ``and``) and for those whose job is not ``running`` (the right side of
    an ``unless``: stopped for a restart, when it may come back on the same hosts)."""
    return expr(f"""
        last_over_time({page}[{hold}])
        and {live}
        or
        last_over_time({page}[{hold}])
        unless {running}
    """)
