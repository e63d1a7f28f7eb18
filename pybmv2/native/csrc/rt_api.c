/* The engine's exported API, driven from Python through ctypes (pybmv2/native/engine.py).
 * Every call that changes state takes the engine's lock (recursive: nx_lock may be held
 * around several), so the packet thread never sees a half-made change, and never waits for
 * more than one call's C. The caller keeps nx_process apart from them (it holds nx_lock).
 * Pulls (nx_pull_begin, then the *_take calls) need no lock against the packet thread,
 * only against each other and the calls that change state (the caller's own lock). */

#include <sched.h>

/* the body of an exported nx_X that changes state: do_X(...) under the engine's lock, and
 * its result (the function's first parameter is the handle, h) */
#define LOCKED(type, call)                  \
    do {                                    \
        ctx_t *cx_ = h;                     \
        pthread_mutex_lock(&cx_->mu);       \
        type rc_ = (call);                  \
        pthread_mutex_unlock(&cx_->mu);     \
        return rc_;                         \
    } while (0)

static void set_call(call_t *c, i32 action, const u64 *args, int nargs) {
    memset(c, 0, sizeof *c);
    c->action = action;
    if (nargs > NX_MAX_ARGW) nargs = NX_MAX_ARGW;
    if (nargs > 0) memcpy(c->args, args, (size_t)nargs * sizeof(u64));
}

NX_EXPORT void *nx_create(void) {
    algos_init();
    ctx_t *cx = calloc(1, sizeof(ctx_t));
    if (!cx) return NULL;
    cx->gen = cx->wgen = 1; /* 0 is no generation: `busy` between rounds */
    cx->drain = 0;
    for (int i = 0; i < NX_NT_REAL; i++) {
        table_init(&cx->tables[i], &TABLE_DESCS[i]);
        cx->tables[i].def.action = -1;
        cx->tables[i].gen = &cx->wgen;
    }
    int bad = 0;
    for (int i = 0; i < NX_NC_REAL; i++) {
        bad |= counter_init(&cx->counters[i], COUNTER_SIZES[i]);
        cx->counters[i].gen = &cx->wgen;
    }
    for (int i = 0; i < NX_NR_REAL; i++) {
        bad |= reg_init(&cx->regs[i], REG_SIZES[i], REG_WIDTHS[i]);
        cx->regs[i].gen = &cx->wgen;
    }
    for (int i = 0; i < NX_NM_REAL; i++) {
        bad |= meterarr_init(&cx->meters[i], METER_SIZES[i], METER_PACKETS[i]);
        cx->meters[i].gen = &cx->wgen;
    }
    cx->mg = calloc(NX_MGIDS, sizeof(rlist_t *));
    cx->ss = calloc(NX_SESSIONS, sizeof(rlist_t *));
    if (bad || !cx->mg || !cx->ss) return NULL;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&cx->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    return cx;
}

/* the engine's lock: the control plane holds it around every change and read of the state
 * the I/O thread's packets use (a recursive mutex) */
NX_EXPORT void nx_lock(void *h) { pthread_mutex_lock(&((ctx_t *)h)->mu); }
NX_EXPORT void nx_unlock(void *h) { pthread_mutex_unlock(&((ctx_t *)h)->mu); }

NX_EXPORT void nx_destroy(void *h) {
    ctx_t *cx = h;
    if (!cx) return;
    nx_io_close(cx);
    for (int i = 0; i < NX_NT_REAL; i++) table_free(&cx->tables[i]);
    for (int i = 0; i < NX_NP_REAL; i++) profile_free(&cx->profiles[i]);
    for (int i = 0; i < NX_NC_REAL; i++) counter_free(&cx->counters[i]);
    for (int i = 0; i < NX_NR_REAL; i++) reg_free(&cx->regs[i]);
    for (int i = 0; i < NX_NM_REAL; i++) meterarr_free(&cx->meters[i]);
    for (int i = 0; i < NX_NV_REAL; i++) free(cx->vsets[i].m);
    for (u32 i = 0; i < NX_MGIDS; i++) free(cx->mg[i]);
    for (u32 i = 0; i < NX_SESSIONS; i++) free(cx->ss[i]);
    free(cx->mg);
    free(cx->ss);
    free(cx->q);
    arena_reset(cx);
    free(cx->arena);
    free(cx->scratch.p);
    free(cx->out.p);
    free(cx->oport);
    free(cx->ooff);
    free(cx->olen);
    free(cx->ogso);
    free(cx->dig.p);
    free(cx->pool);
    pthread_mutex_destroy(&cx->mu);
    free(cx);
}

/* ---- tables ---------------------------------------------------------------------------- */

static table_t *tbl(ctx_t *cx, int tid) {
    return (tid >= 0 && tid < NX_NT_REAL) ? &cx->tables[tid] : NULL;
}

static void set_indirect(entry_t *e, int kind, u32 handle) {
    e->ind_kind = (u8)kind;
    e->ind_handle = handle;
}

static i64 do_table_add(void *h, int tid, const u64 *a, const u64 *b, int plen, i32 prio,
                           u64 seq, i32 action, const u64 *args, int nargs, int ind_kind,
                           u32 ind_handle) {
    table_t *t = tbl(h, tid);
    if (!t) return NX_EINVAL;
    i64 id = table_add(t, a, b, plen, prio, seq);
    if (id < 0) return id;
    entry_t *e = t->ents[id];
    set_call(&e->call, action, args, nargs);
    set_indirect(e, ind_kind, ind_handle);
    return id;
}

NX_EXPORT i64 nx_table_add(void *h, int tid, const u64 *a, const u64 *b, int plen, i32 prio,
                           u64 seq, i32 action, const u64 *args, int nargs, int ind_kind,
                           u32 ind_handle) {
    LOCKED(i64, do_table_add(h, tid, a, b, plen, prio, seq, action, args, nargs, ind_kind, ind_handle));
}

/* Entries packed in 64-bit words, one after another: tid, plen, priority, seq, action,
 * nargs, indirect kind, indirect handle, nwords, then nwords key words (a), nwords mask
 * words (b) and nargs argument words (engine.py packs them: NativeEngine.table_add_many).
 * Each entry's id goes to eids; the number added is returned, and if it is less than n,
 * eids[that number] holds the error of the entry that failed (the rest were not tried).
 * The lock is taken once for all of them: packets wait at most one batch of adds. */
NX_EXPORT i64 nx_table_add_many(void *h, const u64 *w, u32 n, i64 *eids) {
    ctx_t *cx = h;
    u32 i;
    pthread_mutex_lock(&cx->mu);
    for (i = 0; i < n; i++) {
        int nwords = (int)w[8], nargs = (int)w[5];
        const u64 *a = w + 9, *b = a + nwords, *args = b + nwords;
        i64 id = do_table_add(h, (int)w[0], a, b, (int)w[1], (i32)w[2], w[3], (i32)w[4], args,
                              nargs, (int)w[6], (u32)w[7]);
        eids[i] = id;
        if (id < 0) break;
        w = args + nargs;
    }
    pthread_mutex_unlock(&cx->mu);
    return i;
}

static int do_table_modify(void *h, int tid, i64 eid, i32 action, const u64 *args, int nargs,
                              int ind_kind, u32 ind_handle) {
    table_t *t = tbl(h, tid);
    entry_t *e = t ? table_entry(t, eid) : NULL;
    if (!e) return NX_ENOENT;
    set_call(&e->call, action, args, nargs);
    set_indirect(e, ind_kind, ind_handle);
    return 0;
}

NX_EXPORT int nx_table_modify(void *h, int tid, i64 eid, i32 action, const u64 *args, int nargs,
                              int ind_kind, u32 ind_handle) {
    LOCKED(int, do_table_modify(h, tid, eid, action, args, nargs, ind_kind, ind_handle));
}

static int do_table_delete(void *h, int tid, i64 eid) {
    table_t *t = tbl(h, tid);
    return t ? table_delete(t, eid) : NX_EINVAL;
}

NX_EXPORT int nx_table_delete(void *h, int tid, i64 eid) {
    LOCKED(int, do_table_delete(h, tid, eid));
}

static int do_table_set_default(void *h, int tid, i32 action, const u64 *args, int nargs) {
    table_t *t = tbl(h, tid);
    if (!t) return NX_EINVAL;
    set_call(&t->def, action, args, nargs);
    return 0;
}

NX_EXPORT int nx_table_set_default(void *h, int tid, i32 action, const u64 *args, int nargs) {
    LOCKED(int, do_table_set_default(h, tid, action, args, nargs));
}

NX_EXPORT i64 nx_table_size(void *h, int tid) {
    table_t *t = tbl(h, tid);
    if (!t) return NX_EINVAL;
    return (i64)t->next_id - (i64)t->nfree;
}

/* the hash slots of an exact or LPM table (memory use, for tests) */
NX_EXPORT i64 nx_table_slots(void *h, int tid) {
    table_t *t = tbl(h, tid);
    return t ? (i64)t->hcap : NX_EINVAL;
}

/* counters not taken yet: out[0] packets, out[1] bytes; reset: take them (the packet
 * thread's counts are never written: the control plane moves what it has seen) */
NX_EXPORT int nx_entry_counters(void *h, int tid, i64 eid, u64 *out, int reset) {
    table_t *t = tbl(h, tid);
    entry_t *e = t ? table_entry(t, eid) : NULL;
    if (!e) return NX_ENOENT;
    u64 p = LD(&e->pkts), b = LD(&e->bytes);
    out[0] = p - e->seen_pkts;
    out[1] = b - e->seen_bytes;
    if (reset) {
        e->seen_pkts = p;
        e->seen_bytes = b;
    }
    return 0;
}

/* make the counters not taken yet read (pkts, bytes) */
static int do_entry_set_counters(void *h, int tid, i64 eid, u64 pkts, u64 bytes) {
    table_t *t = tbl(h, tid);
    entry_t *e = t ? table_entry(t, eid) : NULL;
    if (!e) return NX_ENOENT;
    e->seen_pkts = LD(&e->pkts) - pkts;
    e->seen_bytes = LD(&e->bytes) - bytes;
    return 0;
}

NX_EXPORT int nx_entry_set_counters(void *h, int tid, i64 eid, u64 pkts, u64 bytes) {
    LOCKED(int, do_entry_set_counters(h, tid, eid, pkts, bytes));
}

/* meters: cfg = cir, cburst, pir, pburst, peak tokens, committed tokens, last update (s) */
static void meter_set(meter_t *m, int configured, const double *cfg) {
    m->configured = (u8)configured;
    if (!configured) return;
    m->cir = cfg[0];
    m->cburst = cfg[1];
    m->pir = cfg[2];
    m->pburst = cfg[3];
    m->tp = cfg[4];
    m->tc = cfg[5];
    m->last = cfg[6];
}

static void meter_get(const meter_t *m, double *out) {
    out[0] = ld_f64(&m->tp);
    out[1] = ld_f64(&m->tc);
    out[2] = ld_f64(&m->last);
}

static int do_entry_meter(void *h, int tid, i64 eid, int configured, const double *cfg) {
    table_t *t = tbl(h, tid);
    entry_t *e = t ? table_entry(t, eid) : NULL;
    if (!e) return NX_ENOENT;
    meter_set(&e->meter, configured, cfg);
    return 0;
}

NX_EXPORT int nx_entry_meter(void *h, int tid, i64 eid, int configured, const double *cfg) {
    LOCKED(int, do_entry_meter(h, tid, eid, configured, cfg));
}

/* start a pull: the next generation of touched lists begins, and once the packet thread
 * runs no round of the old one (it is never waited for longer than that round), the
 * *_take calls read the old one's lists and cells without the engine's lock */
NX_EXPORT void nx_pull_begin(void *h) {
    ctx_t *cx = h;
    u32 old = __atomic_load_n(&cx->gen, __ATOMIC_RELAXED); /* only pulls change it */
    u32 next = old + 1 ? old + 1 : 1;
    __atomic_store_n(&cx->gen, next, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&cx->busy, __ATOMIC_SEQ_CST) == old) sched_yield();
    cx->drain = old;
}

/* take the entries the data plane touched in the generation a pull ended: their ids, the
 * counts since they were last taken and meter state (peak tokens, committed tokens, last
 * update); cap >= size */
NX_EXPORT i64 nx_table_take(void *h, int tid, i64 *eids, u64 *counts, double *meters, u64 *hits,
                            i64 cap) {
    ctx_t *cx = h;
    table_t *t = tbl(cx, tid);
    if (!t) return NX_EINVAL;
    touched_t *l = &t->touched[cx->drain & 1];
    i64 n = 0;
    u32 i = 0;
    for (; i < l->n && n < cap; i++) {
        entry_t *e = table_entry(t, l->ids[i]);
        if (!e) continue; /* deleted (a list a pull began but did not take) */
        u64 p = LD(&e->pkts), b = LD(&e->bytes);
        eids[n] = e->id;
        counts[2 * n] = p - e->seen_pkts;
        counts[2 * n + 1] = b - e->seen_bytes;
        e->seen_pkts = p;
        e->seen_bytes = b;
        meter_get(&e->meter, meters + 3 * n);
        hits[n] = LD(&e->hit_us);
        n++;
    }
    touched_keep(l, i);
    return n;
}

/* ---- action profiles --------------------------------------------------------------------- */

static profile_t *prof(ctx_t *cx, int pid) {
    return (pid >= 0 && pid < NX_NP_REAL) ? &cx->profiles[pid] : NULL;
}

static int do_member_set(void *h, int pid, u32 handle, i32 action, const u64 *args, int nargs) {
    profile_t *p = prof(h, pid);
    if (!p) return NX_EINVAL;
    if (grow((void **)&p->m, &p->mcap, handle + 1, sizeof(member_t))) return NX_ENOMEM;
    p->m[handle].present = 1;
    set_call(&p->m[handle].call, action, args, nargs);
    return 0;
}

NX_EXPORT int nx_member_set(void *h, int pid, u32 handle, i32 action, const u64 *args, int nargs) {
    LOCKED(int, do_member_set(h, pid, handle, action, args, nargs));
}

static int do_member_delete(void *h, int pid, u32 handle) {
    profile_t *p = prof(h, pid);
    if (!p || handle >= p->mcap || !p->m[handle].present) return NX_ENOENT;
    p->m[handle].present = 0;
    return 0;
}

NX_EXPORT int nx_member_delete(void *h, int pid, u32 handle) {
    LOCKED(int, do_member_delete(h, pid, handle));
}

static int do_group_set(void *h, int pid, u32 handle, const u32 *members, u32 n) {
    profile_t *p = prof(h, pid);
    if (!p) return NX_EINVAL;
    if (grow((void **)&p->g, &p->gcap, handle + 1, sizeof(group_t))) return NX_ENOMEM;
    group_t *g = &p->g[handle];
    if (grow((void **)&g->m, &g->cap, n ? n : 1, sizeof(u32))) return NX_ENOMEM;
    memcpy(g->m, members, (size_t)n * sizeof(u32));
    g->n = n;
    g->present = 1;
    return 0;
}

NX_EXPORT int nx_group_set(void *h, int pid, u32 handle, const u32 *members, u32 n) {
    LOCKED(int, do_group_set(h, pid, handle, members, n));
}

static int do_group_delete(void *h, int pid, u32 handle) {
    profile_t *p = prof(h, pid);
    if (!p || handle >= p->gcap || !p->g[handle].present) return NX_ENOENT;
    p->g[handle].present = 0;
    p->g[handle].n = 0;
    return 0;
}

NX_EXPORT int nx_group_delete(void *h, int pid, u32 handle) {
    LOCKED(int, do_group_delete(h, pid, handle));
}

/* ---- counters, registers, meters ------------------------------------------------------------ */

/* a cell's counts not taken yet; reset: take them */
NX_EXPORT int nx_counter_read(void *h, int cid, u64 idx, u64 *out, int reset) {
    ctx_t *cx = h;
    if (cid < 0 || cid >= NX_NC_REAL || idx >= cx->counters[cid].size) return NX_EINVAL;
    counter_t *c = &cx->counters[cid];
    u64 p = LD(&c->pkts[idx]), b = LD(&c->bytes[idx]);
    out[0] = p - c->seen[2 * idx];
    out[1] = b - c->seen[2 * idx + 1];
    if (reset) {
        c->seen[2 * idx] = p;
        c->seen[2 * idx + 1] = b;
    }
    return 0;
}

/* make a cell's counts not taken yet read (pkts, bytes) */
static int do_counter_write(void *h, int cid, u64 idx, u64 pkts, u64 bytes) {
    ctx_t *cx = h;
    if (cid < 0 || cid >= NX_NC_REAL || idx >= cx->counters[cid].size) return NX_EINVAL;
    counter_t *c = &cx->counters[cid];
    c->seen[2 * idx] = LD(&c->pkts[idx]) - pkts;
    c->seen[2 * idx + 1] = LD(&c->bytes[idx]) - bytes;
    return 0;
}

NX_EXPORT int nx_counter_write(void *h, int cid, u64 idx, u64 pkts, u64 bytes) {
    LOCKED(int, do_counter_write(h, cid, idx, pkts, bytes));
}

/* the cells counted in the generation a pull ended, with the counts since they were last
 * taken */
NX_EXPORT i64 nx_counter_take(void *h, int cid, u32 *idx, u64 *counts, i64 cap) {
    ctx_t *cx = h;
    if (cid < 0 || cid >= NX_NC_REAL) return NX_EINVAL;
    counter_t *c = &cx->counters[cid];
    touched_t *l = &c->touched[cx->drain & 1];
    i64 n = 0;
    u32 i = 0;
    for (; i < l->n && n < cap; i++, n++) {
        u32 k = l->ids[i];
        u64 p = LD(&c->pkts[k]), b = LD(&c->bytes[k]);
        idx[n] = k;
        counts[2 * n] = p - c->seen[2 * k];
        counts[2 * n + 1] = b - c->seen[2 * k + 1];
        c->seen[2 * k] = p;
        c->seen[2 * k + 1] = b;
    }
    touched_keep(l, i);
    return n;
}

NX_EXPORT int nx_register_read(void *h, int rid, u64 idx, u64 *out) {
    ctx_t *cx = h;
    if (rid < 0 || rid >= NX_NR_REAL || idx >= cx->regs[rid].size) return NX_EINVAL;
    u128 v = reg_load(&cx->regs[rid], idx);
    out[0] = (u64)v;
    out[1] = (u64)(v >> 64);
    return 0;
}

/* a control-plane write of a cell (under the engine's lock: the packet thread writes too) */
static int do_register_write(void *h, int rid, u64 idx, u64 lo, u64 hi) {
    ctx_t *cx = h;
    if (rid < 0 || rid >= NX_NR_REAL || idx >= cx->regs[rid].size) return NX_EINVAL;
    reg_store(&cx->regs[rid], idx, ((u128)hi << 64) | lo);
    return 0;
}

NX_EXPORT int nx_register_write(void *h, int rid, u64 idx, u64 lo, u64 hi) {
    LOCKED(int, do_register_write(h, rid, idx, lo, hi));
}

/* the cells written in the generation a pull ended, with their values (low and high
 * words) */
NX_EXPORT i64 nx_register_take(void *h, int rid, u32 *idx, u64 *vals, i64 cap) {
    ctx_t *cx = h;
    if (rid < 0 || rid >= NX_NR_REAL) return NX_EINVAL;
    reg_t *r = &cx->regs[rid];
    touched_t *l = &r->touched[cx->drain & 1];
    i64 n = 0;
    u32 i = 0;
    for (; i < l->n && n < cap; i++, n++) {
        u32 k = l->ids[i];
        u128 v = reg_load(r, k);
        idx[n] = k;
        vals[2 * n] = (u64)v;
        vals[2 * n + 1] = (u64)(v >> 64);
    }
    touched_keep(l, i);
    return n;
}

static int do_meter_set(void *h, int mid, u64 idx, int configured, const double *cfg) {
    ctx_t *cx = h;
    if (mid < 0 || mid >= NX_NM_REAL || idx >= cx->meters[mid].size) return NX_EINVAL;
    meter_set(&cx->meters[mid].m[idx], configured, cfg);
    return 0;
}

NX_EXPORT int nx_meter_set(void *h, int mid, u64 idx, int configured, const double *cfg) {
    LOCKED(int, do_meter_set(h, mid, idx, configured, cfg));
}

/* the meters executed in the generation a pull ended, with their state */
NX_EXPORT i64 nx_meter_take(void *h, int mid, u32 *idx, double *state, i64 cap) {
    ctx_t *cx = h;
    if (mid < 0 || mid >= NX_NM_REAL) return NX_EINVAL;
    meterarr_t *a = &cx->meters[mid];
    touched_t *l = &a->touched[cx->drain & 1];
    i64 n = 0;
    u32 i = 0;
    for (; i < l->n && n < cap; i++, n++) {
        u32 k = l->ids[i];
        idx[n] = k;
        meter_get(&a->m[k], state + 3 * n);
    }
    touched_keep(l, i);
    return n;
}

/* ---- the packet replication engine ----------------------------------------------------------- */

static int rlist_put(rlist_t **slot, const u32 *ports, const u32 *rids, u32 n, i64 trunc) {
    rlist_t *l = rlist_new(ports, rids, n, trunc);
    if (!l) return NX_ENOMEM;
    free(*slot);
    *slot = l;
    return 0;
}

static int do_mgrp_set(void *h, u32 mgid, const u32 *ports, const u32 *rids, u32 n) {
    ctx_t *cx = h;
    if (mgid >= NX_MGIDS) return NX_EINVAL;
    return rlist_put(&cx->mg[mgid], ports, rids, n, 0);
}

NX_EXPORT int nx_mgrp_set(void *h, u32 mgid, const u32 *ports, const u32 *rids, u32 n) {
    LOCKED(int, do_mgrp_set(h, mgid, ports, rids, n));
}

static int do_mgrp_delete(void *h, u32 mgid) {
    ctx_t *cx = h;
    if (mgid >= NX_MGIDS || !cx->mg[mgid]) return NX_ENOENT;
    free(cx->mg[mgid]);
    cx->mg[mgid] = NULL;
    return 0;
}

NX_EXPORT int nx_mgrp_delete(void *h, u32 mgid) {
    LOCKED(int, do_mgrp_delete(h, mgid));
}

static int do_session_set(void *h, u32 sid, const u32 *ports, const u32 *rids, u32 n,
                             i64 trunc) {
    ctx_t *cx = h;
    if (sid >= NX_SESSIONS) return NX_EINVAL;
    return rlist_put(&cx->ss[sid], ports, rids, n, trunc);
}

NX_EXPORT int nx_session_set(void *h, u32 sid, const u32 *ports, const u32 *rids, u32 n,
                             i64 trunc) {
    LOCKED(int, do_session_set(h, sid, ports, rids, n, trunc));
}

static int do_session_delete(void *h, u32 sid) {
    ctx_t *cx = h;
    if (sid >= NX_SESSIONS || !cx->ss[sid]) return NX_ENOENT;
    free(cx->ss[sid]);
    cx->ss[sid] = NULL;
    return 0;
}

NX_EXPORT int nx_session_delete(void *h, u32 sid) {
    LOCKED(int, do_session_delete(h, sid));
}

/* a parser value set's members (low and high word each), replacing what it held */
static int do_vset_set(void *h, int id, const u64 *words, u32 n) {
    ctx_t *cx = h;
    if (id < 0 || id >= NX_NV_REAL) return NX_EINVAL;
    u128 *m = malloc((size_t)(n ? n : 1) * sizeof(u128));
    if (!m) return NX_ENOMEM;
    for (u32 i = 0; i < n; i++) m[i] = ((u128)words[2 * i + 1] << 64) | words[2 * i];
    free(cx->vsets[id].m);
    cx->vsets[id].m = m;
    cx->vsets[id].n = n;
    return 0;
}

NX_EXPORT int nx_vset_set(void *h, int id, const u64 *words, u32 n) {
    LOCKED(int, do_vset_set(h, id, words, n));
}

/* ---- packets ------------------------------------------------------------------------------ */

/* run a batch of frames (back to back in `buf`) through the switch; the outputs stay in the
 * context until the next call (nx_outputs), as do the digests (nx_digests) */
NX_EXPORT i64 nx_process(void *h, const u8 *buf, const u32 *lens, const u32 *ports, u32 n,
                         u64 now_us) {
    ctx_t *cx = h;
    cx->now_us = now_us;
    cx->nout = 0;
    cx->out.n = 0;
    cx->dig.n = 0;
    cx->ndig = 0;
    size_t off = 0;
    round_enter(cx);
    for (u32 i = 0; i < n; i++) {
        process_one(cx, ports[i], buf + off, lens[i]);
        off += lens[i];
    }
    round_exit(cx);
    return cx->nout;
}

NX_EXPORT u32 nx_outputs(void *h, const u8 **buf, const u64 **ports, const u32 **offs,
                         const u32 **lens) {
    ctx_t *cx = h;
    *buf = cx->out.p;
    *ports = cx->oport;
    *offs = cx->ooff;
    *lens = cx->olen;
    return cx->nout;
}

NX_EXPORT u32 nx_digests(void *h, const u64 **recs, u64 *nwords) {
    ctx_t *cx = h;
    *recs = (const u64 *)cx->dig.p;
    *nwords = cx->dig.n / sizeof(u64);
    return cx->ndig;
}

/* the hash algorithms by name, for tests against pybmv2.calculations */
NX_EXPORT u64 nx_algo(const char *name, const u8 *d, u64 n) {
    algos_init();
    if (!strcmp(name, "crc16")) return algo_crc16(d, n);
    if (!strcmp(name, "crc32")) return algo_crc32(d, n);
    if (!strcmp(name, "crcCCITT")) return algo_crc_ccitt(d, n);
    if (!strcmp(name, "csum16") || !strcmp(name, "cksum16")) return algo_csum16(d, n);
    if (!strcmp(name, "identity")) return algo_identity(d, n);
    if (!strcmp(name, "xor16")) return algo_xor16(d, n);
    if (!strcmp(name, "xor32")) return algo_xor32(d, n);
    return ~(u64)0;
}
