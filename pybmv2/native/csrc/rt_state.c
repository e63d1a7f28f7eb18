/* Stateful externs and the packet replication engine (pybmv2/externs.py, pre.py).
 *
 * Every cell the data plane changes is put on its array's dirty list once, so that the
 * control plane can collect what changed since it last looked without scanning. */

typedef struct {
    u32 size;
    u64 *pkts, *bytes;
    u8 *dirty;
    u32 *dl, nd;
} counter_t;

typedef struct {
    u32 size;
    u128 mask;
    u128 *v;
    u8 *dirty;
    u32 *dl, nd;
} reg_t;

typedef struct {
    u32 size;
    int packets; /* 1: packet meter, 0: byte meter */
    meter_t *m;
    u32 *dl, nd;
} meterarr_t;

enum { GREEN = 0, YELLOW = 1, RED = 2 };

static int counter_init(counter_t *c, u32 size) {
    c->size = size;
    c->pkts = calloc(size ? size : 1, sizeof(u64));
    c->bytes = calloc(size ? size : 1, sizeof(u64));
    c->dirty = calloc(size ? size : 1, 1);
    c->dl = calloc(size ? size : 1, sizeof(u32));
    c->nd = 0;
    return (c->pkts && c->bytes && c->dirty && c->dl) ? 0 : NX_ENOMEM;
}

static void counter_free(counter_t *c) {
    free(c->pkts);
    free(c->bytes);
    free(c->dirty);
    free(c->dl);
}

/* CounterArray.count: out-of-range indices count nothing */
static inline void counter_count(counter_t *c, u64 i, u64 nbytes) {
    if (i >= c->size) return;
    c->pkts[i]++;
    c->bytes[i] += nbytes;
    if (!c->dirty[i]) {
        c->dirty[i] = 1;
        c->dl[c->nd++] = (u32)i;
    }
}

static int reg_init(reg_t *r, u32 size, int width) {
    r->size = size;
    r->mask = width >= 128 ? ~(u128)0 : (((u128)1 << width) - 1);
    r->v = calloc(size ? size : 1, sizeof(u128));
    r->dirty = calloc(size ? size : 1, 1);
    r->dl = calloc(size ? size : 1, sizeof(u32));
    r->nd = 0;
    return (r->v && r->dirty && r->dl) ? 0 : NX_ENOMEM;
}

static void reg_free(reg_t *r) {
    free(r->v);
    free(r->dirty);
    free(r->dl);
}

static inline u128 reg_read(const reg_t *r, u64 i) { return i < r->size ? r->v[i] : 0; }

static inline void reg_write(reg_t *r, u64 i, u128 v) {
    if (i >= r->size) return;
    r->v[i] = v & r->mask;
    if (!r->dirty[i]) {
        r->dirty[i] = 1;
        r->dl[r->nd++] = (u32)i;
    }
}

static int meterarr_init(meterarr_t *a, u32 size, int packets) {
    a->size = size;
    a->packets = packets;
    a->m = calloc(size ? size : 1, sizeof(meter_t));
    a->dl = calloc(size ? size : 1, sizeof(u32));
    a->nd = 0;
    return (a->m && a->dl) ? 0 : NX_ENOMEM;
}

static void meterarr_free(meterarr_t *a) {
    free(a->m);
    free(a->dl);
}

/* MeterCell.execute: a two-rate three-colour meter refilled continuously */
static inline int meter_exec(meter_t *m, u64 units) {
    if (!m->configured) return GREEN;
    double now = mono_seconds(), elapsed = now - m->last, u = (double)units;
    m->last = now;
    double p = m->tp + elapsed * m->pir, c = m->tc + elapsed * m->cir;
    m->tp = m->pburst < p ? m->pburst : p;
    m->tc = m->cburst < c ? m->cburst : c;
    if (m->tp < u) return RED;
    m->tp -= u;
    if (m->tc < u) return YELLOW;
    m->tc -= u;
    return GREEN;
}

static inline int meterarr_exec(meterarr_t *a, u64 i, u64 nbytes) {
    if (i >= a->size) return GREEN;
    meter_t *m = &a->m[i];
    if (!m->configured) return GREEN;
    if (!m->dirty) {
        m->dirty = 1;
        a->dl[a->nd++] = (u32)i;
    }
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
