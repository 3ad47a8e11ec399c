/* The pod sandbox's process: holds the pod's namespaces, reaps the zombies of
 * processes that end up reparented to it, and exits on SIGINT or SIGTERM. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { _exit(128 + sig); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction stop = {.sa_handler = quit}, child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
        sigaction(SIGCHLD, &child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
