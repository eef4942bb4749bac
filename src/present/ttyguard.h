// ttyguard — the terminal comes back whatever ends kvdemo.
//
// A --step pause and a live race take the terminal out of line mode (no
// echo, no line editing). Ended by Ctrl-C, SIGTERM, SIGHUP or SIGQUIT, the
// program would leave it so: the shell the student types into next would
// show nothing typed. While a guard is armed, each of those signals first
// puts the saved modes back and erases the line the cursor is on (a pause's
// prompt), then is raised again with its default action, so that the exit
// status still says which signal ended the program.
#ifndef KVDEMO_TTYGUARD_H
#define KVDEMO_TTYGUARD_H

#include <termios.h>

// Arms the guard: saved are the modes of the terminal behind fd, as they
// were before the program changed them. Only the signals that still have
// their default action are guarded: one the program handles itself (race
// stops cleanly on Ctrl-C) or that the shell made it ignore (nohup) is left
// as it is. Returns 0, or -1 when a handler could not be installed.
int ttyguard_arm(int fd, const struct termios *saved);
// Disarms it: the signals get back the handlers they had before.
void ttyguard_disarm(void);

#endif
