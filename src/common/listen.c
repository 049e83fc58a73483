/* listen.c — see listen.h: parsing and comparing "HOST:PORT" listen
 * addresses. Pure; no socket is opened. */
#include "common/listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int drv_listen_parse(const char *listen, struct sockaddr_storage *ss, drv_error_t *err)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host)
        return drv_err_invalid(err, "listen", "--listen must be HOST:PORT, got '%s'", listen);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || !colon[1])
        return drv_err_invalid(err, "listen", "bad port in --listen '%s'", listen);
    memset(ss, 0, sizeof *ss);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        host[strlen(host) - 1] = '\0';
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
            return drv_err_invalid(err, "listen", "bad IPv6 address in --listen '%s'", listen);
        return 0;
    }
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
        return drv_err_invalid(err, "listen", "bad IPv4 address in --listen '%s'", listen);
    return 0;
}

int drv_listen_check(const char *listen, drv_error_t *err)
{
    struct sockaddr_storage ss;
    return drv_listen_parse(listen, &ss, err);
}

bool drv_listen_same(const char *a, const char *b)
{
    struct sockaddr_storage sa, sb;
    if (drv_listen_parse(a, &sa, NULL) < 0 || drv_listen_parse(b, &sb, NULL) < 0 ||
        sa.ss_family != sb.ss_family)
        return false;
    if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)&sa, *y = (const void *)&sb;
        return x->sin6_port != 0 && x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    const struct sockaddr_in *x = (const void *)&sa, *y = (const void *)&sb;
    return x->sin_port != 0 && x->sin_port == y->sin_port &&
           x->sin_addr.s_addr == y->sin_addr.s_addr;
}
