/*
 * The schedule clock shared by circuit_switch and tor_switch.
 *
 * PHASE_MOD_CYCLE reduces meta.phase (bit<96>: ingress_global_timestamp + the controller's
 * offset) modulo meta.cycle (bit<96>) in place. p4c has no run-time modulo, so it is
 * restoring division: 48 conditional subtractions of cycle << j, j = 47..0, which covers
 * every 48-bit timestamp for any cycle >= 1 us. The values are 96 bits wide so that the
 * shifted cycle never wraps.
 */
#ifndef MLFABRIC_CLOCK_P4
#define MLFABRIC_CLOCK_P4

#define PHASE_STEP(J) if (meta.phase >= (meta.cycle << J)) { meta.phase = meta.phase - (meta.cycle << J); }

#define PHASE_MOD_CYCLE \
    PHASE_STEP(47) PHASE_STEP(46) PHASE_STEP(45) PHASE_STEP(44) PHASE_STEP(43) PHASE_STEP(42) \
    PHASE_STEP(41) PHASE_STEP(40) PHASE_STEP(39) PHASE_STEP(38) PHASE_STEP(37) PHASE_STEP(36) \
    PHASE_STEP(35) PHASE_STEP(34) PHASE_STEP(33) PHASE_STEP(32) PHASE_STEP(31) PHASE_STEP(30) \
    PHASE_STEP(29) PHASE_STEP(28) PHASE_STEP(27) PHASE_STEP(26) PHASE_STEP(25) PHASE_STEP(24) \
    PHASE_STEP(23) PHASE_STEP(22) PHASE_STEP(21) PHASE_STEP(20) PHASE_STEP(19) PHASE_STEP(18) \
    PHASE_STEP(17) PHASE_STEP(16) PHASE_STEP(15) PHASE_STEP(14) PHASE_STEP(13) PHASE_STEP(12) \
    PHASE_STEP(11) PHASE_STEP(10) PHASE_STEP(9)  PHASE_STEP(8)  PHASE_STEP(7)  PHASE_STEP(6)  \
    PHASE_STEP(5)  PHASE_STEP(4)  PHASE_STEP(3)  PHASE_STEP(2)  PHASE_STEP(1)  PHASE_STEP(0)

#endif
