"""The iteration order of libstdc++'s ``std::unordered_map`` with integer keys.

PI keeps a multicast group's replicas in ``std::unordered_map<RId, Node>`` (one node per
instance, its ports in a ``std::set``) and answers a read by iterating that map, so
simple_switch_grpc returns replicas in hash-map order, not in the order they were written
(the P4Runtime specification allows it). To return what BMv2 returns, the Python target
replays libstdc++'s ``_Hashtable`` (GCC 12, as simple_switch_grpc is built here): the
identity hash of an integer, a maximum load factor of 1.0, a first allocation of 13
buckets, doubling to the next bucket count of its prime list, and one singly linked list
of nodes in which a node joins the front of its bucket's run, or the front of the list if
its bucket is empty; a rehash walks the list and re-inserts every node that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["StdHashOrder", "hash_order"]

#: bucket counts libstdc++ grows through (its prime list, each the first >= twice the last);
#: a table reaches the next one when it would hold one element more than it has buckets
BUCKET_COUNTS = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229,
                 172933, 351061, 712697, 1447153, 2938679, 5967347)


class StdHashOrder:
    """Keys in the order a libstdc++ ``unordered_map`` iterates them, under inserts and erases.

    >>> order = StdHashOrder()
    >>> for k in (2, 0, 1):
    ...     order.insert(k)
    >>> list(order)
    [1, 0, 2]
    >>> order.erase(0); list(order)
    [1, 2]
    """

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._members: set[int] = set()
        self._buckets = 1  # nothing allocated yet
        self._grown = 0  # index into BUCKET_COUNTS of the next size

    def __iter__(self) -> Iterator[int]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    @property
    def bucket_count(self) -> int:
        return self._buckets

    def insert(self, key: int) -> None:
        """``map[key]``: a key already present changes nothing."""
        if key in self._members:
            return
        if len(self._keys) + 1 > (self._buckets if self._grown else 0):
            if self._grown >= len(BUCKET_COUNTS):
                raise OverflowError(f"more than {BUCKET_COUNTS[-1]} keys")
            self._rehash(BUCKET_COUNTS[self._grown])
            self._grown += 1
        _insert(self._keys, key, self._buckets)
        self._members.add(key)

    def erase(self, key: int) -> None:
        """``map.erase(key)``: the others keep their order; the buckets never shrink."""
        if key in self._members:
            self._members.discard(key)
            self._keys.remove(key)

    def clear(self) -> None:
        """``map.clear()``: the buckets stay allocated."""
        self._keys.clear()
        self._members.clear()

    def _rehash(self, buckets: int) -> None:
        old, self._keys, self._buckets = self._keys, [], buckets
        for key in old:
            _insert(self._keys, key, buckets)


def _insert(keys: list[int], key: int, buckets: int) -> None:
    """Put ``key`` at the front of its bucket's run, or at the front of the list."""
    bucket = key % buckets
    for i, other in enumerate(keys):
        if other % buckets == bucket:
            keys.insert(i, key)
            return
    keys.insert(0, key)


def hash_order(keys: Iterable[int]) -> list[int]:
    """The iteration order of a fresh map after ``map[k]`` for each of ``keys`` in turn.

    >>> hash_order([1, 2, 3])
    [3, 2, 1]
    >>> hash_order(range(1, 16))[:4]
    [15, 14, 1, 2]
    """
    order = StdHashOrder()
    for k in keys:
        order.insert(k)
    return list(order)
