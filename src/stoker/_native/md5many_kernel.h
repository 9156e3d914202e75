/* The lanes' kernel, included once for each WIDTH (1, 4, 8, 16 lanes) under the NAME given:
 * one lane is plain 32-bit words (773 MiB/s here, OpenSSL 730), where a vector's lane is slower.
 *
 * Run `blocks` 64-byte blocks of the first WIDTH lanes: lane l reads from at[l], advancing by
 * step[l] (0 keeps an idle lane on its one dummy block; its state is not kept). Only the
 * first WIDTH entries of h, at and step are read or written. */
CLONES
static void NAME(uint32_t h[4][LANES], const uint8_t *at[LANES], const size_t step[LANES],
                 size_t blocks) {
#if WIDTH == 1
    typedef uint32_t vec;
#define WORD(v, l) (v)
#else
    typedef uint32_t vec __attribute__((vector_size(4 * WIDTH)));
#define WORD(v, l) (v)[l]
#endif
    vec a0, b0, c0, d0;
    memcpy(&a0, h[0], sizeof a0); /* the first WIDTH of each row */
    memcpy(&b0, h[1], sizeof b0);
    memcpy(&c0, h[2], sizeof c0);
    memcpy(&d0, h[3], sizeof d0);
    const uint8_t *p[WIDTH];
    memcpy(p, at, sizeof p);
    for (size_t n = 0; n < blocks; n++) {
        vec w[16];
        for (int g = 0; g < 16; g++)
            for (int l = 0; l < WIDTH; l++) WORD(w[g], l) = load_le32(p[l] + 4 * g);
        for (int l = 0; l < WIDTH; l++) p[l] += step[l];
        vec a = a0, b = b0, c = c0, d = d0;
        MD5_STEPS(STEP)
        a0 += a; b0 += b; c0 += c; d0 += d;
    }
    memcpy(h[0], &a0, sizeof a0);
    memcpy(h[1], &b0, sizeof b0);
    memcpy(h[2], &c0, sizeof c0);
    memcpy(h[3], &d0, sizeof d0);
}
#undef WORD
