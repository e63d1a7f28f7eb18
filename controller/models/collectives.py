"""Completion times of collectives under the alpha-beta (latency-bandwidth) model.

Sizes are bytes, bandwidths bytes per second *per direction* of one GPU's link, latencies
seconds per step. These are the formulas an emulation can be cross-checked against.

HB domains: ``group`` GPUs take part, ``per_domain`` of them in each HB domain (an NVLink
server), so the group spans ``group / per_domain`` domains. Inside a domain GPUs talk over
NVLink (``local_bw``); between domains each GPU uses its own NIC (``nic_bw``), on its rail.
"""

from __future__ import annotations

__all__ = [
    "ETHERNET_WIRE_OVERHEAD",
    "TCP_IP_HEADERS",
    "VETH_FRAME_OVERHEAD",
    "alltoall_direct_time",
    "alltoall_hierarchical_time",
    "alltoall_overhead",
    "hierarchical_allreduce_time",
    "p2p_time",
    "ring_allgather_time",
    "ring_allreduce_time",
    "ring_reduce_scatter_time",
    "tcp_payload_fraction",
]

#: IPv4 and TCP headers of a bulk segment, the TCP timestamp option included
TCP_IP_HEADERS = 52
#: what an Ethernet frame costs on the wire beyond its IP packet: header, FCS, preamble, gap
ETHERNET_WIRE_OVERHEAD = 38
#: the same over a shaped veth: htb counts the Ethernet header only
VETH_FRAME_OVERHEAD = 14


def tcp_payload_fraction(mtu: int, frame_overhead: int = ETHERNET_WIRE_OVERHEAD) -> float:
    """The share of a link's rate that bulk TCP delivers as payload at ``mtu``.

    >>> round(tcp_payload_fraction(1500), 3), round(tcp_payload_fraction(9000), 3)
    (0.941, 0.99)
    >>> round(tcp_payload_fraction(1500, VETH_FRAME_OVERHEAD), 3)
    0.956
    """
    if mtu <= TCP_IP_HEADERS:
        raise ValueError(f"an MTU of {mtu} bytes leaves no room for a TCP segment")
    return (mtu - TCP_IP_HEADERS) / (mtu + frame_overhead)


def _check(size: float, n: int, bw: float) -> None:
    if size < 0 or n < 1 or bw <= 0:
        raise ValueError(f"need size >= 0, n >= 1, bandwidth > 0 (got {size}, {n}, {bw})")


def ring_reduce_scatter_time(size: float, n: int, bw: float, latency: float = 0.0) -> float:
    """Ring reduce-scatter of ``size`` bytes over ``n`` GPUs: ``(n-1)/n * size/bw + (n-1)*alpha``.

    >>> ring_reduce_scatter_time(8e9, 8, 1e9)
    7.0
    """
    _check(size, n, bw)
    return (n - 1) / n * size / bw + (n - 1) * latency


def ring_allgather_time(size: float, n: int, bw: float, latency: float = 0.0) -> float:
    """Ring all-gather producing ``size`` bytes on each of ``n`` GPUs (same cost as reduce-scatter)."""
    return ring_reduce_scatter_time(size, n, bw, latency)


def ring_allreduce_time(size: float, n: int, bw: float, latency: float = 0.0) -> float:
    """Ring all-reduce: ``2(n-1)/n * size/bw + 2(n-1)*alpha``.

    Parameters
    ----------
    size : float
        Bytes reduced (the buffer on each GPU).
    n : int
        GPUs in the ring (1 gives 0).
    bw : float
        Bytes per second each GPU sends (and receives) at once.
    latency : float
        Seconds per ring step.

    Examples
    --------
    >>> ring_allreduce_time(1e9, 4, 50e9)  # 2 * 3/4 * 1 GB / 50 GB/s
    0.03
    """
    _check(size, n, bw)
    return 2 * (n - 1) / n * size / bw + 2 * (n - 1) * latency


def hierarchical_allreduce_time(size: float, per_domain: int, domains: int, local_bw: float,
                                nic_bw: float, local_latency: float = 0.0,
                                nic_latency: float = 0.0) -> float:
    """All-reduce over ``per_domain * domains`` GPUs: local reduce-scatter, rail all-reduce, local all-gather.

    After the NVLink reduce-scatter each GPU holds ``size / per_domain`` bytes and all-reduces
    them with the GPUs at the same position (the same rail) in the other domains, then the
    NVLink all-gather restores the full buffer. Rail-only networks run exactly this; a
    fat-tree can run it too, at the same cost.

    Examples
    --------
    >>> hierarchical_allreduce_time(8e9, 8, 4, 400e9, 50e9)  # 2*(7/8*8/400) + 2*3/4*1/50
    0.065
    """
    _check(size, per_domain * domains, nic_bw)
    local = 2 * ring_reduce_scatter_time(size, per_domain, local_bw, local_latency) if per_domain > 1 else 0.0
    return local + ring_allreduce_time(size / per_domain, domains, nic_bw, nic_latency)


def p2p_time(size: float, bw: float, latency: float = 0.0) -> float:
    """One point-to-point transfer: ``size / bw + alpha``.

    >>> p2p_time(50e6, 50e9, 1e-6)
    0.001001
    """
    _check(size, 1, bw)
    return size / bw + latency


def _a2a_shares(size: float, group: int, per_domain: int) -> tuple[float, float, float]:
    if group < 1 or per_domain < 1 or group % per_domain:
        raise ValueError(f"group ({group}) must be a positive multiple of per_domain ({per_domain})")
    local_direct = size * (per_domain - 1) / group      # to peers in my own domain
    remote = size * (group - per_domain) / group        # to peers in other domains
    local_forward = size * (per_domain - 1) / per_domain  # everything off my rail, first hop
    return local_direct, remote, local_forward


def alltoall_direct_time(size: float, group: int, per_domain: int, local_bw: float, nic_bw: float,
                         local_latency: float = 0.0, nic_latency: float = 0.0) -> float:
    """All-to-all on a full-bisection fabric: each GPU sends straight to every peer.

    ``size`` is what each GPU sends in total (``size / group`` to each peer, itself included).
    Same-domain shares go over NVLink while the rest leaves through the GPU's NIC, at once:
    ``max(size*(g-1)/G / local_bw, size*(G-g)/G / nic_bw)``.

    Examples
    --------
    >>> alltoall_direct_time(64e6, 64, 8, 450e9, 50e9)  # 56 MB through the NIC
    0.00112
    """
    _check(size, group, nic_bw)
    local, remote, _ = _a2a_shares(size, group, per_domain)
    t_local = local / local_bw + (local_latency if per_domain > 1 else 0.0)
    t_remote = remote / nic_bw + (nic_latency if group > per_domain else 0.0)
    return max(t_local, t_remote)


def alltoall_hierarchical_time(size: float, group: int, per_domain: int, local_bw: float,
                               nic_bw: float, local_latency: float = 0.0,
                               nic_latency: float = 0.0) -> float:
    """All-to-all on a rail-only network: forward inside the HB domain, then along the rails.

    Phase 1 (NVLink): GPU ``(d, r)`` hands every byte bound for rail ``r' != r`` (in any
    domain) to GPU ``(d, r')`` of its own domain: ``size*(g-1)/g`` bytes. Phase 2 (NIC): each
    GPU sends, on its rail, the bytes that its domain holds for the same rail position of every
    other domain: ``size*(G-g)/G`` bytes, as much as the direct all-to-all's NIC share. The
    phases run one after the other, so the cost over a fabric with a spine is the NVLink phase.

    Examples
    --------
    >>> round(alltoall_hierarchical_time(64e6, 64, 8, 450e9, 50e9), 6)  # 56/450 + 56/50 ms
    0.001244
    """
    _check(size, group, nic_bw)
    _, remote, forward = _a2a_shares(size, group, per_domain)
    t_local = forward / local_bw + (local_latency if per_domain > 1 else 0.0)
    t_remote = remote / nic_bw + (nic_latency if group > per_domain else 0.0)
    return t_local + t_remote


def alltoall_overhead(size: float, group: int, per_domain: int, local_bw: float, nic_bw: float,
                      local_latency: float = 0.0, nic_latency: float = 0.0) -> float:
    """Extra completion time of the rail-only all-to-all over the direct one (a fraction).

    For large groups this tends to ``nic_bw / local_bw * (g-1)/g``: about 10% for 400 Gb/s
    NICs and 450 GB/s NVLink (per direction) with 8 GPUs per domain.

    Examples
    --------
    >>> round(alltoall_overhead(1e9, 4096, 8, 450e9, 50e9), 4)
    0.0974
    """
    direct = alltoall_direct_time(size, group, per_domain, local_bw, nic_bw, local_latency, nic_latency)
    hier = alltoall_hierarchical_time(size, group, per_domain, local_bw, nic_bw, local_latency, nic_latency)
    return 0.0 if direct == 0 else hier / direct - 1.0
