// cli — the command line: kvdemo [list | lesson ID | help | ...] [options].
#ifndef KVDEMO_CLI_H
#define KVDEMO_CLI_H

// Runs kvdemo with these arguments and returns its exit status: 0 on
// success, 2 on a usage error, 1 on any other failure.
int cli_main(int argc, char **argv);

#endif
