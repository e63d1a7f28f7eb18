"""In-network aggregation from the hosts' side (SwitchML): the packet format, the integer
quantisation with a shared exponent, and the all-reduce client that streams a tensor through
a window of switch slots with retransmission on timeout."""
