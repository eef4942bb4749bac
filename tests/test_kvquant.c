// test_kvquant — lesson 12's numbers: bf16 and fp16 rounding against torch
// and numpy (tests/kvquant_reference.py), int8 / int4 quantisation against
// numpy and within its error bound, the KIVI-style key groups, the bytes
// per token, the quantised cache against the contiguous one rounded in
// place and its bytes, --kv-dtype fp32 equal to no variant at all, and the validation
// loss through a quantised cache close to fp32's.
#include "testutil.h"

#include "gpt.h"
#include "kvquant.h"
#include "kvvariant.h"
#include "sampler.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char FIX[] = "tests/fixtures/kvquant.txt";
enum { MAX_CASES = 4096 };

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static void check_rounding(const char *name, uint16_t (*convert)(float), int nan_exp_bits) {
    static double in[MAX_CASES], want[MAX_CASES];
    int n = fixture_array(FIX, "input_bits", in, MAX_CASES);
    assert_int_equal(fixture_array(FIX, name, want, MAX_CASES), n);
    assert_true(n > 3000);
    for (int i = 0; i < n; i++) {
        float x = from_bits((uint32_t)in[i]);
        uint16_t got = convert(x), w = (uint16_t)want[i];
        if (isnan(x)) {   // any NaN will do: all exponent bits set, a mantissa bit too
            uint16_t exp_mask = (uint16_t)(((1u << nan_exp_bits) - 1u) << (15 - nan_exp_bits));
            if ((got & exp_mask) != exp_mask || !(got & ~exp_mask & 0x7fffu))
                fail_msg("%s[%d]: input NaN 0x%08x, expected a NaN, got 0x%04x", name, i, (uint32_t)in[i], got);
            continue;
        }
        if (got != w)
            fail_msg("%s[%d]: input %.9g (0x%08x), expected 0x%04x, got 0x%04x", name, i, x, (uint32_t)in[i], w, got);
    }
}

// bf16: torch's own conversion, every case bit for bit.
static void test_bf16_against_torch(void **state) {
    (void)state;
    check_rounding("bf16_bits", kvquant_bf16_bits, 8);
}

// fp16: numpy's astype(np.float16), every case bit for bit (ties, subnormals,
// overflow to inf included).
static void test_fp16_against_numpy(void **state) {
    (void)state;
    check_rounding("fp16_bits", kvquant_fp16_bits, 5);
}

// Every half and every bf16 reads back as a float that converts to itself;
// a half's value is (-1)^s 2^(e-15) (1 + m/1024), or m 2^-24 for e = 0.
static void test_back_to_float(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 0x1f && m) continue;   // NaN
        float x = kvquant_fp16_float((uint16_t)h);
        double want = e == 0x1f ? INFINITY : e == 0 ? ldexp(m, -24) : ldexp(1.0 + m / 1024.0, e - 15);
        if (h & 0x8000) want = -want;
        if ((double)x != want) fail_msg("half 0x%04x: expected %.9g, got %.9g", h, want, x);
        if (kvquant_fp16_bits(x) != h) fail_msg("half 0x%04x: read back as %.9g, rounds to 0x%04x", h, x, kvquant_fp16_bits(x));
        uint16_t b = (uint16_t)h;
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) continue;
        if (kvquant_bf16_bits(kvquant_bf16_float(b)) != b) fail_msg("bf16 0x%04x does not read back", b);
    }
}

// int8 and int4 fake quantisation of 4 groups of 64 numbers, bit for bit as
// numpy computes it, and within half a step of the input.
static void test_quant_against_numpy(void **state) {
    (void)state;
    double in[256], want[256];
    assert_int_equal(fixture_array(FIX, "quant_input", in, 256), 256);
    const char *names[2] = {"int8_back", "int4_back"};
    KvDtype types[2] = {KV_INT8, KV_INT4};
    for (int t = 0; t < 2; t++) {
        assert_int_equal(fixture_array(FIX, names[t], want, 256), 256);
        float x[256], w[256];
        for (int i = 0; i < 256; i++) x[i] = (float)in[i], w[i] = (float)want[i];
        for (int g = 0; g < 4; g++) {
            float orig[64];
            memcpy(orig, x + 64 * g, sizeof orig);
            float scale = kvquant_fake_quant(x + 64 * g, 64, 1, types[t]);
            float amax = 0;
            for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(orig[i]));
            assert_true(fabsf(scale - amax / kvquant_qmax(types[t])) <= 1e-6f * amax);
            for (int i = 0; i < 64; i++)
                if (fabsf(x[64 * g + i] - orig[i]) > scale * 0.5f * (1 + 1e-6f))
                    fail_msg("%s group %d [%d]: %.9g came back as %.9g, more than half a step %.9g away", names[t], g,
                             i, orig[i], x[64 * g + i], scale / 2);
        }
        assert_bits(x, w, 256, names[t]);
    }
    // all zeros: scale 0, nothing changes
    float z[8] = {0};
    assert_true(kvquant_fake_quant(z, 8, 1, KV_INT4) == 0.0f);
    for (int i = 0; i < 8; i++) assert_true(z[i] == 0.0f);
}

// The tiny model (T 32, C 64, H 4, L 2) with weights 20 times the preset's,
// so that attention is sharp enough for the cache's numbers to matter.
static void tiny_model(GptModel *m) {
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    uint32_t vocab[65];
    for (int i = 0; i < 65; i++) vocab[i] = (unsigned char)GPT_SHAKESPEARE_VOCAB[i];
    char err[256];
    if (gpt_init_random(m, cfg, vocab, 5, ERR(LANG_EN, err))) fail_msg("%s", err);
    for (int i = 0; i < gpt_num_tensors(cfg); i++) {
        GptTensor t = gpt_tensor(m, i);
        if (t.kind == GPT_WEIGHT)
            for (size_t j = 0; j < t.numel; j++) t.data[j] *= 20;
    }
}

// int8 keys as KIVI in the quantised cache: one scale per channel for each
// complete group of G tokens (checked against scales computed here), the
// incomplete group read back as it was written; values one scale per token
// and head.
static void test_kivi_groups(void **state) {
    (void)state;
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    int T = cfg.T, C = cfg.C, H = cfg.H, D = C / H, G = 8, n = 13;
    KvQuant q;
    assert_int_equal(kvquant_cache_init(&q, gpt_cache_shape(cfg), KV_INT8, G), 0);
    Mt19937 rng;
    mt19937_seed(&rng, 3);
    float *k0 = malloc(sizeof(float) * (size_t)n * C), *v0 = malloc(sizeof(float) * (size_t)n * C);
    float *buf = malloc(sizeof(float) * 2 * (size_t)D * T);
    for (int i = 0; i < n * C; i++) k0[i] = (float)mt19937_gauss(&rng), v0[i] = (float)mt19937_gauss(&rng);
    // positions 0 .. 12 of block 1 written: group 0 (0..7) is complete, 8..12 are not
    kvcache_append(&q.base, 1, k0, v0, 1, n, 0);
    for (int h = 0; h < H; h++) {
        const float *key, *value;
        kvcache_read_head(&q.base, &key, &value, buf, 1, h, n);
        for (int d = 0; d < D; d++) {
            float amax = 0;
            for (int t = 0; t < G; t++) amax = fmaxf(amax, fabsf(k0[t * C + h * D + d]));
            for (int t = 0; t < n; t++) {
                float got = key[d * T + t], was = k0[t * C + h * D + d];
                if (t < G) {
                    if (fabsf(got - was) > amax / 127 / 2 * 1.0001f)
                        fail_msg("key h%d d%d t%d: %.9g came back as %.9g (step %.9g)", h, d, t, was, got, amax / 127);
                    float code = got / (amax / 127);
                    if (fabsf(code - nearbyintf(code)) > 1e-3f) fail_msg("key h%d d%d t%d: %.9g is no multiple of the channel's step", h, d, t, got);
                } else if (got != was) {
                    fail_msg("key h%d d%d t%d: expected %.9g as written (incomplete group), got %.9g", h, d, t, was, got);
                }
            }
        }
        for (int t = 0; t < n; t++) {
            float amax = 0;
            for (int d = 0; d < D; d++) amax = fmaxf(amax, fabsf(v0[t * C + h * D + d]));
            for (int d = 0; d < D; d++) {
                float got = value[t * D + d], was = v0[t * C + h * D + d];
                if (fabsf(got - was) > amax / 127 / 2 * 1.0001f)
                    fail_msg("value h%d t%d d%d: %.9g came back as %.9g", h, t, d, was, got);
            }
        }
    }
    free(k0);
    free(v0);
    free(buf);
    kvcache_free(&q.base);
}

// The old way of lesson 12, kept here as the reference: every number stored
// as a float of the contiguous cache, then rounded in place (bf16, fp16) or
// quantised and read back (int8, int4; keys per channel when a group of G
// completes), as the rows arrive at slot .. slot+n-1 of layer l.
static void fake_store(KvContig *c, KvDtype t, int G, int l, int slot, int n) {
    const KvShape *sh = &c->base.shape;
    int T = sh->T, H = sh->H, D = sh->D;
    float *key = c->key + (int64_t)l * H * D * T, *value = c->value + (int64_t)l * H * T * D;
    for (int h = 0; h < H; h++) {
        if (t == KV_BF16 || t == KV_FP16) {
            for (int d = 0; d < D; d++) kvquant_round(key + ((int64_t)h * D + d) * T + slot, n, t);
            kvquant_round(value + ((int64_t)h * T + slot) * D, (int64_t)n * D, t);
            continue;
        }
        for (int p = slot; p < slot + n; p++) kvquant_fake_quant(value + ((int64_t)h * T + p) * D, D, 1, t);
        for (int g = slot / G; (g + 1) * G <= slot + n; g++)
            for (int d = 0; d < D; d++) kvquant_fake_quant(key + ((int64_t)h * D + d) * T + g * G, G, 1, t);
    }
}

// Conformance: the quantised cache (compact codes and scales, read back on
// attend) gives the attention output of the contiguous cache holding the
// same numbers rounded in place, bit for bit, for every type: a prefill of
// 11 rows, then one row a step past two key groups, then a cut back to 13
// (into a complete group) and the rows fed again.
static void test_quant_cache_is_rounded_contig(void **state) {
    (void)state;
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    KvShape sh = gpt_cache_shape(cfg);
    int C = cfg.C, L = cfg.L, G = 8, N = 24;
    const KvDtype types[4] = {KV_BF16, KV_FP16, KV_INT8, KV_INT4};
    float *k = malloc(sizeof(float) * (size_t)N * C), *v = malloc(sizeof(float) * (size_t)N * C);
    float *q = malloc(sizeof(float) * (size_t)N * C);
    float *want = malloc(sizeof(float) * (size_t)N * C), *got = malloc(sizeof(float) * (size_t)N * C);
    Mt19937 rng;
    mt19937_seed(&rng, 11);
    for (int i = 0; i < N * C; i++)
        k[i] = (float)mt19937_gauss(&rng), v[i] = (float)mt19937_gauss(&rng), q[i] = (float)mt19937_gauss(&rng);
    for (int ti = 0; ti < 4; ti++) {
        KvContig ref;
        KvQuant qc;
        assert_int_equal(kvcontig_init(&ref, sh), 0);
        assert_int_equal(kvquant_cache_init(&qc, sh, types[ti], G), 0);
        // (pos, n) of each pass; the cut to 13 comes before the pass at 13
        const int passes[][2] = {{0, 11}, {11, 1}, {12, 1}, {13, 1}, {14, 1}, {15, 1}, {16, 1}, {17, 1}, {13, 4}, {17, 7}};
        for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
            int pos = passes[p][0], n = passes[p][1];
            if (pos < kvcache_len(&qc.base)) {
                kvcache_truncate(&qc.base, pos);
                kvcache_truncate(&ref.base, pos);
            }
            for (int l = 0; l < L; l++) {
                const float *kl = k + (int64_t)pos * C, *vl = v + (int64_t)pos * C, *ql = q + (int64_t)pos * C;
                kvcache_append(&ref.base, l, kl, vl, 1, n, pos);
                fake_store(&ref, types[ti], G, l, pos, n);
                kvcache_append(&qc.base, l, kl, vl, 1, n, pos);
                kvcache_attend(&ref.base, want, NULL, ql, NULL, l, 1, n, pos);
                kvcache_attend(&qc.base, got, NULL, ql, NULL, l, 1, n, pos);
                char what[64];
                snprintf(what, sizeof what, "%s cache, layer %d, pass at %d", kvquant_name(types[ti]), l, pos);
                assert_bits(got, want, (int64_t)n * C, what);
            }
        }
        kvcache_free(&ref.base);
        kvcache_free(&qc.base);
    }
    free(k);
    free(v);
    free(q);
    free(want);
    free(got);
}

// The quantised cache allocates what lesson 12 counts: T tokens of
// kvquant_bytes_per_token, and for int8 / int4 the incomplete key group's
// fp32 residual (L x C x G floats) besides; the tiny model and the chapter's.
static void test_cache_allocates_bytes_per_token(void **state) {
    (void)state;
    const char *presets[2] = {"tiny", "seed"};
    const KvDtype types[4] = {KV_BF16, KV_FP16, KV_INT8, KV_INT4};
    for (int pi = 0; pi < 2; pi++) {
        GptConfig cfg;
        assert_int_equal(gpt_preset(&cfg, presets[pi]), 0);
        int G = 32;
        for (int ti = 0; ti < 4; ti++) {
            KvQuant qc;
            assert_int_equal(kvquant_cache_init(&qc, gpt_cache_shape(cfg), types[ti], G), 0);
            double want = cfg.T * kvquant_bytes_per_token(types[ti], cfg.L, cfg.C, cfg.H, G);
            if (types[ti] == KV_INT8 || types[ti] == KV_INT4) want += 4.0 * cfg.L * cfg.C * G;
            double got = (double)kvcache_bytes(&qc.base);
            if (got != want) fail_msg("%s %s cache: %.0f bytes allocated, expected %.0f", presets[pi], kvquant_name(types[ti]), got, want);
            kvcache_free(&qc.base);
        }
    }
}

// Bytes per token, from the definition: 2 (key, value) x C numbers per
// block, and for int8 / int4 an fp32 scale per head (values) and an fp32
// scale per channel shared by 32 tokens (keys).
static void test_bytes_per_token(void **state) {
    (void)state;
    int L = 6, C = 384, H = 6;   // the chapter's model
    assert_true(kvquant_bytes_per_token(KV_FP32, L, C, H, 32) == L * 2 * C * 4.0);
    assert_true(kvquant_bytes_per_token(KV_BF16, L, C, H, 32) == L * 2 * C * 2.0);
    assert_true(kvquant_bytes_per_token(KV_FP16, L, C, H, 32) == L * 2 * C * 2.0);
    assert_true(kvquant_bytes_per_token(KV_INT8, L, C, H, 32) == L * (2 * C * 1.0 + 4.0 * H + 4.0 * C / 32));
    assert_true(kvquant_bytes_per_token(KV_INT4, L, C, H, 32) == L * (2 * C * 0.5 + 4.0 * H + 4.0 * C / 32));
}

typedef struct {
    int V;
    float *logits;   // (steps, V)
} Rec;

static int rec_step(void *ctx, const GptStep *st) {
    Rec *r = ctx;
    memcpy(r->logits + (size_t)st->step * r->V, st->logits, sizeof(float) * (size_t)r->V);
    return 0;
}

// A variant that asks for nothing (--kv-dtype fp32: fp32 cache, fp32
// activations, no bug) keeps the state's own cache and the plain
// arithmetic: the logits are the plain path's, bit for bit, with and
// without the cache, past the context (32) too.
static void test_fp32_variant_identical(void **state) {
    (void)state;
    GptModel m;
    tiny_model(&m);
    enum { STEPS = 60 };
    GptState s;
    assert_int_equal(gpt_state_init(&s, m.cfg), 0);
    for (int use_cache = 0; use_cache < 2; use_cache++) {
        Rec r[2];
        int tokens[2][3 + STEPS];
        for (int k = 0; k < 2; k++) {
            GptVariant v = {.kv_dtype = KV_FP32, .key_group = 32};
            r[k].V = m.cfg.V;
            r[k].logits = malloc(sizeof(float) * STEPS * (size_t)m.cfg.V);
            Sampler sm;
            assert_int_equal(sampler_init(&sm, m.cfg.V, 1.0f, 0, 42), 0);
            tokens[k][0] = 20, tokens[k][1] = 30, tokens[k][2] = 40;
            KvVariantCaches vc;
            assert_int_equal(kvvariant_attach(&vc, &s, k ? &v : NULL), 0);
            assert_ptr_equal(s.kv, &s.cache.base);
            gpt_generate(tokens[k], &s, &m, &sm, 3, STEPS, use_cache, rec_step, &r[k]);
            kvvariant_detach(&vc);
            sampler_free(&sm);
        }
        assert_bits(r[1].logits, r[0].logits, (int64_t)STEPS * m.cfg.V, use_cache ? "cached logits" : "uncached logits");
        assert_memory_equal(tokens[0], tokens[1], sizeof tokens[0]);
        free(r[0].logits);
        free(r[1].logits);
    }
    gpt_state_free(&s);
    gpt_free(&m);
}

// Made-up text in the tiny model's vocabulary.
static void write_text(const char *path, int n) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    const char *words[] = {"the ", "king ", "and ", "queen ", "of ", "Rome ", "speak, ", "well. ", "O ", "lord!\n"};
    uint32_t x = 12345;
    for (int i = 0; i < n;) {
        x = x * 1103515245u + 12345u;
        const char *w = words[(x >> 16) % 10];
        fputs(w, f);
        i += (int)strlen(w);
    }
    fclose(f);
}

// The validation loss through the cache: with fp32, equal to the training
// stack's (an independent implementation) to rounding; bf16 and int8 within
// 0.02 of it, int4 within 0.1 but not equal (the quantisation did something).
static void test_quantised_loss(void **state) {
    (void)state;
    GptModel m;
    tiny_model(&m);
    char path[64];
    snprintf(path, sizeof path, "/tmp/kvdemo-kvq-%d.txt", (int)getpid());
    write_text(path, 4000);
    TrainText text;
    char err[512];
    assert_int_equal(train_text_load(&text, path, m.vocab, m.cfg.V, ERR(LANG_EN, err)), 0);
    int64_t n_train = text.n * 9 / 10;
    double reference;
    assert_int_equal(train_eval(&m, path, 1, NULL, &reference, ERR(LANG_EN, err)), 0);
    double loss[5];
    KvDtype types[5] = {KV_FP32, KV_BF16, KV_FP16, KV_INT8, KV_INT4};
    for (int t = 0; t < 5; t++) {
        GptVariant v = {.kv_dtype = types[t], .key_group = 8};
        assert_int_equal(kvvariant_eval(&loss[t], &m, &v, text.tokens, NULL, n_train, text.n, 0), 0);
    }
    double plain;
    assert_int_equal(kvvariant_eval(&plain, &m, NULL, text.tokens, NULL, n_train, text.n, 0), 0);
    if (fabs(plain - reference) > 1e-4 * fabs(reference))
        fail_msg("loss through the cache %.6f, the training stack's %.6f", plain, reference);
    assert_true(loss[0] == plain);
    double tol[5] = {0, 0.02, 0.02, 0.02, 0.1};
    for (int t = 1; t < 5; t++)
        if (!(fabs(loss[t] - loss[0]) <= tol[t]))
            fail_msg("%s cache: validation loss %.6f, fp32's %.6f, more than %.2f apart", kvquant_name(types[t]), loss[t],
                     loss[0], tol[t]);
    assert_true(loss[4] != loss[0]);
    train_text_free(&text);
    unlink(path);
    gpt_free(&m);
}

// Lesson 12's two texts (fp32's and int4's) go through the trace: a
// document shows each label as a paragraph and each text as a text block,
// where both were once folded into the preformatted table above them; its
// summing order is called a stylised split-K, in both languages.
static void test_texts_in_the_trace(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 12 --init random --preset tiny --steps 8 --format md");
    if (r.status != 0) fail_msg("lesson 12 --format md exited with %d: %s", r.status, r.err);
    const char *labels[] = {"fp32's text:\n\n```text\nROMEO:", "int4's text:\n\n```text\nROMEO:"};
    for (int i = 0; i < 2; i++)
        if (!strstr(r.out, labels[i])) fail_msg("lesson 12 --format md: expected \"%s\" in:\n%s", labels[i], r.out);
    if (strncmp(r.out, "# ", 2) != 0) fail_msg("lesson 12 --format md: expected the document first, got:\n%.200s", r.out);
    run_free(&r);
    // The summing order is a stylised split-K, not what "a GPU kernel does".
    for (int zh = 0; zh < 2; zh++) {
        r = kvdemo_run(zh ? "lesson 12 --init random --preset tiny --steps 8 --lang zh" : "lesson 12 --init random --preset tiny --steps 8");
        const char *want = zh ? "就像 split-K 的 GPU 内核可能做的那样（只是示意" : "as a split-K GPU kernel\nmay (a stylised model";
        if (!strstr(r.out, want) || strstr(r.out, "matrix-vector") || strstr(r.out, "矩阵-向量"))
            fail_msg("lesson 12 (%s): expected \"%s\" and no matrix-vector claim", zh ? "zh" : "en", want);
        run_free(&r);
    }
}

// `generate --kv-dtype int4 --format json` reports the bytes its cache
// holds: the tiny model's 32 positions of kvquant_bytes_per_token, and the
// residual of 2 blocks x 64 channels x 32 fp32 keys.
static void test_generate_reports_cache_bytes(void **state) {
    (void)state;
    RunResult r = kvdemo_run("generate --init random --preset tiny --steps 3 --kv-dtype int4 --format json");
    if (r.status != 0) fail_msg("generate --kv-dtype int4 exited with %d: %s", r.status, r.err);
    double want = 32 * kvquant_bytes_per_token(KV_INT4, 2, 64, 4, 32) + 4.0 * 2 * 64 * 32;
    char line[128];
    snprintf(line, sizeof line, "\"name\":\"cache_bytes\",\"value\":%.0f}", want);
    if (!strstr(r.out, line)) fail_msg("expected %s in:\n%s", line, r.out);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_against_torch),  cmocka_unit_test(test_fp16_against_numpy),
        cmocka_unit_test(test_back_to_float),       cmocka_unit_test(test_quant_against_numpy),
        cmocka_unit_test(test_kivi_groups),         cmocka_unit_test(test_bytes_per_token),
        cmocka_unit_test(test_quant_cache_is_rounded_contig), cmocka_unit_test(test_cache_allocates_bytes_per_token),
        cmocka_unit_test(test_fp32_variant_identical), cmocka_unit_test(test_quantised_loss),
        cmocka_unit_test(test_texts_in_the_trace), cmocka_unit_test(test_generate_reports_cache_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
