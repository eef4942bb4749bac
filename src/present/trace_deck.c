// trace_deck — the lesson page's style and script: a scroll without
// JavaScript, a deck of slides with it (trace_deck.h).
//
// The page must reach nothing on the network, and tests/test_html.c refuses
// any "//", "http:", "url(" or "@import" in it: the script has no comments
// of that kind and no address but the page's own fragment (#slide-N).
#include "trace_deck.h"

#include <stddef.h>
#include <stdio.h>

// The scroll, then the deck (html.deck, set by the script), then print.
// In the deck a slide's figures sit side by side in reading order, so that
// an operation's operands stand beside its result; printed, the same, one
// slide a page, and a heading always opens its slide (trace_doc.c), so none
// is left alone at the bottom of a page. The page is A4 across (297 x 210
// mm, 10 mm margins: 1047 x 718 CSS pixels inside); before printing the
// script lays each slide out at that width (html.fitting) and shrinks one
// that would not fit (CSS zoom), so that each slide is one page.
const char *const TRACE_DECK_STYLE =
    "body{font-family:system-ui,\"Noto Sans CJK SC\",\"PingFang SC\",sans-serif;max-width:64em;margin:1em auto;"
    "padding:0 1em;line-height:1.45;color:#111;background:#fff}\n"
    "html[lang=en] .zh,html[lang=zh-CN] .en{display:none}\n"
    "h1{font-size:1.5em}h2{font-size:1.25em;margin-top:1.4em}\n"
    "p{white-space:pre-line;margin:.4em 0}\n"
    "pre{background:#f5f5f5;padding:.4em .6em;overflow-x:auto;margin:.4em 0}\n"
    "pre.code{background:#eef3fb;border-left:3px solid #4a6fb5}\n"
    "figure{margin:.8em 0;overflow-x:auto}figcaption{font-family:ui-monospace,monospace;margin:.2em 0}\n"
    "table{border-collapse:collapse;font-family:ui-monospace,monospace;margin:.3em 0}\n"
    "td,th{border:1px solid #bbb;padding:.15em .5em;text-align:right}\n"
    "th{background:#eee;font-weight:normal}th.tok{text-align:left}td.l,th.l{text-align:left}\n"
    "figure.pic svg{max-width:100%;height:auto}figure.pic text.id{font-family:ui-monospace,monospace}\n"
    // a chart (chart_svg.h) in the type's scale: 13 px text at 16 px type, larger with it (projector)
    "figure.pic svg.chart{width:41em}\n"
    ".legend{font-size:.9em}.sw{display:inline-block;min-width:1.1em;text-align:center}\n"
    "@media screen and (min-width:90em){body{font-size:1.25em}}\n"
    // rows and the cache (ROW_MARKS below); a swatch of the legend takes its row's class
    "tr.row-new>th.tok,.sw.row-new{background:" TRACE_ROW_NEW_COLOUR ";color:#000;font-weight:bold}\n"
    "tr.row-new>td{border-top:3px solid #a04a00;border-bottom:3px solid #a04a00}\n"
    "tr.row-new>th.tok::after{content:\" +\"}\n"
    "tr.row-reused>th.tok,.sw.row-reused{background:" TRACE_ROW_REUSED_COLOUR ";color:#000}"
    "tr.row-reused>td{background:#e6f1fb}\n"
    "tr.row-reused>th.tok::after{content:\" \\21BA\"}\n"
    "tr.row-recomputed>td{opacity:.6}tr.row-recomputed>th.tok,.sw.row-recomputed{background:" TRACE_ROW_RECOMPUTED_COLOUR
    ";color:#000}\n"
    "tr.row-recomputed>th.tok::after{content:\" \\D7\"}\n"
    "svg rect.row-new{fill:" TRACE_ROW_NEW_COLOUR ";stroke:#a04a00}svg rect.row-reused{fill:" TRACE_ROW_REUSED_COLOUR
    ";stroke:#fff}svg rect.row-recomputed{fill:" TRACE_ROW_RECOMPUTED_COLOUR ";stroke:#fff}\n"
    ".rowlegend .sw{padding:0 .4em;margin-right:.3em}\n"
    "ol.questions li{margin:.6em 0}ol.questions summary{cursor:pointer}ol.questions p{margin:.3em 0 0 1em}\n"
    "footer.prov{margin-top:2em;border-top:1px solid #bbb;font-size:.85em;color:#444}\n"
    "html.deck footer.prov{display:none}html.deck.overview footer.prov{display:block}\n"
    // the deck
    "html.deck body{max-width:none;margin:0;padding:.5em 2em 4em}\n"
    "@media screen{html.deck:not(.overview) section.slide:not(.current){display:none}}\n"
    "html.deck.overview section.slide{border-bottom:3px solid #bbb;padding-bottom:1em}\n"
    "html.deck section.slide h2{margin-top:.4em}\n"
    "html.deck section.slide figure{display:inline-block;vertical-align:top;max-width:100%;margin:.3em 1.6em .5em 0}\n"
    "nav.deckbar{position:fixed;left:0;right:0;bottom:0;display:flex;align-items:center;gap:.6em;"
    "padding:.3em 1em;background:#f4f4f4;border-top:1px solid #bbb;font-size:.9em}\n"
    "nav.deckbar .counter{margin-right:auto;font-weight:bold}\n"
    "nav.deckbar button{font:inherit;padding:.1em .7em}\n"
    // the projector (html.projector, key P): large type, black on white,
    // no light grey text, heavier lines
    "html.projector body{font-size:1.6em;color:#000;background:#fff;line-height:1.35}\n"
    "html.projector h2{font-size:1.35em}html.projector pre{background:#fff;border:2px solid #000}\n"
    "html.projector pre.code{background:#fff;border-left:6px solid #003b8e}\n"
    "html.projector td,html.projector th{border:2px solid #000}html.projector th{background:#fff;font-weight:bold}\n"
    "html.projector tr.row-new>td{border-top:4px solid #a04a00;border-bottom:4px solid #a04a00}\n"
    "html.projector tr.row-recomputed>td{opacity:.65}\n"
    "html.projector footer.prov{color:#000}html.projector .legend{font-size:1em}\n"
    "html.projector nav.deckbar{background:#000;color:#fff;border-top:2px solid #000}\n"
    "html.projector nav.deckbar button{background:#fff;color:#000;border:2px solid #fff}\n"
    "html.projector nav.deckbar button.projector{background:#ffb000;color:#000}\n"
    // print: one slide a page
    "@page{size:297mm 210mm;margin:10mm}\n"
    "html.fitting body{width:1040px;max-width:none;margin:0;padding:0}html.fitting pre{white-space:pre-wrap}"
    "html.fitting figure{overflow:visible}html.fitting section.slide{display:block!important;border:0;padding:0}\n"
    "@media print{html.deck body{padding:0;margin:0}html.projector body{font-size:1.25em}"
    "nav.deckbar{display:none}section.slide+section.slide{break-before:page}"
    "h1,h2,pre.code,figcaption{break-after:avoid}figure,tr{break-inside:avoid}"
    "section.slide figure{display:inline-block;vertical-align:top;max-width:100%;margin:.3em 1.6em .5em 0}"
    "*{-webkit-print-color-adjust:exact;print-color-adjust:exact}pre{white-space:pre-wrap}}\n";

// The deck. Keys: → and Page Down the next slide, ← and Page Up the one
// before, Home and End the first and the last, O the overview (every slide
// in one scroll; O or Escape goes back, a double click on a slide opens it),
// P the projector mode (large type, high contrast; P again leaves it).
// #slide-N in the address opens slide N and follows each move, so that a
// slide can be linked. A test hook: #keys=K1,K2,... presses those keys (as
// KeyboardEvent.key names) once the deck is built, through the same handler.
const char *const TRACE_DECK_SCRIPT =
    "(function(){\n"
    "var h=document.documentElement,d=document,s=[].slice.call(d.querySelectorAll('section.slide')),n=s.length,i=0;\n"
    "if(!n)return;\n"
    "function el(t,c,x){var e=d.createElement(t);if(c)e.className=c;if(x)e.textContent=x;return e;}\n"
    "function both(e,en,zh){var a=el('span','en',en),b=el('span','zh',zh);a.lang='en';b.lang='zh-CN';"
    "e.textContent='';e.appendChild(a);e.appendChild(b);}\n"
    "var bar=el('nav','deckbar'),count=el('span','counter'),prev=el('button','prev','←'),next=el('button','next','→'),"
    "ov=el('button','overview'),pj=el('button','projector'),lang=el('button','lang','English / 中文');\n"
    "both(ov,'overview (O)','总览（O）');both(pj,'projector (P)','投影（P）');prev.title='Page Up';next.title='Page Down';\n"
    "[count,prev,next,ov,pj,lang].forEach(function(e){if(e.tagName=='BUTTON')e.type='button';bar.appendChild(e);});\n"
    "d.body.appendChild(bar);h.classList.add('deck');\n"
    "function over(){return h.classList.contains('overview');}\n"
    "function show(k,quiet){i=Math.max(0,Math.min(n-1,k));\n"
    " s.forEach(function(x,j){x.classList.toggle('current',j==i);});\n"
    " both(count,'step '+(i+1)+' of '+n,'第 '+(i+1)+' 步，共 '+n+' 步');\n"
    " if(!quiet)try{history.replaceState(null,'','#slide-'+(i+1));}catch(e){}\n"
    " if(over())s[i].scrollIntoView();else window.scrollTo(0,0);}\n"
    "function overview(on){h.classList.toggle('overview',on);show(i,1);}\n"
    "function key(e){if(e.ctrlKey||e.altKey||e.metaKey)return;var k=e.key;\n"
    " if(k=='p'||k=='P')h.classList.toggle('projector');else if(k=='o'||k=='O')overview(!over());else if(k=='Escape'&&over())overview(false);else if(over())return;\n"
    " else if(k=='ArrowRight'||k=='PageDown')show(i+1);else if(k=='ArrowLeft'||k=='PageUp')show(i-1);\n"
    " else if(k=='Home')show(0);else if(k=='End')show(n-1);else return;\n"
    " e.preventDefault();}\n"
    "function fromHash(){var m=/^#slide-(\\d+)$/.exec(location.hash);return m?+m[1]-1:-1;}\n"
    "prev.onclick=function(){show(i-1);};next.onclick=function(){show(i+1);};ov.onclick=function(){overview(!over());};\n"
    "pj.onclick=function(){h.classList.toggle('projector');};\n"
    "lang.onclick=function(){h.lang=h.lang=='en'?'zh-CN':'en';};\n"
    "s.forEach(function(x,j){x.ondblclick=function(){if(over()){i=j;overview(false);}};});\n"
    "d.addEventListener('keydown',key);\n"
    "function fit(on){s.forEach(function(x){x.style.zoom='';});if(!on)return;h.classList.add('fitting');\n"
    " var z=s.map(function(x){return Math.min(1,660/x.scrollHeight,1040/x.scrollWidth);});\n"
    " h.classList.remove('fitting');s.forEach(function(x,j){if(z[j]<1)x.style.zoom=z[j];});}\n"
    "window.addEventListener('beforeprint',function(){fit(1);});window.addEventListener('afterprint',function(){fit(0);});\n"
    "window.addEventListener('hashchange',function(){var k=fromHash();if(k>=0&&k!=i)show(k,1);});\n"
    "var k0=fromHash();show(k0>=0?k0:0,1);\n"
    "var t=/^#keys=([A-Za-z,]+)$/.exec(location.hash);\n"
    "if(t)t[1].split(',').forEach(function(k){d.dispatchEvent(new KeyboardEvent('keydown',{key:k,bubbles:true}));});\n"
    "})();\n";

// ----------------------------------------------------------------------------
// Rows and the cache: one legend, the same colours in every lesson

static const struct {
    TraceRowRole role;
    const char *cls;   // its CSS class (TRACE_DECK_STYLE)
    const char *mark;  // the sign after its token, as the style draws it
    const char *en, *zh;
} ROW_MARKS[] = {
    {ROW_NEW, "row-new", "+", "new: the new token's row, computed in this step (with the cache: appended to K and V)",
     "新行：新 token 的这一行，这一步算出（使用缓存时：追加到 K、V 后面）"},
    {ROW_REUSED, "row-reused", "\u21BA", "reused: read from the cache, computed in an earlier step",
     "复用：从缓存里读出，是前面的步骤算好的"},
    {ROW_RECOMPUTED, "row-recomputed", "\u00D7", "recomputed for nothing: an earlier step had it; the cache saves this",
     "白算：前面的步骤已经算过，KV Cache 省掉的就是这些"},
};

const char *trace_deck_row_class(TraceRowRole role) {
    for (size_t i = 0; i < sizeof ROW_MARKS / sizeof ROW_MARKS[0]; i++)
        if (ROW_MARKS[i].role == role) return ROW_MARKS[i].cls;
    return NULL;
}

void trace_deck_row_legend(Buf *b, unsigned seen) {
    if (!seen) return;
    buf_append(b, "<p class=\"rowlegend\">");
    int first = 1;
    for (size_t i = 0; i < sizeof ROW_MARKS / sizeof ROW_MARKS[0]; i++) {
        if (!(seen & 1u << ROW_MARKS[i].role)) continue;
        if (!first) buf_append(b, " &#160; ");
        first = 0;
        buf_printf(b, "<span class=\"sw %s\">%s</span><span class=\"en\" lang=\"en\">%s</span>"
                   "<span class=\"zh\" lang=\"zh-CN\">%s</span>",
                   ROW_MARKS[i].cls, ROW_MARKS[i].mark, ROW_MARKS[i].en, ROW_MARKS[i].zh);
    }
    buf_append(b, "</p>\n");
}

// ----------------------------------------------------------------------------
// The triangle the cache removes

// Grid g (0 without the cache, 1 with it) of trace_deck_triangle at x0:
// step s feeds prompt + s - 1 positions; a row is two runs of cells, the
// earlier positions (recomputed or reused) and the newest one(s).
static void triangle_grid(Buf *b, int g, int x0, int y0, double cell, int prompt, int steps) {
    for (int s = 1; s <= steps; s++) {
        int n = prompt + s - 1, fresh = s == 1 ? n : 1;   // step 1 computes the prompt in both runs
        double y = y0 + (s - 1) * cell;
        if (n > fresh)
            buf_printf(b, "<rect class=\"%s\" x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"></rect>",
                       g ? "row-reused" : "row-recomputed", x0, y, (n - fresh) * cell, cell);
        buf_printf(b, "<rect class=\"row-new\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"></rect>",
                   x0 + (n - fresh) * cell, y, fresh * cell, cell);
    }
}

void trace_deck_triangle(Buf *b, int prompt, int steps) {
    int cols = prompt + steps - 1;
    double cell = 240.0 / (cols > steps ? cols : steps);
    if (cell > 22) cell = 22;
    int gw = (int)(cols * cell + 0.5), gh = (int)(steps * cell + 0.5), x1 = 12 + gw + 40, top = 34;
    long long without = 0, with = prompt + steps - 1;
    for (int s = 1; s <= steps; s++) without += prompt + s - 1;
    int w = x1 + gw + 12, h = top + gh + 40;
    buf_printf(b, "<svg class=\"triangle\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" font-size=\"12\" "
               "font-family=\"system-ui, sans-serif\">", w, h, w, h);
    for (int g = 0; g < 2; g++) {
        int x0 = g ? x1 : 12;
        char en[96], zh[96];
        snprintf(en, sizeof en, g ? "with the cache: %lld K/V rows" : "without the cache: %lld K/V rows", g ? with : without);
        snprintf(zh, sizeof zh, g ? "使用缓存：%lld 行 K/V" : "不使用缓存：%lld 行 K/V", g ? with : without);
        buf_printf(b, "<text class=\"en\" x=\"%d\" y=\"16\">%s</text><text class=\"zh\" x=\"%d\" y=\"16\">%s</text>", x0, en,
                   x0, zh);
        triangle_grid(b, g, x0, top, cell, prompt, steps);
    }
    buf_printf(b, "<text class=\"en\" x=\"12\" y=\"%d\">a row a step, a column a position</text>"
               "<text class=\"zh\" x=\"12\" y=\"%d\">每一步一行，每个位置一列</text></svg>\n",
               h - 12, h - 12);
}
