/* The compiled half of mqctl's commitlog record walker (mqctl/store/walker.py, issue 32).
 *
 * Two primitives replace the walker's per-record numpy work; everything else (ownership of ranges,
 * resynchronisation, the reasons of problems, the chains of earlier walks) stays in walker.py, shared
 * by both walkers, so that the numpy walker is the oracle of this one:
 *
 *   chain(buf, base, pos, end) -> (bytearray of int64 positions, stopped)
 *       the records chained from pos while pos < end: MAGICCODE, TOTALSIZE bounds, the record inside
 *       the buffer, PHYSICALOFFSET == base + pos (the numpy walker's `_chain` and its PHYSICALOFFSET
 *       cut), and where the chain stopped;
 *   columns(buf, base, positions, check_crc, crc_known, fields, topics, out) -> list of topic bytes
 *       each record's layout check, BODYCRC and fields into `out` (NCOL int64 rows of len(positions)),
 *       topics as codes into the distinct topic byte strings returned (first appearance order);
 *   gather(buf, at, length), nonzero(buf, pos, end), nonzero_end(buf, pos, end): the extracted items
 *       joined, a zero tail passed over (forwards, backwards); key_hashes(offsets, data, hi, lo): salvage's
 *       message keys as 128 bits (tasks.key_hashes).
 *
 * The bytes are untrusted: every read is checked against the buffer's end first, positions and lengths
 * from the caller included. The GIL is released while walking (the buffers stay exported meanwhile).
 * BODYCRC: CRC-32 by carry-less multiplication (PCLMULQDQ, checked at run time) folding 64 bytes at a
 * time, the system zlib for the rest and on CPUs without it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_CLMUL 1
#include <immintrin.h>
#endif

#define MAGIC_V1 0xDAA320A7u
#define MAGIC_V2 0xDAA320ABu
#define MIN_RECORD_SIZE 91
#define MAX_RECORD_SIZE (1 << 30)

/* the rows of `out` (walker.py's _C_* names) */
enum {
    C_TOTAL, C_VERSION, C_BODY_CRC, C_CRC_OK, C_CRC_GOT, C_QUEUE_ID, C_FLAG, C_QUEUE_OFFSET, C_PHYS,
    C_SYSFLAG, C_BORN_TS, C_STORE_TS, C_RECONSUME, C_PREPARED, C_BODY_LEN, C_OK, C_TSTART, C_TLEN, C_PREL,
    C_PLEN, C_BREL, C_TOPIC, NCOL
};

static inline uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((uint16_t)p[0] << 8 | p[1]); }

static inline int64_t be64(const uint8_t *p) {
    return (int64_t)((uint64_t)be32(p) << 32 | (uint64_t)be32(p + 4));
}

/* ------------------------------------------------------------------------------------------ CRC-32 */

#ifdef HAVE_X86_CLMUL
static int have_clmul;

/* Fold len (>= 64, a multiple of 16) bytes into crc (pre- and post-inverted by the caller): the folding
 * of Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" with the bit-reflected
 * constants of the CRC-32 polynomial 0xEDB88320, as in Chromium's zlib (crc32_simd.c). */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc_fold(const uint8_t *buf, size_t len, uint32_t crc) {
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;

    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = k1k2;
    buf += 64;
    len -= 64;
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        len -= 64;
    }
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }
    /* 128 bits to 64, then Barrett reduction to 32 */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    x0 = poly;
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* java.util.zip.CRC32 of p[0:len) (len < 2**31: a body fits in TOTALSIZE) */
static uint32_t crc32_of(const uint8_t *p, size_t len) {
    uint32_t crc = 0;
#ifdef HAVE_X86_CLMUL
    if (have_clmul && len >= 64) {
        size_t chunk = len & ~(size_t)15;
        crc = ~crc_fold(p, chunk, ~(uint32_t)0);
        p += chunk;
        len -= chunk;
    }
#endif
    return (uint32_t)crc32((uLong)crc, p, (uInt)len);
}

/* ------------------------------------------------------------------------------------------ chain */

typedef struct {
    int64_t *v;
    size_t n, cap;
} vec;

static int vec_push(vec *a, int64_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4096;
        int64_t *v = realloc(a->v, cap * sizeof(int64_t));
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}


/* The buffers of objs[i] (flags[i]) into *views[i], i < n; on a failure, those already taken are
 * released (last first) and -1 returned with the exception set. */
static int get_buffers(int n, PyObject *const *objs, Py_buffer *const *views, const int *flags) {
    for (int i = 0; i < n; i++) {
        if (PyObject_GetBuffer(objs[i], views[i], flags[i]) < 0) {
            while (i-- > 0)
                PyBuffer_Release(views[i]);
            return -1;
        }
    }
    return 0;
}

/* The walk of the records chained from pos; returns where it stopped, -1 when out of memory. */
static Py_ssize_t walk_chain(const uint8_t *b, Py_ssize_t n, int64_t base, Py_ssize_t pos, Py_ssize_t end,
                             vec *out) {
    Py_ssize_t stop = n - 35 < end ? n - 35 : end;   /* a record head needs 36 bytes */
    while (pos < stop) {
        const uint8_t *r = b + pos;
        int32_t total = (int32_t)be32(r);
        uint32_t magic = be32(r + 4);
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < MIN_RECORD_SIZE || total > MAX_RECORD_SIZE
            || total > n - pos)
            break;
        if (be64(r + 28) != base + (int64_t)pos)
            break;
        if (vec_push(out, (int64_t)pos) < 0)
            return -1;
        /* the records' heads are a TOTALSIZE apart, further than the CPU's prefetcher looks: ask for the
         * head some records ahead, guessing they are of this size (only a hint: nothing is read) */
        if ((Py_ssize_t)total * 8 < n - pos)
            __builtin_prefetch(r + (Py_ssize_t)total * 8);
        pos += total;
    }
    return pos;
}

static PyObject *py_chain(PyObject *self, PyObject *args) {
    PyObject *obj;
    long long base;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "OLnn", &obj, &base, &pos, &end))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    vec out = {NULL, 0, 0};
    Py_ssize_t stopped = pos;
    if (pos >= 0) {
        Py_BEGIN_ALLOW_THREADS
        stopped = walk_chain((const uint8_t *)view.buf, view.len, (int64_t)base, pos, end, &out);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (stopped < 0) {
        free(out.v);
        return PyErr_NoMemory();
    }
    PyObject *arr = PyByteArray_FromStringAndSize((const char *)out.v, (Py_ssize_t)(out.n * sizeof(int64_t)));
    free(out.v);
    if (!arr)
        return NULL;
    return Py_BuildValue("Nn", arr, stopped);
}

/* ------------------------------------------------------------------------------------------ topics */

typedef struct {
    int64_t at;        /* where the first record with this topic has it in the buffer */
    int64_t len;
    uint64_t hash;
    int64_t code;      /* -1: empty slot */
} slot;

typedef struct {
    slot *s;
    size_t mask, used;
    vec firsts;        /* code -> index of its slot's `at` (kept as at, len pairs) */
} topic_table;

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    while (n >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        h = (h ^ x) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t x = 0;
    memcpy(&x, p, n);
    h = (h ^ x) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static int table_grow(topic_table *t) {
    size_t cap = t->s ? (t->mask + 1) * 2 : 64;
    slot *s = malloc(cap * sizeof(slot));
    if (!s)
        return -1;
    for (size_t i = 0; i < cap; i++)
        s[i].code = -1;
    if (t->s) {
        for (size_t i = 0; i <= t->mask; i++) {
            if (t->s[i].code < 0)
                continue;
            size_t j = t->s[i].hash & (cap - 1);
            while (s[j].code >= 0)
                j = (j + 1) & (cap - 1);
            s[j] = t->s[i];
        }
        free(t->s);
    }
    t->s = s;
    t->mask = cap - 1;
    return 0;
}

/* the code of the topic b[at:at + len), added when new; -1 when out of memory */
static int64_t topic_code(topic_table *t, const uint8_t *b, int64_t at, int64_t len) {
    if (!t->s || (t->used + 1) * 2 > t->mask + 1) {
        if (table_grow(t) < 0)
            return -1;
    }
    uint64_t h = hash_bytes(b + at, (size_t)len);
    size_t j = h & t->mask;
    while (t->s[j].code >= 0) {
        slot *s = &t->s[j];
        if (s->hash == h && s->len == len && memcmp(b + s->at, b + at, (size_t)len) == 0)
            return s->code;
        j = (j + 1) & t->mask;
    }
    int64_t code = (int64_t)t->used++;
    t->s[j] = (slot){at, len, h, code};
    if (vec_push(&t->firsts, at) < 0 || vec_push(&t->firsts, len) < 0)
        return -1;
    return code;
}

/* ------------------------------------------------------------------------------------------ columns */

/* Check the layout of the record at pos and gather its fields into column i of out (row stride n).
 * Returns 1 when its layout is good. Every read is inside b[0:blen) and inside the record. */
static int record_columns(const uint8_t *b, Py_ssize_t blen_buf, int64_t base, int64_t pos, int64_t *out,
                          Py_ssize_t n, Py_ssize_t i) {
#define COL(c) out[(Py_ssize_t)(c) * n + i]
    COL(C_OK) = 0;
    if (pos < 0 || pos > (int64_t)blen_buf - 8)
        return 0;
    const uint8_t *r = b + pos;
    int64_t total = (int32_t)be32(r);
    uint32_t magic = be32(r + 4);
    COL(C_TOTAL) = total;
    if (total < 0 || total > (int64_t)blen_buf - pos)
        return 0;                  /* the record does not fit in the buffer */
    if (total < 40)
        return 0;                  /* not even the SYSFLAG: the body length cannot fit either */
    int64_t sysflag = (int32_t)be32(r + 36);
    int64_t bh = (sysflag & 0x10) ? 20 : 8, sh = (sysflag & 0x20) ? 20 : 8;
    int64_t brel = 68 + bh + sh;
    if (brel + 4 > total)
        return 0;
    int64_t blen = (int32_t)be32(r + brel);
    if (blen < 0 || brel + 4 + blen > total)
        return 0;
    int64_t trel = brel + 4 + blen;
    int v1 = magic == MAGIC_V1;
    int64_t tlen;
    if (v1) {
        if (trel + 1 > total)
            return 0;
        tlen = r[trel];
        if (tlen > 127)
            return 0;
    } else {
        if (trel + 2 > total)
            return 0;
        tlen = be16(r + trel);
    }
    int64_t tstart = trel + (v1 ? 1 : 2);
    int64_t prel = tstart + tlen;
    if (prel + 2 > total)
        return 0;
    int64_t plen = be16(r + prel);
    if (prel + 2 + plen != total)
        return 0;
    COL(C_OK) = 1;
    COL(C_VERSION) = v1 ? 1 : 2;
    COL(C_BODY_CRC) = (int32_t)be32(r + 8);
    COL(C_QUEUE_ID) = (int32_t)be32(r + 12);
    COL(C_FLAG) = (int32_t)be32(r + 16);
    COL(C_QUEUE_OFFSET) = be64(r + 20);
    COL(C_PHYS) = be64(r + 28);
    COL(C_SYSFLAG) = sysflag;
    COL(C_BORN_TS) = be64(r + 40);
    COL(C_STORE_TS) = be64(r + 48 + bh);
    COL(C_RECONSUME) = (int32_t)be32(r + 56 + bh + sh);
    COL(C_PREPARED) = be64(r + 60 + bh + sh);
    COL(C_BODY_LEN) = blen;
    COL(C_TSTART) = tstart;
    COL(C_TLEN) = tlen;
    COL(C_PREL) = prel;
    COL(C_PLEN) = plen;
    COL(C_BREL) = brel;
    return 1;
#undef COL
}

static PyObject *py_columns(PyObject *self, PyObject *args) {
    PyObject *obj, *pobj, *oobj;
    long long base;
    int check_crc, fields, topics;
    Py_ssize_t crc_known;
    if (!PyArg_ParseTuple(args, "OLOpnppO", &obj, &base, &pobj, &check_crc, &crc_known, &fields, &topics,
                          &oobj))
        return NULL;
    Py_buffer view, pview, oview;
    if (get_buffers(3, (PyObject *[]){obj, pobj, oobj}, (Py_buffer *[]){&view, &pview, &oview},
                    (int[]){PyBUF_SIMPLE, PyBUF_SIMPLE, PyBUF_SIMPLE | PyBUF_WRITABLE}) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = pview.len / (Py_ssize_t)sizeof(int64_t);
    if (pview.len % (Py_ssize_t)sizeof(int64_t) || oview.len != (Py_ssize_t)(NCOL * sizeof(int64_t)) * n) {
        PyErr_SetString(PyExc_ValueError, "columns: positions must be int64, out NCOL x len(positions) int64");
        goto done;
    }
    const uint8_t *b = (const uint8_t *)view.buf;
    const int64_t *P = (const int64_t *)pview.buf;
    int64_t *out = (int64_t *)oview.buf;
    topic_table t = {NULL, 0, 0, {NULL, 0, 0}};
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(out, 0, (size_t)oview.len);
    Py_ssize_t good = 0;                         /* records with a good layout so far */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t pos = P[i];
        if (i + 4 < n && P[i + 4] >= 0 && P[i + 4] < view.len)      /* a hint: the head 4 records on */
            __builtin_prefetch(b + P[i + 4]);
        if (!record_columns(b, view.len, (int64_t)base, pos, out, n, i))
            continue;
        int64_t blen = out[C_BODY_LEN * n + i];
        const uint8_t *body = b + pos + out[C_BREL * n + i] + 4;
        if (check_crc && good >= crc_known) {
            int64_t got = (int64_t)(crc32_of(body, (size_t)blen) & 0x7FFFFFFFu);
            out[C_CRC_GOT * n + i] = got;
            out[C_CRC_OK * n + i] = got == out[C_BODY_CRC * n + i];
        } else {
            out[C_CRC_OK * n + i] = 1;
        }
        if (fields && topics) {
            int64_t code = topic_code(&t, b, pos + out[C_TSTART * n + i], out[C_TLEN * n + i]);
            if (code < 0) {
                oom = 1;
                break;
            }
            out[C_TOPIC * n + i] = code;
        }
        good++;
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
    } else {
        result = PyList_New((Py_ssize_t)t.used);
        for (size_t c = 0; result && c < t.used; c++) {
            PyObject *name = PyBytes_FromStringAndSize((const char *)b + t.firsts.v[2 * c],
                                                       (Py_ssize_t)t.firsts.v[2 * c + 1]);
            if (!name) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, (Py_ssize_t)c, name);
        }
    }
    free(t.s);
    free(t.firsts.v);
done:
    PyBuffer_Release(&oview);
    PyBuffer_Release(&pview);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *py_crc32(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc;
    if (view.len >= (Py_ssize_t)1 << 31) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "crc32: at most 2 GiB");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    crc = crc32_of((const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* The checks and copies of gather, nonzero and nonzero_end on plain memory (fuzz_walker_c.c calls them
 * too). gather_size: the bytes the items at[i], len[i] (n of them, int64, unaligned) add up to, or -1 with
 * *bad the first item outside b[0:blen] (-2 when the sum overflows). */
static int64_t gather_size(const char *ab, const char *lb, Py_ssize_t n, int64_t blen, Py_ssize_t *bad) {
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a, l;
        memcpy(&a, ab + 8 * i, 8);
        memcpy(&l, lb + 8 * i, 8);
        if (a < 0 || l < 0 || a > blen || l > blen - a) {
            *bad = i;
            return -1;
        }
        if (l > (int64_t)PY_SSIZE_T_MAX - total)
            return -2;
        total += l;
    }
    return total;
}

static void gather_copy(const uint8_t *b, const char *ab, const char *lb, Py_ssize_t n, char *dst) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a, l;
        memcpy(&a, ab + 8 * i, 8);
        memcpy(&l, lb + 8 * i, 8);
        memcpy(dst, b + a, (size_t)l);
        dst += l;
    }
}

/* pos and end clamped to [0, blen] with pos <= end */
static void clamp_span(Py_ssize_t blen, Py_ssize_t *pos, Py_ssize_t *end) {
    if (*end > blen)
        *end = blen;
    if (*end < 0)
        *end = 0;
    if (*pos < 0)
        *pos = 0;
    if (*pos > *end)
        *pos = *end;
}

static Py_ssize_t first_nonzero(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end) {
    Py_ssize_t i = pos;
    while (i < end && ((uintptr_t)(b + i) & 7) && !b[i])
        i++;
    if (i < end && !b[i]) {
        while (end - i >= 64) {
            uint64_t w[8];
            memcpy(w, b + i, 64);
            if (w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7])
                break;
            i += 64;
        }
        while (i < end && !b[i])
            i++;
    }
    return i;
}

static Py_ssize_t last_nonzero_end(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end) {
    Py_ssize_t i = end;
    while (i - pos >= 64) {
        uint64_t w[8];
        memcpy(w, b + i - 64, 64);
        if (w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7])
            break;
        i -= 64;
    }
    while (i > pos && !b[i - 1])
        i--;
    return i;
}

/* key_hashes' 128 bits of each string (tasks.key_hashes, the same arithmetic): splitmix64's finalizer
 * over the length, then over each 8-byte little-endian word (zero past the string's end), in two lanes. */
static inline uint64_t fmix64(uint64_t h) {
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

static void hash128(const uint8_t *p, int64_t len, uint64_t *hi, uint64_t *lo) {
    uint64_t h1 = fmix64((uint64_t)len ^ 0x243F6A8885A308D3ull), h2 = fmix64((uint64_t)len ^ 0x13198A2E03707344ull);
    for (int64_t j = 0; j < len; j += 8) {
        uint64_t w = 0;
        int64_t k = len - j < 8 ? len - j : 8;
        for (int64_t i = 0; i < k; i++)
            w |= (uint64_t)p[j + i] << (8 * i);
        h1 = fmix64(h1 ^ w);
        h2 = fmix64(h2 ^ (w * 0x9E3779B97F4A7C15ull));
    }
    *hi = h1;
    *lo = h2;
}

/* the strings of Arrow offsets (int32, n + 1 of them, unaligned) into data[0:dlen]: 0, or 1 when an offset
 * runs backwards or past the data */
static int hash_strings(const char *ob, Py_ssize_t n, const uint8_t *data, int64_t dlen, uint64_t *hi,
                        uint64_t *lo) {
    int32_t prev;
    memcpy(&prev, ob, 4);
    if (prev < 0 || prev > dlen)
        return 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t next;
        memcpy(&next, ob + 4 * (i + 1), 4);
        if (next < prev || next > dlen)
            return 1;
        hash128(data + prev, (int64_t)next - prev, hi + i, lo + i);
        prev = next;
    }
    return 0;
}

/* key_hashes(offsets, data, hi, lo): hash128 of the n strings of an Arrow string array's offsets (int32,
 * n + 1) and data into the int64 buffers hi and lo (n each), the GIL released. */
static PyObject *py_key_hashes(PyObject *self, PyObject *args) {
    PyObject *oobj, *dobj, *hobj, *lobj;
    if (!PyArg_ParseTuple(args, "OOOO", &oobj, &dobj, &hobj, &lobj))
        return NULL;
    Py_buffer ov, dv, hv, lv;
    if (get_buffers(4, (PyObject *[]){oobj, dobj, hobj, lobj}, (Py_buffer *[]){&ov, &dv, &hv, &lv},
                    (int[]){PyBUF_SIMPLE, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBUF_WRITABLE}) < 0)
        return NULL;
    PyObject *res = NULL;
    Py_ssize_t n = ov.len / 4 - 1;
    if (ov.len % 4 || n < 0 || hv.len != 8 * n || lv.len != 8 * n || ((uintptr_t)hv.buf & 7) ||
        ((uintptr_t)lv.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "key_hashes: n + 1 int32 offsets and two aligned int64 buffers of n");
        goto done;
    }
    int bad;
    Py_BEGIN_ALLOW_THREADS
    bad = hash_strings((const char *)ov.buf, n, (const uint8_t *)dv.buf, (int64_t)dv.len, (uint64_t *)hv.buf,
                       (uint64_t *)lv.buf);
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "key_hashes: an offset outside the data");
        goto done;
    }
    res = Py_None;
    Py_INCREF(res);
done:
    PyBuffer_Release(&lv);
    PyBuffer_Release(&hv);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&ov);
    return res;
}

/* gather(buf, at, length) -> bytes: the items buf[at[i]:at[i] + length[i]] joined (at, length: int64
 * buffers of equal size; every item checked to lie inside buf first), the copy with the GIL released:
 * the bodies and properties a walk extracts, without a Python object per item. */
static PyObject *py_gather(PyObject *self, PyObject *args) {
    PyObject *obj, *aobj, *lobj;
    if (!PyArg_ParseTuple(args, "OOO", &obj, &aobj, &lobj))
        return NULL;
    Py_buffer view, aview, lview;
    if (get_buffers(3, (PyObject *[]){obj, aobj, lobj}, (Py_buffer *[]){&view, &aview, &lview},
                    (int[]){PyBUF_SIMPLE, PyBUF_SIMPLE, PyBUF_SIMPLE}) < 0)
        return NULL;
    PyObject *res = NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    const char *ab = (const char *)aview.buf, *lb = (const char *)lview.buf;
    Py_ssize_t n = aview.len / 8, bad = 0;
    if (aview.len != lview.len || aview.len % 8) {
        PyErr_SetString(PyExc_ValueError, "gather: at and length must be int64 buffers of one size");
        goto done;
    }
    int64_t total = gather_size(ab, lb, n, (int64_t)view.len, &bad);
    if (total == -1) {
        PyErr_Format(PyExc_ValueError, "gather: item %zd outside the buffer", bad);
        goto done;
    }
    if (total < 0) {
        PyErr_SetString(PyExc_OverflowError, "gather: too many bytes");
        goto done;
    }
    res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!res)
        goto done;
    char *dst = PyBytes_AS_STRING(res);
    Py_BEGIN_ALLOW_THREADS
    gather_copy(b, ab, lb, n, dst);
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&lview);
    PyBuffer_Release(&aview);
    PyBuffer_Release(&view);
    return res;
}

/* (buf, pos, end) -> fn over the bytes [pos, end) of buf, pos and end clamped to the buffer, with the GIL
 * released: the argument handling of nonzero and nonzero_end, said once. */
static PyObject *span_scan(PyObject *args, Py_ssize_t (*fn)(const uint8_t *, Py_ssize_t, Py_ssize_t)) {
    PyObject *obj;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "Onn", &obj, &pos, &end))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    clamp_span(view.len, &pos, &end);
    Py_ssize_t i;
    Py_BEGIN_ALLOW_THREADS
    i = fn((const uint8_t *)view.buf, pos, end);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(i);
}

/* nonzero(buf, pos, end) -> the first position in [pos, end) whose byte is not zero, or end (pos and end
 * clamped to the buffer): a preallocated file's zero tail passed over at memory speed. */
static PyObject *py_nonzero(PyObject *self, PyObject *args) {
    return span_scan(args, first_nonzero);
}

/* nonzero_end(buf, pos, end) -> the position after the last non-zero byte in [pos, end), or pos when all
 * are zero (pos and end clamped to the buffer). */
static PyObject *py_nonzero_end(PyObject *self, PyObject *args) {
    return span_scan(args, last_nonzero_end);
}

static PyMethodDef methods[] = {
    {"chain", py_chain, METH_VARARGS, "chain(buf, base, pos, end) -> (bytearray of int64 positions, stopped)"},
    {"columns", py_columns, METH_VARARGS,
     "columns(buf, base, positions, check_crc, crc_known, fields, topics, out) -> distinct topics"},
    {"crc32", py_crc32, METH_O, "crc32(data) -> java.util.zip.CRC32 of data"},
    {"key_hashes", py_key_hashes, METH_VARARGS, "key_hashes(offsets, data, hi, lo): 128 bits of each string"},
    {"gather", py_gather, METH_VARARGS, "gather(buf, at, length) -> bytes: the items joined"},
    {"nonzero_end", py_nonzero_end, METH_VARARGS, "nonzero_end(buf, pos, end) -> after the last non-zero byte, or pos"},
    {"nonzero", py_nonzero, METH_VARARGS, "nonzero(buf, pos, end) -> first non-zero byte's position, or end"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cwalker",
                                    "mqctl's compiled commitlog record walker (see walker.py)", -1, methods};

PyMODINIT_FUNC PyInit__cwalker(void) {
    const char *crc = "zlib";
#ifdef HAVE_X86_CLMUL
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (have_clmul)
        crc = "pclmul";
#endif
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddIntConstant(m, "NCOL", NCOL) < 0 || PyModule_AddStringConstant(m, "CRC", crc) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
