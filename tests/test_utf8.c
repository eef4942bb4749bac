// test_utf8 — UTF-8 decoding and encoding against the Unicode standard's
// own examples: what the tokenizers accept and refuse.
#include "testutil.h"

#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
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

// Text shown on a terminal: newline, tab and CR LF as they are; ESC, a lone
// CR, DEL, C1 and bytes that are not UTF-8 as \xNN; the rest unchanged.
static void test_shown(void **state) {
    (void)state;
    const char *in = "a\x1b[31m\tb\r\nc\rd\x7f\xff\xc2\x9b\xe5\xa4\xa9\xe5\xa4";
    const char *want = "a\\x1B[31m\tb\r\nc\\x0Dd\\x7F\\xFF\\xC2\\x9B\xe5\xa4\xa9\\xE5\\xA4";
    char out[128];
    size_t n = utf8_shown(out, sizeof out, in, strlen(in));
    if (strcmp(out, want) != 0) fail_msg("expected \"%s\", got \"%s\"", want, out);
    assert_int_equal(n, strlen(want));
    // cut to the buffer, NUL-ended, the whole length returned
    char small[6];
    assert_int_equal(utf8_shown(small, sizeof small, in, strlen(in)), strlen(want));
    assert_string_equal(small, "a\\x1B");
    // the same through a FILE
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    assert_non_null(f);
    assert_int_equal(utf8_put_shown(f, in, strlen(in)), 0);
    fclose(f);
    if (strcmp(buf, want) != 0) fail_msg("utf8_put_shown: expected \"%s\", got \"%s\"", want, buf);
    free(buf);
    // plain text is unchanged
    assert_int_equal(utf8_shown(out, sizeof out, "ROMEO:\n天气", 13), 13);
    assert_string_equal(out, "ROMEO:\n天气");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_encode_round_trip),
        cmocka_unit_test(test_width),
        cmocka_unit_test(test_shown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
