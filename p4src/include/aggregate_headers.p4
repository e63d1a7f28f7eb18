/*
 * In-network aggregation (SwitchML, NSDI'21): the packet format.
 *
 * A worker sends one chunk of AGG_LANES 32-bit integers to UDP port AGG_UDP_PORT of its rail
 * switch's service address; the switch adds it into the slot the packet names and, once every
 * worker of the job has contributed, multicasts the sum back to them (to the port they sent
 * from). 64 lanes is SwitchML's chunk (256 bytes of values per packet).
 */
#ifndef MLFABRIC_AGGREGATE_HEADERS_P4
#define MLFABRIC_AGGREGATE_HEADERS_P4

#define AGG_UDP_PORT 48864
#define AGG_FLAG_SET 1
#define AGG_FLAG_RESULT 2
#define AGG_FLAG_RETRANSMIT 4

/* The lane list, applied to a macro: field declarations, register arrays, reads, adds. */
#define AGG_LANES_DO(M) \
    M(00) M(01) M(02) M(03) M(04) M(05) M(06) M(07) M(08) M(09) M(10) M(11) M(12) M(13) M(14) M(15) \
    M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31) \
    M(32) M(33) M(34) M(35) M(36) M(37) M(38) M(39) M(40) M(41) M(42) M(43) M(44) M(45) M(46) M(47) \
    M(48) M(49) M(50) M(51) M(52) M(53) M(54) M(55) M(56) M(57) M(58) M(59) M(60) M(61) M(62) M(63)

header agg_t {
    bit<8>  job;       /* the job, as `mlfabric aggregate add` installed it */
    bit<8>  flags;     /* AGG_FLAG_SET: which of the slot's two sets; _RESULT and _RETRANSMIT: set by the switch */
    bit<16> slot;      /* the slot within the job's pool */
    bit<32> offset;    /* the chunk's first element: the worker's, returned as sent */
    bit<8>  exponent;  /* biased by 127: the switch keeps the largest of the contributions */
    bit<8>  workers;   /* on results: how many workers contributed */
    bit<16> pad;
    bit<32> bitmap;    /* on results: which workers contributed (bit = the worker's index) */
}

#define AGG_FIELD(i) bit<32> v##i;
header agg_values_t {
    AGG_LANES_DO(AGG_FIELD)
}

#endif
