"""Pausing the cyclic garbage collector for one step whose allocations grow with the session.

A full collection walks every tracked object, and CPython starts one whenever the objects that
survived since the last one exceed a quarter of the heap. A step that allocates in proportion to the
session (play a 10,000-turn scenario, save and reload its record, index its wire in each contract)
therefore paid several full walks of a heap that also grows with the session: quadratic, about 40%
of a 10,000-turn run. Inside ``collector_paused()`` no collection runs; objects are still freed by
reference counting, and cycles made in the step are collected after it (measured: the same peak
memory on a 10,000-turn run). A caller that disabled the collector itself keeps it disabled.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
