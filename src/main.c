// main — kvdemo's entry point; everything else is in cli.c.
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv); }
