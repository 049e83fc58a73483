/* pg_ca.c — see pg_ca.h. One connection for one exchange, at start. */
#include "store/pg_ca.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void one_line(PGconn *c, PGresult *r, char *out, size_t n)
{
    snprintf(out, n, "%s", r ? PQresultErrorMessage(r) : c ? PQerrorMessage(c) : "out of memory");
    out[strcspn(out, "\n")] = '\0';
}

int drv_pg_ca_exchange(const char *url, const char *cert_pem, const char *key_pem,
                       char **cert_out, char **key_out, drv_error_t *err)
{
    const char *const keys[] = {"connect_timeout", "application_name", "client_encoding",
                                "dbname", NULL};
    const char *const vals[] = {"5", "droverd-tls", "UTF8", url, NULL};
    char msg[400];
    int rc = -1;
    *cert_out = *key_out = NULL;
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    PGresult *r = NULL;
    if (!c || PQstatus(c) != CONNECTION_OK) {
        one_line(c, NULL, msg, sizeof msg);
        drv_err(err, 503, "unavailable", "", "TLS: cannot connect to PostgreSQL for the "
                "heads' CA: %s", msg);
        goto out;
    }
    const char *v[] = {cert_pem, key_pem};
    r = PQexecParams(c, "INSERT INTO head_ca VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING", 2,
                     NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        one_line(c, r, msg, sizeof msg);
        drv_err(err, 503, "unavailable", "", "TLS: cannot offer this head's CA (table "
                "head_ca): %s", msg);
        goto out;
    }
    PQclear(r);
    r = PQexec(c, "SELECT cert, key FROM head_ca WHERE id = 1");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        one_line(c, r, msg, sizeof msg);
        drv_err(err, 503, "unavailable", "", "TLS: cannot read the heads' CA (table head_ca): "
                "%s", msg);
        goto out;
    }
    if (!(*cert_out = strdup(PQgetvalue(r, 0, 0))) || !(*key_out = strdup(PQgetvalue(r, 0, 1)))) {
        free(*cert_out);
        *cert_out = NULL;
        drv_err_internal(err, "out of memory");
        goto out;
    }
    rc = 0;
out:
    PQclear(r);
    PQfinish(c);
    return rc;
}
