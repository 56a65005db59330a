/* libFuzzer harness of the compiled walker's C code alone (issue 32), for memory safety at libFuzzer's
 * speed: no Python runs, so there is no oracle here but zlib's CRC-32 (the differential harness against the
 * numpy walker is fuzz_walker.py, much slower). It includes the extension's source and calls its walk: the
 * chain from position 0 and from a position the input chooses, each record's columns and BODYCRC and topic
 * code, the columns of arbitrary positions (as records_at may be given), and gather, nonzero and nonzero_end
 * of positions and lengths taken from the bytes (checked against byte loops) and key_hashes of offsets taken
 * from them, all with AddressSanitizer and UndefinedBehaviorSanitizer:
 *
 *   clang -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *     -I$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])') \
 *     tests/fuzz/fuzz_walker_c.c $(python3-config --ldflags --embed) -lz -o /tmp/fuzz_walker_c
 *   /tmp/fuzz_walker_c -runs=10000000 -max_len=8192 CORPUS SEEDS
 *
 * Input: 8 bytes of base offset, 2 bytes of a start position, then the buffer.
 */
#include "../../mqctl/store/_cwalker.c"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
#ifdef HAVE_X86_CLMUL
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
    return 0;
}

static void columns_of(const uint8_t *b, Py_ssize_t n, const int64_t *P, Py_ssize_t m, int check_crc) {
    int64_t *out = calloc((size_t)(NCOL * (m ? m : 1)), sizeof(int64_t));
    topic_table t = {NULL, 0, 0, {NULL, 0, 0}};
    if (!out)
        return;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (!record_columns(b, n, 0, P[i], out, m, i))
            continue;
        int64_t blen = out[C_BODY_LEN * m + i];
        const uint8_t *body = b + P[i] + out[C_BREL * m + i] + 4;
        if (check_crc && crc32_of(body, (size_t)blen) != (uint32_t)crc32(0, body, (uInt)blen))
            __builtin_trap();                     /* the CRC differs from zlib's */
        if (topic_code(&t, b, P[i] + out[C_TSTART * m + i], out[C_TLEN * m + i]) < 0)
            break;
    }
    free(out);
    free(t.s);
    free(t.firsts.v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 10)
        return 0;
    int64_t base = 0;
    for (int i = 0; i < 8; i++)
        base = (int64_t)((uint64_t)base << 8 | data[i]);
    base &= ((int64_t)1 << 48) - 1;
    Py_ssize_t start = (Py_ssize_t)(data[8] << 8 | data[9]);
    /* the buffer in an allocation of its own size, so that ASan sees a read one byte past it */
    Py_ssize_t n = (Py_ssize_t)size - 10;
    uint8_t *b = malloc(n ? (size_t)n : 1);
    if (!b)
        return 0;
    memcpy(b, data + 10, (size_t)n);
    for (int from = 0; from < 2; from++) {
        vec at = {NULL, 0, 0};
        Py_ssize_t pos = from ? start % (n + 1) : 0;
        if (walk_chain(b, n, base, pos, n, &at) >= 0)
            columns_of(b, n, at.v, (Py_ssize_t)at.n, 1);
        free(at.v);
    }
    /* arbitrary positions, negative and past the end too */
    int64_t P[8];
    for (int i = 0; i < 8; i++)
        P[i] = (int64_t)(start * (i + 1) % (n + 64)) - 32;
    columns_of(b, n, P, 8, 1);
    /* gather of those positions with lengths from the bytes (some outside the buffer: refused), and the
     * zero scans from them, each checked against a byte loop */
    int64_t L[8];
    for (int i = 0; i < 8; i++) {        /* odd: a length from the bytes; even: to the end, -1, 0 or +1 */
        int64_t x = n ? (int64_t)b[(Py_ssize_t)i % n] : i;
        L[i] = i & 1 ? x * (i + 1) - 16 : n - P[i] + x % 3 - 1;
    }
    Py_ssize_t bad = 0;
    int64_t total = gather_size((const char *)P, (const char *)L, 8, n, &bad);
    if (total >= 0) {
        char *dst = malloc(total ? (size_t)total : 1);
        if (dst) {
            gather_copy(b, (const char *)P, (const char *)L, 8, dst);
            int64_t at = 0;
            for (int i = 0; i < 8; i++) {
                if (P[i] < 0 || L[i] < 0 || P[i] + L[i] > n || memcmp(dst + at, b + P[i], (size_t)L[i]))
                    __builtin_trap();             /* accepted an item outside, or copied it wrong */
                at += L[i];
            }
            free(dst);
        }
    } else {
        if (total != -1 || bad < 0 || bad >= 8)
            __builtin_trap();
        if (P[bad] >= 0 && L[bad] >= 0 && P[bad] + L[bad] <= n)
            __builtin_trap();                     /* refused an item inside */
    }
    for (int i = 0; i < 8; i++) {
        Py_ssize_t pos = (Py_ssize_t)P[i], end = (Py_ssize_t)P[(i + 3) % 8] + 64;
        clamp_span(n, &pos, &end);
        Py_ssize_t f = first_nonzero(b, pos, end), e = last_nonzero_end(b, pos, end), want_f = end, want_e = pos;
        for (Py_ssize_t j = pos; j < end; j++)
            if (b[j]) {
                if (want_f == end)
                    want_f = j;
                want_e = j + 1;
            }
        if (f != want_f || e != want_e)
            __builtin_trap();
    }
    /* key_hashes over offsets from the bytes (backwards or past the end: refused, nothing read) */
    int32_t O[9];
    uint64_t H1[8], H2[8];
    for (int i = 0; i < 9; i++)
        O[i] = (int32_t)(P[i % 8] + (i ? L[i - 1] % 7 : 0));
    if (!hash_strings((const char *)O, 8, b, n, H1, H2))
        for (int i = 0; i < 8; i++)
            if (O[i] < 0 || O[i + 1] < O[i] || O[i + 1] > n)
                __builtin_trap();                 /* accepted a string outside the data */
    free(b);
    return 0;
}
