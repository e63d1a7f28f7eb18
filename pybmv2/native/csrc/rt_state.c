/* Stateful externs and the packet replication engine (pybmv2/externs.py, pre.py).
 *
 * Every cell the data plane changes is listed once per generation (rt_base.h), so that
 * the control plane collects what changed since it last looked without scanning, and
 * without the engine's lock. */

typedef struct {
    u32 size;
    u64 *pkts, *bytes; /* the packet thread's counts, never reset */
    u64 *seen;         /* per cell: the packets and bytes the control plane has taken */
    u32 *mark;
    touched_t touched[2];
    const u32 *gen;
} counter_t;

typedef struct {
    u32 size;
    u128 mask;
    u64 *v; /* per cell: the low, then the high 64 bits */
    u32 *mark;
    touched_t touched[2];
    const u32 *gen;
} reg_t;

typedef struct {
    u32 size;
    int packets; /* 1: packet meter, 0: byte meter */
    meter_t *m;
    touched_t touched[2];
    const u32 *gen;
} meterarr_t;

enum { GREEN = 0, YELLOW = 1, RED = 2 };

/* two lists that hold every one of `size` cells without growing */
static int touched_init(touched_t *lists, u32 size) {
    for (int g = 0; g < 2; g++) {
        lists[g].ids = calloc(size ? size : 1, sizeof(u32));
        lists[g].cap = size ? size : 1;
        lists[g].n = 0;
        if (!lists[g].ids) return NX_ENOMEM;
    }
    return 0;
}

static void touched_free(touched_t *lists) {
    free(lists[0].ids);
    free(lists[1].ids);
}

/* list cell i of an array (once per generation) */
static inline void cell_touch(u32 *mark, touched_t *lists, const u32 *gen, u64 i) {
    u32 g = *gen;
    if (mark[i] != g && touched_add(&lists[g & 1], (u32)i) == 0) mark[i] = g;
}

static int counter_init(counter_t *c, u32 size) {
    c->size = size;
    c->pkts = calloc(size ? size : 1, sizeof(u64));
    c->bytes = calloc(size ? size : 1, sizeof(u64));
    c->seen = calloc(2 * (size_t)(size ? size : 1), sizeof(u64));
    c->mark = calloc(size ? size : 1, sizeof(u32));
    int bad = touched_init(c->touched, size);
    return (c->pkts && c->bytes && c->seen && c->mark && !bad) ? 0 : NX_ENOMEM;
}

static void counter_free(counter_t *c) {
    free(c->pkts);
    free(c->bytes);
    free(c->seen);
    free(c->mark);
    touched_free(c->touched);
}

/* CounterArray.count: out-of-range indices count nothing */
static inline void counter_count(counter_t *c, u64 i, u64 nbytes) {
    if (i >= c->size) return;
    ST(&c->pkts[i], c->pkts[i] + 1);
    ST(&c->bytes[i], c->bytes[i] + nbytes);
    cell_touch(c->mark, c->touched, c->gen, i);
}

static int reg_init(reg_t *r, u32 size, int width) {
    r->size = size;
    r->mask = width >= 128 ? ~(u128)0 : (((u128)1 << width) - 1);
    r->v = calloc(2 * (size_t)(size ? size : 1), sizeof(u64));
    r->mark = calloc(size ? size : 1, sizeof(u32));
    int bad = touched_init(r->touched, size);
    return (r->v && r->mark && !bad) ? 0 : NX_ENOMEM;
}

static void reg_free(reg_t *r) {
    free(r->v);
    free(r->mark);
    touched_free(r->touched);
}

/* a cell as the packet thread (its only writer) or a reader holding the lock sees it */
static inline u128 reg_read(const reg_t *r, u64 i) {
    return i < r->size ? (((u128)r->v[2 * i + 1] << 64) | r->v[2 * i]) : 0;
}

/* a cell's value, by a pull running beside the packet thread: a value being written may
 * mix its two halves, and is read again at the next pull (it is listed again) */
static inline u128 reg_load(const reg_t *r, u64 i) {
    return ((u128)LD(&r->v[2 * i + 1]) << 64) | LD(&r->v[2 * i]);
}

static inline void reg_store(reg_t *r, u64 i, u128 v) {
    v &= r->mask;
    ST(&r->v[2 * i], (u64)v);
    ST(&r->v[2 * i + 1], (u64)(v >> 64));
}

static inline void reg_write(reg_t *r, u64 i, u128 v) {
    if (i >= r->size) return;
    reg_store(r, i, v);
    cell_touch(r->mark, r->touched, r->gen, i);
}

static int meterarr_init(meterarr_t *a, u32 size, int packets) {
    a->size = size;
    a->packets = packets;
    a->m = calloc(size ? size : 1, sizeof(meter_t));
    int bad = touched_init(a->touched, size);
    return (a->m && !bad) ? 0 : NX_ENOMEM;
}

static void meterarr_free(meterarr_t *a) {
    free(a->m);
    touched_free(a->touched);
}

/* MeterCell.execute: a two-rate three-colour meter refilled continuously (the packet
 * thread writes the tokens and the time; a pull reads them) */
static inline int meter_exec(meter_t *m, u64 units) {
    if (!m->configured) return GREEN;
    double now = mono_seconds(), elapsed = now - m->last, u = (double)units;
    double p = m->tp + elapsed * m->pir, c = m->tc + elapsed * m->cir;
    p = m->pburst < p ? m->pburst : p;
    c = m->cburst < c ? m->cburst : c;
    int colour = GREEN;
    if (p < u) {
        colour = RED;
    } else {
        p -= u;
        if (c < u) colour = YELLOW;
        else c -= u;
    }
    st_f64(&m->last, now);
    st_f64(&m->tp, p);
    st_f64(&m->tc, c);
    return colour;
}

static inline int meterarr_exec(meterarr_t *a, u64 i, u64 nbytes) {
    if (i >= a->size) return GREEN;
    meter_t *m = &a->m[i];
    if (!m->configured) return GREEN;
    u32 g = *a->gen;
    if (m->mark != g && touched_add(&a->touched[g & 1], (u32)i) == 0) m->mark = g;
    return meter_exec(m, a->packets ? 1 : nbytes);
}

/* ---- parser value sets ------------------------------------------------------------------ */

/* a value set's members, as its transitions compare them (the key under the mask) */
typedef struct {
    u128 *m;
    u32 n;
} vset_t;

static inline int vset_has(const vset_t *s, u128 k) {
    for (u32 i = 0; i < s->n; i++)
        if (s->m[i] == k) return 1;
    return 0;
}

/* ---- the packet replication engine ------------------------------------------------------- */

typedef struct {
    u32 port, rid;
} replica_t;

typedef struct {
    u32 n;
    i64 trunc; /* clone sessions: packet_length_bytes */
    replica_t r[];
} rlist_t;

#define NX_MGIDS 65536
#define NX_SESSIONS 32768

static rlist_t *rlist_new(const u32 *ports, const u32 *rids, u32 n, i64 trunc) {
    rlist_t *l = malloc(sizeof(rlist_t) + (size_t)n * sizeof(replica_t));
    if (!l) return NULL;
    l->n = n;
    l->trunc = trunc;
    for (u32 i = 0; i < n; i++) {
        l->r[i].port = ports[i];
        l->r[i].rid = rids[i];
    }
    return l;
}
