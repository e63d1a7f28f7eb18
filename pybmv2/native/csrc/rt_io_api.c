/* The I/O thread's API (pybmv2/native/io.py): open, attach ports, configure queues and the
 * named extensions, start and stop the thread, exchange packet-ins, packet-outs and digests. */

NX_EXPORT int nx_io_open(void *h, u64 start_ns, i64 cpu_port, u32 depth, double rate_pps) {
    ctx_t *cx = h;
    if (cx->io) return NX_EEXIST;
    nx_io_t *io = calloc(1, sizeof *io);
    if (!io) return NX_ENOMEM;
    io->rx = malloc((size_t)IO_BATCH * (IO_SNAP + 4));
    io->down_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    io->up_efd = eventfd(0, EFD_CLOEXEC);
    if (!io->rx || io->down_efd < 0 || io->up_efd < 0) {
        if (io->down_efd >= 0) close(io->down_efd);
        if (io->up_efd >= 0) close(io->up_efd);
        free(io->rx);
        free(io);
        return NX_ENOMEM;
    }
    io->start_ns = start_ns;
    io->cpu_port = cpu_port;
    io->def_depth = depth ? depth : 64;
    io->def_rate = rate_pps;
    io->cal_slot = -1;
    for (u32 i = 0; i < IO_NPORTNUM; i++) io->portfd[i] = io->portix[i] = -1;
    pthread_mutex_init(&io->upmu, NULL);
    pthread_mutex_init(&io->downmu, NULL);
    cx->io = io;
    return 0;
}

/* attach port `num` to an AF_PACKET socket bound to its interface (Python opened it, and
 * set PACKET_VNET_HDR on it when `vnet`: the port takes and sends super-packets) */
NX_EXPORT int nx_io_port(void *h, u32 num, int fd, int vnet) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io || io->running || num >= IO_NPORTNUM || io->nports >= IO_MAXPORTS) return NX_EINVAL;
    int one = 1, has = 0;
    socklen_t hl = sizeof has;
    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one);
    /* the socket's setting must be the one asked for (a socket that is no packet socket,
     * a test's socket pair, has none: fine without super-packets) */
    int known = !getsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &has, &hl);
    if (vnet ? !(known && has) : (known && has)) return NX_EINVAL;
    io->ports[io->nports].fd = fd;
    io->ports[io->nports].num = num;
    io->ports[io->nports].vnet = vnet ? 1 : 0;
    io->portix[num] = (i32)io->nports;
    io->nports++;
    io->portfd[num] = fd;
    return 0;
}

/* poll without sleeping for `us` microseconds after each frame received (0: sleep at once) */
NX_EXPORT int nx_io_busy_poll(void *h, u32 us) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io || io->running) return NX_EINVAL;
    io->busy_ns = (u64)us * 1000;
    return 0;
}

/* depth (packets, 0: unchanged) and rate (packets/s, <= 0: unlimited) of one port's queue,
 * or of every port's (port < 0) */
NX_EXPORT int nx_io_queue(void *h, i64 port, u32 depth, double rate_pps) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io || port >= IO_NPORTNUM) return NX_EINVAL;
    pthread_mutex_lock(&cx->mu);
    int rc = 0;
    for (i64 p = port < 0 ? 0 : port; p < (port < 0 ? IO_NPORTNUM : port + 1); p++) {
        equeue_t *q = io->q[p];
        if (!q && port < 0) continue;
        if (!q && !(q = io_queue(io, (u64)p))) { rc = NX_ENOMEM; break; }
        if (depth) q->depth = depth;
        q->rate_pps = rate_pps > 0 ? rate_pps : 0;
        if (depth && q->depth > q->cap && !io_queue(io, (u64)p)) { rc = NX_ENOMEM; break; }
    }
    if (port < 0) {
        if (depth) io->def_depth = depth;
        io->def_rate = rate_pps > 0 ? rate_pps : 0;
    }
    pthread_mutex_unlock(&cx->mu);
    efd_signal(io->down_efd);
    return rc;
}

/* --calendar-queue: hold a job while the metadata field in PHV slot `slot` (< 0: none)
 * holds a release time after the clock's (before the thread starts) */
NX_EXPORT int nx_io_calendar(void *h, i64 slot) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io || io->running) return NX_EINVAL;
    io->cal_slot = slot < 0 ? -1 : slot;
    return 0;
}

/* --port-delay and --port-ingress-delay: what `port` transmits leaves `tx_us` after egress,
 * what it receives enters ingress `rx_us` after it arrives (0: at once; before the start) */
NX_EXPORT int nx_io_delay(void *h, u32 port, u64 tx_us, u64 rx_us) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io || io->running || port >= IO_NPORTNUM) return NX_EINVAL;
    io->tx_delay[port] = tx_us;
    io->rx_delay[port] = rx_us;
    return 0;
}

NX_EXPORT int nx_io_start(void *h) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io || io->running) return NX_EINVAL;
    io->stop = 0;
    if (pthread_create(&io->thread, NULL, io_main, cx)) return NX_ENOMEM;
    io->running = 1;
    return 0;
}

/* stop the thread (idempotent); Python's reader is woken to see the end */
NX_EXPORT void nx_io_stop(void *h) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io) return;
    if (io->running) {
        __atomic_store_n(&io->stop, 1, __ATOMIC_RELEASE);
        efd_signal(io->down_efd);
        pthread_join(io->thread, NULL);
        io->running = 0;
    }
    efd_signal(io->up_efd);
}

/* free everything nx_io_open made but the up eventfd (Python closes it after its reader
 * is done) and the sockets (Python's) */
NX_EXPORT void nx_io_close(void *h) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io) return;
    nx_io_stop(h);
    for (u32 p = 0; p < IO_NPORTNUM; p++) {
        equeue_t *q = io->q[p];
        if (!q) continue;
        for (u32 i = 0; i < q->cap; i++) free(q->ring[i].buf);
        free(q->ring);
        free(q);
    }
    hline_free(&io->cal);
    hline_free(&io->tx_line);
    hline_free(&io->rx_line);
    close(io->down_efd);
    free(io->rx);
    free(io->spare);
    free(io->up.p);
    free(io->up_back.p);
    free(io->down.p);
    free(io->down_work.p);
    pthread_mutex_destroy(&io->upmu);
    pthread_mutex_destroy(&io->downmu);
    cx->io = NULL;
    free(io);
}

NX_EXPORT int nx_io_up_fd(void *h) {
    ctx_t *cx = h;
    return cx->io ? cx->io->up_efd : -1;
}

/* a frame entering on `port` (a packet-out: the CPU port), run by the I/O thread */
NX_EXPORT int nx_io_inject(void *h, u64 port, const u8 *frame, u32 len) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io) return NX_EINVAL;
    size_t need = 16 + (((size_t)len + 7) & ~(size_t)7);
    pthread_mutex_lock(&io->downmu);
    int rc = buf_reserve(&io->down, need);
    if (!rc) {
        u8 *r = io->down.p + io->down.n;
        memset(r, 0, 16);
        memcpy(r, &port, 8);
        memcpy(r + 8, &len, 4);
        memcpy(r + 16, frame, len);
        io->down.n += need;
    }
    pthread_mutex_unlock(&io->downmu);
    efd_signal(io->down_efd);
    return rc;
}

/* the records waiting for Python; valid until the next call */
NX_EXPORT u64 nx_io_take(void *h, const u8 **recs) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io) return 0;
    buf_swap(&io->upmu, &io->up, &io->up_back);
    *recs = io->up_back.p;
    return io->up_back.n;
}

/* counters: per port rx, tx, rx dropped, tx dropped (4 x nports), then oversize frames,
 * packet-ins dropped, and per queue (of `qports` given) enqueued, dropped, departed, depth */
NX_EXPORT int nx_io_stats(void *h, u64 *out, const u32 *qports, u32 nq) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io) return NX_EINVAL;
    pthread_mutex_lock(&cx->mu);
    u32 k = 0;
    for (u32 i = 0; i < io->nports; i++) {
        out[k++] = io->ports[i].rx;
        out[k++] = io->ports[i].tx;
        out[k++] = io->ports[i].rx_dropped;
        out[k++] = io->ports[i].tx_dropped;
    }
    out[k++] = io->oversize;
    out[k++] = io->up_dropped;
    for (u32 i = 0; i < nq; i++) {
        equeue_t *q = qports[i] < IO_NPORTNUM ? io->q[qports[i]] : NULL;
        out[k++] = q ? q->enqueued : 0;
        out[k++] = q ? q->dropped : 0;
        out[k++] = q ? q->departed : 0;
        out[k++] = q ? q->n : 0;
    }
    pthread_mutex_unlock(&cx->mu);
    return (int)k;
}

/* the super-packets' counters: per port those received and sent whole (2 x nports), then
 * the super-packets dropped because their output could not be described (rt_offload.c) */
NX_EXPORT int nx_io_offloads(void *h, u64 *out) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io) return NX_EINVAL;
    pthread_mutex_lock(&cx->mu);
    u32 k = 0;
    for (u32 i = 0; i < io->nports; i++) {
        out[k++] = io->ports[i].rx_super;
        out[k++] = io->ports[i].tx_super;
    }
    out[k++] = io->offload_dropped;
    pthread_mutex_unlock(&cx->mu);
    return (int)k;
}

/* the hold lines' counters: per line (calendar, port delay, port ingress delay) the items
 * held, released, dropped (out of memory) and waiting now: 12 values */
NX_EXPORT int nx_io_holds(void *h, u64 *out) {
    ctx_t *cx = h;
    nx_io_t *io = cx->io;
    if (!io) return NX_EINVAL;
    hline_t *lines[3] = {&io->cal, &io->tx_line, &io->rx_line};
    for (int i = 0; i < 3; i++) {
        out[4 * i] = __atomic_load_n(&lines[i]->held, __ATOMIC_RELAXED);
        out[4 * i + 1] = __atomic_load_n(&lines[i]->released, __ATOMIC_RELAXED);
        out[4 * i + 2] = __atomic_load_n(&lines[i]->dropped, __ATOMIC_RELAXED);
        out[4 * i + 3] = __atomic_load_n(&lines[i]->n, __ATOMIC_RELAXED);
    }
    return 12;
}
