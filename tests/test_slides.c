// test_slides — lesson 2's page (--format html) in a real browser: Debian's
// chromium, headless, when /usr/bin/chromium exists (.ci/run installs it);
// without it each test reports itself SKIPPED, never passed.
//
// Chromium loads the page from a file and prints the DOM after its script
// ran (--dump-dom), prints it (--print-to-pdf) or takes a screenshot of it
// (--screenshot). Eight loads, one after the other (on a machine whose
// cores are busy, seven browsers at once each missed the time limit where
// one at a time would not), each stopped after LIMIT seconds:
//   page.html            the deck is built: slide 1 shown, "step 1 of 7", the controls
//   page.html#slide-3    a link to a slide opens it
//   page.html#keys=...   keys pressed through the page's own handler (the
//                        test hook of trace_deck.c) move from slide to slide,
//                        then P turns the projector mode on
//   scripts off          the scroll: every slide, no control
//   layout.html          lessons 2 and 6.1 at three sizes of screen, the
//                        boxes read back: nothing covers a table or an id
//   printed              a PDF of one page a slide
//   two screenshots      slide 5 and, in the projector mode, slide 1, as
//                        PNG (read by tests/png.c): drawn, not blank
// Scripts are turned off by the page's copy nojs.html, the same page with a
// Content-Security-Policy of script-src 'none' (the browser refuses to run
// its script, as with JavaScript off): Chromium 156's headless
// --dump-dom prints nothing at all under --blink-settings=scriptEnabled=false.
// The cache's rows (row-new, row-reused, row-recomputed) are in each.
//
// On a busy machine a load can run out of time: it then runs once more with
// twice the time, and when that too is stopped (or the loads before it spent
// BUDGET, so that it never starts) its tests report themselves SKIPPED with
// the reason and the load average. A load that chromium ended by itself
// without the whole page fails, with chromium's last line of stderr.
#include "testutil.h"

#include "png.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const CHROMIUM = "/usr/bin/chromium";
enum { LOADS = 8, SLIDES = 7 };   // lesson 2's six, then the class questions
enum { LAYOUT = 4, PRINT = 5, SHOT = 6 };   // the layout's load; the one that prints (to PDF); the first screenshot
enum { SHOT_W = 1280, SHOT_H = 800 };
enum { LIMIT = 60 };   // seconds a load may take (a busy machine); a few when it is not
// Seconds after which no load (nor a load's second try, of 2 * LIMIT) starts:
// BUDGET + 2 * LIMIT stays under tests/run-all.sh's TEST_TIMEOUT of 300.
enum { BUDGET = 150 };
enum { TIMED_OUT = 124, NOT_STARTED = 125 };   // timeout(1)'s status; the script's own

// What layout.html's script is to look at (layout_write).
typedef struct {
    int slides, legends, heads, ids;
    int links;   // lesson2.html's deck read (1)
} LayoutCounts;

// What each load of the page gave: its DOM after the scripts.
typedef struct {
    char dir[256];
    char *dom[LOADS];
    int pages;   // pages of the printed PDF, -1 when none was printed
    LayoutCounts layout;   // what layout.html is to look at
    PngImage shot[LOADS - SHOT];
    char shot_err[LOADS - SHOT][600];   // why a screenshot could not be read
    int status[LOADS];      // the exit status of chromium's last try, TIMED_OUT or NOT_STARTED
    int complete[LOADS];    // 1 when the load's DOM, PDF or PNG is whole (the script's own test)
    int tries[LOADS];       // 1, or 2 when it ran again for 2 * LIMIT
    char err[LOADS][256];   // the last line chromium wrote on stderr
} Browser;

static const char *const LOAD_NAME[LOADS] = {"plain", "slide-3", "keys", "no-script", "layout", "print",
                                             "screenshot of slide 5",
                                             "screenshot of slide 1, projector mode"};

// The pages of a PDF file: its page objects ("/Type /Page", not "/Pages";
// Chromium's PDFs keep them uncompressed); -1 when there is no such file.
static int pdf_pages(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static const char KEY[] = "/Type /Page";
    size_t k = 0, len = strlen(KEY);
    int pages = 0, c, after = 0;
    while ((c = fgetc(f)) != EOF) {
        if (after) pages += c != 's', after = 0;
        if (c == KEY[k]) {
            if (++k == len) after = 1, k = 0;
        } else {
            k = c == KEY[0];
        }
    }
    fclose(f);
    return pages;
}

// The shell commands of load i (into cmd): chromium stopped after LIMIT
// seconds, run once more for 2 * LIMIT when its DOM, PDF or PNG is not whole
// (a machine too busy), neither started once BUDGET seconds have passed since
// $t0. Each try writes chromium's status to rc-i and its stderr to err-i.txt;
// the second try leaves again-i, a whole output ok-i.
static void load_commands(char *cmd, size_t size, int i) {
    static const char *const HOW[LOADS] = {"", "#slide-3", "#keys=ArrowRight,PageDown,End,ArrowLeft,PageUp,p", "", "", "",
                                           "#slide-5", "#keys=p"};
    static const char *const PAGE[LOADS] = {"lesson2.html", "lesson2.html", "lesson2.html", "nojs.html", "layout.html",
                                            "lesson2.html", "lesson2.html", "lesson2.html"};
    char out[128], done[128], one[2][1024], in_time[128];
    if (i == PRINT) {
        snprintf(out, sizeof out, "--no-pdf-header-footer --print-to-pdf=\"$PWD/page.pdf\"");
        snprintf(done, sizeof done, "grep -aq '%%%%EOF' page.pdf");
    } else if (i >= SHOT) {
        snprintf(out, sizeof out, "--window-size=%d,%d --screenshot=\"$PWD/shot-%d.png\"", SHOT_W, SHOT_H, i);
        snprintf(done, sizeof done, "grep -aq IEND shot-%d.png", i);
    } else if (i == LAYOUT) {   // layout.html reads lesson2.html's frame (a file, as the others)
        snprintf(out, sizeof out, "--allow-file-access-from-files --dump-dom");
    } else {
        snprintf(out, sizeof out, "--dump-dom");
        snprintf(done, sizeof done, "grep -q '</html>' dom-%d.html", i);
    }
    for (int k = 0; k < 2; k++)
        snprintf(one[k], sizeof one[k],
                 "rm -rf profile-%d; mkdir profile-%d && timeout %d %s --headless --no-sandbox --disable-gpu --disable-quic "
                 "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
                 "--user-data-dir=\"$PWD/profile-%d\" %s \"file://$PWD/%s%s\" >dom-%d.html 2>err-%d.txt; echo $? >rc-%d",
                 i, i, LIMIT * (k + 1), CHROMIUM, i, out, PAGE[i], HOW[i], i, i, i);
    snprintf(in_time, sizeof in_time, "[ $(($(date +%%s) - t0)) -lt %d ]", BUDGET);
    snprintf(cmd, size, "if %s; then %s; %s || { %s && { : >again-%d; %s; }; }; %s && : >ok-%d; else echo %d >rc-%d; fi; ",
             in_time, one[0], done, in_time, i, one[1], done, i, NOT_STARTED, i);
}

// What load i left: its status, whether its output is whole, chromium's last
// line of stderr.
static void load_result(Browser *b, int i) {
    char path[512], line[256];
    snprintf(path, sizeof path, "%s/rc-%d", b->dir, i);
    FILE *f = fopen(path, "r");
    b->status[i] = -1;
    if (f) {
        if (fscanf(f, "%d", &b->status[i]) != 1) b->status[i] = -1;
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/ok-%d", b->dir, i);
    b->complete[i] = access(path, F_OK) == 0;
    snprintf(path, sizeof path, "%s/again-%d", b->dir, i);
    b->tries[i] = access(path, F_OK) == 0 ? 2 : 1;
    snprintf(path, sizeof path, "%s/err-%d.txt", b->dir, i);
    snprintf(b->err[i], sizeof b->err[i], "(nothing)");
    if ((f = fopen(path, "r"))) {
        while (fgets(line, sizeof line, f))
            if (line[0] != '\n') snprintf(b->err[i], sizeof b->err[i], "%.*s", (int)strcspn(line, "\n"), line);
        fclose(f);
    }
}

// ----------------------------------------------------------------------------
// The layout: nothing covers what a slide shows

// The sizes of screen a page is laid out on in layout.html: a laptop, an old
// projector, a full-HD one.
static const int LAYOUT_SIZE[][2] = {{1400, 1000}, {1024, 768}, {1920, 1080}};
// The lessons (kvdemo lesson ARGS --format html), each on the first sizes of
// LAYOUT_SIZE: with 20 samples lesson 6.1 copies blocks on write into the
// pool's second row too (a picture drawn the same at every size: its page
// is large, and one size is enough).
static const struct {
    const char *args;
    int sizes;
} LAYOUT_LESSON[] = {{"2", 3}, {"6.1", 3}, {"6.1 --samples 20", 1}};
enum { LAYOUT_LESSONS = sizeof LAYOUT_LESSON / sizeof LAYOUT_LESSON[0] };

// layout.html's script. Each page is in an iframe of one screen's size (a
// file beside it, read across frames with --allow-file-access-from-files:
// as srcdoc the pages made a dump of 7 MB, which once came back without its
// end on a loaded machine). Once all are loaded it walks
// each deck with its own → button, slide by slide, in the page's mode and
// then in the projector mode (its own key P), and reads the boxes back:
//   at the slide's top and scrolled to its end, the row legend covers none
//   of the slide's tables, pictures and code (within the screen), and the
//   deck bar none at the end (its bottom margin);
//   in lesson 6.1's pool, no arrowhead's box meets a text's box (a block's
//   id, its L/ref line, the legend), and no point of an arrow (41 along it)
//   lies in one.
// Then, in lesson2.html itself (a frame opened at #slide-2): the address
// follows → and Page Up; O shows every slide and Escape one again; in the
// overview the language button leaves no text of the other language shown,
// and there are texts of its own.
// It writes one line for each thing covered or wrong, then the counts of
// what it looked at, into <pre id="layout">, which --dump-dom prints.
static const char LAYOUT_SCRIPT[] =
    "window.onload=function(){\n"
    "var out=[],n={slides:0,legends:0,heads:0,ids:0,links:0};\n"
    "function meet(a,b,top,bot){return Math.max(a.left,b.left)<Math.min(a.right,b.right)&&"
    "Math.max(a.top,b.top,top)<Math.min(a.bottom,b.bottom,bot);}\n"
    "function box(b){return {left:b.x,right:b.x+b.width,top:b.y,bottom:b.y+b.height};}\n"
    "function pool(g,where){\n"
    " var texts=[].filter.call(g.querySelectorAll('text'),function(t){return t.getBBox().width>0;});\n"
    " n.ids+=[].filter.call(g.querySelectorAll('text.id'),function(t){return t.getBBox().width>0;}).length;\n"
    " [].forEach.call(g.querySelectorAll('polygon'),function(a){n.heads++;var A=box(a.getBBox());\n"
    "  texts.forEach(function(t){if(meet(A,box(t.getBBox()),-1e9,1e9))"
    "out.push(where+': an arrowhead (x '+Math.round(A.left)+') covers the text \"'+t.textContent+'\"');});});\n"
    " [].forEach.call(g.querySelectorAll('path'),function(a){var L=a.getTotalLength();\n"
    "  texts.forEach(function(t){var T=box(t.getBBox());for(var k=0;k<=40;k++){var p=a.getPointAtLength(L*k/40);\n"
    "   if(p.x>T.left&&p.x<T.right&&p.y>T.top&&p.y<T.bottom){"
    "out.push(where+': an arrow crosses the text \"'+t.textContent+'\"');break;}}});});}\n"
    "function slide(w,d,s,where){\n"
    " var leg=s.querySelector('p.rowlegend'),bar=d.querySelector('nav.deckbar');\n"
    " [0,1].forEach(function(end){w.scrollTo(0,end?d.documentElement.scrollHeight:0);var vh=w.innerHeight,on=[];\n"
    "  if(leg)on.push(['the row legend',leg]);if(end)on.push(['the deck bar',bar]);if(leg&&!end)n.legends++;\n"
    "  on.forEach(function(c){var C=c[1].getBoundingClientRect();\n"
    "   [].forEach.call(s.querySelectorAll('table,svg,pre'),function(t,j){if(meet(C,t.getBoundingClientRect(),0,vh))"
    "out.push(where+(end?', scrolled to its end':', at its top')+': '+c[0]+' covers its '+t.tagName.toLowerCase()+' '+(j+1));});});});\n"
    " [].forEach.call(s.querySelectorAll('svg.pool'),function(g){pool(g,where);});}\n"
    "function walk(f,mode){var w=f.contentWindow,d=f.contentDocument,next=d.querySelector('button.next');\n"
    " if(!next){out.push(f.id+': no deck');return;}\n"
    " var all=d.querySelectorAll('section.slide');\n"
    " for(var k=0;k<all.length;k++){var s=d.querySelector('section.slide.current'),where=f.id+mode+', slide '+(k+1);\n"
    "  if(s){n.slides++;slide(w,d,s,where);}else out.push(where+': no slide shown');next.click();}}\n"
    "function links(f){var w=f.contentWindow,d=f.contentDocument,h=d.documentElement,where='lesson2.html#slide-2';\n"
    " function key(k){d.dispatchEvent(new w.KeyboardEvent('keydown',{key:k,bubbles:true}));}\n"
    " function shown(sel){return [].filter.call(d.querySelectorAll(sel),function(e){return e.getClientRects().length>0;}).length;}\n"
    " function expect(what,got,want){if(got!==want)out.push(where+': '+what+': expected '+want+', got '+got);}\n"
    " var all=d.querySelectorAll('section.slide').length,cur=d.querySelector('section.slide.current');\n"
    " expect('the address at first',w.location.hash,'#slide-2');expect('the slide shown at first',cur&&cur.id,'slide-2');\n"
    " d.querySelector('button.next').click();expect('the address after the button',w.location.hash,'#slide-3');\n"
    " key('PageUp');expect('the address after Page Up',w.location.hash,'#slide-2');\n"
    " expect('slides shown',shown('section.slide'),1);key('o');expect('slides shown in the overview (O)',shown('section.slide'),all);\n"
    " d.querySelector('button.lang').click();expect('the language after its button',h.lang,'zh-CN');\n"
    " expect('English texts shown',shown('.en'),0);if(!shown('.zh'))out.push(where+': no Chinese text shown');\n"
    " d.querySelector('button.lang').click();expect('the language after its button again',h.lang,'en');\n"
    " expect('Chinese texts shown',shown('.zh'),0);if(!shown('.en'))out.push(where+': no English text shown');\n"
    " key('Escape');expect('slides shown after Escape',shown('section.slide'),1);n.links++;}\n"
    "var lf=document.getElementById('links');if(lf&&lf.contentDocument)links(lf);else out.push('lesson2.html: not read');\n"
    "[].forEach.call(document.querySelectorAll('iframe.walk'),function(f){var d=f.contentDocument,w=f.contentWindow;\n"
    " walk(f,'');d.dispatchEvent(new w.KeyboardEvent('keydown',{key:'Home',bubbles:true}));\n"
    " d.dispatchEvent(new w.KeyboardEvent('keydown',{key:'p',bubbles:true}));walk(f,', projector');});\n"
    "out.push('looked at '+n.slides+' slides, '+n.legends+' legends, '+n.heads+' arrowheads, '+n.ids+' ids, '+n.links+' deck');\n"
    "document.getElementById('layout').textContent=out.join('\\n');};\n";

// Writes text into dir/name.
static void page_write(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int count_of(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) n++;
    return n;
}

// layout.html in dir: each page of LAYOUT_LESSON (written as layout-L.html)
// in an iframe of each of its sizes, and LAYOUT_SCRIPT. Returns what the
// script is to look at.
static LayoutCounts layout_write(const char *dir, const char *const page[LAYOUT_LESSONS]) {
    char path[512];
    snprintf(path, sizeof path, "%s/layout.html", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>layout</title>\n</head>\n<body>\n"
          "<pre id=\"layout\">not measured</pre>\n", f);
    LayoutCounts want = {0, 0, 0, 0, 1};
    for (int l = 0; l < LAYOUT_LESSONS; l++) {
        char name[32];
        snprintf(name, sizeof name, "layout-%d.html", l);
        page_write(dir, name, page[l]);
        want.slides += 2 * LAYOUT_LESSON[l].sizes * count_of(page[l], "<section class=\"slide\"");
        want.legends += 2 * LAYOUT_LESSON[l].sizes * count_of(page[l], "<p class=\"rowlegend\">");
        want.heads += 2 * LAYOUT_LESSON[l].sizes * count_of(page[l], "<polygon ");
        want.ids += 2 * LAYOUT_LESSON[l].sizes * count_of(page[l], "class=\"id\">");
        for (int z = 0; z < LAYOUT_LESSON[l].sizes; z++) {
            fprintf(f, "<iframe class=\"walk\" id=\"lesson %s at %d x %d\" style=\"border:0;width:%dpx;height:%dpx\" "
                    "src=\"layout-%d.html\"></iframe>\n", LAYOUT_LESSON[l].args, LAYOUT_SIZE[z][0], LAYOUT_SIZE[z][1],
                    LAYOUT_SIZE[z][0], LAYOUT_SIZE[z][1], l);
        }
    }
    fputs("<iframe id=\"links\" style=\"border:0;width:1400px;height:1000px\" src=\"lesson2.html#slide-2\"></iframe>\n", f);
    fprintf(f, "<script>\n%s</script>\n</body>\n</html>\n", LAYOUT_SCRIPT);
    fclose(f);
    return want;
}

// Writes lesson 2's page into a new folder (and its copy without scripts,
// and layout.html with lesson 6.1's) and has chromium load them the eight
// ways, one after the other (load_commands); each DOM in b->dom (NULL when
// chromium printed none), the PDF's pages and the screenshots.
static int setup(void **state) {
    if (access(CHROMIUM, X_OK)) return 0;   // the tests skip
    Browser *b = calloc(1, sizeof *b);
    assert_non_null(b);
    assert_int_equal(tmpdir_make(b->dir, sizeof b->dir, "slides"), 0);
    RunResult r = kvdemo_run("lesson 2 --format html"), more[LAYOUT_LESSONS - 1];
    assert_int_equal(r.status, 0);
    page_write(b->dir, "lesson2.html", r.out);
    const char *page[LAYOUT_LESSONS] = {r.out};
    for (int l = 1; l < LAYOUT_LESSONS; l++) {
        char args[64];
        snprintf(args, sizeof args, "lesson %s --format html", LAYOUT_LESSON[l].args);
        more[l - 1] = kvdemo_run(args);
        assert_int_equal(more[l - 1].status, 0);
        page[l] = more[l - 1].out;
    }
    b->layout = layout_write(b->dir, page);
    for (int l = 1; l < LAYOUT_LESSONS; l++) run_free(&more[l - 1]);
    char path[512];
    snprintf(path, sizeof path, "%s/nojs.html", b->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    const char *head = strstr(r.out, "<head>");
    assert_non_null(head);
    head += strlen("<head>");
    fprintf(f, "%.*s\n<meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">%s",
            (int)(head - r.out), r.out, head);
    fclose(f);
    run_free(&r);
    char cmd[16384];
    int len = snprintf(cmd, sizeof cmd, "cd '%s' || exit 1; t0=$(date +%%s); ", b->dir);
    for (int i = 0; i < LOADS; i++) {
        load_commands(cmd + len, sizeof cmd - (size_t)len, i);
        len += (int)strlen(cmd + len);
    }
    snprintf(cmd + len, sizeof cmd - (size_t)len, "true");
    r = shell_run(cmd);
    run_free(&r);
    for (int i = 0; i < LOADS; i++) load_result(b, i);
    snprintf(path, sizeof path, "%s/page.pdf", b->dir);
    b->pages = pdf_pages(path);
    for (int i = SHOT; i < LOADS; i++) {
        snprintf(path, sizeof path, "%s/shot-%d.png", b->dir, i);
        if (png_read(&b->shot[i - SHOT], path, b->shot_err[i - SHOT], sizeof b->shot_err[0])) b->shot[i - SHOT].rgb = NULL;
    }
    for (int i = 0; i < PRINT; i++) {
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
    for (int i = SHOT; i < LOADS; i++) png_free(&b->shot[i - SHOT]);
    tmpdir_remove(b->dir);
    free(b);
    return 0;
}

// The DOM of load i (NULL for the PDF and the screenshots, which are read
// apart). Skips without chromium, and when the load's output is not whole
// because chromium was stopped for time twice (or never started): the page
// was not checked, and the line says why. Fails when chromium ended by
// itself without the whole page, or printed nothing.
static const char *dom(void **state, int i) {
    Browser *b = *state;
    if (!b) {
        fprintf(stderr, "%s is not installed (apt-get install chromium): skipped\n", CHROMIUM);
        skip();
    }
    if (!b->complete[i] && (b->status[i] == TIMED_OUT || b->status[i] == NOT_STARTED)) {
        double load[3] = {-1, -1, -1};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) {
            if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
            fclose(f);
        }
        char again[64] = ", and not run again: the loads had spent their budget";
        if (b->tries[i] == 2) snprintf(again, sizeof again, ", then again after %d s", 2 * LIMIT);
        if (b->status[i] == TIMED_OUT)
            fprintf(stderr, "chromium (%s load): stopped after %d s%s; load average %.2f %.2f %.2f: "
                    "the page was not checked: skipped\n", LOAD_NAME[i], LIMIT, again, load[0], load[1], load[2]);
        else
            fprintf(stderr, "chromium (%s load): not started, the loads before it took the %d-s budget; "
                    "load average %.2f %.2f %.2f: the page was not checked: skipped\n", LOAD_NAME[i], BUDGET,
                    load[0], load[1], load[2]);
        skip();
    }
    if (!b->complete[i])
        fail_msg("chromium (%s load): exit status %d without the whole %s; its stderr ends: %s", LOAD_NAME[i],
                 b->status[i], i == PRINT ? "PDF" : i >= SHOT ? "PNG" : "DOM", b->err[i]);
    if (i >= PRINT) return NULL;
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
                                           "<button class=\"overview\"", "<button class=\"projector\"",
                                           "<button class=\"lang\""};
    for (size_t i = 0; i < sizeof CONTROLS / sizeof CONTROLS[0]; i++)
        if (!strstr(html, CONTROLS[i])) fail_msg("chromium, page.html: expected '%s' in the DOM", CONTROLS[i]);
    expect_cache_rows(html, "chromium, page.html");
}

static void test_fragment_opens_a_slide(void **state) {
    expect_shown(dom(state, 1), 3, "chromium, page.html#slide-3");
}

// → 2, Page Down 3, End 7, ← 6, Page Up 5; then P, the projector mode.
static void test_keys_move_the_slide(void **state) {
    expect_shown(dom(state, 2), 5, "chromium, page.html#keys=ArrowRight,PageDown,End,ArrowLeft,PageUp,p");
}

// P turns the projector mode on (html.projector); the page opens without it.
static void test_key_p_turns_the_projector_on(void **state) {
    const char *on = dom(state, 2), *off = dom(state, 0);
    if (!strstr(on, "<html lang=\"en\" class=\"deck projector\">"))
        fail_msg("chromium, keys ...,p: expected <html lang=\"en\" class=\"deck projector\">, got '%.80s'",
                 strstr(on, "<html"));
    if (!strstr(off, "<html lang=\"en\" class=\"deck\">"))
        fail_msg("chromium, page.html: expected no projector mode at first, got '%.80s'", strstr(off, "<html"));
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

// The layout (layout.html, LAYOUT_SCRIPT): at each screen size, in the
// page's mode and the projector's, nothing covers a slide's tables,
// pictures and code, and no arrow of lesson 6.1's pool covers a text; and
// in lesson2.html, the address follows the slide, O and Escape open and
// close the overview, and the language button switches every text.
static void test_nothing_covers_the_slides(void **state) {
    const char *html = dom(state, LAYOUT), *what = "chromium, layout.html";
    const LayoutCounts *want = &((Browser *)*state)->layout;
    const char *pre = strstr(html, "<pre id=\"layout\">"), *end = pre ? strstr(pre, "</pre>") : NULL;
    if (!end) fail_msg("%s: expected <pre id=\"layout\"> in the DOM", what);
    pre += strlen("<pre id=\"layout\">");
    if (!strncmp(pre, "not measured", strlen("not measured")))
        fail_msg("%s: expected the measures, got 'not measured': the script did not run to its end", what);
    int covered = 0;
    LayoutCounts got = {-1, -1, -1, -1, -1};
    for (const char *line = pre; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) eol = end;
        if (sscanf(line, "looked at %d slides, %d legends, %d arrowheads, %d ids, %d deck", &got.slides, &got.legends,
                   &got.heads, &got.ids, &got.links) != 5)
            covered++, fprintf(stderr, "%s: %.*s\n", what, (int)(eol - line), line);
        line = eol + 1;
    }
    if (covered) fail_msg("%s: expected nothing covered or wrong, got the %d line(s) above", what, covered);
    if (got.slides != want->slides || got.legends != want->legends || got.heads != want->heads || got.ids != want->ids ||
        got.links != 1)
        fail_msg("%s: expected to look at %d slides, %d legends, %d arrowheads, %d ids, 1 deck; looked at %d, %d, %d, "
                 "%d, %d", what, want->slides, want->legends, want->heads, want->ids, got.slides, got.legends, got.heads,
                 got.ids, got.links);
}

// Printed, each slide is one page: a slide too tall is shrunk to its page
// (trace_deck.c), never split, so no heading is left at a page's bottom.
static void test_printed_one_slide_a_page(void **state) {
    dom(state, PRINT);
    int pages = ((Browser *)*state)->pages;
    if (pages < 0) fail_msg("chromium --print-to-pdf: expected a PDF, got none");
    if (pages != SLIDES) fail_msg("chromium --print-to-pdf: expected %d pages (one a slide), got %d", SLIDES, pages);
}

// A screenshot, as chromium took it (fails when it could not be read).
static const PngImage *shot(void **state, int i) {
    dom(state, i);
    Browser *b = *state;
    const PngImage *img = &b->shot[i - SHOT];
    if (!img->rgb) fail_msg("chromium --screenshot (%s): expected a PNG, got: %s", LOAD_NAME[i], b->shot_err[i - SHOT]);
    if (img->width != SHOT_W || img->height != SHOT_H)
        fail_msg("chromium --screenshot (%s): expected %d x %d pixels, got %d x %d", LOAD_NAME[i], SHOT_W, SHOT_H,
                 img->width, img->height);
    return img;
}

// Pixels unlike the top-left one (the page's background), and pixels of
// exactly this colour.
static long count_pixels(const PngImage *img, const uint8_t rgb[3], long *unlike_corner) {
    long n = 0;
    *unlike_corner = 0;
    for (long i = 0; i < (long)img->width * img->height; i++) {
        const uint8_t *p = img->rgb + 3 * i;
        *unlike_corner += memcmp(p, img->rgb, 3) != 0;
        n += !memcmp(p, rgb, 3);
    }
    return n;
}

// The slides are drawn, not blank: at least 2% of the pixels are not the
// background (lesson 2's slide 5 covers about a third, slide 1 in the
// projector mode a tenth); slide 5, the cached step, shows the appended
// rows in amber (#b26b00, row-new: its cells are filled solid).
static void test_screenshots_are_not_blank(void **state) {
    static const uint8_t AMBER[3] = {0xb2, 0x6b, 0x00};
    for (int i = SHOT; i < LOADS; i++) {
        const PngImage *img = shot(state, i);
        long unlike, amber = count_pixels(img, AMBER, &unlike), total = (long)img->width * img->height;
        if (unlike < total / 50)
            fail_msg("chromium --screenshot (%s): expected at least %ld pixels unlike the background, got %ld", LOAD_NAME[i],
                     total / 50, unlike);
        if (i == SHOT && amber < 1000)
            fail_msg("chromium --screenshot (%s): expected at least 1000 amber pixels (the rows appended to K and V), "
                     "got %ld", LOAD_NAME[i], amber);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deck_is_built),
        cmocka_unit_test(test_fragment_opens_a_slide),
        cmocka_unit_test(test_keys_move_the_slide),
        cmocka_unit_test(test_key_p_turns_the_projector_on),
        cmocka_unit_test(test_without_scripts_no_dead_control),
        cmocka_unit_test(test_nothing_covers_the_slides),
        cmocka_unit_test(test_printed_one_slide_a_page),
        cmocka_unit_test(test_screenshots_are_not_blank),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
