/* The lanes' kernel, included once for each WIDTH (4, 8, 16 lanes) under the NAME given.
 *
 * Run `blocks` 64-byte blocks of the first WIDTH lanes: lane l reads from at[l], advancing by
 * step[l] (0 keeps an idle lane on its one dummy block; its state is not kept). Only the
 * first WIDTH entries of h, at and step are read or written. */
CLONES
static void NAME(uint32_t h[4][LANES], const uint8_t *at[LANES], const size_t step[LANES],
                 size_t blocks) {
    typedef uint32_t vec __attribute__((vector_size(4 * WIDTH)));
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
            for (int l = 0; l < WIDTH; l++) w[g][l] = load_le32(p[l] + 4 * g);
        for (int l = 0; l < WIDTH; l++) p[l] += step[l];
        vec a = a0, b = b0, c = c0, d = d0;
        STEP(F, a, b, c, d, 0, 0, 7); STEP(F, d, a, b, c, 1, 1, 12); STEP(F, c, d, a, b, 2, 2, 17); STEP(F, b, c, d, a, 3, 3, 22);
        STEP(F, a, b, c, d, 4, 4, 7); STEP(F, d, a, b, c, 5, 5, 12); STEP(F, c, d, a, b, 6, 6, 17); STEP(F, b, c, d, a, 7, 7, 22);
        STEP(F, a, b, c, d, 8, 8, 7); STEP(F, d, a, b, c, 9, 9, 12); STEP(F, c, d, a, b, 10, 10, 17); STEP(F, b, c, d, a, 11, 11, 22);
        STEP(F, a, b, c, d, 12, 12, 7); STEP(F, d, a, b, c, 13, 13, 12); STEP(F, c, d, a, b, 14, 14, 17); STEP(F, b, c, d, a, 15, 15, 22);
        STEP(G, a, b, c, d, 16, 1, 5); STEP(G, d, a, b, c, 17, 6, 9); STEP(G, c, d, a, b, 18, 11, 14); STEP(G, b, c, d, a, 19, 0, 20);
        STEP(G, a, b, c, d, 20, 5, 5); STEP(G, d, a, b, c, 21, 10, 9); STEP(G, c, d, a, b, 22, 15, 14); STEP(G, b, c, d, a, 23, 4, 20);
        STEP(G, a, b, c, d, 24, 9, 5); STEP(G, d, a, b, c, 25, 14, 9); STEP(G, c, d, a, b, 26, 3, 14); STEP(G, b, c, d, a, 27, 8, 20);
        STEP(G, a, b, c, d, 28, 13, 5); STEP(G, d, a, b, c, 29, 2, 9); STEP(G, c, d, a, b, 30, 7, 14); STEP(G, b, c, d, a, 31, 12, 20);
        STEP(H, a, b, c, d, 32, 5, 4); STEP(H, d, a, b, c, 33, 8, 11); STEP(H, c, d, a, b, 34, 11, 16); STEP(H, b, c, d, a, 35, 14, 23);
        STEP(H, a, b, c, d, 36, 1, 4); STEP(H, d, a, b, c, 37, 4, 11); STEP(H, c, d, a, b, 38, 7, 16); STEP(H, b, c, d, a, 39, 10, 23);
        STEP(H, a, b, c, d, 40, 13, 4); STEP(H, d, a, b, c, 41, 0, 11); STEP(H, c, d, a, b, 42, 3, 16); STEP(H, b, c, d, a, 43, 6, 23);
        STEP(H, a, b, c, d, 44, 9, 4); STEP(H, d, a, b, c, 45, 12, 11); STEP(H, c, d, a, b, 46, 15, 16); STEP(H, b, c, d, a, 47, 2, 23);
        STEP(I, a, b, c, d, 48, 0, 6); STEP(I, d, a, b, c, 49, 7, 10); STEP(I, c, d, a, b, 50, 14, 15); STEP(I, b, c, d, a, 51, 5, 21);
        STEP(I, a, b, c, d, 52, 12, 6); STEP(I, d, a, b, c, 53, 3, 10); STEP(I, c, d, a, b, 54, 10, 15); STEP(I, b, c, d, a, 55, 1, 21);
        STEP(I, a, b, c, d, 56, 8, 6); STEP(I, d, a, b, c, 57, 15, 10); STEP(I, c, d, a, b, 58, 6, 15); STEP(I, b, c, d, a, 59, 13, 21);
        STEP(I, a, b, c, d, 60, 4, 6); STEP(I, d, a, b, c, 61, 11, 10); STEP(I, c, d, a, b, 62, 2, 15); STEP(I, b, c, d, a, 63, 9, 21);
        a0 += a; b0 += b; c0 += c; d0 += d;
    }
    memcpy(h[0], &a0, sizeof a0);
    memcpy(h[1], &b0, sizeof b0);
    memcpy(h[2], &c0, sizeof c0);
    memcpy(h[3], &d0, sizeof d0);
}

