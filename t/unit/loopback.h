/* loopback.h — for the unit tests that talk over loopback sockets
 * (test_agent_http.c, test_httpc.c); included after cmocka.h. */
#ifndef DRV_T_LOOPBACK_H
#define DRV_T_LOOPBACK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* A socket bound to an ephemeral loopback port, not listening (connecting
 * to it is refused until listen()); *port set. */
static int bound_socket(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    *port = ntohs(sa.sin_port);
    return fd;
}

#endif
