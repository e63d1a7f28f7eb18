/* Match-action tables and action profiles (pybmv2/tables.py, action_profiles.py).
 *
 * Entries live in a per-table array indexed by entry id. Exact-only tables hash their key
 * words; exact+one-LPM tables hash (key with the prefix masked, prefix length) and probe
 * the prefix lengths present, longest first; every other table keeps its entries in
 * priority order (highest first, then the caller's sequence number) and scans them. */

enum { MK_EXACT = 0, MK_LPM = 1, MK_TERNARY = 2, MK_RANGE = 3, MK_OPTIONAL = 4, MK_VALID = 5 };
enum { MODE_EXACT = 0, MODE_LPM = 1, MODE_TERNARY = 2 };
enum { IND_NONE = 0, IND_MEMBER = 1, IND_GROUP = 2 };

#define SLOT_EMPTY 0xFFFFFFFFu
#define SLOT_TOMB 0xFFFFFFFEu

typedef struct {
    i32 action;
    u64 args[NX_MAX_ARGW];
} call_t;

typedef struct {
    u8 configured;
    u32 mark; /* the generation it was last listed in (meter arrays) */
    double cir, cburst, pir, pburst;
    /* tokens (peak, committed) and the time of the last update: the packet thread's */
    double tp, tc, last;
} meter_t;

typedef struct {
    i8 kind;
    u8 woff, nwords;
    u16 width;
} keyf_t;

typedef struct {
    int mode, nf, nw, lpm_f;
    const keyf_t *f;
} table_desc_t;

typedef struct {
    u64 seq;
    i32 prio, plen;
    call_t call;
    u8 ind_kind;
    u32 ind_handle, id;
    u32 mark;        /* the generation it was last listed in */
    u32 tpos;        /* its place in that generation's list */
    u64 pkts, bytes; /* counted by the packet thread, never reset */
    u64 seen_pkts, seen_bytes; /* what the control plane has taken of them */
    u64 hit_us;      /* the ingress timestamp of its last hit (tables with support_timeout) */
    meter_t meter;
    u64 kw[]; /* a[nw] (value, low), then b[nw] (mask, high) */
} entry_t;

typedef struct {
    const table_desc_t *d;
    entry_t **ents;
    u32 ecap, next_id;
    u32 *freel, nfree, fcap;
    u32 *slots, hcap, hused, hlive; /* slots; used = live + deleted (tombstones) */
    u32 len_count[129];
    int lens[129], nlens;
    u64 lmask[129][2];
    u32 *order, norder, ocap;
    call_t def;
    touched_t touched[2]; /* entries whose counters or meter the data plane changed */
    const u32 *gen;       /* the packet thread's generation (ctx_t.wgen) */
} table_t;

static void table_init(table_t *t, const table_desc_t *d) {
    memset(t, 0, sizeof *t);
    t->d = d;
    if (d->mode == MODE_LPM) {
        const keyf_t *f = &d->f[d->lpm_f];
        int w = f->width;
        for (int plen = 0; plen <= w && plen <= 128; plen++) {
            u128 full = w >= 128 ? ~(u128)0 : (((u128)1 << w) - 1);
            u128 low = (w - plen) >= 128 ? ~(u128)0 : (((u128)1 << (w - plen)) - 1);
            u128 m = full ^ low;
            t->lmask[plen][0] = (u64)m;
            t->lmask[plen][1] = (u64)(m >> 64);
        }
    }
}

static void table_free(table_t *t) {
    for (u32 i = 0; i < t->next_id; i++) free(t->ents[i]);
    free(t->ents);
    free(t->freel);
    free(t->slots);
    free(t->order);
    free(t->touched[0].ids);
    free(t->touched[1].ids);
}

static inline entry_t *table_entry(const table_t *t, i64 id) {
    if (id < 0 || (u64)id >= t->next_id) return NULL;
    return t->ents[id];
}

/* ---- hashed tables (exact and LPM) ----------------------------------------------------- */

static inline int key_eq(const u64 *a, const u64 *b, int nw) {
    for (int i = 0; i < nw; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static inline u64 slot_hash(const table_t *t, const u64 *key, int plen) {
    return hash_words(key, t->d->nw, (u64)plen + 1);
}

static inline entry_t *hash_find(const table_t *t, const u64 *key, int plen) {
    if (!t->hcap) return NULL;
    u32 mask = t->hcap - 1, h = (u32)slot_hash(t, key, plen) & mask;
    int nw = t->d->nw;
    for (;;) {
        u32 s = t->slots[h];
        if (s == SLOT_EMPTY) return NULL;
        if (s != SLOT_TOMB) {
            entry_t *e = t->ents[s];
            if (e->plen == plen && key_eq(e->kw, key, nw)) return e;
        }
        h = (h + 1) & mask;
    }
}

static void hash_put(table_t *t, u32 id) {
    entry_t *e = t->ents[id];
    u32 mask = t->hcap - 1, h = (u32)slot_hash(t, e->kw, e->plen) & mask;
    while (t->slots[h] != SLOT_EMPTY && t->slots[h] != SLOT_TOMB) h = (h + 1) & mask;
    if (t->slots[h] == SLOT_EMPTY) t->hused++;
    t->slots[h] = id;
    t->hlive++;
}

static int hash_rebuild(table_t *t, u32 cap) {
    u32 *old = t->slots, oldcap = t->hcap;
    u32 *s = malloc((size_t)cap * sizeof(u32));
    if (!s) return NX_ENOMEM;
    memset(s, 0xFF, (size_t)cap * sizeof(u32));
    t->slots = s;
    t->hcap = cap;
    t->hused = t->hlive = 0;
    for (u32 i = 0; i < oldcap; i++)
        if (old[i] != SLOT_EMPTY && old[i] != SLOT_TOMB) hash_put(t, old[i]);
    free(old);
    return 0;
}

static void hash_remove(table_t *t, const entry_t *e) {
    u32 mask = t->hcap - 1, h = (u32)slot_hash(t, e->kw, e->plen) & mask;
    for (;;) {
        u32 s = t->slots[h];
        if (s == SLOT_EMPTY) return;
        if (s != SLOT_TOMB && t->ents[s] == e) {
            t->slots[h] = SLOT_TOMB;
            t->hlive--;
            return;
        }
        h = (h + 1) & mask;
    }
}

static void lpm_lengths(table_t *t) {
    t->nlens = 0;
    for (int l = 128; l >= 0; l--)
        if (t->len_count[l]) t->lens[t->nlens++] = l;
}

static inline entry_t *lpm_lookup(const table_t *t, const u64 *key) {
    const keyf_t *f = &t->d->f[t->d->lpm_f];
    int nw = t->d->nw, o = f->woff, n = f->nwords;
    u64 k[NX_MAX_KEYW];
    memcpy(k, key, (size_t)nw * sizeof(u64));
    for (int i = 0; i < t->nlens; i++) {
        int plen = t->lens[i];
        for (int j = 0; j < n; j++) k[o + j] = key[o + j] & t->lmask[plen][j];
        entry_t *e = hash_find(t, k, plen);
        if (e) return e;
    }
    return NULL;
}

/* ---- priority-ordered tables ------------------------------------------------------------ */

static inline u128 word_val(const u64 *w, int n) {
    return n == 2 ? (((u128)w[1] << 64) | w[0]) : (u128)w[0];
}

static inline int tern_match(const table_desc_t *d, const entry_t *e, const u64 *key) {
    const u64 *a = e->kw, *b = e->kw + d->nw;
    for (int i = 0; i < d->nf; i++) {
        const keyf_t *f = &d->f[i];
        int o = f->woff;
        switch (f->kind) {
        case MK_EXACT:
        case MK_VALID:
            for (int j = 0; j < f->nwords; j++)
                if (key[o + j] != a[o + j]) return 0;
            break;
        case MK_RANGE: {
            u128 v = word_val(key + o, f->nwords);
            if (v < word_val(a + o, f->nwords) || v > word_val(b + o, f->nwords)) return 0;
            break;
        }
        default: /* ternary, optional, lpm: value and mask */
            for (int j = 0; j < f->nwords; j++)
                if ((key[o + j] & b[o + j]) != a[o + j]) return 0;
        }
    }
    return 1;
}

static inline int before(const entry_t *x, const entry_t *y) {
    return x->prio > y->prio || (x->prio == y->prio && x->seq < y->seq);
}

static int order_insert(table_t *t, u32 id) {
    if (grow((void **)&t->order, &t->ocap, t->norder + 1, sizeof(u32))) return NX_ENOMEM;
    entry_t *e = t->ents[id];
    u32 lo = 0, hi = t->norder;
    while (lo < hi) {
        u32 mid = (lo + hi) / 2;
        if (before(t->ents[t->order[mid]], e)) lo = mid + 1;
        else hi = mid;
    }
    memmove(t->order + lo + 1, t->order + lo, (t->norder - lo) * sizeof(u32));
    t->order[lo] = id;
    t->norder++;
    return 0;
}

static void order_remove(table_t *t, u32 id) {
    for (u32 i = 0; i < t->norder; i++)
        if (t->order[i] == id) {
            memmove(t->order + i, t->order + i + 1, (t->norder - i - 1) * sizeof(u32));
            t->norder--;
            return;
        }
}

/* ---- the table API ------------------------------------------------------------------------ */

static inline entry_t *table_lookup(const table_t *t, const u64 *key) {
    switch (t->d->mode) {
    case MODE_EXACT:
        return hash_find(t, key, 0);
    case MODE_LPM:
        return lpm_lookup(t, key);
    default:
        for (u32 i = 0; i < t->norder; i++) {
            entry_t *e = t->ents[t->order[i]];
            if (tern_match(t->d, e, key)) return e;
        }
        return NULL;
    }
}

static i64 table_add(table_t *t, const u64 *a, const u64 *b, int plen, i32 prio, u64 seq) {
    const table_desc_t *d = t->d;
    int nw = d->nw;
    if (d->mode == MODE_LPM && (plen < 0 || plen > d->f[d->lpm_f].width)) return NX_EINVAL;
    if (d->mode != MODE_LPM) plen = 0;
    if (d->mode != MODE_TERNARY && hash_find(t, a, plen)) return NX_EEXIST;
    u32 id;
    if (t->nfree) {
        id = t->freel[--t->nfree];
    } else {
        if (grow((void **)&t->ents, &t->ecap, t->next_id + 1, sizeof(entry_t *))) return NX_ENOMEM;
        id = t->next_id++;
    }
    entry_t *e = calloc(1, sizeof(entry_t) + (size_t)(2 * nw) * sizeof(u64));
    if (!e) return NX_ENOMEM;
    memcpy(e->kw, a, (size_t)nw * sizeof(u64));
    memcpy(e->kw + nw, b, (size_t)nw * sizeof(u64));
    e->plen = plen;
    e->prio = prio;
    e->seq = seq;
    e->id = id;
    t->ents[id] = e;
    if (d->mode == MODE_TERNARY) {
        if (order_insert(t, id)) return NX_ENOMEM;
    } else {
        if ((t->hused + 1) * 2 > t->hcap) { /* sized by the live entries: tombstones go */
            u32 cap = 64;
            while (cap < (t->hlive + 1) * 4) cap *= 2;
            if (hash_rebuild(t, cap)) return NX_ENOMEM;
        }
        hash_put(t, id);
        if (d->mode == MODE_LPM && t->len_count[plen]++ == 0) lpm_lengths(t);
    }
    return id;
}

/* take a deleted entry off the touched lists (under the engine's lock, no pull running):
 * it is listed at most once, at its place in its last generation's list, and only if that
 * list was not taken since (then another entry, or none, is at that place) */
static void entry_forget(table_t *t, const entry_t *e) {
    if (!e->mark) return;
    touched_t *l = &t->touched[e->mark & 1];
    if (e->tpos >= l->n || l->ids[e->tpos] != e->id) return;
    u32 last = l->ids[--l->n];
    if (last != e->id) {
        l->ids[e->tpos] = last;
        t->ents[last]->tpos = e->tpos;
    }
}

static int table_delete(table_t *t, i64 id) {
    entry_t *e = table_entry(t, id);
    if (!e) return NX_ENOENT;
    if (t->d->mode == MODE_TERNARY) {
        order_remove(t, (u32)id);
    } else {
        hash_remove(t, e);
        if (t->d->mode == MODE_LPM && --t->len_count[e->plen] == 0) lpm_lengths(t);
    }
    entry_forget(t, e);
    free(e);
    t->ents[id] = NULL;
    if (grow((void **)&t->freel, &t->fcap, t->nfree + 1, sizeof(u32))) return NX_ENOMEM;
    t->freel[t->nfree++] = (u32)id;
    return 0;
}

/* list an entry whose counters or meter the data plane changed (once per generation) */
static inline void entry_touch(table_t *t, entry_t *e) {
    u32 g = *t->gen;
    if (e->mark == g) return;
    touched_t *l = &t->touched[g & 1];
    u32 at = l->n;
    if (touched_add(l, e->id) == 0) {
        e->mark = g;
        e->tpos = at;
    }
}

/* time-stamp a hit of an entry that may age (BMv2's update_ts: the packet's ingress time) */
static inline void entry_hit(table_t *t, entry_t *e, u64 ts_us) {
    ST(&e->hit_us, ts_us);
    entry_touch(t, e);
}

static inline void entry_count(table_t *t, entry_t *e, u64 nbytes) {
    ST(&e->pkts, e->pkts + 1);
    ST(&e->bytes, e->bytes + nbytes);
    entry_touch(t, e);
}

/* ---- action profiles and selectors ------------------------------------------------------- */

typedef struct {
    u8 present;
    call_t call;
} member_t;

typedef struct {
    u8 present;
    u32 n, cap;
    u32 *m; /* member handles, ascending */
} group_t;

typedef struct {
    member_t *m;
    u32 mcap;
    group_t *g;
    u32 gcap;
} profile_t;

static void profile_free(profile_t *p) {
    for (u32 i = 0; i < p->gcap; i++) free(p->g[i].m);
    free(p->m);
    free(p->g);
}
