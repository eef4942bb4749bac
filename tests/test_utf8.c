// test_utf8 — UTF-8 decoding and encoding against the Unicode standard's
// own examples: what the tokenizers accept and refuse.
#include "testutil.h"

#include "utf8.h"

#include <string.h>

static void expect_decode(const char *bytes, size_t n, int want_len, uint32_t want_cp) {
    uint32_t cp = 0xFFFFFFFF;
    int len = utf8_decode(&cp, (const unsigned char *)bytes, n);
    if (len != want_len) fail_msg("decode of %zu bytes: expected length %d, got %d", n, want_len, len);
    if (want_len && cp != want_cp) fail_msg("decode: expected U+%04X, got U+%04X", want_cp, cp);
}

static void test_decode(void **state) {
    (void)state;
    expect_decode("A", 1, 1, 0x41);
    expect_decode("\xC3\xA9", 2, 2, 0xE9);             // é
    expect_decode("\xE5\xA4\xA9", 3, 3, 0x5929);       // 天
    expect_decode("\xF0\x9F\x98\x80", 4, 4, 0x1F600);  // an emoji, 4 bytes
    expect_decode("\xF4\x8F\xBF\xBF", 4, 4, 0x10FFFF); // the last code point
    expect_decode("\xC0\x80", 2, 0, 0);                // overlong NUL
    expect_decode("\xE0\x80\xAF", 3, 0, 0);            // overlong '/'
    expect_decode("\xED\xA0\x80", 3, 0, 0);            // a surrogate, U+D800
    expect_decode("\xF4\x90\x80\x80", 4, 0, 0);        // beyond U+10FFFF
    expect_decode("\x80", 1, 0, 0);                    // a lone continuation byte
    expect_decode("\xE5\xA4\xA9", 2, 0, 0);            // cut off by n
    expect_decode("\xE5\xA4", 3, 0, 0);                // cut off by the string's end
    expect_decode("", 0, 0, 0);
}

static void test_encode_round_trip(void **state) {
    (void)state;
    const uint32_t cps[] = {0x0, 0x7F, 0x80, 0x7FF, 0x800, 0x5929, 0xFFFF, 0x10000, 0x10FFFF};
    const int lens[] = {1, 1, 2, 2, 3, 3, 3, 4, 4};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        unsigned char b[4];
        int len = utf8_encode(b, cps[i]);
        if (len != lens[i]) fail_msg("U+%04X: expected %d bytes, got %d", cps[i], lens[i], len);
        uint32_t back;
        if (cps[i] > 0 && (utf8_decode(&back, b, (size_t)len) != len || back != cps[i]))
            fail_msg("U+%04X does not decode back", cps[i]);
    }
    unsigned char b[4];
    assert_int_equal(utf8_encode(b, 0x5929), 3);
    assert_memory_equal(b, "\xE5\xA4\xA9", 3);
}

// Terminal columns: CJK and full-width forms take two.
static void test_width(void **state) {
    (void)state;
    assert_int_equal(utf8_width(""), 0);
    assert_int_equal(utf8_width("step"), 4);
    assert_int_equal(utf8_width("天气真好"), 8);
    assert_int_equal(utf8_width("好，出"), 6);   // U+FF0C FULLWIDTH COMMA
    assert_int_equal(utf8_width("é"), 1);
    assert_int_equal(utf8_width("KV 缓存"), 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_encode_round_trip),
        cmocka_unit_test(test_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
