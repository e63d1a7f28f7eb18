/* Hold lines: packets and frames held until a time on the switch's clock (pybmv2/calendar.py's
 * CalendarQueue, in C), for the I/O thread of rt_io.c.
 *
 * A line is a binary min-heap ordered by (release time, arrival number): items leave in
 * release order, and items with the same release time in the order they came, as Python's
 * heapq of (release_us, next(seq), item) gives them. The I/O thread alone pushes and pops;
 * the counters are read by other threads (nx_io_holds), so they are updated atomically. */

/* one held item: a frame (port delays), or an egress job and its frame (calendar queues) */
typedef struct {
    u64 port;
    u32 len;
    pkt_t *job; /* the egress job's state (calendar queue), else NULL; job->data is `data` */
    u32 gso;    /* the frame's offload word (rt_offload.c): a held frame's, or the job's */
    u8 data[];
} held_t;

typedef struct {
    u64 at_us, seq;
    held_t *item;
} hentry_t;

typedef struct {
    hentry_t *h;
    u32 n, cap;
    u64 seq;
    u64 held, released, dropped; /* items held so far, released, refused (out of memory) */
} hline_t;

static inline int hentry_before(const hentry_t *a, const hentry_t *b) {
    return a->at_us < b->at_us || (a->at_us == b->at_us && a->seq < b->seq);
}

/* a copy of `len` bytes of `data` for port `port`, with a copy of `job` when given */
static held_t *held_new(u64 port, const u8 *data, u32 len, const pkt_t *job, u32 gso) {
    held_t *it = malloc(sizeof *it + (len ? len : 1));
    if (!it) return NULL;
    it->port = port;
    it->len = len;
    it->gso = job ? job->gso : gso;
    it->job = NULL;
    memcpy(it->data, data, len);
    if (job) {
        it->job = malloc(sizeof *job);
        if (!it->job) {
            free(it);
            return NULL;
        }
        *it->job = *job;
        it->job->data = it->data;
    }
    return it;
}

static void held_free(held_t *it) {
    if (!it) return;
    free(it->job);
    free(it);
}

/* hold `it` until `at_us` (the line owns it from now on, and frees it if it cannot) */
static void hline_push(hline_t *l, u64 at_us, held_t *it) {
    if (!it || grow((void **)&l->h, &l->cap, l->n + 1, sizeof(hentry_t))) {
        held_free(it);
        __atomic_fetch_add(&l->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    hentry_t e = {at_us, l->seq++, it};
    u32 i = l->n;
    while (i > 0) { /* sift up */
        u32 parent = (i - 1) / 2;
        if (!hentry_before(&e, &l->h[parent])) break;
        l->h[i] = l->h[parent];
        i = parent;
    }
    l->h[i] = e;
    __atomic_store_n(&l->n, l->n + 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&l->held, 1, __ATOMIC_RELAXED);
}

/* the release time of the next item (UINT64_MAX: the line is empty) */
static inline u64 hline_next(const hline_t *l) { return l->n ? l->h[0].at_us : UINT64_MAX; }

/* the next item if its time has come (at_us <= now_us), else NULL; the caller frees it */
static held_t *hline_pop_due(hline_t *l, u64 now_us) {
    if (!l->n || l->h[0].at_us > now_us) return NULL;
    held_t *it = l->h[0].item;
    u32 n = l->n - 1;
    hentry_t last = l->h[n];
    u32 i = 0;
    for (;;) { /* sift the last entry down from the root */
        u32 c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && hentry_before(&l->h[c + 1], &l->h[c])) c++;
        if (!hentry_before(&l->h[c], &last)) break;
        l->h[i] = l->h[c];
        i = c;
    }
    if (n) l->h[i] = last;
    __atomic_store_n(&l->n, n, __ATOMIC_RELAXED);
    __atomic_fetch_add(&l->released, 1, __ATOMIC_RELAXED);
    return it;
}

/* drop every item (the I/O thread stopped; as its queues' packets, they are lost) */
static void hline_free(hline_t *l) {
    for (u32 i = 0; i < l->n; i++) held_free(l->h[i].item);
    free(l->h);
    memset(l, 0, sizeof *l);
}
