"""TDTCP segment format: round trips, limits and one-line errors for malformed input."""

from __future__ import annotations

import pytest

from workloads.errors import ProtocolError
from workloads.tdtcp.errors import WireFormatError
from workloads.tdtcp.wire import (
    ACK_HEADER,
    DATA_HEADER,
    Ack,
    DataSegment,
    decode,
    decode_ack,
    decode_data,
    encode_ack,
    encode_data,
)


@pytest.mark.parametrize("seg", [
    DataSegment(conn=0, seq=0, tdn=0, ts_ns=0, payload=b""),
    DataSegment(conn=2**32 - 1, seq=2**63, tdn=255, ts_ns=2**64 - 1, payload=b"x" * 1444, fin=True),
    DataSegment(conn=9, seq=1444, tdn=1, ts_ns=123456789, payload=bytes(range(256)), retx=True),
])
def test_data_round_trip(seg: DataSegment) -> None:
    raw = encode_data(seg)
    assert len(raw) == DATA_HEADER.size + len(seg.payload)
    assert decode(raw) == seg and decode_data(memoryview(raw)) == seg


@pytest.mark.parametrize("ack", [
    Ack(conn=1, cum_ack=0, echo_ts_ns=0, data_tdn=0, rwnd=0),
    Ack(conn=1, cum_ack=2888, echo_ts_ns=77, data_tdn=3, rwnd=2**32 - 1, fin=True),
    Ack(conn=1, cum_ack=10, echo_ts_ns=77, data_tdn=1, rwnd=5,
        sacks=((20, 30), (40, 50), (60, 70), (2**64 - 2, 2**64 - 1))),
])
def test_ack_round_trip(ack: Ack) -> None:
    raw = encode_ack(ack)
    assert len(raw) == ACK_HEADER.size + 16 * len(ack.sacks)
    assert decode(raw) == ack and decode_ack(bytearray(raw)) == ack


def _data() -> bytes:
    return encode_data(DataSegment(conn=1, seq=0, tdn=0, ts_ns=1, payload=b"abcd"))


def _ack() -> bytes:
    return encode_ack(Ack(conn=1, cum_ack=0, echo_ts_ns=1, data_tdn=0, rwnd=1, sacks=((5, 9),)))


@pytest.mark.parametrize(("raw", "words"), [
    (b"", "too short"),
    (b"\x00\x01" + bytes(40), "bad magic"),
    (b"\x7d\x09" + bytes(40), "unknown segment kind 9"),
    (_data()[:20], "shorter than its 28-byte header"),
    (_data()[:-1], "length field 4 but 3 payload bytes"),
    (_data() + b"!", "length field 4 but 5 payload bytes"),
    (_data()[:2] + b"\x80" + _data()[3:], "unknown flags 0x80"),
    (_ack()[:30], "shorter than its 32-byte header"),
    (_ack()[:-1], "expected 48"),
    (_ack()[:2] + b"\x02" + _ack()[3:], "unknown flags 0x02"),
    (_ack()[:28] + b"\x05" + _ack()[29:], "5 SACK blocks: at most 4"),
    (_ack()[:32] + (9).to_bytes(8, "big") + (5).to_bytes(8, "big"), "[9, 5): empty or reversed"),
])
def test_malformed_input_raises_one_line(raw: bytes, words: str) -> None:
    with pytest.raises(WireFormatError) as err:
        decode(raw)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, ProtocolError) and isinstance(err.value, ValueError)


def test_decoding_the_wrong_kind_is_an_error() -> None:
    with pytest.raises(WireFormatError, match="kind 2 where 1 was expected"):
        decode_data(_ack())
    with pytest.raises(WireFormatError, match="kind 1 where 2 was expected"):
        decode_ack(_data())


@pytest.mark.parametrize(("thing", "words"), [
    (DataSegment(conn=2**32, seq=0, tdn=0, ts_ns=0, payload=b""), "conn=4294967296"),
    (DataSegment(conn=0, seq=0, tdn=256, ts_ns=0, payload=b""), "tdn=256"),
    (DataSegment(conn=0, seq=-1, tdn=0, ts_ns=0, payload=b""), "seq=-1"),
    (DataSegment(conn=0, seq=0, tdn=0, ts_ns=0, payload=bytes(70000)), "length=70000"),
    (Ack(conn=0, cum_ack=0, echo_ts_ns=0, data_tdn=0, rwnd=0, sacks=((1, 2),) * 5), "5 SACK blocks"),
    (Ack(conn=0, cum_ack=0, echo_ts_ns=0, data_tdn=0, rwnd=0, sacks=((3, 3),)), "[3, 3)"),
    (Ack(conn=0, cum_ack=0, echo_ts_ns=0, data_tdn=0, rwnd=-5), "rwnd=-5"),
])
def test_unencodable_values_are_refused(thing: DataSegment | Ack, words: str) -> None:
    with pytest.raises(WireFormatError, match=words.replace("[", r"\[").replace(")", r"\)")):
        encode_data(thing) if isinstance(thing, DataSegment) else encode_ack(thing)
