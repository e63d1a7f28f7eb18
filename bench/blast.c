/* make bench's traffic source and sink for forwarding rates over veth (bench/veth_rate.py).
 *
 *   blast TX_IFACE RX_IFACE FRAMES_FILE SECONDS WINDOW
 *
 * Sends the frames of FRAMES_FILE (records: u16 length, little-endian, then the bytes), in
 * turn, on TX_IFACE and counts the frames arriving on RX_IFACE, keeping at most WINDOW frames
 * in flight (sent, not yet received): the rate measured is what the device between the two
 * forwards without loss, not how fast its input queue overflows. When nothing arrives for
 * 50 ms the frames in flight count as lost and sending resumes. Prints
 * "sent received lost seconds". A Python sender/receiver tops out at some 30,000 frames/s,
 * below what the native engine and a Linux bridge forward; this one does not. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define SNAP 2048

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_port(const char *iface) {
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0) { perror("socket"); exit(2); }
    struct sockaddr_ll a = {0};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = (int)if_nametoindex(iface);
    if (!a.sll_ifindex || bind(fd, (struct sockaddr *)&a, sizeof a)) { perror(iface); exit(2); }
    int one = 1, big = 8 << 20;
    setsockopt(fd, SOL_PACKET, 23 /* PACKET_IGNORE_OUTGOING */, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: blast TX_IFACE RX_IFACE FRAMES_FILE SECONDS WINDOW\n");
        return 2;
    }
    int tx = open_port(argv[1]), rx = open_port(argv[2]);
    double seconds = atof(argv[4]);
    long window = atol(argv[5]);
    FILE *f = fopen(argv[3], "rb");
    if (!f) { perror(argv[3]); return 2; }
    static uint8_t data[1 << 22];
    size_t size = fread(data, 1, sizeof data, f);
    fclose(f);
    struct iovec frames[4096];
    int nframes = 0;
    for (size_t at = 0; at + 2 <= size && nframes < 4096;) {
        size_t len = data[at] | (data[at + 1] << 8);
        frames[nframes].iov_base = data + at + 2;
        frames[nframes].iov_len = len;
        nframes++;
        at += 2 + len;
    }
    if (!nframes) { fprintf(stderr, "no frames\n"); return 2; }
    static uint8_t rbuf[BATCH][SNAP];
    struct mmsghdr smsg[BATCH], rmsg[BATCH];
    struct iovec riov[BATCH];
    for (int i = 0; i < BATCH; i++) {
        riov[i].iov_base = rbuf[i];
        riov[i].iov_len = SNAP;
    }
    long sent = 0, received = 0, lost = 0, inflight = 0;
    int next = 0;
    double start = now(), end = start + seconds, last_rx = start;
    while (now() < end) {
        long room = window - inflight;
        if (room > 0) {
            int n = room < BATCH ? (int)room : BATCH;
            memset(smsg, 0, sizeof smsg);
            for (int i = 0; i < n; i++) {
                smsg[i].msg_hdr.msg_iov = &frames[(next + i) % nframes];
                smsg[i].msg_hdr.msg_iovlen = 1;
            }
            int k = sendmmsg(tx, smsg, (unsigned)n, MSG_DONTWAIT);
            if (k > 0) {
                sent += k;
                inflight += k;
                next = (next + k) % nframes;
            }
        }
        struct pollfd p = {rx, POLLIN, 0};
        if (poll(&p, 1, inflight >= window ? 50 : 0) > 0) {
            memset(rmsg, 0, sizeof rmsg);
            for (int i = 0; i < BATCH; i++) {
                rmsg[i].msg_hdr.msg_iov = &riov[i];
                rmsg[i].msg_hdr.msg_iovlen = 1;
            }
            int k = recvmmsg(rx, rmsg, BATCH, MSG_DONTWAIT, NULL);
            if (k > 0) {
                received += k;
                inflight = inflight > k ? inflight - k : 0;
                last_rx = now();
            }
        } else if (inflight && now() - last_rx > 0.05) {
            lost += inflight;
            inflight = 0;
            last_rx = now();
        }
    }
    double elapsed = now() - start;
    printf("%ld %ld %ld %.6f\n", sent, received, lost, elapsed);
    return 0;
}
