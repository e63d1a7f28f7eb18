"""The shadow rebuilds mirrored frames from lossy, reordered, duplicated TCP segment copies."""

from __future__ import annotations

import itertools
import random

import pytest

from workloads.checkmate.reassembly import HEADER, Frame, FrameStream, Gap

MOD = 1 << 32
LENGTHS = (0, 8, 100, 1000, 3000)
TIMEOUT = 0.05
Seg = tuple[int, int]
Item = Frame | Gap


def tag_of(i: int) -> int:
    """Tags like :func:`workloads.framing.make_tag`: call number from 1, step below 16."""
    return ((1 + i // 16) << 20) | (i % 16)


def plausible(tag: int, length: int) -> bool:
    return 1 <= tag >> 20 < 4096 and (tag & 0xFFFFF) < 64 and length <= 4096


def make_stream(rng: random.Random, n: int, lengths: tuple[int, ...] = LENGTHS,
                bad: int | None = None) -> tuple[bytes, list[Frame]]:
    """``n`` frames of random payload (frame ``bad`` gets an implausible tag)."""
    buf = bytearray()
    frames = []
    for i in range(n):
        length = rng.choice(lengths)
        tag = 0 if i == bad else tag_of(i)
        frame = Frame(len(buf), tag, rng.randbytes(length))
        buf += HEADER.pack(tag, length) + frame.payload
        frames.append(frame)
    return bytes(buf), frames


def segment(rng: random.Random, size: int, frames: list[Frame] | None = None,
            max_seg: int = 1500) -> list[Seg]:
    """Random segment boundaries; with ``frames``, every frame starts a segment."""
    cuts = {0, size}
    if frames is not None:
        cuts.update(f.offset for f in frames)
    pos = 0
    while pos < size:
        pos += rng.randint(1, max_seg)
        cuts.add(min(pos, size))
    edges = sorted(cuts)
    return list(itertools.pairwise(edges))


def feed(fs: FrameStream, segs: list[Seg], data: bytes, isn: int, *, syn: bool = True,
         dt: float = 0.0, poll_every: bool = False) -> list[Item]:
    """Add the segments (the SYN first if ``syn``), ``dt`` apart; poll once long after."""
    out: list[Item] = []
    now = 0.0
    if syn:
        fs.add(isn, b"", syn=True, now=now)
    for off, end in segs:
        fs.add((isn + 1 + off) % MOD, data[off:end], now=now)
        if poll_every:
            out += fs.poll(now)
        now += dt
    out += fs.poll(now + 100.0)
    return out


def stream(lengths: bool = True, max_buffered: int = 64 << 20) -> FrameStream:
    return FrameStream(plausible=plausible, hole_timeout_s=TIMEOUT, max_buffered=max_buffered,
                       lengths=LENGTHS if lengths else None)


def frames_of(items: list[Item]) -> list[Frame]:
    return [x for x in items if isinstance(x, Frame)]


def gaps_of(items: list[Item]) -> list[Gap]:
    return [x for x in items if isinstance(x, Gap)]


def assert_accounted(fs: FrameStream, segs: list[Seg], items: list[Item]) -> None:
    """Every byte received was delivered, or counted duplicate or discarded, or is buffered."""
    delivered = sum(f.end - f.offset for f in frames_of(items))
    st = fs.stats
    assert sum(e - s for s, e in segs) == (
        delivered + st.duplicate_bytes + st.discarded_bytes + fs.buffered_bytes)


def shifted(frames: list[Frame], by: int) -> list[Frame]:
    return [Frame(f.offset - by, f.tag, f.payload) for f in frames]


def test_header_is_the_wire_header() -> None:
    from workloads.framing import HEADER as WIRE

    assert HEADER.format == WIRE.format


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lengths", [True, False])
def test_in_order(seed: int, lengths: bool) -> None:
    rng = random.Random(seed)
    data, frames = make_stream(rng, 40)
    fs = stream(lengths)
    items = feed(fs, segment(rng, len(data)), data, rng.randrange(MOD), poll_every=True)
    assert items == frames
    assert fs.base_known and not fs.joined_mid_stream and fs.synced
    assert fs.buffered_bytes == 0 and fs.delivered_offset == len(data)
    assert fs.stats.frames == 40 and fs.stats.gaps == 0 and fs.duplicate_bytes == 0


@pytest.mark.parametrize("seed", range(4))
def test_shuffled(seed: int) -> None:
    rng = random.Random(seed)
    data, frames = make_stream(rng, 40)
    segs = segment(rng, len(data))
    rng.shuffle(segs)
    fs = stream()
    assert feed(fs, segs, data, rng.randrange(MOD)) == frames
    assert fs.buffered_bytes == 0


def retransmissions(rng: random.Random, segs: list[Seg], size: int, count: int) -> list[Seg]:
    """``segs`` with ``count`` overlapping retransmissions, each after its first copy."""
    out = list(segs)
    for _ in range(count):
        a = rng.randrange(size)
        b = min(size, a + rng.randint(1, 3000))
        first = next(i for i, (s, e) in enumerate(out) if s <= a < e)
        out.insert(rng.randint(first + 1, len(out)), (a, b))
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shuffle", [False, True])
def test_duplicates_and_overlaps(seed: int, shuffle: bool) -> None:
    rng = random.Random(seed)
    data, frames = make_stream(rng, 40)
    segs = retransmissions(rng, segment(rng, len(data)), len(data), 30)
    if shuffle:
        rng.shuffle(segs)
    fs = stream()
    items = feed(fs, segs, data, rng.randrange(MOD), poll_every=True)
    assert items == frames
    assert fs.duplicate_bytes == sum(e - s for s, e in segs) - len(data)
    assert_accounted(fs, segs, items)
    assert fs.stats.discarded_bytes == 0


@pytest.mark.parametrize(("syn", "shuffle"), [(True, False), (True, True), (False, False)])
def test_sequence_wraps_past_2_32(syn: bool, shuffle: bool) -> None:
    rng = random.Random(7)
    data, frames = make_stream(rng, 40)
    segs = segment(rng, len(data))
    isn = MOD - len(data) // 2
    if shuffle:
        rng.shuffle(segs)
    items = feed(stream(), segs, data, isn, syn=syn)
    assert items == frames
    assert frames[-1].offset + 1 + isn > MOD > frames[0].offset + isn


def test_dropped_segment_inside_a_payload_is_a_gap() -> None:
    rng = random.Random(1)
    data, frames = make_stream(rng, 20, lengths=(3000,))
    segs = segment(rng, len(data), frames, max_seg=500)
    k = 5
    lost = next(s for s in segs if s[0] > frames[k].offset + 16 and s[1] < frames[k].end)
    segs.remove(lost)
    fs = stream()
    items = feed(fs, segs, data, rng.randrange(MOD))
    gap = Gap(lost[0], lost[1], last_tag=frames[k - 1].tag, next_tag=frames[k + 1].tag)
    assert items == [*frames[:k], gap, *frames[k + 1:]]
    assert_accounted(fs, segs, items)
    assert fs.synced and fs.stats.gaps == 1 and fs.stats.gap_bytes == lost[1] - lost[0]
    assert fs.stats.anchors == 0  # the next boundary was known: no scan
    assert gap.size == lost[1] - lost[0] and fs.read_offset == fs.delivered_offset == len(data)

    # the same, streaming: the gap waits for the timeout, then delivery resumes
    streamed = feed(stream(), segs, data, 99, dt=0.01, poll_every=True)
    assert frames_of(streamed) == frames[:k] + frames[k + 1:]
    assert [(g.start, g.end, g.last_tag) for g in gaps_of(streamed)] == [
        (gap.start, gap.end, gap.last_tag)]


@pytest.mark.parametrize("lengths", [True, False])
def test_dropped_header_reanchors_by_scanning(lengths: bool) -> None:
    rng = random.Random(2)
    data, frames = make_stream(rng, 20, lengths=(3000,))
    segs = segment(rng, len(data), frames, max_seg=500)
    k = 8
    lost = next(s for s in segs if s[0] == frames[k].offset)
    segs.remove(lost)
    fs = stream(lengths)
    items = feed(fs, segs, data, rng.randrange(MOD))
    gap = Gap(lost[0], lost[1], last_tag=frames[k - 1].tag, next_tag=frames[k + 1].tag)
    assert items == [*frames[:k], gap, *frames[k + 1:]]
    assert fs.stats.anchors == 1 and fs.stats.desyncs == 0

    streamed = feed(stream(lengths), segs, data, 5, dt=0.01, poll_every=True)
    assert frames_of(streamed) == frames[:k] + frames[k + 1:]
    assert len(gaps_of(streamed)) == 1


def test_gap_across_a_frame_boundary_reanchors() -> None:
    rng = random.Random(3)
    data, frames = make_stream(rng, 20, lengths=(100, 1000))
    k = 6  # lose the end of frame k, the whole of k + 1 and the start of k + 2
    lost = (frames[k].end - 10, frames[k + 2].offset + 30)
    segs = [(max(s, lost[1]) if s >= lost[0] else s, min(e, lost[0]) if s < lost[0] else e)
            for s, e in segment(rng, len(data), max_seg=300)]
    segs = [(s, e) for s, e in segs if s < e]
    fs = stream()
    items = feed(fs, segs, data, 77, dt=0.01, poll_every=True)
    assert frames_of(items) == frames[:k] + frames[k + 3:]
    assert gaps_of(items) == [Gap(*lost, last_tag=frames[k - 1].tag, next_tag=frames[k + 3].tag)]
    assert fs.stats.anchors == 1


@pytest.mark.parametrize("lengths", [True, False])
def test_join_mid_stream(lengths: bool) -> None:
    rng = random.Random(4)
    data, frames = make_stream(rng, 40)
    segs = segment(rng, len(data), None if lengths else frames)
    first = next(i for i, (s, _) in enumerate(segs) if s > len(data) // 4
                 and all(f.offset != s for f in frames))
    joined_at = segs[first][0]
    fs = stream(lengths)
    items = feed(fs, segs[first:], data, MOD - 100, syn=False, dt=0.01, poll_every=True)
    assert items == shifted([f for f in frames if f.offset >= joined_at], joined_at)
    assert fs.joined_mid_stream and not fs.base_known and fs.stats.anchors == 1


def test_join_anchor_waits_for_the_following_header() -> None:
    """A lone candidate is taken only once the data after it had its chance to arrive."""
    rng = random.Random(5)
    data, frames = make_stream(rng, 3, lengths=(100,))
    fs = stream()
    cut = frames[1].offset + 20  # frame 1's header is there, not frame 2's
    fs.add(1000, data[10:cut], now=0.0)
    assert fs.poll(0.0) == [] and not fs.synced
    fs.add(1000 + cut - 10, data[cut:], now=0.01)
    assert fs.poll(0.01) == shifted(frames[1:], 10)
    # the last frame of a quiet stream: its following header never comes
    fs = stream()
    fs.add(1000, data[frames[2].offset - 3:], now=0.0)
    assert fs.poll(0.0) == []
    assert fs.poll(TIMEOUT) == shifted(frames[2:], frames[2].offset - 3)


def test_late_retransmission_fills_the_hole() -> None:
    rng = random.Random(6)
    data, frames = make_stream(rng, 30)
    segs = segment(rng, len(data), max_seg=400)
    lost = segs.pop(10)
    segs.insert(13, lost)  # arrives 0.03 s late, before the 0.05 s timeout
    fs = stream()
    assert feed(fs, segs, data, 3, dt=0.01, poll_every=True) == frames
    assert fs.stats.gaps == 0


def test_retransmission_after_the_gap_is_ignored() -> None:
    rng = random.Random(6)
    data, frames = make_stream(rng, 30, lengths=(3000,))
    segs = segment(rng, len(data), frames, max_seg=400)
    k = 10
    i = next(i for i, s in enumerate(segs) if s[0] > frames[k].offset + 16 and s[1] < frames[k].end)
    lost = segs.pop(i)
    segs.insert(i + 10, lost)  # 0.1 s late: the gap was declared
    fs = stream()
    items = feed(fs, segs, data, 3, dt=0.01, poll_every=True)
    assert frames_of(items) == frames[:k] + frames[k + 1:]
    assert [(g.start, g.end) for g in gaps_of(items)] == [lost]
    # the late copy (and the rest of frame k once the gap is declared) lie behind the read
    # pointer: they count as duplicates
    assert fs.duplicate_bytes >= lost[1] - lost[0]
    assert_accounted(fs, segs, items)


@pytest.mark.parametrize("shuffle", [False, True])
def test_memory_stays_bounded(shuffle: bool) -> None:
    rng = random.Random(8)
    data, frames = make_stream(rng, 80)
    segs = segment(rng, len(data), max_seg=600)
    del segs[5]
    if shuffle:  # local reordering, in windows of 20 segments
        segs = [s for w in range(0, len(segs), 20)
                for s in rng.sample(segs[w:w + 20], len(segs[w:w + 20]))]
    limit = 8192
    fs = stream(max_buffered=limit)
    fs.add(MOD - 1, b"", syn=True, now=0.0)
    items: list[Item] = []
    for off, end in segs:  # the clock never moves: only memory pressure declares gaps
        fs.add(off, data[off:end], now=0.0)
        assert fs.buffered_bytes <= limit
        items += fs.poll(0.0)
    items += fs.poll(0.0)
    assert gaps_of(items)
    got = frames_of(items)
    assert set(got) <= set(frames) and got == sorted(got, key=lambda f: f.offset)
    assert len(got) > len(frames) // 2
    assert_accounted(fs, segs, items)
    if not shuffle:  # one loss: the frames from the hole to where the stream resynchronised
        j = next(j for j, f in enumerate(got) if f != frames[j])
        assert got[j:] == frames[frames.index(got[j]):] and len(gaps_of(items)) == 1


def test_syn_after_its_data_rebases() -> None:
    rng = random.Random(9)
    data, frames = make_stream(rng, 6, lengths=(100,))
    segs = [(f.offset, f.end) for f in frames]
    isn = MOD - 300
    fs = stream()
    fs.add(isn + 1 + segs[2][0], data[segs[2][0]:segs[2][1]], now=0.0)  # a lone candidate
    fs.add(isn, b"", syn=True, now=0.0)
    assert fs.base_known and fs.synced and not fs.joined_mid_stream
    items = feed(fs, segs[:2] + segs[3:], data, isn, syn=False)
    assert items == frames and fs.stats.resets == 0


def test_syn_after_scanned_data_goes_on_anchoring() -> None:
    rng = random.Random(9)
    data, frames = make_stream(rng, 20)
    segs = segment(rng, len(data), max_seg=200)
    isn = 5000
    fs = stream()
    first = next(i for i, (s, _) in enumerate(segs) if s > 0 and all(f.offset != s for f in frames))
    fs.add(isn + 1 + segs[first][0], data[segs[first][0]:segs[first][1]], now=0.0)
    fs.add(isn, b"", syn=True, now=0.0)
    assert fs.base_known and not fs.synced
    items = feed(fs, segs, data, isn, syn=False)
    joined_at = segs[first][0]
    assert items == [f for f in frames if f.offset >= joined_at]


def test_syn_after_the_anchor_is_ignored() -> None:
    rng = random.Random(9)
    data, frames = make_stream(rng, 20)
    segs = segment(rng, len(data))
    fs = stream()
    items = feed(fs, segs[:10], data, 700, syn=False)
    fs.add(700 - 1000, b"", syn=True, now=0.0)  # its own SYN, 1000 bytes before the join
    items += feed(fs, segs[10:], data, 700, syn=False)
    base = segs[0][0]
    assert items == frames and fs.joined_mid_stream and fs.stats.resets == 0 and base == 0


def test_new_syn_restarts_the_stream() -> None:
    rng = random.Random(10)
    data_a, frames_a = make_stream(rng, 10)
    data_b, frames_b = make_stream(rng, 10)
    fs = stream()
    items = feed(fs, segment(rng, len(data_a)), data_a, 1000)
    fs.add(1000, b"", syn=True, now=0.0)  # a retransmitted SYN: ignored
    fs.add(1000 + 1 + len(data_a) + 50, b"x" * 20, now=0.0)  # left in the buffers
    items += feed(fs, segment(rng, len(data_b)), data_b, 2**31 + 5)
    assert items == frames_a + frames_b
    assert fs.stats.resets == 1 and fs.stats.discarded_bytes == 20


def test_garbage_segments_are_dropped() -> None:
    fs = stream()
    fs.add(0, b"", syn=True, now=0.0)
    fs.add(1 + 2**31, b"junk", now=0.0)
    fs.add(2**31 - 1, b"junk", now=0.0)
    assert fs.stats.garbage_segments == 2 and fs.buffered_bytes == 0


def test_implausible_header_resynchronises() -> None:
    rng = random.Random(11)
    data, frames = make_stream(rng, 20, bad=7)
    fs = stream()
    items = feed(fs, segment(rng, len(data)), data, 42)
    assert items == frames[:7] + frames[8:]
    assert fs.stats.desyncs == 1 and fs.stats.anchors == 1 and fs.stats.gaps == 0


def test_syn_of_another_connection_after_data_restarts() -> None:
    rng = random.Random(12)
    data, frames = make_stream(rng, 10)
    fs = stream()
    fs.add(5000, data[100:400], now=0.0)  # a join: nothing found yet
    fs.add(5000 + 2**20, b"", syn=True, now=0.0)  # far from that data: a new connection
    assert fs.stats.resets == 1 and fs.base_known and fs.buffered_bytes == 0
    assert feed(fs, segment(rng, len(data)), data, 5000 + 2**20, syn=False) == frames


def test_oversized_header_is_implausible() -> None:
    """A header announcing more than max_buffered, or a length not in ``lengths``, is a
    desync, not a reason to buffer."""
    rng = random.Random(13)
    data, frames = make_stream(rng, 6, lengths=(100,))
    odd = HEADER.pack(tag_of(98), 7) + bytes(7) + HEADER.pack(tag_of(99), 5000) + bytes(5000)
    spliced = data[:frames[3].offset] + odd + data[frames[3].offset:]
    fs = FrameStream(plausible=plausible, max_buffered=4096, lengths=(100, 5000))
    items = feed(fs, [(0, len(spliced))], spliced, 0)
    assert items == frames[:3] + [Frame(f.offset + len(odd), f.tag, f.payload)
                                  for f in frames[3:]]
    assert fs.stats.desyncs == 1 and fs.stats.anchors == 1


def fake_inside(payload_len: int, at: int, claimed: int, rng: random.Random) -> bytes:
    """A random payload with a plausible header for ``claimed`` bytes at ``at``."""
    body = bytearray(rng.randbytes(payload_len))
    body[at:at + 16] = HEADER.pack(tag_of(3), claimed)
    return bytes(body)


def build(parts: list[tuple[int, bytes]]) -> tuple[bytes, list[Frame]]:
    buf = bytearray()
    frames = []
    for tag, payload in parts:
        frames.append(Frame(len(buf), tag, payload))
        buf += HEADER.pack(tag, len(payload)) + payload
    return bytes(buf), frames


def test_anchor_chain_check_rejects_a_fake_header() -> None:
    rng = random.Random(14)
    # frame 0's payload holds a plausible header whose "next header" is random bytes
    data, frames = build([(tag_of(0), fake_inside(1000, 200, 100, rng)),
                          *[(tag_of(i), rng.randbytes(100)) for i in range(1, 6)]])
    fs = stream()
    items = feed(fs, [(150, len(data))], data, 0, syn=False)
    assert items == shifted(frames[1:], 150)


def test_anchor_rejects_a_fake_header_on_a_partial_next_header() -> None:
    """The part of the following header that arrived already rules the fake out."""
    rng = random.Random(15)
    data, frames = build([(tag_of(0), fake_inside(1000, 900, 1000, rng)),
                          *[(tag_of(i), rng.randbytes(100)) for i in range(1, 12)]])
    fake_next = frames[0].offset + 16 + 900 + 16 + 1000
    fs = stream()
    fs.add(500, data[500:fake_next + 10], now=0.0)  # 10 bytes of the fake's next header
    assert fs.synced  # on frame 1, without waiting for the fake to be decided
    assert frames_of(fs.poll(0.0)) == shifted(
        [f for f in frames[1:] if f.end <= fake_next + 10], 500)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="hole_timeout_s"):
        FrameStream(plausible=plausible, hole_timeout_s=-1)
    with pytest.raises(ValueError, match="max_buffered"):
        FrameStream(plausible=plausible, max_buffered=8)
    with pytest.raises(ValueError, match="lengths"):
        FrameStream(plausible=plausible, lengths=[-1])


def deliverable(frames: list[Frame], mask: bytearray, *, syn: bool, base: int) -> list[Frame]:
    """The frames a stream fed in order with the bytes ``mask`` marks delivers.

    Synchronised at a frame, the stream delivers it if it all arrived; otherwise the first
    hole in it becomes a gap, after which the next frame's start is known if the header
    arrived and the hole ends inside the frame. Else the stream anchors on the next frame
    whose header arrived after the hole (or, when joining, after the first byte received),
    once the header after it arrived too, or the stream went quiet after it, or a hole
    inside the frame timed out (a complete frame that nothing confirms is passed over).
    """
    size = len(mask)

    def missing(x: int) -> int:
        i = mask.find(0, x)
        return size if i < 0 else i

    def received(x: int) -> int:
        i = mask.find(1, x)
        return size if i < 0 else i

    last = size - mask[::-1].find(1) if 1 in mask else 0
    synced, scan_from, out = syn, base, []
    for f in frames:
        hole = missing(f.offset)
        if not synced:
            if f.offset < scan_from or hole < f.offset + 16:
                continue
            confirmed = f.end + 16 <= size and missing(f.end) >= f.end + 16
            if not (confirmed or hole >= last or hole < f.end):
                continue
        if hole >= f.end:
            out.append(f)
            synced = True
            continue
        end = received(hole)
        synced = hole >= f.offset + 16 and end <= f.end
        scan_from = end
    return out


@pytest.mark.parametrize("seed", range(200))
def test_delivers_exactly_the_deliverable_frames(seed: int) -> None:
    """In order with random drops, the frames delivered are exactly those that arrived whole
    and that the stream could find (see :func:`deliverable`), and every gap was missing."""
    rng = random.Random(seed)
    syn, lengths = seed % 2 == 0, seed % 4 < 2
    data, frames = make_stream(rng, rng.randint(5, 30))
    segs = segment(rng, len(data), None if lengths else frames, max_seg=rng.choice((50, 700)))
    drop = rng.choice((0.02, 0.1, 0.3))
    kept = [s for s in segs if rng.random() >= drop]
    if not syn:
        kept = kept[rng.randint(0, 3):]
    if not kept:
        return
    base = 0 if syn else kept[0][0]
    mask = bytearray(len(data))
    for s, e in kept:
        mask[s:e] = b"\x01" * (e - s)
    expected = deliverable(frames, mask, syn=syn, base=base)
    whole = [f for f in frames if f.offset >= base and all(mask[f.offset:f.end])]
    assert set(expected) <= set(whole)
    fs = stream(lengths)
    items = feed(fs, kept, data, rng.randrange(MOD), syn=syn, dt=0.01, poll_every=True)
    assert frames_of(items) == shifted(expected, base)
    assert_accounted(fs, kept, items)
    starts = [x.offset if isinstance(x, Frame) else x.start for x in items]
    assert starts == sorted(starts)
    for g in gaps_of(items):
        assert g.start < g.end and not any(mask[g.start + base:g.end + base])


def test_deliverable_misses_few_whole_frames() -> None:
    """The model above is not vacuous: nearly all frames that arrived whole are delivered."""
    rng = random.Random(0)
    total = found = 0
    for _ in range(50):
        data, frames = make_stream(rng, 30)
        mask = bytearray(b"\x01") * len(data)
        for s, e in segment(rng, len(data), max_seg=700):
            if rng.random() < 0.1:
                mask[s:e] = bytes(e - s)
        whole = [f for f in frames if all(mask[f.offset:f.end])]
        total += len(whole)
        found += len(deliverable(frames, mask, syn=True, base=0))
    assert found >= 0.9 * total
