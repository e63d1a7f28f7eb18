"""The Python target replays libstdc++'s unordered_map iteration order, which BMv2's PI shows
in multicast read-backs. Expected orders were printed by a program built with g++ 12 against
the libstdc++ simple_switch_grpc uses here (``for (auto &p : m)`` after the same operations)."""

from __future__ import annotations

from pybmv2.pre import Replica
from pybmv2.runtime.hash_order import StdHashOrder, hash_order
from pybmv2.runtime.pre_codec import pi_replica_order

KEYS = [29647, 30516, 29611, 12445, 12101, 31179, 12201, 6168, 29267, 19883, 9292, 5942, 2744, 25962, 29687,
        10321, 983, 4139, 3902, 2336, 12465, 15855, 1971, 30404, 21383, 28870, 12800, 15312, 19277, 32753, 301,
        5569, 29971, 18229, 26658, 5452, 16645, 20662, 15051, 18942]


def test_inserts_and_erases_follow_libstdcxx() -> None:
    order = StdHashOrder()
    for k in (5, 40, 18, 3):
        order.insert(k)
    order.erase(40)
    for k in (27, 1, 2, 4, 6, 7, 8, 9, 10, 11):
        order.insert(k)
    assert (list(order), order.bucket_count) == ([11, 10, 9, 8, 7, 6, 4, 2, 1, 27, 3, 18, 5], 13)
    order.erase(5)
    order.insert(70)  # the 14th key: 29 buckets
    order.insert(44)
    assert (list(order), order.bucket_count) == ([44, 18, 70, 3, 27, 1, 2, 4, 6, 7, 8, 9, 10, 11], 29)


def test_forty_group_ids_grow_the_map_twice() -> None:
    order = StdHashOrder()
    for k in KEYS:
        order.insert(k)
    order.erase(KEYS[3])
    order.erase(KEYS[17])
    assert order.bucket_count == 59
    assert list(order) == [20662, 16645, 26658, 18229, 29971, 5569, 2744, 19883, 5942, 983, 6168, 29687, 15051, 301,
                           12101, 30516, 18942, 29267, 10321, 31179, 29611, 12201, 15855, 19277, 9292, 29647, 25962,
                           32753, 3902, 2336, 12465, 5452, 1971, 21383, 30404, 28870, 12800, 15312]


def test_a_key_inserted_twice_keeps_its_place() -> None:
    assert hash_order([3, 1, 3, 2]) == [2, 1, 3]


def test_replicas_group_by_instance_in_map_order_ports_ascending() -> None:
    replicas = [Replica(p, p) for p in range(1, 20)] + [Replica(30, 3)]
    got = [(r.egress_port, r.rid) for r in pi_replica_order(replicas)]
    assert got[:7] == [(19, 19), (18, 18), (17, 17), (16, 16), (15, 15), (14, 14), (1, 1)]
    assert got[8:10] == [(3, 3), (30, 3)]
