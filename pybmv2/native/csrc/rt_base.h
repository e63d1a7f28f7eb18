/* mlfabric native engine: base types, hash/checksum algorithms and bit-level I/O.
 *
 * This file, the other rt_*.c files and the code pybmv2/native generates for one program
 * are concatenated into one translation unit and built with the system's C compiler. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int8_t i8;
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t i32;
typedef int64_t i64;
typedef unsigned __int128 u128;
typedef __int128 i128;

#define NX_EXPORT __attribute__((visibility("default")))
#define NX_LIKELY(x) __builtin_expect(!!(x), 1)
#define NX_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* error codes of the API (negative returns) */
#define NX_EEXIST (-1)
#define NX_ENOENT (-2)
#define NX_EINVAL (-3)
#define NX_ENOMEM (-4)

/* a growable byte buffer */
typedef struct {
    u8 *p;
    size_t n, cap;
} nx_buf_t;

static int buf_reserve(nx_buf_t *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra) cap *= 2;
    u8 *q = realloc(b->p, cap);
    if (!q) return NX_ENOMEM;
    b->p = q;
    b->cap = cap;
    return 0;
}

/* grow an array of `size`-byte items to hold at least `need` items */
static int grow(void **arr, u32 *cap, u32 need, size_t size) {
    if (need <= *cap) return 0;
    u32 c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*arr, (size_t)c * size);
    if (!q) return NX_ENOMEM;
    memset((u8 *)q + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
    *arr = q;
    *cap = c;
    return 0;
}

/* ---- what the data plane touched, for the control plane's pulls --------------------------
 *
 * Counts, register cells and meter buckets have one writer, the thread running packets
 * (the I/O thread, or the caller of nx_process). It stores them with relaxed atomic stores
 * and lists every cell it touches once per generation, in that generation's list (two
 * lists, by the generation's parity). A pull (nx_pull_begin, rt_api.c) starts the next
 * generation, waits until the packet thread runs no round listing into the old one, and
 * then reads the old lists and the cells they name with relaxed atomic loads, without the
 * engine's lock: packets go on meanwhile, listing into the new generation. Counts only grow;
 * the reader keeps what it has seen of each (`seen`) and takes the difference, so that a
 * packet counted during a pull is taken by the next one, never twice and never lost. */
#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static inline double ld_f64(const double *p) {
    double v;
    __atomic_load(p, &v, __ATOMIC_RELAXED);
    return v;
}

static inline void st_f64(double *p, double v) { __atomic_store(p, &v, __ATOMIC_RELAXED); }

/* the ids of the cells touched in one generation */
typedef struct {
    u32 *ids, n, cap;
} touched_t;

/* list a cell; 0, or NX_ENOMEM (then it is not listed, and the next touch tries again) */
static inline int touched_add(touched_t *l, u32 id) {
    if (grow((void **)&l->ids, &l->cap, l->n + 1, sizeof(u32))) return NX_ENOMEM;
    l->ids[l->n++] = id;
    return 0;
}

/* a take stopped at list position `i` (its caller's room ran out): the rest stays listed */
static inline void touched_keep(touched_t *l, u32 i) {
    memmove(l->ids, l->ids + i, (size_t)(l->n - i) * sizeof(u32));
    l->n -= i;
}

/* ---- algorithms, bit for bit as BMv2 computes them (pybmv2/calculations.py) ---------- */

static u16 CRC16_TABLE[256], CCITT_TABLE[256];
static u32 CRC32_TABLE[256];
static u8 REFLECT8[256];

static void algos_init(void) {
    for (u32 b = 0; b < 256; b++) {
        u32 r = b << 8, c = b << 8;
        for (int i = 0; i < 8; i++) {
            r = (r & 0x8000) ? ((r << 1) ^ 0x8005) : (r << 1);
            c = (c & 0x8000) ? ((c << 1) ^ 0x1021) : (c << 1);
        }
        CRC16_TABLE[b] = (u16)r;
        CCITT_TABLE[b] = (u16)c;
        u32 x = b;
        for (int i = 0; i < 8; i++) x = (x & 1) ? (x >> 1) ^ 0xEDB88320u : (x >> 1);
        CRC32_TABLE[b] = x;
        u8 v = (u8)b, o = 0;
        for (int i = 0; i < 8; i++) { o = (u8)((o << 1) | (v & 1)); v >>= 1; }
        REFLECT8[b] = o;
    }
}

static u64 algo_crc16(const u8 *d, size_t n) {
    u32 rem = 0;
    for (size_t i = 0; i < n; i++)
        rem = CRC16_TABLE[REFLECT8[d[i]] ^ (rem >> 8)] ^ ((rem << 8) & 0xFFFF);
    u32 out = 0;
    for (int i = 0; i < 16; i++) { out = (out << 1) | (rem & 1); rem >>= 1; }
    return out;
}

static u64 algo_crc32(const u8 *d, size_t n) {
    u32 c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = CRC32_TABLE[(c ^ d[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static u64 algo_crc_ccitt(const u8 *d, size_t n) {
    u32 rem = 0xFFFF;
    for (size_t i = 0; i < n; i++) rem = CCITT_TABLE[d[i] ^ (rem >> 8)] ^ ((rem << 8) & 0xFFFF);
    return rem;
}

static u64 algo_csum16(const u8 *d, size_t n) {
    u64 sum = 0;
    size_t i = 0;
    for (; i + 1 < n; i += 2) sum += ((u32)d[i] << 8) | d[i + 1];
    if (i < n) sum += (u32)d[i] << 8;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (~sum) & 0xFFFF;
}

static u64 algo_identity(const u8 *d, size_t n) {
    u64 v = 0;
    for (size_t i = 0; i < n && i < 8; i++) v = (v << 8) | d[i];
    return v;
}

static u64 algo_xor(const u8 *d, size_t n, size_t w) {
    u64 out = 0;
    for (size_t i = 0; i < n; i += w) {
        u64 chunk = 0;
        for (size_t j = 0; j < w; j++) chunk = (chunk << 8) | (i + j < n ? d[i + j] : 0);
        out ^= chunk;
    }
    return out;
}

static u64 algo_xor16(const u8 *d, size_t n) { return algo_xor(d, n, 2); }
static u64 algo_xor32(const u8 *d, size_t n) { return algo_xor(d, n, 4); }

/* ---- bit-level I/O --------------------------------------------------------------------- */

/* `width` (<= 128) bits starting `start` bits into `d`, big-endian */
static inline u128 rd_bits(const u8 *d, u64 start, int width) {
    u64 first = start >> 3, last = (start + (u64)width - 1) >> 3;
    int shift = (int)((last + 1) * 8 - (start + (u64)width));
    u128 acc = 0;
    if (last - first < 16) {
        for (u64 i = first; i <= last; i++) acc = (acc << 8) | d[i];
        acc >>= shift;
    } else { /* 17 bytes: a (nearly) 128-bit value not aligned on a byte */
        for (u64 i = first + 1; i <= last; i++) acc = (acc << 8) | d[i];
        acc = (acc >> shift) | ((u128)d[first] << (128 - shift));
    }
    return width >= 128 ? acc : (acc & (((u128)1 << width) - 1));
}

/* a big-endian bit writer over a buffer that has room */
typedef struct {
    u8 *buf;
    u64 bits;
} bw_t;

static inline void bw_put(bw_t *w, u128 v, int width) {
    while (width > 0) {
        u64 byte = w->bits >> 3;
        int used = (int)(w->bits & 7), room = 8 - used;
        if (used == 0 && width >= 8) {
            w->buf[byte] = (u8)(v >> (width - 8));
            w->bits += 8;
            width -= 8;
            continue;
        }
        int take = width < room ? width : room;
        u8 bits = (u8)((v >> (width - take)) & ((1u << take) - 1));
        if (used == 0) w->buf[byte] = 0;
        w->buf[byte] |= (u8)(bits << (room - take));
        w->bits += (u64)take;
        width -= take;
    }
}

/* the monotonic clock as Python's time.monotonic() gives it */
static inline double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)((i64)ts.tv_sec * 1000000000LL + ts.tv_nsec) / 1e9;
}

/* ---- hashing of key words --------------------------------------------------------------- */

static inline u64 mix64(u64 h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline u64 hash_words(const u64 *w, int n, u64 seed) {
    u64 h = seed * 0x9E3779B97F4A7C15ULL + (u64)n;
    for (int i = 0; i < n; i++) h = mix64(h ^ w[i]) + 0x9E3779B97F4A7C15ULL;
    return mix64(h);
}
