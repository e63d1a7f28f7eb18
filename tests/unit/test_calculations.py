"""Hash and checksum algorithms match their reference check values (and BMv2's choices)."""

from __future__ import annotations

import pytest

from pybmv2.calculations import ALGORITHMS, crc16, crc32, csum16, identity


def test_crc16_is_crc16_arc() -> None:
    # The standard check value of CRC-16/ARC (poly 0x8005, reflected), which BMv2's crc16 is.
    assert crc16(b"123456789") == 0xBB3D


def test_crc32_is_the_standard_crc32() -> None:
    assert crc32(b"123456789") == 0xCBF43926


def test_ccitt_false_check_value() -> None:
    assert ALGORITHMS["crcCCITT"](b"123456789") == 0x29B1


def test_csum16_of_a_real_ipv4_header_verifies_to_zero() -> None:
    header = bytes.fromhex("450000730000400040 11b861c0a80001c0a800c7".replace(" ", ""))
    assert csum16(header) == 0


def test_csum16_pads_odd_lengths_with_a_zero_byte() -> None:
    assert csum16(b"\x01") == csum16(b"\x01\x00")


@pytest.mark.parametrize(("data", "expected"), [(b"", 0), (b"\x01\x02", 0x0102), (bytes(range(1, 11)), 0x0102030405060708)])
def test_identity_takes_at_most_eight_bytes(data: bytes, expected: int) -> None:
    assert identity(data) == expected
