#!/bin/sh
# The tests need cmocka's header and library. Install them through apt-get
# when they are missing and we are allowed to; otherwise say what to run.
if [ -f /usr/include/cmocka.h ] || echo '#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
int main(void){return 0;}' | ${CC:-cc} -x c - -o /dev/null -lcmocka 2>/dev/null; then
    exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "kvdemo: cmocka is missing; installing libcmocka-dev" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libcmocka-dev >&2 && exit 0
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        echo "kvdemo: cmocka is missing; installing libcmocka-dev with sudo" >&2
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libcmocka-dev >&2 && exit 0
    fi
fi
echo "kvdemo: the tests need cmocka; install it with: sudo apt-get install libcmocka-dev" >&2
exit 1
