/* Super-packets (the Python target's named extension `--super-packets`, native engine only).
 *
 * A port's AF_PACKET socket with PACKET_VNET_HDR hands over, before each frame, the
 * virtio_net_hdr the kernel keeps for it: a TCP segment up to 64 KB that the sender's stack
 * has not cut into frames (gso_type, gso_size: its MSS) and whose L4 checksum holds only the
 * pseudo-header's sum (NEEDS_CSUM). The engine runs such a super-packet through the
 * pipeline once, as one packet, and sends it with a header of its own; the kernel cuts it
 * into frames (and fills every checksum) only where a device cannot take it whole, and a
 * veth to a host's stack takes it whole. So a switch handles one packet where the wire
 * would carry up to 45 frames of 1,500 bytes or 7 of 9,000.
 *
 * What the pipeline sees differs from the per-frame path (docs/python-target.md says it
 * per program and experiment): one packet and its full length where there would be
 * several frames, so P4 packet counters and meters count super-packets (byte counters miss
 * the headers of the frames the kernel cuts), and a clone or multicast copy is a copy of
 * the whole super-packet. The egress queues' packet rates pace a super-packet as its
 * frames (gso_segments), so a port's rate in frames per second holds.
 *
 * On the way out the header is derived again from the frame the deparser built (headers
 * may have moved or changed): the L4 header is found after Ethernet, 802.1Q/802.1ad tags
 * and IPv4 or IPv6, and a partial checksum is set to the pseudo-header sum of the output's
 * own addresses and length, as the kernel's __tcp_v4_send_check leaves it, so that a
 * program that rewrote an address still gets a right checksum on the wire. A super-packet
 * whose output the engine cannot describe so (no TCP or UDP where the header said) is
 * dropped and counted (nx_io_stats: offload drops). */
#include <linux/virtio_net.h>
#ifndef VIRTIO_NET_HDR_GSO_UDP_L4 /* linux 6.2's headers; the kernels before it never send it */
#define VIRTIO_NET_HDR_GSO_UDP_L4 5
#endif

#define GSO_SIZE(g) ((g) & 0xFFFFu)
#define GSO_TYPE(g) (((g) >> 16) & 0xFFu)
#define GSO_CSUM (1u << 24) /* the L4 checksum holds the pseudo-header's sum: NEEDS_CSUM */
#define GSO_VALID (1u << 25) /* the kernel checked the L4 checksum: DATA_VALID */

/* the word a received frame's virtio_net_hdr becomes (0: a plain frame, its checksums
 * complete, as on the per-frame path) */
static inline u32 gso_word(const struct virtio_net_hdr *h) {
    u32 w = 0;
    if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) w |= GSO_CSUM;
    if (h->flags & VIRTIO_NET_HDR_F_DATA_VALID) w |= GSO_VALID;
    if ((h->gso_type & 0x7F) != VIRTIO_NET_HDR_GSO_NONE && h->gso_size)
        w |= ((u32)h->gso_type << 16) | h->gso_size;
    return w;
}

/* where a frame's network and transport headers are */
typedef struct {
    u32 l3, l4, l4_end; /* offsets: IP header, L4 header, end of the L4 header */
    u32 l4_len;         /* the L4 header and payload, from the IP header's length */
    u8 ipv, proto;      /* 4 or 6; IPPROTO_TCP (6) or IPPROTO_UDP (17) */
} layout_t;

static inline u16 rd16(const u8 *p) { return (u16)((p[0] << 8) | p[1]); }

/* Ethernet, any 802.1Q/802.1ad tags, IPv4 (with options) or IPv6 (no extension headers),
 * then TCP or UDP: 0, or -1 when the frame is not that */
static int frame_layout(const u8 *f, u32 len, layout_t *o) {
    u32 at = 12;
    if (len < 14) return -1;
    u16 type = rd16(f + at);
    while ((type == 0x8100 || type == 0x88A8) && at + 6 <= len) {
        at += 4;
        type = rd16(f + at);
    }
    at += 2;
    o->l3 = at;
    if (type == 0x0800) {
        if (at + 20 > len || (f[at] >> 4) != 4) return -1;
        u32 ihl = (u32)(f[at] & 0xF) * 4, total = rd16(f + at + 2);
        if (ihl < 20 || total < ihl || at + total > len) return -1;
        if (rd16(f + at + 6) & 0x3FFF) return -1; /* a fragment: no L4 header to speak of */
        o->ipv = 4;
        o->proto = f[at + 9];
        o->l4 = at + ihl;
        o->l4_len = total - ihl;
    } else if (type == 0x86DD) {
        if (at + 40 > len || (f[at] >> 4) != 6) return -1;
        o->ipv = 6;
        o->proto = f[at + 6];
        o->l4 = at + 40;
        o->l4_len = rd16(f + at + 4);
        if (o->l4 + o->l4_len > len) return -1;
    } else {
        return -1;
    }
    if (o->proto == 6) {
        if (o->l4_len < 20 || o->l4 + 20 > len) return -1;
        u32 doff = (u32)(f[o->l4 + 12] >> 4) * 4;
        if (doff < 20 || doff > o->l4_len) return -1;
        o->l4_end = o->l4 + doff;
    } else if (o->proto == 17) {
        if (o->l4_len < 8) return -1;
        o->l4_end = o->l4 + 8;
    } else {
        return -1;
    }
    return 0;
}

/* the pseudo-header's one's-complement sum, folded, not complemented (what a partial
 * checksum holds before the device adds the L4 bytes) */
static u16 pseudo_sum(const u8 *f, const layout_t *o) {
    u64 sum = 0;
    u32 n = o->ipv == 4 ? 4 : 16;
    const u8 *src = f + o->l3 + (o->ipv == 4 ? 12 : 8);
    for (u32 i = 0; i < 2 * n; i += 2) sum += rd16(src + i); /* source then destination */
    sum += o->proto;
    sum += o->l4_len;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (u16)sum;
}

/* how many frames the wire carries for this packet (1 for a plain frame) */
static u32 gso_segments(u32 gso, const u8 *f, u32 len) {
    u32 mss = GSO_SIZE(gso);
    layout_t o;
    if (!mss || frame_layout(f, len, &o)) return 1;
    u32 payload = len > o.l4_end ? len - o.l4_end : 0;
    return payload > mss ? (payload + mss - 1) / mss : 1;
}

/* the virtio_net_hdr to send `f` with (its checksum field set to the pseudo-header sum
 * when partial): 0, or -1 when a super-packet's output is not one the kernel can cut */
static int gso_header(u32 gso, u8 *f, u32 len, struct virtio_net_hdr *h) {
    memset(h, 0, sizeof *h);
    if (!(gso & (GSO_CSUM | 0xFFFFu))) return 0; /* a plain frame: nothing to say */
    layout_t o;
    u32 type = GSO_TYPE(gso) & 0x7F, mss = GSO_SIZE(gso);
    if (frame_layout(f, len, &o)) return (mss && type) ? -1 : 0;
    if (mss && type) {
        int ok = (type == VIRTIO_NET_HDR_GSO_TCPV4 && o.ipv == 4 && o.proto == 6) ||
                 (type == VIRTIO_NET_HDR_GSO_TCPV6 && o.ipv == 6 && o.proto == 6) ||
                 (type == VIRTIO_NET_HDR_GSO_UDP_L4 && o.proto == 17) ||
                 (type == VIRTIO_NET_HDR_GSO_UDP && o.proto == 17);
        if (!ok) return -1;
        h->gso_type = (u8)GSO_TYPE(gso);
        h->gso_size = (u16)mss;
        h->hdr_len = (u16)o.l4_end;
    }
    if (gso & GSO_CSUM) {
        u32 field = o.l4 + (o.proto == 6 ? 16 : 6);
        u16 ps = pseudo_sum(f, &o);
        f[field] = (u8)(ps >> 8);
        f[field + 1] = (u8)ps;
        h->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        h->csum_start = (u16)o.l4;
        h->csum_offset = (u16)(o.proto == 6 ? 16 : 6);
    } else if (mss) {
        return -1; /* a super-packet always carries a partial checksum */
    }
    return 0;
}
