/* Process mode: the switch's packet I/O in one thread of its own (pybmv2/native/io.py).
 *
 * The thread waits (ppoll) on every port's AF_PACKET socket and on an eventfd. It takes up
 * to IO_BATCH frames per port per round with recvmmsg, puts back the 802.1Q tag the kernel
 * moved into PACKET_AUXDATA (as pybmv2/ports.py does), runs each frame through parser and
 * ingress, and enqueues what reaches egress on the egress port's queue (simple_switch's
 * egress buffers: a depth in packets, a rate in packets/s, the enqueue/dequeue metadata).
 * Queues whose next departure has come are drained through egress and the deparser; frames
 * go out with sendmmsg. Frames for the CPU port and digests go to Python through the `up`
 * buffer and an eventfd; packet-outs come in through the `down` buffer and the other eventfd.
 *
 * The thread holds the context's lock (cx->mu) while it runs packets, never while it waits
 * or sends: a control-plane change waits at most one round. Pulls of the counts take no
 * lock: each round is one generation's (round_enter, rt_pkt.h; rt_base.h). Every packet's
 * ingress and egress global timestamps are read from the clock when it enters that stage.
 *
 * Three named extensions hold packets in hold lines (rt_hold.c) on the same clock, in µs
 * since start_ns, and the thread wakes when the next one is due, as the Python engine's
 * CalendarQueues do (pybmv2/daemon.py): the calendar queue (a job whose release time, a
 * metadata field the program wrote, is after the clock's waits after ingress and then goes
 * to its egress queue), port delays (a port's frames leave a fixed time after egress) and
 * port ingress delays (a port's frames enter ingress a fixed time after they arrive). */
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define IO_BATCH 64
/* frames longer than this are dropped: a super-packet (rt_offload.c) is at most 64 KB of IP
 * after its link-layer header */
#define IO_SNAP (65536 + 64)
#define IO_NPORTNUM 512
#define IO_MAXPORTS IO_NPORTNUM /* as many ports as BMv2 (its default 512), one per port number */
#define IO_UP_LIMIT (64u << 20) /* bytes waiting for Python before packet-ins are dropped */
#define KIND_PACKET_IN 0
#define KIND_DIGEST 1

typedef struct {
    pkt_t s;
    u8 *buf;
    u32 cap;
    u64 enq_us;
} qjob_t;

typedef struct {
    qjob_t *ring;
    u32 cap, head, n, depth;
    double rate_pps;
    u64 next_ns; /* earliest departure of the next packet (paced queues) */
    u64 enqueued, dropped, departed;
} equeue_t;

typedef struct {
    int fd, dead;
    int vnet; /* the socket has PACKET_VNET_HDR: super-packets (rt_offload.c) */
    u32 num;
    /* frames as the wire counts them (a super-packet as its segments), drops, errors, and
     * super-packets this port received and sent whole */
    u64 rx, tx, rx_dropped, tx_dropped, errors, rx_super, tx_super;
} ioport_t;

typedef struct nx_io {
    pthread_t thread;
    int running, stop;
    int down_efd, up_efd;
    u64 start_ns;
    i64 cpu_port;
    ioport_t ports[IO_MAXPORTS];
    u32 nports;
    int portfd[IO_NPORTNUM]; /* port number -> socket, -1 none */
    i32 portix[IO_NPORTNUM]; /* port number -> index in ports[], -1 none */
    equeue_t *q[IO_NPORTNUM];
    u16 qports[IO_NPORTNUM]; /* the port numbers that have a queue, in creation order */
    u32 nq;
    u32 def_depth;
    double def_rate;
    u32 rr; /* round robin among ready queues */
    /* receive slots; 4 bytes of headroom for a restored VLAN tag */
    u8 *rx;
    struct mmsghdr rmsg[IO_BATCH];
    struct iovec riov[IO_BATCH];
    struct sockaddr_ll raddr[IO_BATCH];
    struct iovec rvio[IO_BATCH][2];
    struct virtio_net_hdr rvnet[IO_BATCH];
    u8 rctl[IO_BATCH][CMSG_SPACE(sizeof(struct tpacket_auxdata))];
    /* a spare job buffer, swapped with the one of the job that leaves its queue */
    u8 *spare;
    u32 spare_cap;
    /* to Python: records [u32 kind, u32 len, u64 port, bytes padded to 8] */
    pthread_mutex_t upmu;
    nx_buf_t up, up_back;
    u64 up_dropped;
    /* from Python: records [u64 port, u32 len, u32 pad, bytes padded to 8] */
    pthread_mutex_t downmu;
    nx_buf_t down, down_work;
    u64 oversize;
    u64 offload_dropped; /* super-packets whose output could not be described (rt_offload.c) */
    /* the named extensions: the calendar queue's PHV slot (-1: none), the ports' delays in
     * µs (0: none) on what they transmit and receive, and the three hold lines */
    i64 cal_slot;
    u64 tx_delay[IO_NPORTNUM], rx_delay[IO_NPORTNUM];
    hline_t cal, tx_line, rx_line;
    /* busy polling: for busy_ns after the last frame received, the thread polls without
     * sleeping (0: it sleeps at once) */
    u64 busy_ns, last_rx_ns;
} nx_io_t;

/* one side of a double buffer: under mu, the records gathered in live move to work, and
 * live starts empty (what work held before is reused) */
static void buf_swap(pthread_mutex_t *mu, nx_buf_t *live, nx_buf_t *work) {
    pthread_mutex_lock(mu);
    nx_buf_t t = *live;
    *live = *work;
    *work = t;
    live->n = 0;
    pthread_mutex_unlock(mu);
}

static inline u64 io_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (u64)ts.tv_sec * 1000000000ULL + (u64)ts.tv_nsec;
}

static inline u64 io_now_us(nx_io_t *io) { return (io_now_ns() - io->start_ns) / 1000; }

static void efd_signal(int fd) {
    u64 one = 1;
    ssize_t r = write(fd, &one, sizeof one);
    (void)r;
}

static equeue_t *io_queue(nx_io_t *io, u64 port) {
    if (port >= IO_NPORTNUM) return NULL;
    equeue_t *q = io->q[port];
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q) return NULL;
        q->depth = io->def_depth;
        q->rate_pps = io->def_rate;
        io->q[port] = q;
        io->qports[io->nq++] = (u16)port;
    }
    if (q->cap < q->depth) {
        qjob_t *r = calloc(q->depth, sizeof(qjob_t));
        if (!r) return NULL;
        for (u32 i = 0; i < q->n; i++) r[i] = q->ring[(q->head + i) % q->cap];
        for (u32 i = q->n; i < q->cap; i++) free(q->ring[(q->head + i) % q->cap].buf);
        free(q->ring);
        q->ring = r;
        q->cap = q->depth;
        q->head = 0;
    }
    return q;
}

/* simple_switch's enqueue: a full queue drops the packet */
static void io_to_queue(ctx_t *cx, const pkt_t *s) {
    nx_io_t *io = cx->io;
    equeue_t *q = io_queue(io, s->port);
    if (!q) return;
    if (q->n >= q->depth) {
        q->dropped++;
        return;
    }
    qjob_t *j = &q->ring[(q->head + q->n) % q->cap];
    if (j->cap < s->len) {
        u8 *b = realloc(j->buf, s->len ? s->len : 1);
        if (!b) return;
        j->buf = b;
        j->cap = s->len;
    }
    memcpy(j->buf, s->data, s->len);
    j->s = *s;
    j->s.data = j->buf;
    j->enq_us = io_now_us(io);
    if (STD_QUEUEING) {
        std_set_enq_timestamp(&j->s, j->enq_us);
        std_set_enq_qdepth(&j->s, q->n);
    }
    q->n++;
    q->enqueued++;
}

/* a job after ingress (or an egress clone, or a recirculated packet's): held in the calendar
 * line while its release time is after the clock's, else into its egress queue */
static void io_enqueue(ctx_t *cx, const pkt_t *s) {
    nx_io_t *io = cx->io;
    if (io->cal_slot >= 0) {
        u64 at = gen_meta_u64(s, (u32)io->cal_slot);
        if (at > io_now_us(io)) {
            hline_push(&io->cal, at, held_new(s->port, s->data, s->len, s, 0));
            return;
        }
    }
    io_to_queue(cx, s);
}

/* every job the last ingress or egress left in cx->q goes to its egress queue */
static void io_enqueue_jobs(ctx_t *cx) {
    while (cx->qhead < cx->qtail) io_enqueue(cx, &cx->q[cx->qhead++]);
    cx->qhead = cx->qtail = 0;
    arena_reset(cx);
}

static void io_ingress(ctx_t *cx, u64 port, const u8 *frame, u32 len, u32 gso) {
    cx->now_us = io_now_us(cx->io);
    cx->in_gso = gso;
    ingress_frame(cx, port, frame, len);
    cx->in_gso = 0;
    io_enqueue_jobs(cx);
}

/* what the calendar and ingress-delay lines release now: frames into ingress, jobs into
 * their egress queues (under cx->mu; what they hold meanwhile is due later) */
static void io_release(ctx_t *cx) {
    nx_io_t *io = cx->io;
    u64 now = io_now_us(io);
    held_t *it;
    while ((it = hline_pop_due(&io->rx_line, now))) {
        io_ingress(cx, it->port, it->data, it->len, it->gso);
        held_free(it);
    }
    while ((it = hline_pop_due(&io->cal, now))) {
        io_to_queue(cx, it->job);
        held_free(it);
    }
}

/* the earliest time (ns on CLOCK_MONOTONIC) a hold line has something due (0: none) */
static u64 io_held_wake(nx_io_t *io) {
    u64 at = hline_next(&io->cal), tx = hline_next(&io->tx_line), rx = hline_next(&io->rx_line);
    if (tx < at) at = tx;
    if (rx < at) at = rx;
    if (at > (UINT64_MAX - io->start_ns) / 1000) return 0; /* none, or beyond the clock's range */
    return io->start_ns + at * 1000;
}

/* the queue whose packet may leave now (round robin among the ready ones), or NULL and the
 * earliest time (ns) a paced one may (0: none waiting) */
static equeue_t *io_ready(nx_io_t *io, u64 now, u64 *port, u64 *wake) {
    *wake = 0;
    for (u32 k = 0; k < io->nq; k++) {
        u32 i = (io->rr + k) % io->nq;
        equeue_t *q = io->q[io->qports[i]];
        if (!q->n) continue;
        if (q->next_ns <= now) {
            io->rr = i + 1;
            *port = io->qports[i];
            return q;
        }
        if (!*wake || q->next_ns < *wake) *wake = q->next_ns;
    }
    return NULL;
}

static void io_egress_one(ctx_t *cx, equeue_t *q, u64 now_ns) {
    nx_io_t *io = cx->io;
    qjob_t *j = &q->ring[q->head];
    u32 segs = j->s.gso ? gso_segments(j->s.gso, j->buf, j->s.len) : 1;
    pkt_t job = j->s;
    u8 *buf = j->buf;
    u32 cap = j->cap;
    j->buf = io->spare;
    j->cap = io->spare_cap;
    u64 enq = j->enq_us;
    q->head = (q->head + 1) % q->cap;
    q->n--;
    q->departed++;
    if (q->rate_pps > 0) {
        /* the line's timetable, not the thread's: the frame left (on a line that never runs
         * late) back to back after the one before it, or when it arrived if the line was
         * idle by then. Counting the gap from now instead would lose the thread's wake-up
         * latency (ppoll's timer slack, ~50-70 us) on every frame of a backlog: 18% of the
         * rate at 3,000 frames/s. Late departures catch up, never beyond the line's rate
         * since the first frame of the backlog. */
        u64 gap = (u64)(1e9 * segs / q->rate_pps); /* a super-packet is paced as its frames */
        u64 arrived = io->start_ns + enq * 1000;
        q->next_ns = (q->next_ns > arrived ? q->next_ns : arrived) + gap;
    } else {
        q->next_ns = now_ns;
    }
    cx->qhead = cx->qtail = 0;
    cx->now_us = io_now_us(io);
    cx->deq_timedelta = cx->now_us - enq;
    cx->deq_qdepth = q->n;
    int passes = 0;
    egress(cx, &job, &passes);
    cx->deq_timedelta = cx->deq_qdepth = 0;
    io_enqueue_jobs(cx); /* egress clones and recirculated packets */
    io->spare = buf;
    io->spare_cap = cap;
}

/* append a record for Python (caller holds upmu) */
static void io_up(nx_io_t *io, u32 kind, u64 port, const void *data, u32 len) {
    size_t need = 16 + (((size_t)len + 7) & ~(size_t)7);
    if (io->up.n + need > IO_UP_LIMIT || buf_reserve(&io->up, need)) {
        io->up_dropped++;
        return;
    }
    u8 *r = io->up.p + io->up.n;
    memcpy(r, &kind, 4);
    memcpy(r + 4, &len, 4);
    memcpy(r + 8, &port, 8);
    memcpy(r + 16, data, len);
    io->up.n += need;
}

/* up to IO_BATCH frames out of `port` (none to the CPU port, or to a port without a socket);
 * on a port with super-packets each goes with its virtio_net_hdr (rt_offload.c) */
static void io_send(nx_io_t *io, u64 port, u8 *const *data, const u32 *len, const u32 *gso, u32 n) {
    int fd = (port < IO_NPORTNUM) ? io->portfd[port] : -1;
    if (fd < 0 || (i64)port == io->cpu_port) return;
    ioport_t *p = &io->ports[io->portix[port]];
    struct mmsghdr msg[IO_BATCH];
    struct iovec iov[IO_BATCH][2];
    struct virtio_net_hdr vh[IO_BATCH];
    u32 segs[IO_BATCH];
    u32 m = 0;
    for (u32 i = 0; i < n && i < IO_BATCH; i++) {
        segs[m] = 1;
        u32 k = 0;
        if (p->vnet) {
            if (gso_header(gso[i], data[i], len[i], &vh[m])) {
                io->offload_dropped++;
                p->tx_dropped++;
                continue;
            }
            if (vh[m].gso_type != VIRTIO_NET_HDR_GSO_NONE) segs[m] = gso_segments(gso[i], data[i], len[i]);
            iov[m][k].iov_base = &vh[m];
            iov[m][k++].iov_len = sizeof vh[m];
        } else if (gso[i] & 0xFFFFu) {
            io->offload_dropped++; /* never: every port of a switch has super-packets or none */
            p->tx_dropped++;
            continue;
        }
        iov[m][k].iov_base = data[i];
        iov[m][k++].iov_len = len[i];
        memset(&msg[m], 0, sizeof msg[m]);
        msg[m].msg_hdr.msg_iov = iov[m];
        msg[m].msg_hdr.msg_iovlen = k;
        m++;
    }
    u32 sent = 0;
    while (sent < m) {
        int r = sendmmsg(fd, msg + sent, m - sent, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        sent += (u32)r;
    }
    for (u32 i = 0; i < sent; i++) {
        p->tx += segs[i];
        p->tx_super += segs[i] > 1;
    }
    p->tx_dropped += m - sent;
}

/* the frames of delayed ports whose time has come, sent in release order */
static void io_send_due(nx_io_t *io) {
    u8 *data[IO_BATCH];
    u32 len[IO_BATCH], gso[IO_BATCH];
    held_t *its[IO_BATCH];
    u64 now = io_now_us(io);
    held_t *it = hline_pop_due(&io->tx_line, now);
    while (it) {
        u64 port = it->port;
        u32 n = 0;
        for (; it && it->port == port && n < IO_BATCH; it = hline_pop_due(&io->tx_line, now)) {
            data[n] = it->data;
            len[n] = it->len;
            gso[n] = it->gso;
            its[n++] = it;
        }
        io_send(io, port, data, len, gso, n);
        for (u32 k = 0; k < n; k++) held_free(its[k]);
    }
}

/* send what the round produced; CPU-port frames and digests go up to Python */
static void io_flush(ctx_t *cx) {
    nx_io_t *io = cx->io;
    int signal = 0;
    if (cx->dig.n || (io->cpu_port >= 0 && cx->nout)) {
        pthread_mutex_lock(&io->upmu);
        if (cx->dig.n) {
            io_up(io, KIND_DIGEST, 0, cx->dig.p, (u32)cx->dig.n);
            signal = 1;
        }
        for (u32 i = 0; i < cx->nout; i++)
            if ((i64)cx->oport[i] == io->cpu_port) {
                io_up(io, KIND_PACKET_IN, cx->oport[i], cx->out.p + cx->ooff[i], cx->olen[i]);
                signal = 1;
            }
        pthread_mutex_unlock(&io->upmu);
    }
    cx->dig.n = 0;
    cx->ndig = 0;
    if (signal) efd_signal(io->up_efd);
    u8 *data[IO_BATCH];
    for (u32 i = 0; i < cx->nout;) {
        u64 port = cx->oport[i];
        u32 n = 0;
        while (i + n < cx->nout && n < IO_BATCH && cx->oport[i + n] == port) {
            data[n] = cx->out.p + cx->ooff[i + n];
            n++;
        }
        if (port < IO_NPORTNUM && io->tx_delay[port] && (i64)port != io->cpu_port) {
            u64 at = io_now_us(io) + io->tx_delay[port]; /* --port-delay: leave later */
            for (u32 k = 0; k < n; k++)
                hline_push(&io->tx_line, at, held_new(port, data[k], cx->olen[i + k], NULL, cx->ogso[i + k]));
        } else {
            io_send(io, port, data, cx->olen + i, cx->ogso + i, n);
        }
        i += n;
    }
    cx->nout = 0;
    cx->out.n = 0;
}

/* one port's waiting frames (at most IO_BATCH), each through ingress */
static void io_receive(ctx_t *cx, ioport_t *p) {
    nx_io_t *io = cx->io;
    for (u32 i = 0; i < IO_BATCH; i++) {
        io->riov[i].iov_base = io->rx + (size_t)i * (IO_SNAP + 4) + 4;
        io->riov[i].iov_len = IO_SNAP;
        memset(&io->rmsg[i], 0, sizeof io->rmsg[i]);
        if (p->vnet) { /* the virtio_net_hdr first, then the frame */
            io->rvio[i][0].iov_base = &io->rvnet[i];
            io->rvio[i][0].iov_len = sizeof io->rvnet[i];
            io->rvio[i][1] = io->riov[i];
            io->rmsg[i].msg_hdr.msg_iov = io->rvio[i];
            io->rmsg[i].msg_hdr.msg_iovlen = 2;
        } else {
            io->rmsg[i].msg_hdr.msg_iov = &io->riov[i];
            io->rmsg[i].msg_hdr.msg_iovlen = 1;
        }
        io->rmsg[i].msg_hdr.msg_name = &io->raddr[i];
        io->rmsg[i].msg_hdr.msg_namelen = sizeof io->raddr[i];
        io->rmsg[i].msg_hdr.msg_control = io->rctl[i];
        io->rmsg[i].msg_hdr.msg_controllen = sizeof io->rctl[i];
    }
    int n = recvmmsg(p->fd, io->rmsg, IO_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
    if (n <= 0) return;
    for (int i = 0; i < n; i++) {
        struct msghdr *h = &io->rmsg[i].msg_hdr;
        if (io->raddr[i].sll_pkttype == PACKET_OUTGOING) continue;
        u32 len = io->rmsg[i].msg_len;
        u32 gso = 0;
        if (p->vnet) {
            if (len < sizeof io->rvnet[i]) continue;
            len -= (u32)sizeof io->rvnet[i];
            gso = gso_word(&io->rvnet[i]);
        }
        if (len > IO_SNAP || (h->msg_flags & MSG_TRUNC)) {
            io->oversize++;
            p->rx_dropped++;
            continue;
        }
        u8 *f = io->rx + (size_t)i * (IO_SNAP + 4) + 4;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
            if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
            struct tpacket_auxdata aux;
            memcpy(&aux, CMSG_DATA(c), sizeof aux);
            if ((aux.tp_status & TP_STATUS_VLAN_VALID) && len >= 12) {
                u16 tpid = (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) && aux.tp_vlan_tpid
                               ? aux.tp_vlan_tpid : ETH_P_8021Q;
                memmove(f - 4, f, 12);
                f -= 4;
                f[12] = (u8)(tpid >> 8);
                f[13] = (u8)tpid;
                f[14] = (u8)(aux.tp_vlan_tci >> 8);
                f[15] = (u8)aux.tp_vlan_tci;
                len += 4;
            }
        }
        u32 segs = gso ? gso_segments(gso, f, len) : 1;
        p->rx += segs;
        p->rx_super += segs > 1;
        if (io->rx_delay[p->num]) /* --port-ingress-delay: enter later */
            hline_push(&io->rx_line, io_now_us(io) + io->rx_delay[p->num],
                       held_new(p->num, f, len, NULL, gso));
        else
            io_ingress(cx, p->num, f, len, gso);
    }
}

/* packet-outs (and other frames Python injects), each through ingress */
static void io_injected(ctx_t *cx) {
    nx_io_t *io = cx->io;
    buf_swap(&io->downmu, &io->down, &io->down_work);
    for (size_t at = 0; at + 16 <= io->down_work.n;) {
        u64 port;
        u32 len;
        memcpy(&port, io->down_work.p + at, 8);
        memcpy(&len, io->down_work.p + at + 8, 4);
        io_ingress(cx, port, io->down_work.p + at + 16, len, 0);
        at += 16 + (((size_t)len + 7) & ~(size_t)7);
    }
    io->down_work.n = 0;
}

static void *io_main(void *arg) {
    ctx_t *cx = arg;
    nx_io_t *io = cx->io;
    struct pollfd pfd[IO_MAXPORTS + 1];
    while (!__atomic_load_n(&io->stop, __ATOMIC_ACQUIRE)) {
        u64 now = io_now_ns(), port = 0, wake = 0;
        pthread_mutex_lock(&cx->mu);
        equeue_t *ready = io_ready(io, now, &port, &wake);
        pthread_mutex_unlock(&cx->mu);
        u64 held = io_held_wake(io); /* the hold lines are the I/O thread's alone */
        if (held && (!wake || held < wake)) wake = held;
        struct timespec ts, *tsp = NULL;
        /* a thread that sleeps is woken by the kernel when a frame comes; on a virtual
         * machine whose idle CPUs halt at once, that costs tens of microseconds per hop */
        int spinning = io->busy_ns && now - io->last_rx_ns < io->busy_ns;
        if (ready || spinning) {
            ts.tv_sec = ts.tv_nsec = 0;
            tsp = &ts;
        } else if (wake) {
            u64 d = wake > now ? wake - now : 0;
            ts.tv_sec = (time_t)(d / 1000000000ULL);
            ts.tv_nsec = (long)(d % 1000000000ULL);
            tsp = &ts;
        }
        for (u32 i = 0; i < io->nports; i++) {
            pfd[i].fd = io->ports[i].dead ? -1 : io->ports[i].fd;
            pfd[i].events = POLLIN;
            pfd[i].revents = 0;
        }
        pfd[io->nports].fd = io->down_efd;
        pfd[io->nports].events = POLLIN;
        pfd[io->nports].revents = 0;
        int r = ppoll(pfd, io->nports + 1, tsp, NULL);
        if (r < 0 && errno != EINTR) break;
        if (pfd[io->nports].revents & POLLIN) {
            u64 v;
            ssize_t k = read(io->down_efd, &v, sizeof v);
            (void)k;
        }
        for (u32 i = 0; r > 0 && i < io->nports; i++) {
            /* an interface going down or away sets the socket's error: take it (poll would
             * report it again and again), and stop polling a socket that is gone */
            if (pfd[i].revents & POLLERR) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(io->ports[i].fd, SOL_SOCKET, SO_ERROR, &err, &el);
                io->ports[i].errors++;
            }
            if (pfd[i].revents & (POLLHUP | POLLNVAL)) io->ports[i].dead = 1;
        }
        pthread_mutex_lock(&cx->mu);
        round_enter(cx);
        io_release(cx);
        for (u32 i = 0; r > 0 && i < io->nports; i++)
            if (pfd[i].revents & POLLIN) {
                io_receive(cx, &io->ports[i]);
                io->last_rx_ns = now;
            }
        io_injected(cx);
        /* drain the queues that may send now: at most one round's worth per queue, so a
         * flood on one port cannot hold the lock for long */
        for (u32 k = 0; k < IO_BATCH * (io->nports + 1); k++) {
            u64 t = io_now_ns();
            equeue_t *q = io_ready(io, t, &port, &wake);
            if (!q) break;
            io_egress_one(cx, q, t);
            if (cx->nout >= IO_BATCH * 4) break;
        }
        round_exit(cx);
        pthread_mutex_unlock(&cx->mu);
        io_flush(cx);
        io_send_due(io);
    }
    return NULL;
}

