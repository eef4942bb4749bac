// cli — the command line: kvdemo [list | lesson ID | help | ...] [options].
#ifndef KVDEMO_CLI_H
#define KVDEMO_CLI_H

#include "options.h"
#include "trace.h"

// Runs kvdemo with these arguments and returns its exit status: 0 on
// success, 2 on a usage error, 1 on any other failure. *lang is the
// language its messages spoke (--lang, else LANG), for main's last line.
int cli_main(int argc, char **argv, Lang *lang);

// Parses argv[2..] as the options of `command` (argv[1]) into opt and tr,
// as cli_main does before it runs the command. Returns 0 or the exit status
// of a usage error (said on stderr). For the option parser's fuzz target.
int cli_parse_options(Options *opt, Trace *tr, int argc, char **argv, const char *command);

#endif
