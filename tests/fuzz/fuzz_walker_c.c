/* libFuzzer harness of the compiled walker's C code alone (issue 32), for memory safety at libFuzzer's
 * speed: no Python runs, so there is no oracle here but zlib's CRC-32 (the differential harness against the
 * numpy walker is fuzz_walker.py, much slower). It includes the extension's source and calls its walk: the
 * chain from position 0 and from a position the input chooses, each record's columns and BODYCRC and topic
 * code, and the columns of arbitrary positions (as records_at may be given), all with AddressSanitizer and
 * UndefinedBehaviorSanitizer:
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
    free(b);
    return 0;
}
