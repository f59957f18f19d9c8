/* compress (sec. 4.4.1, eq. (15)) of one fp32 weight on an x86-64 CPU with AVX-512F: the kept
 * elements of every kept filter row, in order, packed into one dense block.
 *
 * Built and loaded by prunex/comm/native.py (cc -O3 -fopenmp -shared); the Python side checks every
 * argument. The layout is the one of ShrinkPlan.compress: the (C_in * KH * KW)-float row of each kept
 * filter K_out[p] is read whole and its kept elements (channel K_in[q]'s KH*KW floats, q ascending)
 * are written at out[p * kept_per_row ...]. Which elements of a row are kept is the same for every
 * row: one 16-bit mask per 16-float block of the row (bit j = element 16 b + j kept).
 *
 * Per 16-float block: one load, one vcompressps of the kept lanes, appended to a register that is
 * written out a 64-byte line at a time (pack_range). No store touches a float outside the range's own
 * output, so the OpenMP threads' ranges of rows cannot race and a bucket view is written exactly
 * where it lies. Pure data movement: the bytes are the ones torch.index_select writes (NaN payloads
 * and signed zeros included).
 *
 * The kernel is compiled for AVX-512F by a target attribute, not by -m flags, so the library loads on
 * any x86-64 CPU; prunex_pack_rows_supported() says whether this CPU may call it. Elsewhere (aarch64)
 * it compiles to "not supported". */
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

int prunex_pack_rows_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

/* Software prefetch: the next kept row starts after a gap (a dropped filter), where the hardware
 * prefetcher loses the stream, so each block also fetches the same block of the kept row at least
 * PREFETCH_ROWS rows and PREFETCH_FLOATS floats ahead, into L2 (_MM_HINT_T1). Measured with bench.shrink's
 * layers (ratio to a copy of the compact bytes, same process): hint T0 (into L1) 0.50-0.65, T1 or T2
 * 0.73-0.85, no prefetch 0.44-0.53; in one pair of runs, T1 1 row ahead 0.81, 2-4 rows 0.83-0.84. */
#define PREFETCH_ROWS 2
#define PREFETCH_FLOATS 2048

/* Rows [p0, p1) of one layer; their output out[p0 * kept_per_row, p1 * kept_per_row) is one contiguous
 * stream. Packed blocks are gathered in a register (acc, its first `fill` lanes taken) and written a
 * whole aligned 64-byte line at a time with streaming stores: the compact bytes go to memory without
 * first reading the line in (on these sizes, far above the caches, that is a quarter of the traffic).
 * The first and the last line of the range are partly another range's (or another tensor's): those
 * two are written with ordinary masked stores of this range's lanes only. */
__attribute__((target("avx512f"))) static void pack_range(const float *t, int64_t row_len, const int64_t *rows,
                                                          int64_t p0, int64_t p1, const uint16_t *mask,
                                                          int64_t kept_per_row, float *out) {
    const int64_t nblk = row_len / 16, tail = row_len % 16;
    const int64_t ahead = row_len * PREFETCH_ROWS >= PREFETCH_FLOATS ? PREFETCH_ROWS : PREFETCH_FLOATS / row_len;
    float *start = out + p0 * kept_per_row;
    const int lead = (int)(((uintptr_t)start & 63u) / 4u); /* lanes of the first line before `start` */
    float *line = start - lead;                             /* 64-byte aligned */
    const __mmask16 first_lanes = (__mmask16)(0xFFFFu << lead);
    int fill = lead, first = 1;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t p = p0; p < p1; p++) {
        const float *src = t + rows[p] * row_len;
        const float *next = p + ahead < p1 ? t + rows[p + ahead] * row_len : src;
        for (int64_t b = 0; b < nblk + (tail ? 1 : 0); b++) {
            _mm_prefetch((const char *)(next + 16 * b), _MM_HINT_T1);
            const __mmask16 k = mask[b];
            const int n = __builtin_popcount(k);
            const __m512 v = b < nblk ? _mm512_loadu_ps(src + 16 * b)
                                      : _mm512_maskz_loadu_ps((__mmask16)((1u << tail) - 1u), src + 16 * b);
            const __m512 c = _mm512_maskz_compress_ps(k, v); /* the n kept floats, in order, at lanes 0..n-1 */
            acc = _mm512_mask_expand_ps(acc, (__mmask16)(((1u << n) - 1u) << fill), c); /* to lanes fill.. */
            if (fill + n < 16) {
                fill += n;
                continue;
            }
            if (first) {
                _mm512_mask_storeu_ps(line, first_lanes, acc);
                first = 0;
            } else {
                _mm512_stream_ps(line, acc);
            }
            line += 16;
            const int used = 16 - fill; /* c's lanes [used, n) start the next line */
            acc = _mm512_maskz_compress_ps((__mmask16)(0xFFFFu << used), c);
            fill = n - used;
        }
    }
    __mmask16 last = (__mmask16)((1u << fill) - 1u);
    if (first) last &= first_lanes;
    if (last) _mm512_mask_storeu_ps(line, last, acc);
    _mm_sfence(); /* streaming stores are weakly ordered: make them visible before the threads join */
}

/* rows: the kept filters (n_rows of them, each < the tensor's C_out); mask: ceil(row_len / 16) blocks;
 * out: n_rows * kept_per_row floats. Splits the rows evenly over n_threads OpenMP threads. */
void prunex_pack_rows(const float *t, int64_t row_len, const int64_t *rows, int64_t n_rows, const uint16_t *mask,
                      int64_t kept_per_row, float *out, int n_threads) {
#pragma omp parallel num_threads(n_threads) if (n_threads > 1 && n_rows * row_len >= 16384)
    {
        int64_t id = 0, nt = 1;
#ifdef _OPENMP
        extern int omp_get_thread_num(void);
        extern int omp_get_num_threads(void);
        id = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        pack_range(t, row_len, rows, n_rows * id / nt, n_rows * (id + 1) / nt, mask, kept_per_row, out);
    }
}

#else

int prunex_pack_rows_supported(void) { return 0; }

void prunex_pack_rows(const float *t, int64_t row_len, const int64_t *rows, int64_t n_rows, const uint16_t *mask,
                      int64_t kept_per_row, float *out, int n_threads) {
    (void)t; (void)row_len; (void)rows; (void)n_rows; (void)mask; (void)kept_per_row; (void)out; (void)n_threads;
}

#endif
