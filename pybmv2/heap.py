"""The switch process's heap, kept out of the cyclic garbage collector's way.

A switch process holds a loaded program (tens of thousands of objects that live as long as
the pipeline) and, once written, its table entries. CPython's full collections scan every
tracked object, so during a large Write each one cost ~27 ms, a quarter of the batch's
time: with the program frozen (:func:`gc.freeze`) they scan only what was written since.
:func:`settle_heap` runs at start-up and after each pipeline commit: unfreeze (the previous
program's cycles become collectable), collect, freeze what is left. Only reference cycles
that become garbage after a freeze wait for the next commit; refcounting frees the rest.
"""

from __future__ import annotations

import gc
import logging
import time

__all__ = ["settle_heap"]

log = logging.getLogger(__name__)


def settle_heap() -> None:
    """Collect everything, then freeze the survivors out of later collections."""
    t0 = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    log.debug("heap settled in %.1f ms: %d objects frozen", 1e3 * (time.perf_counter() - t0),
              gc.get_freeze_count())
