// test_memory — the KV cache calculator (src/cmd/memory.c, `kvdemo memory`)
// against published figures: the article's GPT-3 example (164,282,499,072 B,
// REFERENCES §3.3), LLaMA-2-7B's 524,288 B and LLaMA-2-70B's 327,680 B per
// token, OPT-13B's 800 KB (the vLLM paper), Mistral's cache capped at its
// 4096-token window, DeepSeek-V2's MLA latent (kv_lora_rank 512 + 64 rope
// dims, no factor 2); the char GPT's 2 · L · C · 4 = 18,432 B; and bad input.
//   test_context_marks          lengths past a cited context marked (GPT-3 2048, LLaMA-2-7B
//                               4096, Mixtral 32768: REFERENCES.md), none without one
//   test_quantised_like_lesson12  int4 / int8 bytes a token = kvquant_bytes_per_token (the scales)
//   test_dtype_is_the_caches    --dtype leaves the weights at the model's own dtype; "fits" an upper bound
#include "testutil.h"

#include "gpt.h"
#include "kvquant.h"
#include "kvvariant.h"
#include "memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void expect_u64(const char *what, uint64_t want, uint64_t got) {
    if (want != got) fail_msg("%s: expected %llu, got %llu", what, (unsigned long long)want, (unsigned long long)got);
}

static uint64_t per_token(const char *name, int bits) {
    const MemModel *m = memory_preset(name);
    if (!m) fail_msg("no preset %s", name);
    uint64_t b = 0;
    assert_int_equal(memory_bytes_per_token(&b, m, bits), 0);
    return b;
}

static void test_published_figures(void **state) {
    (void)state;
    // The article's §8: 2 · 96 · 12288 · 2 B per token, × (512 + 32) × 64.
    uint64_t gpt3 = 0;
    assert_int_equal(memory_cache_bytes(&gpt3, memory_preset("gpt3-175b"), 16, 512 + 32, 64), 0);
    expect_u64("gpt3-175b, b 64, s+n 544, fp16", 164282499072ull, gpt3);
    expect_u64("gpt3-175b per token", 4718592, per_token("gpt3-175b", 16));
    expect_u64("llama-2-7b per token", 524288, per_token("llama-2-7b", 16));
    expect_u64("llama-2-70b per token", 327680, per_token("llama-2-70b", 16));
    expect_u64("opt-13b per token (800 KB)", 819200, per_token("opt-13b", 16));
    expect_u64("llama-3-405b per token (8 KV heads)", 516096, per_token("llama-3-405b", 16));
    expect_u64("qwen2.5-7b per token", 57344, per_token("qwen2.5-7b", 16));
    // MLA: layers · (kv_lora_rank + rope dims) · 2 B, no factor 2.
    expect_u64("deepseek-v2 per token", 60 * (512 + 64) * 2, per_token("deepseek-v2", 16));
    expect_u64("deepseek-v3 per token", 61 * (512 + 64) * 2, per_token("deepseek-v3", 16));
    // Mistral: the rolling buffer holds at most the 4096-token window.
    const MemModel *mistral = memory_preset("mistral-7b");
    uint64_t capped = 0, short_seq = 0;
    assert_int_equal(memory_cache_bytes(&capped, mistral, 16, 32768, 1), 0);
    expect_u64("mistral-7b at 32768 tokens", 2ull * 32 * 8 * 128 * 2 * 4096, capped);
    assert_int_equal(memory_cache_bytes(&short_seq, mistral, 16, 1000, 1), 0);
    expect_u64("mistral-7b at 1000 tokens", 2ull * 32 * 8 * 128 * 2 * 1000, short_seq);
    // Mixtral has no window.
    uint64_t mixtral = 0;
    assert_int_equal(memory_cache_bytes(&mixtral, memory_preset("mixtral-8x7b"), 16, 32768, 1), 0);
    expect_u64("mixtral-8x7b at 32768 tokens", 2ull * 32 * 8 * 128 * 2 * 32768, mixtral);
    // Other widths: int4 is half a byte a value.
    expect_u64("llama-2-7b int4", 524288 / 4, per_token("llama-2-7b", 4));
    expect_u64("llama-2-7b fp32", 524288 * 2, per_token("llama-2-7b", 32));
    assert_null(memory_preset("gpt-5"));
}

static void test_dtypes_sizes_overflow(void **state) {
    (void)state;
    const char *names[] = {"fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp64", ""};
    const int bits[] = {32, 16, 16, 8, 8, 4, 0, 0};
    for (int i = 0; i < 8; i++)
        if (memory_dtype_bits(names[i]) != bits[i])
            fail_msg("dtype %s: expected %d bits, got %d", names[i], bits[i], memory_dtype_bits(names[i]));
    double b;
    assert_int_equal(memory_parse_size(&b, "80GB"), 0);
    assert_true(b == 80e9);
    assert_int_equal(memory_parse_size(&b, "24GiB"), 0);
    assert_true(b == 24.0 * 1024 * 1024 * 1024);
    assert_int_equal(memory_parse_size(&b, "512 MB"), 0);
    assert_true(b == 512e6);
    assert_int_equal(memory_parse_size(&b, "80"), -1);
    assert_int_equal(memory_parse_size(&b, "-1GB"), -1);
    assert_int_equal(memory_parse_size(&b, "GB"), -1);
    uint64_t out = 0;
    assert_int_equal(memory_mul(&out, UINT64_MAX / 2 + 1, 2), -1);
    assert_int_equal(memory_mul(&out, UINT64_MAX / 3, 3), 0);
    expect_u64("UINT64_MAX / 3 * 3", UINT64_MAX / 3 * 3, out);
    MemModel huge = {"huge", "huge", 1000000000, 1, 1000000000, 1000000000, 1, 0, 0, 0, 16, "test", 0, NULL};
    assert_int_equal(memory_bytes_per_token(&out, &huge, 16), -1);
    char buf[64];
    assert_string_equal(memory_grouped(buf, sizeof buf, 164282499072ull), "164,282,499,072");
    assert_string_equal(memory_decimal(buf, sizeof buf, 164282499072.0), "164.3 GB");
    assert_string_equal(memory_binary(buf, sizeof buf, 164282499072.0), "153.0 GiB");
}

static double value_of(const Event *e, int n, const char *event, const char *name) {
    const Event *x = events_find(e, n, event, NULL, -1, name);
    if (!x) fail_msg("no %s event %s", event, name);
    return x->value;
}

static void test_cli_worked_check(void **state) {
    (void)state;
    RunResult r = kvdemo_run("memory --model gpt3-175b --batch 64 --tokens 544 --dtype fp16");
    assert_int_equal(r.status, 0);
    if (!strstr(r.out, "164,282,499,072 B")) fail_msg("expected 164,282,499,072 B in:\n%s", r.out);
    if (!strstr(r.out, "164.3 GB") || !strstr(r.out, "153.0 GiB")) fail_msg("expected 164.3 GB and 153.0 GiB in:\n%s", r.out);
    if (!strstr(r.out, "powers of 1000") || !strstr(r.out, "powers of 1024")) fail_msg("units not explained:\n%s", r.out);
    run_free(&r);
    r = kvdemo_run_env("LANG=zh_CN.UTF-8", "memory --model gpt3-175b --batch 64 --tokens 544");
    assert_int_equal(r.status, 0);
    if (!strstr(r.out, "164,282,499,072 B") || !strstr(r.out, "每个 token")) fail_msg("zh output:\n%s", r.out);
    run_free(&r);
    int n;
    Event *e = kvdemo_json("memory --model gpt3-175b --batch 64 --tokens 544 --format json", &n);
    expect_u64("bytes", 164282499072ull, (uint64_t)value_of(e, n, "count", "bytes"));
    expect_u64("bytes_per_token", 4718592, (uint64_t)value_of(e, n, "count", "bytes_per_token"));
    expect_u64("bytes_per_sequence", 4718592ull * 544, (uint64_t)value_of(e, n, "count", "bytes_per_sequence"));
    events_free(e, n);
    e = kvdemo_json("memory --model gpt3-175b --batch 64 --tokens 544 --format json --lang zh", &n);
    expect_u64("zh bytes", 164282499072ull, (uint64_t)value_of(e, n, "count", "bytes"));
    events_free(e, n);
}

static void test_cli_gpu_memory_and_shapes(void **state) {
    (void)state;
    int n;
    // LLaMA-2-7B fp16 on 80 GB: weights 7e9 · 2 B, sequences of 4096 tokens
    // of 524,288 B a token in what is left.
    Event *e = kvdemo_json("memory --model llama-2-7b --tokens 4096 --batch 8 --gpu-memory 80GB --format json", &n);
    double left = 80e9 - 7e9 * 2;
    expect_u64("sequences_fit", (uint64_t)floor(left / (524288.0 * 4096)), (uint64_t)value_of(e, n, "count", "sequences_fit"));
    assert_true(value_of(e, n, "value", "weights_bytes") == 14e9);
    events_free(e, n);
    // vLLM's pool, worked: (24 GB · 0.9 − the weights) in blocks of 16 tokens
    // of 524,288 B, and the "maximum concurrency" of its log, blocks · 16 /
    // max_model_len (REFERENCES §1.3, vllm #8031).
    e = kvdemo_json("memory --model llama-2-7b --tokens 4096 --gpu-memory 24GB --format json", &n);
    double blocks = floor((24e9 * 0.9 - 7e9 * 2) / (16 * 524288.0));
    expect_u64("vllm_blocks", (uint64_t)blocks, (uint64_t)value_of(e, n, "count", "vllm_blocks"));
    double got = value_of(e, n, "value", "vllm_max_concurrency");
    if (fabs(got - blocks * 16 / 4096) > 1e-9) fail_msg("vllm_max_concurrency: expected %.6f, got %.6f", blocks * 16 / 4096, got);
    events_free(e, n);
    // No --tokens: the longest context for the batch.
    e = kvdemo_json("memory --model llama-2-70b --batch 2 --gpu-memory 160GB --format json", &n);
    expect_u64("max_tokens", (uint64_t)floor((160e9 - 140e9) / (327680.0 * 2)), (uint64_t)value_of(e, n, "count", "max_tokens"));
    events_free(e, n);
    // A shape by hand: 2 · 32 · 8 · 128 · 2 B per token, 8192 tokens.
    e = kvdemo_json("memory --layers 32 --kv-heads 8 --head-dim 128 --batch 1 --tokens 8192 --format json", &n);
    expect_u64("bytes", 2ull * 32 * 8 * 128 * 2 * 8192, (uint64_t)value_of(e, n, "count", "bytes"));
    events_free(e, n);
    // Mistral past its window.
    e = kvdemo_json("memory --model mistral-7b --tokens 32768 --format json", &n);
    expect_u64("tokens_held", 4096, (uint64_t)value_of(e, n, "count", "tokens_held"));
    events_free(e, n);
    // The char GPT: 2 · L · C · 4 bytes, from the seed shape (L 6, C 384).
    e = kvdemo_json("memory --model char-gpt --tokens 256 --format json", &n);
    expect_u64("char-gpt bytes_per_token", 2 * 6 * 384 * 4, (uint64_t)value_of(e, n, "count", "bytes_per_token"));
    events_free(e, n);
    // --list: every preset, with its bytes per token at 16 bits.
    e = kvdemo_json("memory --list --format json", &n);
    for (int i = 0; i < NUM_MEM_PRESETS; i++) {
        const MemModel *m = &MEM_PRESETS[i];
        const Event *x = events_find(e, n, "count", m->name, -1, "bytes_per_token");
        if (!x) fail_msg("--list has no bytes_per_token for %s", m->name);
        uint64_t want = m->mla_dim ? (uint64_t)m->layers * m->mla_dim * 2 : 2ull * m->layers * m->kv_heads * m->head_dim * 2;
        expect_u64(m->name, want, (uint64_t)x->value);
    }
    events_free(e, n);
}

// memory --model FILE reads the shape from the header alone: a model whose
// weights hold a NaN (which generate refuses) still gives its sizes, from
// the file's V, T, C, H, L.
static void test_model_file_header_only(void **state) {
    (void)state;
    char path[] = "/tmp/kvdemo-memory-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    GptModel m;
    char err[256], args[512];
    uint32_t vocab[3] = {'a', 'b', 'c'};
    assert_int_equal(gpt_init_random(&m, (GptConfig){3, 16, 8, 2, 3}, vocab, 1, ERR(LANG_EN, err)), 0);
    if (gpt_save(&m, path, ERR(LANG_EN, err)) != 0) fail_msg("gpt_save: %s", err);
    gpt_free(&m);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, -8, SEEK_END);   // the last weight (before the checksum): NaN
    unsigned char nan_bytes[4] = {0x00, 0x00, 0xc0, 0x7f};
    assert_int_equal(fwrite(nan_bytes, 1, 4, f), 4);
    fclose(f);
    snprintf(args, sizeof args, "generate --model %s --prompt a --steps 1", path);
    expect_failure(args, 1, "every weight must be finite");
    int n;
    snprintf(args, sizeof args, "memory --model %s --tokens 16 --format json", path);
    Event *e = kvdemo_json(args, &n);
    // 2 (K and V) · L 3 · C 8 · 4 bytes a token
    expect_u64("bytes_per_token", 2 * 3 * 8 * 4, (uint64_t)value_of(e, n, "count", "bytes_per_token"));
    events_free(e, n);
    unlink(path);
}

static void test_cli_bad_input(void **state) {
    (void)state;
    // --list in Chinese: the column headings too
    RunResult r = kvdemo_run("memory --list --lang zh");
    const char *head = strstr(r.out, "名称");
    if (r.status != 0 || !head || !strstr(head, "层数") || !strstr(head, "KV 头数") || !strstr(head, "头维度"))
        fail_msg("memory --list --lang zh: expected the headings 名称, 层数, KV 头数, 头维度");
    if (strstr(r.out, "layers") || strstr(r.out, "kv_heads")) fail_msg("memory --list --lang zh: English headings left");
    run_free(&r);
    expect_failure("memory --model gpt-5 --tokens 10", 2, "unknown model 'gpt-5'");
    expect_failure("memory --model llama-2-7b --tokens 0", 2, "--tokens");
    expect_failure("memory --model llama-2-7b --tokens -5", 2, "--tokens");
    expect_failure("memory --model llama-2-7b --tokens 10 --batch 0", 2, "--batch");
    expect_failure("memory --layers 32 --kv-heads 0 --head-dim 128 --tokens 10", 2, "--kv-heads");
    expect_failure("memory --layers 32 --head-dim 128 --tokens 10", 2, "--layers, --kv-heads and --head-dim");
    expect_failure("memory --model llama-2-7b", 2, "--tokens");
    expect_failure("memory --tokens 10", 2, "--model");
    expect_failure("memory --model llama-2-7b --tokens 10 --dtype fp64", 2, "fp32|fp16");
    expect_failure("memory --model llama-2-7b --tokens 10 --gpu-memory 80", 2, "80GB");
    expect_failure("memory --layers 1000000000 --kv-heads 1000000000 --head-dim 1000000000 --tokens 1000", 2,
                   "64 bits");
    expect_failure("memory --model gpt3-175b --tokens 1000000000000000 --batch 1000000000", 2, "64 bits");
    expect_failure("memory --list --model gpt3-175b", 2, "--list");
    expect_failure("memory --steps 3", 2, "unknown option '--steps'");
}

static void test_context_marks(void **state) {
    (void)state;
    static const struct { const char *model; int context; } cited[] = {
        {"gpt3-175b", 2048}, {"opt-13b", 2048}, {"llama-2-7b", 4096}, {"mixtral-8x7b", 32768}};
    for (int i = 0; i < 4; i++) {
        const MemModel *m = memory_preset(cited[i].model);
        if (!m || m->context != cited[i].context || !m->context_source)
            fail_msg("%s: expected a cited context of %d, got %d", cited[i].model, cited[i].context, m ? m->context : -1);
        assert_int_equal(memory_past_context(m, (uint64_t)cited[i].context), 0);
        assert_int_equal(memory_past_context(m, (uint64_t)cited[i].context + 1), 1);
    }
    assert_int_equal(memory_past_context(memory_preset("llama-2-70b"), 1000000), 0);   // none cited: no mark
    int n;
    char args[160];
    for (int past = 0; past < 2; past++) {
        snprintf(args, sizeof args, "memory --model llama-2-7b --tokens %d --format json", 4096 + past);
        Event *e = kvdemo_json(args, &n);
        expect_u64("context", 4096, (uint64_t)value_of(e, n, "count", "context"));
        expect_u64("past_context", (uint64_t)past, (uint64_t)value_of(e, n, "count", "past_context"));
        events_free(e, n);
    }
    // The longest context on 24 GB: (24e9 - 14e9) / 524,288 B = 19,073 tokens, past 4096.
    RunResult r = kvdemo_run("memory --model llama-2-7b --gpu-memory 24GB --lang en");
    if (!strstr(r.out, "at most 19,073 tokens a sequence") || !strstr(r.out, "! past the model's 4,096-token context"))
        fail_msg("expected 19,073 tokens marked past the 4,096-token context in:\n%s", r.out);
    run_free(&r);
    r = kvdemo_run("memory --model llama-2-7b --gpu-memory 24GB --lang zh");
    if (!strstr(r.out, "! 超过了模型 4,096 个 token 的上下文")) fail_msg("zh: expected the mark in:\n%s", r.out);
    run_free(&r);
}

static void test_quantised_like_lesson12(void **state) {
    (void)state;
    int n;
    static const char *const dtypes[] = {"int4", "int8"};
    const KvDtype kinds[] = {KV_INT4, KV_INT8};
    for (int i = 0; i < 2; i++) {
        char args[128];
        snprintf(args, sizeof args, "memory --model char-gpt --dtype %s --tokens 1 --format json", dtypes[i]);
        Event *e = kvdemo_json(args, &n);
        // the seed preset: 6 blocks of 6 heads of 64
        double want = kvquant_bytes_per_token(kinds[i], 6, 384, 6, KV_KEY_GROUP);
        expect_u64(dtypes[i], (uint64_t)want, (uint64_t)value_of(e, n, "count", "bytes_per_token"));
        events_free(e, n);
    }
    // int4 by hand: 2 · 6 · 384 · 1/2 B of codes + 6 · (4 · 6 + 4 · 384 / 32) B of scales
    expect_u64("char GPT int4", 2304 + 432, (uint64_t)kvquant_bytes_per_token(KV_INT4, 6, 384, 6, KV_KEY_GROUP));
    Event *e = kvdemo_json("memory --model llama-2-7b --dtype fp8 --tokens 1 --format json", &n);
    expect_u64("fp8 has no scales", 524288 / 2, (uint64_t)value_of(e, n, "count", "bytes_per_token"));
    events_free(e, n);
}

static void test_dtype_is_the_caches(void **state) {
    (void)state;
    int n;
    Event *e = kvdemo_json("memory --model llama-2-70b --dtype int8 --tokens 4096 --gpu-memory 160GB --format json", &n);
    if (value_of(e, n, "value", "weights_bytes") != 140e9)
        fail_msg("weights with --dtype int8: expected 70e9 · 2 B = 1.4e11, got %g", value_of(e, n, "value", "weights_bytes"));
    events_free(e, n);
    RunResult r = kvdemo_run("memory --model llama-2-70b --dtype int8 --tokens 4096 --gpu-memory 160GB --lang en");
    static const char *const says[] = {"--dtype sets the cache's values, not the weights'", "that fit: at most ",
                                       "(an upper bound: the activations and the runtime's own memory are not counted)"};
    for (int i = 0; i < 3; i++)
        if (!strstr(r.out, says[i])) fail_msg("expected \"%s\" in:\n%s", says[i], r.out);
    run_free(&r);
    r = kvdemo_run("memory --model llama-2-70b --dtype int8 --tokens 4096 --gpu-memory 160GB --lang zh");
    if (!strstr(r.out, "--dtype 只设缓存的数值，不改权重") || !strstr(r.out, "（这是上限：")) fail_msg("zh:\n%s", r.out);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_figures),
        cmocka_unit_test(test_dtypes_sizes_overflow),
        cmocka_unit_test(test_cli_worked_check),
        cmocka_unit_test(test_cli_gpu_memory_and_shapes),
        cmocka_unit_test(test_model_file_header_only),
        cmocka_unit_test(test_cli_bad_input),
        cmocka_unit_test(test_context_marks),
        cmocka_unit_test(test_quantised_like_lesson12),
        cmocka_unit_test(test_dtype_is_the_caches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
