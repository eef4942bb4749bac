// trace_deck — what makes the lesson page (--format html, trace_doc.c) a
// deck of slides: its style and its script.
//
// Each slide is a <section class="slide" id="slide-N">. Without JavaScript
// the page is one readable scroll and shows no button; the script makes it a
// deck (one slide a screen, ← → and Page Up / Down, "step N of M", #slide-N
// in the address, O for the overview) and adds the controls and the
// language button itself. docs/presenting.md says how to use it.
#ifndef KVDEMO_TRACE_DECK_H
#define KVDEMO_TRACE_DECK_H

// The page's <style> text and its <script> text (no tags around them).
extern const char *const TRACE_DECK_STYLE;
extern const char *const TRACE_DECK_SCRIPT;

#endif
