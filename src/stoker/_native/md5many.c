/* MD5 of many buffers at once: one MD5 per SIMD lane (16 lanes of 32 bits).
 *
 * One MD5 is a chain of 64 dependent steps per 64-byte block, so a single stream is bound by
 * the chain's latency (OpenSSL's: ~700 MiB/s on a core here) and leaves most of the core idle.
 * Up to sixteen independent streams, one per lane, run the same chain on vectors (as minio's
 * md5-simd does in Go): 4 lanes hash ~2,400 MiB/s together, 16 ~7 GiB/s. One or two busy lanes
 * run in plain 32-bit words (773 and 1,336 MiB/s; OpenSSL 730), where vectors were slower.
 * The steps are RFC 1321's; GCC's vector extensions keep it one portable source, and
 * target_clones builds it for AVX-512, AVX2 and plain x86-64, picked when the module loads.
 *
 * Python API (module stoker._native.md5many; the GIL is released while hashing):
 *   new() -> bytearray                      a fresh state (STATE_SIZE bytes)
 *   update_many(states, datas) -> None      states[i] takes datas[i] (equal-length sequences)
 *   digest(state) -> bytes                  the 16-byte digest; the state is left as it was
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define LANES 16 /* at most; fewer busy lanes run on narrower vectors (4, 8), or none (1, 2) */

typedef struct {
    uint32_t h[4];
    uint64_t length;   /* bytes taken so far */
    uint8_t tail[64];  /* the bytes of an unfinished block: length % 64 of them */
} md5_state;

static const uint32_t K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

/* One kernel per instruction set, picked when the module loads (GCC's ifunc, x86-64 Linux);
 * elsewhere the compiler's default target. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#define SCALAR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#define SCALAR_CLONES
#endif

static inline uint32_t load_le32(const uint8_t *p) {
    /* MD5's words are little-endian; on x86 this is one load */
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* RFC 1321's four functions, each added to s (a + K + w, which need not wait for the step
 * before). b is the step before's result, c and d older: what uses only c and d is off the
 * chain of dependent steps, so each form puts as few operations after b as it can. G's two
 * halves have no bit in common, so they add, and c & ~d joins s early (as Go's MD5 does);
 * H takes c ^ d first. That took 2 of G's 6 operations on the chain and 1 of H's 5: one lane
 * 694 -> 773 MiB/s here, two 1,097 -> 1,186, sixteen 6,763 -> 7,070. */
#define F(b, c, d, s) (((d) ^ ((b) & ((c) ^ (d)))) + (s))
#define G(b, c, d, s) (((b) & (d)) + ((s) + ((c) & ~(d))))
#define H(b, c, d, s) (((b) ^ ((c) ^ (d))) + (s))
#define I(b, c, d, s) (((c) ^ ((b) | ~(d))) + (s))
#define ROTL(x, r) (((x) << (r)) | ((x) >> (32 - (r))))
/* (setup.py keeps GCC from reassociating these adds: it put one more add on the chain.) */
#define STEP(f, a, b, c, d, i, g, r) a = b + ROTL(f(b, c, d, (a + (K[i] + w[g]))), r);
/* RFC 1321's 64 steps of a block, for S(f, a, b, c, d, step, word, rotation) to spell out. */
#define MD5_STEPS(S) \
    S(F, a, b, c, d, 0, 0, 7) S(F, d, a, b, c, 1, 1, 12) S(F, c, d, a, b, 2, 2, 17) S(F, b, c, d, a, 3, 3, 22) \
    S(F, a, b, c, d, 4, 4, 7) S(F, d, a, b, c, 5, 5, 12) S(F, c, d, a, b, 6, 6, 17) S(F, b, c, d, a, 7, 7, 22) \
    S(F, a, b, c, d, 8, 8, 7) S(F, d, a, b, c, 9, 9, 12) S(F, c, d, a, b, 10, 10, 17) S(F, b, c, d, a, 11, 11, 22) \
    S(F, a, b, c, d, 12, 12, 7) S(F, d, a, b, c, 13, 13, 12) S(F, c, d, a, b, 14, 14, 17) S(F, b, c, d, a, 15, 15, 22) \
    S(G, a, b, c, d, 16, 1, 5) S(G, d, a, b, c, 17, 6, 9) S(G, c, d, a, b, 18, 11, 14) S(G, b, c, d, a, 19, 0, 20) \
    S(G, a, b, c, d, 20, 5, 5) S(G, d, a, b, c, 21, 10, 9) S(G, c, d, a, b, 22, 15, 14) S(G, b, c, d, a, 23, 4, 20) \
    S(G, a, b, c, d, 24, 9, 5) S(G, d, a, b, c, 25, 14, 9) S(G, c, d, a, b, 26, 3, 14) S(G, b, c, d, a, 27, 8, 20) \
    S(G, a, b, c, d, 28, 13, 5) S(G, d, a, b, c, 29, 2, 9) S(G, c, d, a, b, 30, 7, 14) S(G, b, c, d, a, 31, 12, 20) \
    S(H, a, b, c, d, 32, 5, 4) S(H, d, a, b, c, 33, 8, 11) S(H, c, d, a, b, 34, 11, 16) S(H, b, c, d, a, 35, 14, 23) \
    S(H, a, b, c, d, 36, 1, 4) S(H, d, a, b, c, 37, 4, 11) S(H, c, d, a, b, 38, 7, 16) S(H, b, c, d, a, 39, 10, 23) \
    S(H, a, b, c, d, 40, 13, 4) S(H, d, a, b, c, 41, 0, 11) S(H, c, d, a, b, 42, 3, 16) S(H, b, c, d, a, 43, 6, 23) \
    S(H, a, b, c, d, 44, 9, 4) S(H, d, a, b, c, 45, 12, 11) S(H, c, d, a, b, 46, 15, 16) S(H, b, c, d, a, 47, 2, 23) \
    S(I, a, b, c, d, 48, 0, 6) S(I, d, a, b, c, 49, 7, 10) S(I, c, d, a, b, 50, 14, 15) S(I, b, c, d, a, 51, 5, 21) \
    S(I, a, b, c, d, 52, 12, 6) S(I, d, a, b, c, 53, 3, 10) S(I, c, d, a, b, 54, 10, 15) S(I, b, c, d, a, 55, 1, 21) \
    S(I, a, b, c, d, 56, 8, 6) S(I, d, a, b, c, 57, 15, 10) S(I, c, d, a, b, 58, 6, 15) S(I, b, c, d, a, 59, 13, 21) \
    S(I, a, b, c, d, 60, 4, 6) S(I, d, a, b, c, 61, 11, 10) S(I, c, d, a, b, 62, 2, 15) S(I, b, c, d, a, 63, 9, 21)

#define WIDTH 1
#define NAME lanes_blocks_1
#include "md5many_kernel.h"
#undef WIDTH
#undef NAME
#define WIDTH 4
#define NAME lanes_blocks_4
#include "md5many_kernel.h"
#undef WIDTH
#undef NAME
#define WIDTH 8
#define NAME lanes_blocks_8
#include "md5many_kernel.h"
#undef WIDTH
#undef NAME
#define WIDTH 16
#define NAME lanes_blocks_16
#include "md5many_kernel.h"
#undef WIDTH
#undef NAME

/* Two lanes as two chains of plain 32-bit words, interleaved step by step: the core runs one
 * chain's step while the other's waits on its latency. 1,336 MiB/s here against 1,180 for two
 * lanes of a four-wide vector; three chains (1,590) lose to the vector's three lanes (~1,730).
 * x86-64-v3's ANDN and RORX save a move a step; packed into vectors by GCC, the chains ran at
 * 1,040-1,300. */
#define STEP_X_Y(f, a, b, c, d, i, g, r) \
    a##x = b##x + ROTL(f(b##x, c##x, d##x, (a##x + (K[i] + wx[g]))), r); \
    a##y = b##y + ROTL(f(b##y, c##y, d##y, (a##y + (K[i] + wy[g]))), r);
SCALAR_CLONES
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-slp-vectorize"))) /* (GCC would pack the chains: 1,040) */
#endif
static void lanes_blocks_2(uint32_t h[4][LANES], const uint8_t *at[LANES], size_t blocks) {
    uint32_t ax0 = h[0][0], bx0 = h[1][0], cx0 = h[2][0], dx0 = h[3][0];
    uint32_t ay0 = h[0][1], by0 = h[1][1], cy0 = h[2][1], dy0 = h[3][1];
    const uint8_t *px = at[0], *py = at[1];
    for (size_t n = 0; n < blocks; n++, px += 64, py += 64) {
        uint32_t wx[16], wy[16];
        for (int g = 0; g < 16; g++) {
            wx[g] = load_le32(px + 4 * g);
            wy[g] = load_le32(py + 4 * g);
        }
        uint32_t ax = ax0, bx = bx0, cx = cx0, dx = dx0, ay = ay0, by = by0, cy = cy0, dy = dy0;
        MD5_STEPS(STEP_X_Y)
        ax0 += ax; bx0 += bx; cx0 += cx; dx0 += dx;
        ay0 += ay; by0 += by; cy0 += cy; dy0 += dy;
    }
    h[0][0] = ax0; h[1][0] = bx0; h[2][0] = cx0; h[3][0] = dx0;
    h[0][1] = ay0; h[1][1] = by0; h[2][1] = cy0; h[3][1] = dy0;
}

static const uint8_t IDLE_BLOCK[64]; /* what an idle lane hashes (its result is dropped) */

/* Where one lane stands in an update_many: its state and its blocks still to hash. */
typedef struct {
    md5_state *state;
    const uint8_t *at;
    size_t blocks;
} lane_work;

/* Hash every work's blocks, up to LANES at a time; a lane that finishes takes the next work.
 * The busy lanes are kept at the front, and run on the narrowest vectors that hold them:
 * a call costs what its vectors' width costs, however many lanes are busy. */
static void run_lanes(lane_work *work, size_t count) {
    lane_work *busy[LANES];
    size_t next = 0, n = 0;
    for (;;) {
        for (; n < LANES && next < count; next++)
            if (work[next].blocks) busy[n++] = &work[next];
        if (!n) return;
        size_t least = SIZE_MAX;
        uint32_t h[4][LANES];
        const uint8_t *at[LANES];
        size_t step[LANES];
        for (size_t l = 0; l < LANES; l++) {
            at[l] = l < n ? busy[l]->at : IDLE_BLOCK;
            step[l] = l < n ? 64 : 0;
            for (int j = 0; j < 4; j++) h[j][l] = l < n ? busy[l]->state->h[j] : 0;
            if (l < n && busy[l]->blocks < least) least = busy[l]->blocks;
        }
        if (n == 1)
            lanes_blocks_1(h, at, step, least);
        else if (n == 2)
            lanes_blocks_2(h, at, least);
        else if (n <= 4)
            lanes_blocks_4(h, at, step, least);
        else if (n <= 8)
            lanes_blocks_8(h, at, step, least);
        else
            lanes_blocks_16(h, at, step, least);
        size_t kept = 0;
        for (size_t l = 0; l < n; l++) {
            for (int j = 0; j < 4; j++) busy[l]->state->h[j] = h[j][l];
            busy[l]->at += 64 * least;
            busy[l]->blocks -= least;
            if (busy[l]->blocks) busy[kept++] = busy[l];
        }
        n = kept;
    }
}

/* Feed data[i] (len[i] bytes) to states[i]: first each state's unfinished block (all lanes
 * at once), then the whole blocks, then what is left into each tail. */
static void update_states(md5_state **states, const uint8_t **data, const size_t *len,
                          size_t count, lane_work *work, uint8_t (*joined)[64]) {
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        size_t held = states[i]->length % 64, take = 64 - held;
        if (held && len[i] >= take) { /* the tail completes a block */
            memcpy(joined[i], states[i]->tail, held);
            memcpy(joined[i] + held, data[i], take);
            work[n++] = (lane_work){states[i], joined[i], 1};
        }
    }
    run_lanes(work, n);
    for (size_t i = 0; i < count; i++) {
        size_t held = states[i]->length % 64, skip = held ? 64 - held : 0;
        if (skip > len[i]) skip = len[i]; /* too little to complete the tail */
        work[i] = (lane_work){states[i], data[i] + skip, (len[i] - skip) / 64};
    }
    run_lanes(work, count);
    for (size_t i = 0; i < count; i++) {
        size_t held = states[i]->length % 64, skip = held ? 64 - held : 0;
        if (skip > len[i]) { /* all of it joins the tail */
            memcpy(states[i]->tail + held, data[i], len[i]);
        } else {
            size_t rest = (len[i] - skip) % 64;
            memcpy(states[i]->tail, data[i] + len[i] - rest, rest);
        }
        states[i]->length += len[i];
    }
}

static void finish(md5_state s, uint8_t out[16]) {
    uint8_t pad[72] = {0x80};
    size_t held = s.length % 64, padding = (held < 56 ? 56 : 120) - held;
    uint64_t bits = s.length * 8;
    for (int i = 0; i < 8; i++) pad[padding + i] = (uint8_t)(bits >> (8 * i)); /* little-endian */
    md5_state *one = &s;
    const uint8_t *data = pad;
    size_t len = padding + 8;
    lane_work work[1];
    uint8_t joined[1][64];
    update_states(&one, &data, &len, 1, work, joined);
    for (int i = 0; i < 16; i++) out[i] = (uint8_t)(s.h[i / 4] >> (8 * (i % 4)));
}

static void init(md5_state *s) {
    memset(s, 0, sizeof *s);
    s->h[0] = 0x67452301;
    s->h[1] = 0xefcdab89;
    s->h[2] = 0x98badcfe;
    s->h[3] = 0x10325476;
}

/* ---- Python ---- */

static PyObject *py_new(PyObject *self, PyObject *unused) {
    md5_state s;
    init(&s);
    return PyByteArray_FromStringAndSize((const char *)&s, sizeof s);
}

static int get_state(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len != (Py_ssize_t)sizeof(md5_state)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "not an MD5 state (make one with new())");
        return -1;
    }
    return 0;
}

static PyObject *py_digest(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (get_state(arg, &view) < 0) return NULL;
    md5_state s;
    memcpy(&s, view.buf, sizeof s);
    PyBuffer_Release(&view);
    uint8_t out[16];
    finish(s, out);
    return PyBytes_FromStringAndSize((const char *)out, 16);
}

static PyObject *py_update_many(PyObject *self, PyObject *args) {
    PyObject *states_arg, *datas_arg;
    if (!PyArg_ParseTuple(args, "OO:update_many", &states_arg, &datas_arg)) return NULL;
    PyObject *states_seq = PySequence_Fast(states_arg, "states must be a sequence");
    if (!states_seq) return NULL;
    PyObject *datas_seq = PySequence_Fast(datas_arg, "datas must be a sequence");
    if (!datas_seq) {
        Py_DECREF(states_seq);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(states_seq), got = 0;
    Py_buffer *views = NULL;
    void *scratch = NULL;
    if (PySequence_Fast_GET_SIZE(datas_seq) != count) {
        PyErr_SetString(PyExc_ValueError, "states and datas differ in length");
        goto done;
    }
    views = PyMem_Calloc(2 * (size_t)count + 1, sizeof *views);
    /* per item: its state and data pointers, length, lane work and joined block */
    size_t each = sizeof(md5_state *) + sizeof(uint8_t *) + sizeof(size_t) + sizeof(lane_work) + 64;
    scratch = PyMem_Malloc(each * (size_t)count + 1);
    if (!views || !scratch) {
        PyErr_NoMemory();
        goto done;
    }
    md5_state **states = scratch;
    const uint8_t **data = (const uint8_t **)(states + count);
    size_t *len = (size_t *)(data + count);
    lane_work *work = (lane_work *)(len + count);
    uint8_t (*joined)[64] = (uint8_t (*)[64])(work + count);
    for (; got < count; got++) {
        if (get_state(PySequence_Fast_GET_ITEM(states_seq, got), &views[2 * got]) < 0) goto done;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(datas_seq, got), &views[2 * got + 1],
                               PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&views[2 * got]);
            goto done;
        }
        states[got] = views[2 * got].buf;
        data[got] = views[2 * got + 1].buf;
        len[got] = (size_t)views[2 * got + 1].len;
        for (Py_ssize_t j = 0; j < got; j++)
            if (states[j] == states[got]) { /* its order would be undefined */
                PyErr_SetString(PyExc_ValueError, "a state appears twice in one update_many");
                got++;
                goto done;
            }
    }
    Py_BEGIN_ALLOW_THREADS
    update_states(states, data, len, (size_t)count, work, joined);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < 2 * got; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(scratch);
    Py_DECREF(states_seq);
    Py_DECREF(datas_seq);
    return result;
}

static PyMethodDef methods[] = {
    {"new", py_new, METH_NOARGS, "A fresh MD5 state (a bytearray)."},
    {"update_many", py_update_many, METH_VARARGS,
     "update_many(states, datas): states[i] takes datas[i]; the GIL is released meanwhile."},
    {"digest", py_digest, METH_O, "digest(state) -> the 16-byte MD5 of what the state took."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "md5many", "MD5 of many buffers at once, one per SIMD lane.", -1,
    methods,
};

PyMODINIT_FUNC PyInit_md5many(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "STATE_SIZE", sizeof(md5_state)) < 0) Py_CLEAR(m);
    if (m && PyModule_AddIntConstant(m, "LANES", LANES) < 0) Py_CLEAR(m);
    return m;
}
