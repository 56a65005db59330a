/* What a compiled record walker would do, for the figures in bench/README.md (issue 15): not part of
 * mqctl. It walks every record of each commitlog file given (TOTALSIZE chain, MAGICCODE, SYSFLAG's
 * host widths, body length) and computes each body's CRC-32 with the system zlib, as
 * `recover inspect --deep` does with numpy and zlib-ng, and prints the process's CPU time per record.
 *
 *     gcc -O2 -o /tmp/native_floor bench/native_floor.c -lz && /tmp/native_floor STORE/commitlog/0*
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int main(int argc, char **argv) {
    long records = 0, crc_errors = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    for (int f = 1; f < argc; f++) {
        int fd = open(argv[f], O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) { perror(argv[f]); return 2; }
        size_t n = (size_t)st.st_size, pos = 0;
        const uint8_t *b = mmap(0, n, PROT_READ, MAP_SHARED, fd, 0);
        if (b == MAP_FAILED) { perror(argv[f]); return 2; }
        while (pos + 40 <= n) {
            int32_t total = (int32_t)be32(b + pos);
            uint32_t magic = be32(b + pos + 4);
            if (total < 40 || (magic != 0xdaa320a7u && magic != 0xdaa320abu) || pos + (size_t)total > n) break;
            uint32_t sysflag = be32(b + pos + 36);
            size_t brel = 68 + ((sysflag & 0x10) ? 20 : 8) + ((sysflag & 0x20) ? 20 : 8);
            int32_t blen = (int32_t)be32(b + pos + brel);
            if (blen < 0 || brel + 4 + (size_t)blen > (size_t)total) break;
            if ((crc32(0L, b + pos + brel + 4, (uInt)blen) & 0x7fffffff) != be32(b + pos + 8)) crc_errors++;
            records++;
            pos += (size_t)total;
        }
        munmap((void *)b, n);
        close(fd);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    double cpu = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("records %ld, BODYCRC errors %ld, CPU %.3f s, %.0f ns per record\n", records, crc_errors, cpu,
           records ? cpu / (double)records * 1e9 : 0.0);
    return 0;
}
