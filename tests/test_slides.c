// test_slides — lesson 2's page (--format html) in a real browser: Debian's
// chromium, headless, when /usr/bin/chromium exists (.ci/run installs it);
// without it each test reports itself SKIPPED, never passed.
//
// Chromium loads the page from a file and prints the DOM after its script
// ran (--dump-dom). Four loads, at once, each stopped after 60 s:
//   page.html            the deck is built: slide 1 shown, "step 1 of 7", the controls
//   page.html#slide-3    a link to a slide opens it
//   page.html#keys=...   keys pressed through the page's own handler (the
//                        test hook of trace_deck.c) move from slide to slide
//   scripts off          the scroll: every slide, no control
// Scripts are turned off by the page's copy nojs.html, the same page with a
// Content-Security-Policy of script-src 'none' (the browser refuses to run
// its script, as with JavaScript off): Chromium 156's headless
// --dump-dom prints nothing at all under --blink-settings=scriptEnabled=false.
// The cache's rows (row-new, row-reused, row-recomputed) are in each.
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const CHROMIUM = "/usr/bin/chromium";
enum { LOADS = 4, SLIDES = 7 };   // lesson 2's six, then the class questions

// What each load of the page gave: its DOM after the scripts.
typedef struct {
    char dir[256];
    char *dom[LOADS];
} Browser;

static const char *const LOAD_NAME[LOADS] = {"plain", "slide-3", "keys", "no-script"};

// Writes lesson 2's page into a new folder and has chromium load it the four
// ways at once (each once more when it fails); each DOM in b->dom (NULL when chromium printed none).
static int setup(void **state) {
    if (access(CHROMIUM, X_OK)) return 0;   // the tests skip
    Browser *b = calloc(1, sizeof *b);
    assert_non_null(b);
    assert_int_equal(tmpdir_make(b->dir, sizeof b->dir, "slides"), 0);
    RunResult r = kvdemo_run("lesson 2 --format html");
    assert_int_equal(r.status, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/lesson2.html", b->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(r.out, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/nojs.html", b->dir);
    f = fopen(path, "w");
    assert_non_null(f);
    const char *head = strstr(r.out, "<head>");
    assert_non_null(head);
    head += strlen("<head>");
    fprintf(f, "%.*s\n<meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">%s",
            (int)(head - r.out), r.out, head);
    fclose(f);
    run_free(&r);
    static const char *const HOW[LOADS] = {"", "#slide-3", "#keys=ArrowRight,PageDown,End,ArrowLeft,PageUp", ""};
    // Each load runs again once, alone in its profile, when it printed no
    // whole DOM (a machine too busy for 60 s).
    char cmd[16384], one[1024];
    int len = snprintf(cmd, sizeof cmd, "cd '%s' || exit 1; ", b->dir);
    for (int i = 0; i < LOADS; i++) {
        snprintf(one, sizeof one,
                 "rm -rf profile-%d; mkdir profile-%d && timeout 60 %s --headless --no-sandbox --disable-gpu --disable-quic "
                 "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
                 "--user-data-dir=\"$PWD/profile-%d\" --dump-dom \"file://$PWD/%s%s\" >dom-%d.html 2>/dev/null",
                 i, i, CHROMIUM, i, i == 3 ? "nojs.html" : "lesson2.html", HOW[i], i);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, "( %s; grep -q '</html>' dom-%d.html || { %s; } ) & ", one, i,
                        one);
    }
    snprintf(cmd + len, sizeof cmd - (size_t)len, "wait");
    r = shell_run(cmd);
    run_free(&r);
    for (int i = 0; i < LOADS; i++) {
        snprintf(path, sizeof path, "%s/dom-%d.html", b->dir, i);
        FILE *d = fopen(path, "r");
        if (!d) continue;
        fclose(d);
        b->dom[i] = file_slurp(path);
    }
    *state = b;
    return 0;
}

static int teardown(void **state) {
    Browser *b = *state;
    if (!b) return 0;
    for (int i = 0; i < LOADS; i++) free(b->dom[i]);
    tmpdir_remove(b->dir);
    free(b);
    return 0;
}

// The DOM of load i; skips without chromium, fails when it printed nothing.
static const char *dom(void **state, int i) {
    Browser *b = *state;
    if (!b) {
        fprintf(stderr, "%s is not installed (apt-get install chromium): skipped\n", CHROMIUM);
        skip();
    }
    if (!b->dom[i] || !strstr(b->dom[i], "</html>"))
        fail_msg("chromium (%s load): expected the page's DOM, got %s", LOAD_NAME[i],
                 b->dom[i] ? "an incomplete one" : "nothing");
    return b->dom[i];
}

// The slides marked current (1-based, in order) into cur; returns how many.
static int current_slides(const char *html, int *cur, int max) {
    int n = 0;
    for (const char *p = html; (p = strstr(p, "<section ")); p++) {
        const char *end = strchr(p, '>');
        int id = 0;
        const char *at = strstr(p, "id=\"slide-");
        if (at && at < end) id = atoi(at + strlen("id=\"slide-"));
        const char *c = strstr(p, "current");
        if (c && c < end && n < max) cur[n++] = id;
    }
    return n;
}

static void expect_shown(const char *html, int slide, const char *what) {
    int cur[SLIDES + 1];
    int n = current_slides(html, cur, SLIDES + 1);
    if (n != 1 || cur[0] != slide)
        fail_msg("%s: expected slide %d alone shown (class current), got %d slide(s) shown, the first %d", what, slide,
                 n, n ? cur[0] : 0);
    char want[64];
    snprintf(want, sizeof want, "step %d of %d", slide, SLIDES);
    if (!strstr(html, want)) fail_msg("%s: expected the counter '%s'", what, want);
    snprintf(want, sizeof want, "第 %d 步，共 %d 步", slide, SLIDES);
    if (!strstr(html, want)) fail_msg("%s: expected the counter '%s'", what, want);
}

// The rows that the cache makes: reused and new in the cached step, greyed
// without the cache, in any of the loads.
static void expect_cache_rows(const char *html, const char *what) {
    static const char *const WANT[] = {"<tr class=\"row-new\">", "<tr class=\"row-reused\">",
                                       "<tr class=\"row-recomputed\">", "<p class=\"rowlegend\">"};
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++)
        if (!strstr(html, WANT[i])) fail_msg("%s: expected '%s' in the DOM", what, WANT[i]);
}

static void test_deck_is_built(void **state) {
    const char *html = dom(state, 0);
    if (!strstr(html, "<html lang=\"en\" class=\"deck\">"))
        fail_msg("chromium: expected <html lang=\"en\" class=\"deck\"> once the script ran, got '%.80s'",
                 strstr(html, "<html"));
    expect_shown(html, 1, "chromium, page.html");
    static const char *const CONTROLS[] = {"<nav class=\"deckbar\">", "<button class=\"prev\"", "<button class=\"next\"",
                                           "<button class=\"overview\"", "<button class=\"lang\""};
    for (size_t i = 0; i < sizeof CONTROLS / sizeof CONTROLS[0]; i++)
        if (!strstr(html, CONTROLS[i])) fail_msg("chromium, page.html: expected '%s' in the DOM", CONTROLS[i]);
    expect_cache_rows(html, "chromium, page.html");
}

static void test_fragment_opens_a_slide(void **state) {
    expect_shown(dom(state, 1), 3, "chromium, page.html#slide-3");
}

// → 2, Page Down 3, End 7, ← 6, Page Up 5.
static void test_keys_move_the_slide(void **state) {
    expect_shown(dom(state, 2), 5, "chromium, page.html#keys=ArrowRight,PageDown,End,ArrowLeft,PageUp");
}

static void test_without_scripts_no_dead_control(void **state) {
    const char *html = dom(state, 3);
    const char *what = "chromium with scripts off";
    // The body up to the script (whose text is there, not run); the <html> tag.
    const char *body = strstr(html, "<body>"), *script = body ? strstr(body, "<script>") : NULL;
    if (!script) fail_msg("%s: expected the page's body and its script in the DOM, unrun", what);
    if (!strstr(html, "<html lang=\"en\">")) fail_msg("%s: expected <html lang=\"en\"> (no deck)", what);
    html = body;
    static const char *const DEAD[] = {"<button", "<nav", "<input", "onclick", "current"};
    for (size_t i = 0; i < sizeof DEAD / sizeof DEAD[0]; i++) {
        const char *hit = strstr(html, DEAD[i]);
        if (hit && hit < script) fail_msg("%s: expected no '%s' in the DOM, got '%.80s'", what, DEAD[i], hit);
    }
    for (int s = 1; s <= SLIDES; s++) {
        char want[64];
        snprintf(want, sizeof want, "<section class=\"slide\" id=\"slide-%d\">", s);
        if (!strstr(html, want)) fail_msg("%s: expected every slide in the scroll; '%s' missing", what, want);
    }
    expect_cache_rows(html, what);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deck_is_built),
        cmocka_unit_test(test_fragment_opens_a_slide),
        cmocka_unit_test(test_keys_move_the_slide),
        cmocka_unit_test(test_without_scripts_no_dead_control),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
