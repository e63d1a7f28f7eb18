/* The packet state and the engine context (after the generated phv_t and constants).
 *
 * pkt_t is pybmv2.state.PacketState: the PHV, header validity, stack cursors, the frame
 * and its parser cursor, and the per-packet registers simple_switch keeps. */

typedef struct {
    phv_t v;
    u8 valid[NX_NH];
    i32 sn[NX_NS];
    const u8 *data;
    u32 len, offset;
    i64 error, truncate_len, pkt_len;
    u8 checksum_error, exit_;
    u32 clone_session, clone_fl, resubmit, recirc, learn_id;
    u64 port; /* the egress job's port */
    u32 gso;  /* a super-packet's offload word (rt_offload.c; 0: a plain frame) */
    /* a fault (pkt_fault): 1 | 2 for an unsigned index; the stack's next index; the index */
    u32 fault, fault_stack;
    u128 fault_index;
} pkt_t;

/* a run-time stack index out of bounds: BMv2 throws std::out_of_range and aborts, the
 * Python target drops the packet and names the stack. The generated code calls this and
 * leaves the function it runs in; the control stops (exit_) and the switch drops the
 * packet with a record for Python to log (fault_record in rt_switch.c). */
#define NX_FAULT_RECORD (1ULL << 32) /* a digest record's learn id no learn list has */

static inline void pkt_fault(pkt_t *p, u32 stack, u128 index, u32 is_unsigned) {
    p->fault = 1 | (is_unsigned ? 2 : 0);
    p->fault_stack = stack;
    p->fault_index = index;
    p->exit_ = 1;
}

struct nx_io;

typedef struct ctx {
    /* held by the I/O thread while it runs packets, and by every control-plane change
     * (not by pulls of what the data plane counted: rt_base.h) */
    pthread_mutex_t mu;
    /* generations of the touched lists: `gen` is the current one (a pull advances it),
     * `busy` the one the packet thread's running round lists into (0: no round), `wgen`
     * the packet thread's copy for its round, `drain` the one a pull reads */
    u32 gen, busy, wgen, drain;
    struct nx_io *io;
    table_t tables[NX_NT];
    profile_t profiles[NX_NP];
    counter_t counters[NX_NC];
    reg_t regs[NX_NR];
    meterarr_t meters[NX_NM];
    vset_t vsets[NX_NV];
    rlist_t **mg, **ss;
    u64 now_us;
    /* what the egress queue reports to the packet egress runs (process mode only) */
    u64 deq_timedelta, deq_qdepth;
    /* the egress jobs of the input packet being processed (a FIFO) */
    pkt_t *q;
    u32 qhead, qtail, qcap;
    pkt_t tmp[2];
    nx_buf_t scratch;
    /* frames that live until the input packet is done (recirculated ones) */
    u8 **arena;
    u32 narena, acap;
    /* outputs of the batch: frames back to back, with their ports, offsets, lengths and
     * offload words (rt_offload.c) */
    nx_buf_t out;
    u64 *oport;
    u32 *ooff, *olen, *ogso, nout, ocap;
    /* the offload word of the frame entering ingress now (its copies and passes carry it) */
    u32 in_gso;
    /* PHVs given back by finished packets, taken by new ones last-in first-out */
    phv_t *pool;
    u32 npool, pcap;
    /* digests of the batch: u64 records [learn id, n, (low, high) x n] */
    nx_buf_t dig;
    u32 ndig;
} ctx_t;

static inline u8 *scratch(ctx_t *cx, size_t n) {
    cx->scratch.n = 0;
    if (buf_reserve(&cx->scratch, n + 64)) abort();
    return cx->scratch.p;
}

/* the packet thread starts a round: it lists into the current generation, published in
 * `busy` (a pull that advanced `gen` between the load and the store is seen, and taken) */
static inline void round_enter(ctx_t *cx) {
    u32 g;
    do {
        g = __atomic_load_n(&cx->gen, __ATOMIC_SEQ_CST);
        __atomic_store_n(&cx->busy, g, __ATOMIC_SEQ_CST);
    } while (__atomic_load_n(&cx->gen, __ATOMIC_SEQ_CST) != g);
    cx->wgen = g;
}

/* the round is over: what it stored is visible to a pull that sees `busy` change */
static inline void round_exit(ctx_t *cx) { __atomic_store_n(&cx->busy, 0, __ATOMIC_RELEASE); }
