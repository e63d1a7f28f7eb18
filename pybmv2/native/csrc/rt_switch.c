/* The v1model architecture as simple_switch runs it (pybmv2/switch.py, V1Switch.process):
 * parser, ingress, the PRE (clone, digest, resubmit, multicast, drop), egress, egress
 * clones, deparser and recirculation, in the same order, for one input packet at a time. */

#define MAX_PASSES 32
#define INSTANCE_NORMAL 0
#define INSTANCE_INGRESS_CLONE 1
#define INSTANCE_EGRESS_CLONE 2
#define INSTANCE_RECIRC 4
#define INSTANCE_REPLICATION 5
#define INSTANCE_RESUBMIT 6

/* BMv2's PHV pool (pybmv2/phv_pool.py): a packet takes the storage the last finished packet
 * gave back, so the fields of headers it does not have hold what that packet left there
 * (P4 leaves them unspecified; the target promises BMv2's values). Metadata is zeroed. */
static void pool_take(ctx_t *cx, phv_t *v) {
    if (cx->npool) *v = cx->pool[--cx->npool];
    else memset(v, 0, sizeof *v);
}

/* a packet is done with its PHV (dropped, transmitted or replaced by its copies) */
static void pool_give(ctx_t *cx, const phv_t *v) {
    if (grow((void **)&cx->pool, &cx->pcap, cx->npool + 1, sizeof(phv_t))) return;
    cx->pool[cx->npool] = *v;
    gen_pool_scrub(&cx->pool[cx->npool]);
    cx->npool++;
}

static void new_state(ctx_t *cx, pkt_t *s, const u8 *data, u32 len) {
    pool_take(cx, &s->v);
    gen_reset_metadata(s);
    memcpy(s->valid, INIT_VALID, sizeof s->valid);
    memset(s->sn, 0, sizeof s->sn);
    s->data = data;
    s->len = len;
    s->offset = 0;
    s->error = s->truncate_len = 0;
    s->pkt_len = len;
    s->checksum_error = s->exit_ = 0;
    s->clone_session = s->clone_fl = s->resubmit = s->recirc = s->learn_id = 0;
    s->port = 0;
    s->gso = cx->in_gso;
    s->fault = s->fault_stack = 0;
}

/* BMv2's clone_with_phv (V1Switch._clone): a pooled PHV with the metadata and the valid
 * headers' fields copied; the cursor, errors and lengths; no pending requests */
static void copy_state(ctx_t *cx, pkt_t *d, const pkt_t *s) {
    phv_t v;
    pool_take(cx, &v);
    gen_copy_live(&v, s);
    *d = *s;
    d->v = v;
    d->exit_ = 0;
    d->clone_session = d->clone_fl = d->resubmit = d->recirc = d->learn_id = 0;
    d->port = 0;
    d->fault = 0;
}

static pkt_t *push_job(ctx_t *cx) {
    if (cx->qtail == cx->qcap) {
        if (cx->qhead > 0) {
            memmove(cx->q, cx->q + cx->qhead, (cx->qtail - cx->qhead) * sizeof(pkt_t));
            cx->qtail -= cx->qhead;
            cx->qhead = 0;
        }
        if (cx->qtail == cx->qcap && grow((void **)&cx->q, &cx->qcap, cx->qcap + 1, sizeof(pkt_t)))
            abort();
    }
    return &cx->q[cx->qtail++];
}

static u8 *arena_alloc(ctx_t *cx, size_t n) {
    if (grow((void **)&cx->arena, &cx->acap, cx->narena + 1, sizeof(u8 *))) abort();
    u8 *p = malloc(n ? n : 1);
    if (!p) abort();
    cx->arena[cx->narena++] = p;
    return p;
}

static void arena_reset(ctx_t *cx) {
    for (u32 i = 0; i < cx->narena; i++) free(cx->arena[i]);
    cx->narena = 0;
}

/* a packet dropped on a fault (pkt_fault): a record among the digests, for Python to log
 * as the Python engine does (pybmv2/native/records.py); `where` 0 ingress, 1 egress */
static void fault_record(ctx_t *cx, const pkt_t *s, u64 where) {
    if (buf_reserve(&cx->dig, 8 * 8)) abort();
    u64 *r = (u64 *)(cx->dig.p + cx->dig.n);
    r[0] = NX_FAULT_RECORD;
    r[1] = 3;
    r[2] = s->fault_stack;
    r[3] = 0;
    r[4] = where | (s->fault & 2);
    r[5] = 0;
    r[6] = (u64)s->fault_index;
    r[7] = (u64)(s->fault_index >> 64);
    cx->dig.n += 8 * 8;
    cx->ndig++;
}

static void do_parse(ctx_t *cx, pkt_t *s) {
    gen_parse(cx, s);
    if (s->fault) return; /* the parser stopped on a fault: no checksums either */
    std_set_parser_error(s, (u64)s->error);
    int bad = gen_verify(cx, s);
    s->checksum_error = (u8)bad;
    std_set_checksum_error(s, bad ? 1 : 0);
}

static void replicate(ctx_t *cx, const pkt_t *s, const rlist_t *l, int set_rid) {
    for (u32 i = 0; l && i < l->n; i++) {
        pkt_t *c = push_job(cx);
        copy_state(cx, c, s);
        if (set_rid) std_set_egress_rid(c, l->r[i].rid);
        c->port = l->r[i].port;
    }
}

/* one pass through parser and ingress; a resubmitted packet's next state (built in
 * `next`, which also holds an ingress clone while it is replicated), else NULL */
static pkt_t *ingress_pass(ctx_t *cx, pkt_t *s, u64 port, pkt_t *next) {
    const u8 *frame = s->data;
    u32 flen = s->len;
    i64 ingress_size = s->pkt_len;
    do_parse(cx, s);
    if (!s->fault) gen_ingress(cx, s);
    if (s->fault) {
        fault_record(cx, s, 0);
        pool_give(cx, &s->v);
        return NULL;
    }
    s->exit_ = 0;
    u64 egress_spec = std_get_egress_spec(s), mgid = std_get_mcast_grp(s);
    if (s->clone_session) {
        u32 sid = s->clone_session & 0x7FFF, fl = s->clone_fl;
        s->clone_session = s->clone_fl = 0;
        const rlist_t *sess = cx->ss[sid];
        if (sess) {
            pkt_t *c = next;
            new_state(cx, c, frame, flen);
            std_set_ingress_port(c, port);
            do_parse(cx, c);
            if (c->fault) { /* as the Python engine: the packet is dropped, its copy lost */
                fault_record(cx, c, 0);
                pool_give(cx, &s->v);
                return NULL;
            }
            gen_reset_metadata(c);
            gen_copy_field_list(c, s, fl);
            std_set_instance_type(c, INSTANCE_INGRESS_CLONE);
            c->pkt_len = ingress_size;
            c->truncate_len = sess->trunc;
            replicate(cx, c, sess, sess->n > 1);
            pool_give(cx, &c->v);
        }
    }
    if (s->learn_id) {
        gen_learn(cx, s, s->learn_id);
        s->learn_id = 0;
    }
    if (s->resubmit) {
        new_state(cx, next, frame, flen);
        gen_copy_field_list(next, s, s->resubmit);
        std_set_instance_type(next, INSTANCE_RESUBMIT);
        std_set_packet_length(next, (u64)ingress_size);
        next->pkt_len = ingress_size;
        pool_give(cx, &s->v);
        return next;
    }
    if (mgid) {
        std_set_instance_type(s, INSTANCE_REPLICATION);
        replicate(cx, s, mgid < NX_MGIDS ? cx->mg[mgid] : NULL, 1);
        pool_give(cx, &s->v);
        return NULL;
    }
    if (egress_spec == DROP_PORT) {
        pool_give(cx, &s->v);
        return NULL;
    }
    std_set_instance_type(s, INSTANCE_NORMAL);
    pkt_t *j = push_job(cx);
    *j = *s;
    j->port = egress_spec;
    return NULL;
}

/* ingress passes of the state in cx->tmp[k] until no resubmit is left (at most
 * MAX_PASSES); `port` < 0: each pass's clones take the state's own ingress_port */
static void ingress_passes(ctx_t *cx, int k, i64 port) {
    pkt_t *s = &cx->tmp[k];
    for (int pass = 0; pass < MAX_PASSES && s; pass++) {
        u64 p = port >= 0 ? (u64)port : std_get_ingress_port(s);
        k ^= 1;
        s = ingress_pass(cx, s, p, &cx->tmp[k]);
    }
    if (s) pool_give(cx, &s->v); /* resubmitted more than MAX_PASSES times: dropped */
}

static u8 *out_begin(ctx_t *cx, size_t bound) {
    if (buf_reserve(&cx->out, bound)) abort();
    return cx->out.p + cx->out.n;
}

static void out_commit(ctx_t *cx, u64 port, u32 n, u32 gso) {
    if (cx->nout == cx->ocap) {
        u32 cap = cx->ocap ? cx->ocap * 2 : 256;
        u64 *op = realloc(cx->oport, cap * sizeof(u64));
        if (op) cx->oport = op;
        u32 *oo = realloc(cx->ooff, cap * sizeof(u32));
        if (oo) cx->ooff = oo;
        u32 *ol = realloc(cx->olen, cap * sizeof(u32));
        if (ol) cx->olen = ol;
        u32 *og = realloc(cx->ogso, cap * sizeof(u32));
        if (og) cx->ogso = og;
        if (!op || !oo || !ol || !og) abort();
        cx->ocap = cap;
    }
    cx->oport[cx->nout] = port;
    cx->ooff[cx->nout] = (u32)cx->out.n;
    cx->olen[cx->nout] = n;
    cx->ogso[cx->nout] = gso;
    cx->out.n += n;
    cx->nout++;
}

/* the deparser: checksums, valid headers in order, the payload, truncation (a truncated
 * super-packet is a plain frame: its offload word goes) */
static u32 deparse(ctx_t *cx, pkt_t *s, u8 *o) {
    const u8 *pl = s->data + s->offset;
    u32 pn = s->len - s->offset;
    gen_update_checksums(cx, s, pl, pn);
    u32 n = gen_emit(s, o);
    memcpy(o + n, pl, pn);
    n += pn;
    u32 full = n;
    i64 t = s->truncate_len;
    if (t > 0 && t < (i64)n) n = (u32)t;
    else if (t < 0) n = (i64)n + t > 0 ? (u32)((i64)n + t) : 0;
    if (n < full) s->gso = 0;
    return n;
}

/* one egress job; a recirculated frame is fed back through ingress */
static void egress(ctx_t *cx, pkt_t *s, int *passes) {
    std_set_egress_global_timestamp(s, cx->now_us);
    if (STD_QUEUEING) { /* the egress queue's, in process mode (rt_io.c); else none */
        std_set_deq_timedelta(s, cx->deq_timedelta);
        std_set_deq_qdepth(s, cx->deq_qdepth);
    }
    std_set_egress_port(s, s->port);
    std_set_egress_spec(s, (DROP_PORT + 1) & EGRESS_SPEC_MASK);
    std_set_packet_length(s, (u64)s->pkt_len);
    gen_egress(cx, s);
    if (s->fault) {
        fault_record(cx, s, 1);
        pool_give(cx, &s->v);
        return;
    }
    if (s->clone_session) {
        u32 sid = s->clone_session & 0x7FFF, fl = s->clone_fl;
        s->clone_session = s->clone_fl = 0;
        const rlist_t *sess = cx->ss[sid];
        if (sess) {
            pkt_t *c = &cx->tmp[1];
            copy_state(cx, c, s);
            gen_reset_metadata(c);
            gen_copy_field_list(c, s, fl);
            std_set_instance_type(c, INSTANCE_EGRESS_CLONE);
            c->truncate_len = sess->trunc;
            replicate(cx, c, sess, sess->n > 1);
            pool_give(cx, &c->v);
        }
    }
    if (std_get_egress_spec(s) == DROP_PORT) {
        pool_give(cx, &s->v);
        return;
    }
    size_t bound = (size_t)HDR_MAX_BYTES + (s->len - s->offset);
    if (s->recirc) {
        u8 *f = arena_alloc(cx, bound);
        u32 n = deparse(cx, s, f);
        pkt_t *r = &cx->tmp[0];
        new_state(cx, r, f, n);
        r->gso = s->gso;
        gen_copy_field_list(r, s, s->recirc);
        std_set_instance_type(r, INSTANCE_RECIRC);
        std_set_packet_length(r, n);
        pool_give(cx, &s->v);
        if (++*passes > MAX_PASSES) {
            pool_give(cx, &r->v);
            return;
        }
        ingress_passes(cx, 0, -1);
        return;
    }
    u8 *o = out_begin(cx, bound);
    u32 n = deparse(cx, s, o);
    out_commit(cx, s->port, n, s->gso);
    pool_give(cx, &s->v);
}

/* a frame received on port at cx->now_us through ingress (its jobs queued in cx->q); the
 * frame's offload word is cx->in_gso (0 but on a port with super-packets) */
static void ingress_frame(ctx_t *cx, u64 port, const u8 *frame, u32 len) {
    cx->qhead = cx->qtail = 0;
    pkt_t *s = &cx->tmp[0];
    new_state(cx, s, frame, len);
    std_set_ingress_port(s, port);
    std_set_packet_length(s, len);
    std_set_ingress_global_timestamp(s, cx->now_us);
    ingress_passes(cx, 0, (i64)port);
}

static void process_one(ctx_t *cx, u64 port, const u8 *frame, u32 len) {
    ingress_frame(cx, port, frame, len);
    int passes = 0;
    while (cx->qhead < cx->qtail) {
        pkt_t job = cx->q[cx->qhead++];
        egress(cx, &job, &passes);
    }
    arena_reset(cx);
}
